"""ropegen.plot: the numbers behind each figure against float64 and the peers' golden data (HF's
llama3, YaRN, M-RoPE and RoFormer functions, tests/golden), and every kind rendered to a PNG of the
expected size. Rendering tests skip, saying so, without matplotlib (pip install 'ropegen[plot]')."""
import json
import math
import os
import struct

import numpy as np
import pytest

import ropegen
from ropegen import plot

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
GOLDEN = os.path.join(ROOT, "tests", "golden", "data")
LLAMA3 = os.path.join(EXAMPLES, "llama3_8b.yaml")
QWEN25 = os.path.join(EXAMPLES, "qwen2_5_7b.yaml")
QWEN2_VL = os.path.join(EXAMPLES, "qwen2_vl_7b.yaml")
SINUSOIDAL = os.path.join(EXAMPLES, "transformer_sinusoidal.yaml")


def golden(name):
    with open(os.path.join(GOLDEN, name + ".json")) as f:
        return json.load(f)


def test_explain_keys_are_the_contract():
    e = ropegen.explain(LLAMA3, max_pos=64, kernel=False)
    assert list(e)[:8] == ["name", "encoding", "rotary_dim", "attention_factor", "attention_factor_source",
                           "original_max_position", "pairs", "precision"]
    assert list(e["pairs"][0])[:6] == ["index", "inv_freq", "inv_freq_unscaled", "wavelength", "regime", "axis"]
    assert list(e["precision"])[:5] == ["max_pos", "f32_angle", "bf16_table", "f16_table", "rope_gen"]
    assert e["precision"]["rope_gen"] is None
    assert ropegen.explain(LLAMA3, precision=False)["precision"] is None


def test_wavelengths_are_hf_llama3():
    """Llama 3.1 8B: HF's own inv_freq (golden), its unscaled theta^(-2i/d), and the regimes whose
    smooth factors rebuild HF's frequencies."""
    d = plot.wavelength_data(LLAMA3)
    hf = np.array(golden("hf_freqs_llama31_8b_llama3")["inv_freq"])
    np.testing.assert_allclose(d["wavelength"], 2 * np.pi / hf, rtol=4e-7)
    unscaled = 500000.0 ** (-2 * np.arange(64) / 128)
    np.testing.assert_allclose(d["wavelength_unscaled"], 2 * np.pi / unscaled, rtol=1e-13)
    assert d["regime"] == ["kept"] * 29 + ["blended"] * 6 + ["interpolated"] * 29
    assert (d["original_context"], d["extended_context"]) == (8192, 65536)
    e = ropegen.explain(LLAMA3, precision=False)
    for p, f in zip(e["pairs"], hf):
        w = p["regime_value"]
        assert (1 - w) * p["inv_freq_unscaled"] / 8 + w * p["inv_freq_unscaled"] == pytest.approx(f, rel=4e-7)


def test_yarn_gamma_rebuilds_hf():
    case = golden("hf_freqs_qwen25_yarn")
    e = ropegen.explain(case["spec"], precision=False)
    for p, f in zip(e["pairs"], case["inv_freq"]):
        g = p["regime_value"]
        assert (1 - g) * p["inv_freq_unscaled"] / 4 + g * p["inv_freq_unscaled"] == pytest.approx(f, rel=4e-7)
    assert [p["regime"] for p in e["pairs"]] == ["extrapolated"] * 24 + ["ramp"] * 16 + ["interpolated"] * 24
    assert e["attention_factor"] == pytest.approx(case["attention_factor"], rel=1e-7)


def test_decay_bound_against_a_direct_sum():
    inv = 10000.0 ** (-2 * np.arange(64) / 128)
    distances = [0, 1, 7, 250, 100000]
    got = plot.decay_bound(inv, distances)
    assert got[0] == pytest.approx(65 / 2, rel=1e-15)  # r = 0: the mean of 1..64
    for r, g in zip(distances, got):
        total = 0.0
        for j in range(1, 65):
            s = sum(complex(math.cos(r * inv[k]), math.sin(r * inv[k])) for k in range(j))
            total += abs(s)
        assert g == pytest.approx(total / 64, rel=1e-12), r
    d = plot.decay_data(LLAMA3, max_distance=4096, points=50)
    assert d["distance"][0] == 1 and d["distance"][-1] == 4096
    e = ropegen.explain(LLAMA3, precision=False)
    np.testing.assert_allclose(d["bound"], plot.decay_bound([p["inv_freq"] for p in e["pairs"]], d["distance"]),
                               rtol=1e-15)
    assert d["bound"][-1] < d["bound"][0] / 2  # the decay RoFormer shows


def _nearest_bf16(x):
    """Round float64 values to bf16 (8 significant bits, nearest even), independently of the library."""
    m, e = np.frexp(x)  # x = m * 2^e, |m| in [0.5, 1)
    return np.ldexp(np.round(m * 256.0), e - 8)


def test_precision_data_against_float64():
    """Each bin's largest error, recomputed here from the definitions in long double, numpy float32,
    an independent bf16 rounding and numpy's float16."""
    max_pos = 2047
    d = plot.precision_data(QWEN25, max_pos=max_pos)
    e = ropegen.explain(QWEN25, precision=False)
    inv = np.array([p["inv_freq"] for p in e["pairs"]])
    a = e["attention_factor"]
    pos = np.arange(max_pos + 1)
    exact = pos[:, None].astype(np.longdouble) * inv[None, :].astype(np.longdouble)  # exact: 11 + 53 bits
    angle = (pos[:, None].astype(np.float32) * inv[None, :].astype(np.float32)).astype(np.float64)
    errors = {k: np.zeros(max_pos + 1) for k in ("f32_angle", "bf16_table", "f16_table")}
    for fn in (np.cos, np.sin):
        ref = (a * fn(exact)).astype(np.float64)
        value = a * fn(angle)
        for key, v in (("f32_angle", value), ("bf16_table", _nearest_bf16(value)),
                       ("f16_table", value.astype(np.float16).astype(np.float64))):
            errors[key] = np.maximum(errors[key], np.abs(v - ref).max(axis=1))
    assert list(d["first"]) == [0] + [2 ** k for k in range(1, 11)]
    for key, per_position in errors.items():
        want = [per_position[f:l + 1].max() for f, l in zip(d["first"], d["last"])]
        np.testing.assert_allclose(d[key], want, rtol=0, atol=1e-15, err_msg=key)
    assert np.all(d["rope_gen"] > 0) and np.all(d["rope_gen"] < 2.5e-7 * a)  # the real kernel
    assert not d["sampled"] and d["positions_checked"] == max_pos + 1


def test_heatmaps_are_the_peers_tables():
    case = json.load(open(os.path.join(GOLDEN, "encodings", "hf_roformer_sinusoidal_table.json")))
    ids = np.array(case["inputs"]["positions"]["data"])
    hf = np.array(case["outputs"]["out"]["data"]).reshape(case["outputs"]["out"]["shape"])
    d = plot.heatmap_data(case["spec"], positions=int(ids.max()) + 1)
    np.testing.assert_allclose(d["values"][ids], hf, atol=1e-7)  # HF's float64 angles, stored float32
    rope = plot.heatmap_data(LLAMA3, positions=100)
    hf_inv = np.array(golden("hf_freqs_llama31_8b_llama3")["inv_freq"])
    np.testing.assert_allclose(rope["values"], np.cos(np.arange(100)[:, None] * hf_inv[None, :]), atol=1e-5)
    table = np.random.default_rng(0).standard_normal((50, 16))
    learned = plot.heatmap_data({"name": "l", "encoding": "learned", "dim": 16}, positions=20, table=table)
    np.testing.assert_array_equal(learned["values"], table[:20])
    with pytest.raises(plot.PlotError, match="--table"):
        plot.heatmap_data({"name": "l", "encoding": "learned", "dim": 16})


def test_axes_reproduce_hf_mrope():
    """Qwen2-VL's M-RoPE (HF's Qwen2VLRotaryEmbedding cos at 3-axis ids): each pair's axis and
    frequency give HF's cos."""
    case = json.load(open(os.path.join(GOLDEN, "encodings", "hf_qwen2_vl_mrope_table.json")))
    ids = np.array(case["inputs"]["positions"]["data"]).reshape(case["inputs"]["positions"]["shape"])
    hf = np.array(case["outputs"]["out"]["data"]).reshape(case["outputs"]["out"]["shape"])
    d = plot.axes_data(case["spec"])
    assert list(d["pairs_per_axis"]) == [2, 3, 3]
    np.testing.assert_allclose(np.cos(ids[:, d["axis"]] * d["inv_freq"][None, :]), hf[:, :8], atol=1e-6)
    np.testing.assert_allclose(np.sin(ids[:, d["axis"]] * d["inv_freq"][None, :]), hf[:, 8:], atol=1e-6)
    assert list(plot.axes_data(QWEN2_VL)["pairs_per_axis"]) == [16, 24, 24]
    with pytest.raises(plot.PlotError, match="multi-axis"):
        plot.axes_data(LLAMA3)


def _png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    assert head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


RENDER_CASES = [
    ("wavelengths", [LLAMA3, QWEN25], {}),
    ("decay", [LLAMA3, os.path.join(EXAMPLES, "llama2_7b.yaml")], {}),
    ("precision", [LLAMA3], {"max_pos": 5000}),
    ("heatmap", [SINUSOIDAL, LLAMA3], {}),
    ("axes", [QWEN2_VL], {}),
]


@pytest.mark.parametrize("kind,specs,options", RENDER_CASES, ids=[c[0] for c in RENDER_CASES])
def test_each_kind_renders_a_png(kind, specs, options, tmp_path):
    image = pytest.importorskip("matplotlib.image", reason="matplotlib is not installed (pip install 'ropegen[plot]')")
    out = tmp_path / f"{kind}.png"
    plot.save(plot.figure(kind, specs, **options), str(out))
    assert _png_size(out) == (plot.FIGSIZE[0] * plot.DPI, plot.FIGSIZE[1] * plot.DPI)
    assert out.stat().st_size > 10000
    pixels = image.imread(str(out))
    assert pixels.shape[:2] == (600, 1000)
    assert pixels[..., :3].std() > 0.05  # drawn, not blank
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # no temporary file left


def test_command_line(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install 'ropegen[plot]')")
    svg = tmp_path / "w.svg"
    assert plot.main([LLAMA3, "-o", str(svg)]) == 0
    assert svg.read_text().lstrip().startswith("<?xml")
    assert plot.main([LLAMA3, "-o", str(tmp_path / "w.jpg")]) == 2
    assert plot.main([str(tmp_path / "missing.yaml"), "-o", str(tmp_path / "m.png")]) == 2
    assert plot.main([LLAMA3, "-o", str(tmp_path / "a.png"), "--kind", "axes"]) == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: a\nhead_dim: 128\nrotary_dim: 130\n")
    assert plot.main([str(bad), "-o", str(tmp_path / "b.png")]) == 2
    err = capsys.readouterr().err
    assert "must end in .png or .svg" in err and "multi-axis" in err and f"{bad}:3:13: error: rotary_dim" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml", "w.svg"]
    with pytest.raises(SystemExit):
        plot.main([LLAMA3, "-o", str(tmp_path / "k.png"), "--kind", "pictures"])
