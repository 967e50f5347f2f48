"""Specs from ropegen.from_hf run by ropegen.torch against the HF modules they come from, where the model
applies more than the forward rotation: DeepSeek-V4 rotates its attention output back with (cos, -sin),
which is Rope.backward (the rotation by -angle)."""
import json
import os

import pytest
import yaml

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
v4 = pytest.importorskip("transformers.models.deepseek_v4.modeling_deepseek_v4")

import ropegen  # noqa: E402
from ropegen.torch import Rope  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
V4 = os.path.join(ROOT, "tests", "golden", "hf_configs", "deepseek_v4_flash.json")


@pytest.mark.parametrize("rope_set", ["main", "compress"])
def test_deepseek_v4_output_rotation_is_rope_backward(rope_set):
    with open(V4) as f:
        config = v4.DeepseekV4Config.from_dict(json.load(f))
    spec = yaml.safe_load(ropegen.from_hf(V4, layer_type=rope_set))
    # the config's bf16 and the default layout are deployment choices; HF runs float32 at explicit ids
    spec = {k: v for k, v in spec.items() if k not in ("dtype", "layout")}
    rope = Rope(dict(spec, positions="explicit"))
    gen = torch.Generator().manual_seed(0)
    ids = torch.tensor([[0, 1, 7, 100, 1023, 4095, 6000, 8191]])
    q = torch.randn(1, 8, 4, 512, generator=gen)  # [B, S, H, D]: the attention's output layout
    cos, sin = v4.DeepseekV4RotaryEmbedding(config)(q, ids, layer_type=rope_set)
    # HF, as DeepseekV4Attention: q rotated on [B, H, S, D], the output rotated back with (cos, -sin)
    forward = v4.apply_rotary_pos_emb(q.transpose(1, 2), cos, sin).transpose(1, 2)
    back = v4.apply_rotary_pos_emb(q.transpose(1, 2), cos, -sin).transpose(1, 2)
    got_forward, _ = rope(q, position_ids=ids, layout="bshd")
    got_back, _ = rope.backward(q, position_ids=ids, layout="bshd")
    # HF computes its angles in float32 (position x inv_freq): up to 8191 x 2^-24 rad x |q| (< 5) off.
    tol = 8191 * 2.0**-24 * 5
    assert float((got_forward - forward).abs().max()) < tol
    assert float((got_back - back).abs().max()) < tol
    assert torch.equal(got_back[..., :448], q[..., :448])  # the nope dims pass through
    again, _ = rope.backward(got_forward, position_ids=ids, layout="bshd")
    assert float((again - q).abs().max()) < 1e-5  # the inverse
