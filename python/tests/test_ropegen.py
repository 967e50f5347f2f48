"""The Python binding: every peer golden case through ropegen.compile on
numpy arrays, in place, spec forms, errors, freqs; torch when installed."""
import glob
import json
import os

import numpy as np
import pytest

import ropegen

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = sorted(glob.glob(os.path.join(ROOT, "tests", "golden", "data", "*.json")))


def load(path):
    with open(path) as f:
        return json.load(f)


def cases_with_tensors():
    return [p for p in GOLDEN if not p.endswith("VERSIONS.json") and "q" in load(p)]


def max_position(case, q):
    if "positions" in case:
        return max(case["positions"])
    return case.get("offset", 0) + max(q.shape)


@pytest.mark.parametrize("path", cases_with_tensors(), ids=lambda p: os.path.basename(p)[:-5])
def test_golden_case(path):
    case = load(path)
    rope = ropegen.compile(case["spec"])
    q = np.array(case["q"], dtype=np.float32).reshape(case["q_shape"])
    kwargs = {"offset": case.get("offset", 0), "seq_len": case.get("seq_len")}
    if "positions" in case:
        kwargs["positions"] = np.array(case["positions"], dtype=np.int64).reshape(case["positions_shape"])
    tol = (4e-6 + 2e-7 * max_position(case, q)) * max(1.0, float(np.abs(case["out_q"]).max()))
    if "k" in case:
        k = np.array(case["k"], dtype=np.float32).reshape(case["k_shape"])
        out_q, out_k = rope(q, k, **kwargs)
        assert np.abs(out_k.ravel() - np.array(case["out_k"])).max() <= tol
    else:
        out_q = rope(q, **kwargs)
    assert np.abs(out_q.ravel() - np.array(case["out_q"])).max() <= tol


def test_in_place_equals_out_of_place_and_spec_forms():
    spec = {"name": "t", "head_dim": 64, "rotary_dim": 48, "rotary_offset": 8, "pairing": "interleaved"}
    q = np.random.default_rng(0).standard_normal((2, 9, 3, 64)).astype(np.float32)
    out = ropegen.compile(spec)(q)
    q2 = q.copy()
    ropegen.compile(json.dumps(spec))(q2, out_q=q2)  # YAML text (JSON is YAML)
    assert np.array_equal(q2, out)
    assert np.array_equal(q[..., :8], out[..., :8])  # pass-through dims untouched


def test_path_spec_and_freqs():
    spec = os.path.join(ROOT, "examples", "qwen2_5_7b.yaml")
    inv_freq, attention_factor = ropegen.freqs(spec)
    assert inv_freq.shape == (64,) and inv_freq[0] == 1.0
    assert attention_factor == pytest.approx(0.1 * np.log(4) + 1, abs=1e-15)
    assert "scaling:\n  type: yarn" in ropegen.compile(spec).spec


def test_errors_are_value_errors_with_cli_messages():
    with pytest.raises(ValueError, match=r"<string>:2:11: error: head_dim \(7\) must be even"):
        ropegen.compile("name: a\nhead_dim: 7\n")
    rope = ropegen.compile({"name": "a", "head_dim": 8})
    with pytest.raises(ValueError, match=r"expected \(1, 2, 3, 8\).*cos/sin-sized"):
        rope(np.zeros((1, 2, 3, 4), np.float32))
    with pytest.raises(ValueError, match="the spec's dtype is f32"):
        rope(np.zeros((1, 2, 3, 8), np.float64))


def test_torch_matches_hf_apply_rotary_pos_emb():
    torch = pytest.importorskip("torch", reason="torch not installed: the torch comparison did not run")
    modeling = pytest.importorskip("transformers.models.llama.modeling_llama")
    from transformers import LlamaConfig
    cfg = LlamaConfig(hidden_size=256, num_attention_heads=4, num_key_value_heads=2, rope_theta=10000.0)
    q, k = torch.randn(2, 4, 7, 64), torch.randn(2, 2, 7, 64)
    pos = torch.arange(7)[None].expand(2, 7)
    cos, sin = modeling.LlamaRotaryEmbedding(cfg)(q, pos)
    hq, hk = modeling.apply_rotary_pos_emb(q, k, cos, sin)
    rope = ropegen.compile({"name": "l", "head_dim": 64, "layout": "bhsd"})
    oq, ok = rope(q, k)
    assert (oq - hq).abs().max().item() < 1e-5 and (ok - hk).abs().max().item() < 1e-5


ENCODINGS = sorted(glob.glob(os.path.join(ROOT, "tests", "golden", "data", "encodings", "*.json")))


def kernel_case(path):
    return load(path)["command"] in ("apply", "backward")


def array(t):
    return np.array(t["data"], dtype=np.int64 if t["dtype"] == "int64" else np.float32).reshape(t["shape"])


@pytest.mark.parametrize("path", [p for p in ENCODINGS if kernel_case(p)], ids=lambda p: os.path.basename(p)[:-5])
def test_golden_encodings_forward_and_backward(path):
    """Every encoding's golden case (M-RoPE, vision, learned freqs, backward by
    the peers' autograd, sinusoidal, learned, ALiBi) through the binding."""
    case = load(path)
    kernel = ropegen.compile(case["spec"])
    inputs, outputs = case["inputs"], case["outputs"]
    kwargs = {"offset": case.get("options", {}).get("offset", 0)}
    for name in ("positions", "cu_seqlens", "table", "freqs", "saved_q", "saved_k", "q_norm_weight", "k_norm_weight"):
        if name in inputs:
            kwargs[name] = array(inputs[name])
    if case["command"] == "backward":
        got = kernel.backward(array(inputs["q"]), array(inputs["k"]) if "k" in inputs else None, **kwargs)
        names = ("out_q", "out_k", "out_freqs") if "out_freqs" in outputs else (
            "out_q", "out_k", "out_q_norm_weight", "out_k_norm_weight")
    elif kernel.encoding == "rope":
        got = kernel(array(inputs["q"]), array(inputs["k"]) if "k" in inputs else None, **kwargs)
        names = ("out_q", "out_k")
    else:
        got = kernel(array(inputs["x"]), **kwargs)
        names = ("out",)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(outputs)
    for name, value in zip(names, got):
        want = array(outputs[name])
        assert np.abs(value - want).max() <= 1e-5 * max(1.0, float(np.abs(want).max())), name


def test_alibi_in_place_and_errors():
    alibi = ropegen.compile({"name": "a", "encoding": "alibi", "num_heads": 4, "form": "causal"})
    scores = np.zeros((1, 4, 3, 3), dtype=np.float32)
    alibi(scores, out=scores, offset=0)
    assert scores[0, 0, 2, 0] == -2 * 0.25 and scores[0, 0, 0, 2] == 0  # slope 2^-2 for head 0 of 4; j > i untouched
    with pytest.raises(ValueError, match="num_heads 4"):
        alibi(np.zeros((1, 2, 3, 3), dtype=np.float32))


def test_cos_sin_cache_of_frequency_scheme_table():
    """`frequency: {scheme: table}` reads an engine's cos/sin cache: given the
    computing kernel's own cos/sin, it gives that kernel's bits, forward and
    backward; any row stride; mistakes are ValueErrors naming cos_sin_cache."""
    yarn = {"type": "yarn", "factor": 4, "original_max_position": 32}
    dims = {"name": "c", "head_dim": 24, "rotary_dim": 16, "rotary_offset": 4, "pairing": "interleaved",
            "positions": "explicit"}
    computing = ropegen.compile({**dims, "scaling": yarn})
    table = ropegen.compile({**dims, "frequency": {"scheme": "table"}})
    # The computing kernel's cos/sin: its outputs on (1, 0) pairs (half pairing: [cos | sin]).
    rows = 64
    unit = np.zeros((1, rows, 1, 16), np.float32)
    unit[..., :8] = 1
    extract = ropegen.compile({"name": "e", "head_dim": 16, "positions": "explicit", "scaling": yarn})
    cache = extract(unit, positions=np.arange(rows)[None])[0, :, 0, :]
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((2, 5, 3, 24)).astype(np.float32), rng.standard_normal((2, 5, 1, 24)).astype(np.float32)
    positions = rng.integers(0, rows, (2, 5)).astype(np.int32)
    for want, got in zip(computing(q, k, positions=positions), table(q, k, positions=positions, cos_sin_cache=cache)):
        assert np.array_equal(want, got)
    wide = np.full((rows, 20), 9.0, np.float32)
    wide[:, :16] = cache  # rows 20 apart
    want, got = computing.backward(q, positions=positions), table.backward(q, positions=positions, cos_sin_cache=wide[:, :16])
    assert np.array_equal(want, got) and not np.array_equal(want, q)
    with pytest.raises(ValueError, match="pass cos_sin_cache, float32 shaped \\(max_pos, 16\\)"):
        table(q, positions=positions)
    with pytest.raises(ValueError, match="cos_sin_cache has dtype float16 but float32"):
        table(q, positions=positions, cos_sin_cache=cache.astype(np.float16))
    with pytest.raises(ValueError, match="is outside cos_sin_cache: it has 64 rows"):
        table(q, positions=positions + 40, cos_sin_cache=cache)
    with pytest.raises(ValueError, match="cos_sin_cache is for specs with `frequency: {scheme: table}`"):
        computing(q, positions=positions, cos_sin_cache=cache)
