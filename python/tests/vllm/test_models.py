"""rope-gen inside a real vLLM (CPU backend, float32): tiny random models,
greedy generation of 64 tokens for a short prompt and one of 48 tokens (whose
positions pass the scaled models' original context of 32), once with vLLM's
kernels (VLLM_PLUGINS unset: the plugin is installed, loaded, and must swap
nothing) and once with VLLM_PLUGINS=ropegen. Each run is one process for all
models (vLLM starts an engine process per model)."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here: `make test-vllm` runs these in .venv-vllm")

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
    results, reports = [], []
    for plugins in (None, "ropegen"):
        out, report_dir = root / f"out-{plugins}.json", root / f"report-{plugins}"
        report_dir.mkdir()
        subprocess.run([sys.executable, os.path.join(HERE, "generate.py"), str(models), str(out), *MODELS,
                        "--tokens", str(TOKENS), "--report-dir", str(report_dir)], check=True, env=_env(plugins))
        results.append(json.loads(out.read_text()))
        reports.append(report_dir)
    return results[0], results[1], reports[0], reports[1]


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("name", list(MODELS))
def test_greedy_tokens_identical_and_rope_gen_ran(name, runs, record_property):
    vllm_runs, ropegen_runs, vllm_reports, ropegen_reports = runs
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
    assert lines, "no report lines with VLLM_PLUGINS=ropegen"
    built = [line for line in lines if "kernel" in line]
    for line in built:
        assert set(line) == {"pid", "layer", "kernel", "spec", "reason"}
        assert line["kernel"] in ("computing", "table"), line
        assert (line["spec"] is not None) == (line["kernel"] == "computing")
    classes = MODELS[name][2]
    assert {line["layer"] for line in built} == set(classes)
    ran = {line["layer"] for line in lines if line.get("first_call") is True}
    assert ran == set(classes)
    assert all(line["pid"] != os.getpid() for line in lines)  # vLLM's engine process wrote them
