"""rope-gen inside a real vLLM (CPU backend, float32): tiny random models,
greedy generation of 64 tokens for a short prompt and one of 48 tokens (whose
positions pass the scaled models' original context of 32), once with vLLM's
kernels (VLLM_PLUGINS unset: the plugin is installed, loaded, and must swap
nothing) and once with VLLM_PLUGINS=ropegen. Each pass is one process running
the models one after another in-process (vLLM's two processes per model would
cost ~45 s each here); one more run serves Llama 3 as vLLM deploys it, engine
and model worker in processes of their own. The three runs go side by side."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("vllm.model_executor", reason="vLLM is not installed here: `make test-vllm` runs these in .venv-vllm")

from models import MODELS  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TOKENS = 64


def _env(plugins):
    env = {k: v for k, v in os.environ.items() if k not in ("VLLM_PLUGINS", "ROPEGEN_VLLM_REPORT")}
    if plugins is not None:
        env["VLLM_PLUGINS"] = plugins
    return env


@pytest.fixture(scope="session")
def runs(tmp_path_factory):
    """({name: vLLM's result}, {name: rope-gen's result}, report dir of each run)."""
    root = tmp_path_factory.mktemp("vllm")
    models = root / "models"
    subprocess.run([sys.executable, os.path.join(HERE, "models.py"), str(models)], check=True)
    runs, outs, reports = [], [], []
    for i, (plugins, names, how) in enumerate(((None, MODELS, ["--in-process"]),
                                               ("ropegen", MODELS, ["--in-process"]), ("ropegen", ["llama3"], []))):
        out, report_dir = root / f"out-{i}.json", root / f"report-{i}"
        report_dir.mkdir()
        runs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "generate.py"), str(models), str(out),
                                      *names, "--tokens", str(TOKENS), "--report-dir", str(report_dir), *how],
                                     env=_env(plugins)))
        outs.append(out)
        reports.append(report_dir)
    codes = [run.wait() for run in runs]
    assert codes == [0, 0, 0], f"generate.py exit codes {codes}"
    return [json.loads(out.read_text()) for out in outs], reports


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("name", list(MODELS))
def test_greedy_tokens_identical_and_rope_gen_ran(name, runs, record_property):
    (vllm_runs, ropegen_runs, _), (vllm_reports, ropegen_reports, _) = runs
    theirs, ours = vllm_runs[name], ropegen_runs[name]
    if "error" in theirs:
        pytest.skip(f"vLLM's CPU backend does not run {name}: {theirs['error'][:300]}")
    assert "error" not in ours, ours.get("error")
    assert [len(t) for t in ours["tokens"]] == [TOKENS, TOKENS]
    assert ours["tokens"] == theirs["tokens"]
    diff = max(abs(a - b) for p, q in zip(ours["logprobs"], theirs["logprobs"]) for a, b in zip(p, q))
    record_property("max_logprob_diff", diff)
    assert diff < 1e-3

    # VLLM_PLUGINS unset: installed and loaded, yet nothing swapped.
    assert _lines(vllm_reports / f"{name}.jsonl") == []
    lines = _lines(ropegen_reports / f"{name}.jsonl")
    classes = set(MODELS[name].classes)
    if not classes:  # a model vLLM runs on HF's modelling code builds no vLLM RoPE layer
        assert lines == []
        return
    built = [line for line in lines if "kernel" in line]
    for line in built:
        assert set(line) == {"pid", "layer", "kernel", "spec", "reason"}
        assert line["kernel"] in ("computing", "table"), line
        assert (line["spec"] is not None) == (line["kernel"] == "computing")
    # Every RoPE class the model runs ran rope-gen's kernels (Qwen2-VL also
    # builds a RotaryEmbedding for its vision tower, which text never runs).
    assert classes <= {line["layer"] for line in built}
    assert {line["layer"] for line in lines if line.get("first_call") is True} == classes


def test_vllm_worker_processes_report_and_match(runs):
    """As vLLM deploys a model: the engine and the model worker in processes of
    their own, each appending its lines to the one report file."""
    (vllm_runs, _, worker_runs), (_, _, worker_reports) = runs
    assert "error" not in worker_runs["llama3"], worker_runs["llama3"].get("error")
    assert worker_runs["llama3"]["tokens"] == vllm_runs["llama3"]["tokens"]
    lines = _lines(worker_reports / "llama3.jsonl")
    assert {(line["layer"], line.get("kernel"), line.get("first_call")) for line in lines} == {
        ("Llama3RotaryEmbedding", "computing", None), ("Llama3RotaryEmbedding", None, True)}
    assert all(line["pid"] != worker_runs["llama3"]["pid"] for line in lines)  # vLLM's worker process wrote them
