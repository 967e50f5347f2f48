"""torch.ops.ropegen.fused_qk_norm_rope (vLLM's schema) against a float64
formula of vLLM's reference semantics (RMSNorm per head, then RoPE from
cos_sin_cache), written here independently of rope-gen's lowering: Qwen3's
shape (GQA, head_dim 128) and partial rotary, NeoX and GPT-J pairings, bf16,
f16 and f32, V untouched, and the op's schema (opcheck); the spec-driven
Rope module with q_norm_weight/k_norm_weight, forward and autograd."""
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


# --- the spec-driven Rope module with qk_norm: forward and autograd ----------

QWEN3 = {"name": "qwen3_like", "head_dim": 64, "rotary_dim": 48, "rotary_offset": 8, "frequency": {"theta": 1e6},
         "qk_norm": {"type": "rms", "eps": 1e-6, "weight": "per_head"}}
GEMMA = dict(QWEN3, name="gemma_like", qk_norm={"type": "rms_one_plus", "eps": 1e-6, "weight": "per_head"})


def normed_then_rotated(spec, x, w, positions):
    """Float64, bhsd, half pairing: each head normalised (w x, or (1 + w) x),
    then dims [offset, offset + rotary_dim) rotated at positions [B, S]."""
    x = x.double()
    factor = 1 + w.double() if spec["qk_norm"]["type"] == "rms_one_plus" else w.double()
    h = x / torch.sqrt((x * x).mean(-1, keepdim=True) + spec["qk_norm"]["eps"]) * factor
    off, r = spec["rotary_offset"], spec["rotary_dim"]
    inv_freq = 1.0 / spec["frequency"]["theta"] ** (torch.arange(0, r, 2, dtype=torch.float64) / r)
    angle = positions.double()[:, None, :, None] * inv_freq
    a, b = h[..., off:off + r // 2], h[..., off + r // 2:off + r]
    rotated = torch.cat([a * angle.cos() - b * angle.sin(), b * angle.cos() + a * angle.sin()], dim=-1)
    return torch.cat([h[..., :off], rotated, h[..., off + r:]], dim=-1)


def qk_and_weights(seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 4, 5, 64, generator=g), torch.randn(2, 2, 5, 64, generator=g)
    wq, wk = torch.rand(64, generator=g) + 0.5, torch.rand(64, generator=g) + 0.5
    return q, k, wq, wk, (torch.arange(5) + 7).repeat(2, 1)


def float64_gradients(spec, q, k, wq, wk, pos, gq, gk):
    """torch autograd through the float64 formula: dL/dq, dL/dk, dL/dwq, dL/dwk."""
    leaves = [t.detach().double().requires_grad_() for t in (q, k, wq, wk)]
    q64, k64, wq64, wk64 = leaves
    torch.autograd.backward([normed_then_rotated(spec, q64, wq64, pos), normed_then_rotated(spec, k64, wk64, pos)],
                            [gq.double(), gk.double()])
    return [t.grad for t in leaves]


@pytest.mark.parametrize("spec", [QWEN3, GEMMA], ids=["rms", "rms_one_plus"])
def test_rope_module_with_qk_norm_forward_and_gradients_match_float64(spec):
    q, k, wq, wk, pos = qk_and_weights()
    rope = ropegen.torch.Rope(spec, q_norm_weight=wq, k_norm_weight=wk)
    assert rope.q_norm_weight.requires_grad and rope.k_norm_weight.requires_grad
    q, k = q.requires_grad_(), k.requires_grad_()
    out_q, out_k = rope(q, k, pos)
    torch.testing.assert_close(out_q.double(), normed_then_rotated(spec, q.detach(), wq, pos), rtol=1e-6, atol=3e-6)
    torch.testing.assert_close(out_k.double(), normed_then_rotated(spec, k.detach(), wk, pos), rtol=1e-6, atol=3e-6)
    gq, gk = torch.randn_like(out_q), torch.randn_like(out_k)
    torch.autograd.backward([out_q, out_k], [gq, gk])
    want = float64_gradients(spec, q, k, wq, wk, pos, gq, gk)
    for got, w, what in zip((q.grad, k.grad, rope.q_norm_weight.grad, rope.k_norm_weight.grad), want,
                            ("dq", "dk", "d q_norm_weight", "d k_norm_weight")):
        torch.testing.assert_close(got.double(), w, rtol=1e-5, atol=1e-5, msg=what)


def test_weights_given_with_the_call_override_the_modules_and_get_gradients():
    q, k, wq, wk, pos = qk_and_weights(1)
    rope = ropegen.torch.Rope(QWEN3, q_norm_weight=torch.ones(64), k_norm_weight=torch.ones(64))
    wq, wk = wq.requires_grad_(), wk.requires_grad_()
    out_q, out_k = rope(q, k, pos, q_norm_weight=wq, k_norm_weight=wk)
    torch.testing.assert_close(out_q.double(), normed_then_rotated(QWEN3, q, wq.detach(), pos), rtol=1e-6, atol=3e-6)
    torch.testing.assert_close(out_k.double(), normed_then_rotated(QWEN3, k, wk.detach(), pos), rtol=1e-6, atol=3e-6)
    gq, gk = torch.randn_like(out_q), torch.randn_like(out_k)
    torch.autograd.backward([out_q, out_k], [gq, gk])
    assert rope.q_norm_weight.grad is None  # the module's were not used
    _, _, want_wq, want_wk = float64_gradients(QWEN3, q, k, wq, wk, pos, gq, gk)
    torch.testing.assert_close(wq.grad.double(), want_wq, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(wk.grad.double(), want_wk, rtol=1e-5, atol=1e-5)


def test_bf16_weights_get_bf16_gradients_summed_in_float32():
    q, k, wq, wk, pos = qk_and_weights(2)
    q, k = q.bfloat16().requires_grad_(), k.bfloat16()
    wq = wq.bfloat16().requires_grad_()
    out_q, _ = ropegen.torch.Rope(QWEN3)(q, k, pos, q_norm_weight=wq, k_norm_weight=wk.bfloat16())
    g = torch.randn_like(out_q)
    out_q.backward(g)
    assert wq.grad.dtype == torch.bfloat16 and q.grad.dtype == torch.bfloat16
    _, _, want_wq, _ = float64_gradients(QWEN3, q, k, wq, wk.bfloat16(), pos, g, torch.zeros_like(k))
    torch.testing.assert_close(wq.grad.double(), want_wq, rtol=2.0 ** -7, atol=1e-3)


def test_opcheck_rope_ops_with_norm_weights():
    q, k, wq, wk, pos = qk_and_weights(3)
    spec = ropegen.torch.Rope(QWEN3).spec
    for op, args in [
        (torch.ops.ropegen.rope.default, (spec, q.requires_grad_(), k.requires_grad_(), pos, "bhsd", 0, None, None,
                                          wq, wk)),
        (torch.ops.ropegen.rope_.default, (spec, q.detach().clone(), k.detach().clone(), pos, "bhsd", 0, None, None,
                                           wq, wk)),
        (torch.ops.ropegen.rope_backward.default, (spec, q.detach(), k.detach(), pos, "bhsd", 0, None, None,
                                                   q.detach().clone(), k.detach().clone(), wq, wk)),
        (torch.ops.ropegen.rope.default, (spec, q.detach(), k.detach(), pos, "bhsd", 0, None, None,
                                          wq.clone().requires_grad_(), wk.clone().requires_grad_()))]:
        opcheck(op, args)


def test_float32_weights_of_bf16_rows_as_mixed_precision_keeps_them():
    """bf16 q and k with float32 weights (autocast keeps parameters float32):
    read as they are, and their gradients come back float32."""
    q, k, wq, wk, pos = qk_and_weights(4)
    q, k = q.bfloat16().requires_grad_(), k.bfloat16()
    rope = ropegen.torch.Rope(QWEN3, q_norm_weight=wq + 2.0 ** -10, k_norm_weight=wk)  # not bf16 values
    assert rope.q_norm_weight.dtype == torch.float32
    out_q, out_k = rope(q, k, pos)
    want_q = normed_then_rotated(QWEN3, q.detach(), rope.q_norm_weight.detach(), pos)
    torch.testing.assert_close(out_q.double(), want_q, rtol=2.0 ** -8, atol=1e-6)
    g = torch.randn_like(out_q)
    out_q.backward(g)
    assert rope.q_norm_weight.grad.dtype == torch.float32 and q.grad.dtype == torch.bfloat16
    _, _, want_wq, _ = float64_gradients(QWEN3, q, k, rope.q_norm_weight, rope.k_norm_weight, pos, g,
                                         torch.zeros_like(k))
    torch.testing.assert_close(rope.q_norm_weight.grad.double(), want_wq, rtol=1e-5, atol=1e-5)
