"""torch.ops.ropegen.fused_qk_norm_rope (vLLM's schema) against a float64
formula of vLLM's reference semantics (RMSNorm per head, then RoPE from
cos_sin_cache), written here independently of rope-gen's lowering: Qwen3's
shape (GQA, head_dim 128) and partial rotary, NeoX and GPT-J pairings, bf16,
f16 and f32, V untouched, and the op's schema (opcheck)."""
import pytest

torch = pytest.importorskip("torch")
import ropegen.torch  # noqa: E402,F401  (registers the ops)
from torch.library import opcheck  # noqa: E402


def cos_sin_cache(max_pos, rotary_dim, dtype, base=10000.0):
    inv_freq = 1.0 / base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    angle = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv_freq
    return torch.cat([angle.cos(), angle.sin()], dim=-1).to(dtype)


def reference(qkv, hq, hk, hv, d, eps, wq, wk, cache, is_neox, positions):
    """Float64: each head of Q and K as x / sqrt(mean(x^2) + eps) * w, then its
    first r dims rotated by cache[position] (r = the cache's width)."""
    x = qkv.double().clone()
    r = cache.shape[1]
    cos, sin = cache.double()[positions][:, None, : r // 2], cache.double()[positions][:, None, r // 2:]
    for first, heads, w in ((0, hq, wq), (hq * d, hk, wk)):
        h = x[:, first:first + heads * d].view(-1, heads, d)
        h = h / torch.sqrt((h * h).mean(-1, keepdim=True) + eps) * w.double()
        if is_neox:
            a, b = h[..., : r // 2].clone(), h[..., r // 2: r].clone()
            h[..., : r // 2], h[..., r // 2: r] = a * cos - b * sin, b * cos + a * sin
        else:
            a, b = h[..., 0:r:2].clone(), h[..., 1:r:2].clone()
            h[..., 0:r:2], h[..., 1:r:2] = a * cos - b * sin, b * cos + a * sin
        x[:, first:first + heads * d] = h.reshape(-1, heads * d)
    return x


# (dtype, its rounding relative to a value: one rounding at the store), pairing
# and rotary ratio combined so that four kernels cover every dtype, both
# pairings and partial rotary.
CASES = [(torch.bfloat16, 2.0 ** -8, True, 1.0), (torch.bfloat16, 2.0 ** -8, False, 0.25),
         (torch.float16, 2.0 ** -11, False, 1.0), (torch.float32, 2.0 ** -22, True, 0.25)]


@pytest.mark.parametrize("dtype,eps_rel,is_neox,rotary_ratio", CASES)
def test_fused_qk_norm_rope_matches_float64(dtype, eps_rel, is_neox, rotary_ratio):
    torch.manual_seed(13)
    hq, hk, hv, d, tokens, eps = 32, 8, 8, 128, 7, 1e-6  # Qwen3-8B's heads
    qkv = torch.randn(tokens, (hq + hk + hv) * d).to(dtype)
    wq = (1 + 0.1 * torch.randn(d)).to(dtype)
    wk = (1 + 0.1 * torch.randn(d)).to(dtype)
    cache = cos_sin_cache(4096, int(d * rotary_ratio), dtype)
    positions = torch.tensor([0, 1, 4095, 17, 300, 2, 2], dtype=torch.int64)
    want = reference(qkv, hq, hk, hv, d, eps, wq, wk, cache, is_neox, positions)
    before = qkv.clone()
    torch.ops.ropegen.fused_qk_norm_rope(qkv, hq, hk, hv, d, eps, wq, wk, cache, is_neox, positions)
    v = slice((hq + hk) * d, None)
    assert torch.equal(qkv[:, v], before[:, v])  # V untouched
    err = (qkv.double() - want).abs()
    bound = 4e-6 + 1.5 * eps_rel * want.abs()
    assert bool((err <= bound).all()), f"max error {err.max().item():.3g}"


def test_opcheck():
    torch.manual_seed(0)
    hq, hk, hv, d = 4, 2, 2, 64
    qkv = torch.randn(3, (hq + hk + hv) * d, dtype=torch.bfloat16)
    w = torch.ones(d, dtype=torch.bfloat16)
    args = (qkv, hq, hk, hv, d, 1e-5, w, w.clone(), cos_sin_cache(16, 32, torch.bfloat16), True,
            torch.tensor([0, 5, 9]))
    opcheck(torch.ops.ropegen.fused_qk_norm_rope.default, args)


def test_wrong_width_is_refused():
    qkv = torch.zeros(2, 100, dtype=torch.bfloat16)
    w = torch.ones(64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="qkv: error: qkv is"):
        torch.ops.ropegen.fused_qk_norm_rope(qkv, 1, 1, 1, 64, 1e-6, w, w, cos_sin_cache(4, 64, torch.float32), True,
                                             torch.tensor([0, 1]))
