"""ropegen.from_hf: a Hugging Face config (dict, JSON text, file or directory) to the
spec `rope-gen from-hf` writes, ready for ropegen.compile."""
import json
import os
import shutil

import numpy as np
import pytest

import ropegen

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LLAMA3 = os.path.join(ROOT, "examples", "hf_configs", "llama3_8b.json")


def llama3():
    with open(LLAMA3) as f:
        return json.load(f)


def test_dict_gives_the_normalised_spec():
    spec = ropegen.from_hf(llama3(), name="llama3_8b")
    lines = spec.splitlines()
    assert lines[0] == "name: llama3_8b"
    for line in ["encoding: rope", "head_dim: 128", "pairing: half", "dtype: f32", "  theta: 500000",
                 "  type: llama3", "  factor: 8", "  original_max_position: 8192"]:
        assert line in lines, spec


def test_every_form_agrees():
    from_dict = ropegen.from_hf(llama3())
    with open(LLAMA3) as f:
        assert ropegen.from_hf(f.read()) == from_dict        # JSON text
    assert ropegen.from_hf(LLAMA3) == from_dict                # a path
    assert ropegen.from_hf(os.path.abspath(LLAMA3)) == from_dict


def test_a_directory_holding_config_json(tmp_path):
    shutil.copy(LLAMA3, tmp_path / "config.json")
    assert ropegen.from_hf(tmp_path) == ropegen.from_hf(llama3())


def test_the_spec_compiles_and_runs():
    spec = ropegen.from_hf(llama3(), name="llama3_8b")
    inv_freq, attention_factor = ropegen.freqs(spec)
    assert inv_freq.shape == (64,) and inv_freq[0] == 1.0 and attention_factor == 1.0
    q = np.random.default_rng(0).standard_normal((1, 3, 2, 128)).astype(np.float32)
    out = ropegen.compile(spec)(q)
    assert out.shape == q.shape
    np.testing.assert_array_equal(out[:, 0], q[:, 0])  # position 0 is the identity


def test_a_bad_config_names_the_key():
    config = llama3()
    config["rope_theta"] = "big"
    with pytest.raises(ValueError, match=r"`rope_theta` must be a number, not \"big\""):
        ropegen.from_hf(config)


def test_bad_options_and_inputs():
    with pytest.raises(ValueError, match="pairing must be"):
        ropegen.from_hf(llama3(), pairing="rotate")
    with pytest.raises(ValueError):
        ropegen.from_hf("{not json")
    with pytest.raises(ValueError):
        ropegen.from_hf("/nonexistent/config.json")
    with pytest.raises(ValueError):
        ropegen.from_hf(llama3(), vision=True)  # a text-only model has no vision tower
    with pytest.raises(TypeError):
        ropegen.from_hf(42)


def test_non_finite_numbers_as_pythons_json_writes_them():
    """A dict with inf / nan goes through json.dumps as Infinity / NaN: accepted where from-hf does not read,
    refused by name where it does."""
    config = dict(llama3(), time_step_limit=[0.0, float("inf")], init_std=float("nan"))
    assert ropegen.from_hf(config) == ropegen.from_hf(llama3())
    with pytest.raises(ValueError, match=r"`rope_theta` must be a number, not Infinity"):
        ropegen.from_hf(dict(llama3(), rope_theta=float("inf")))


def test_a_name_is_used_as_given():
    assert ropegen.from_hf(llama3(), name="l3_8b").splitlines()[0] == "name: l3_8b"
    for name in ("../l3", "Llama3", "l3/8b"):
        with pytest.raises(ValueError, match=r"--name `.*`: a spec name must be an identifier"):
            ropegen.from_hf(llama3(), name=name)
