"""ropegen.hf's fused QK-norm path: an attention's per-head q_norm / k_norm deferred to its RoPE call, which runs
them with the rotation in one rope-gen kernel (a spec with `qk_norm`; see ropegen/hf.py).

Qwen3, Gemma 3, GLM-4 MoE, ... normalise q and k per head (RMSNorm over head_dim, a [head_dim] weight) and hand
the results, transposed or not, straight to apply_rotary_pos_emb. While a patched attention's forward runs, its
q_norm / k_norm return their input unchanged and record it; the dispatcher then finds those very tensors (same
data, same size) as q and k and runs norm + RoPE fused, with the norms' own weights (so training updates them).
Anything else (a norm whose output is not what reaches the apply function, or an apply function that is never
reached) raises instead of leaving q or k unnormalised.
"""
import contextvars
import copy

import torch

_DEFERRED = contextvars.ContextVar("ropegen_hf_deferred_norms", default=None)


class _Tracing:
    """The call being traced by torch.compile, which cannot trace ContextVar.set (a trace runs in one thread;
    compiled code does not run this Python again)."""
    call = None


_TRACING = _Tracing()


def _current():
    return _TRACING.call if torch.compiler.is_compiling() else _DEFERRED.get()


def _enter(call):
    if torch.compiler.is_compiling():
        previous, _TRACING.call = _TRACING.call, call
        return previous
    return _DEFERRED.set(call)


def _leave(token):
    if torch.compiler.is_compiling():
        _TRACING.call = token
    else:
        _DEFERRED.reset(token)


def _expected(x, eps, factor):
    x = x.double()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * factor


def norm_kind(norm, head_dim):
    """The qk_norm `type` ("rms": x̂·w, "rms_one_plus": x̂·(1 + w)) and eps of `norm` when it is a per-head
    RMSNorm over `head_dim` dims that rope-gen reproduces, else None. Probed on a float32 copy with a random
    weight (the kind must not depend on the weight's current values), at |x| ~ 1 and ~ 1e-3 (mean(x²) near eps,
    so the eps read from the module is checked too)."""
    weight = getattr(norm, "weight", None)
    eps = getattr(norm, "variance_epsilon", getattr(norm, "eps", None))
    if (not isinstance(weight, torch.nn.Parameter) or tuple(weight.shape) != (head_dim,)
            or isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0):
        return None
    gen = torch.Generator().manual_seed(0)
    try:
        probe = copy.deepcopy(norm).float()
        with torch.no_grad():
            probe.weight.copy_(torch.randn(head_dim, generator=gen))
            xs = [scale * torch.randn(3, 2, head_dim, generator=gen) for scale in (1.0, 1e-3)]
            outs = [type(probe).forward(probe, x) for x in xs]
    except Exception:  # noqa: BLE001 - a norm in a form this module does not know stays on HF's path
        return None
    w = probe.weight.detach().double()
    for kind, factor in (("rms", w), ("rms_one_plus", 1 + w)):
        wants = [_expected(x, float(eps), factor) for x in xs]
        if all(isinstance(o, torch.Tensor) and o.shape == x.shape
               and float((o.double() - want).abs().max()) <= 1e-5 * max(1.0, float(want.abs().max()))
               for o, x, want in zip(outs, xs, wants)):
            return kind, float(eps)
    return None


class FusedNorms:
    """An attention whose q_norm and k_norm run inside its RoPE call."""

    def __init__(self, where, q_norm, k_norm, kind, eps):
        self.where, self.q_norm, self.k_norm, self.kind, self.eps = where, q_norm, k_norm, kind, eps

    def spec(self):
        return {"type": self.kind, "eps": self.eps, "weight": "per_head"}


class _Call:
    """One call of a patched attention: the inputs its norms were given, until the RoPE call takes them."""

    def __init__(self, fused):
        self.fused, self.inputs = fused, {}


def attention_forward(original, fused):
    """The attention's forward with its norms deferred for the duration of each call."""

    def forward(*args, **kwargs):
        call = _Call(fused)
        token = _enter(call)
        try:
            out = original(*args, **kwargs)
        finally:
            _leave(token)
        if call.inputs:
            raise ValueError(f"ropegen.hf: {fused.where}: its {' and '.join(sorted(call.inputs))} ran but their "
                             "output never reached apply_rotary_pos_emb, where ropegen.hf runs them; patch(model, "
                             "fuse_qk_norm=False) keeps HF's norms")
        return out

    return forward


def norm_forward(original, norm, which):
    """`norm`'s forward: deferred (its input returned as is) inside its attention's call, else as before."""

    def forward(x, *args, **kwargs):
        call = _current()
        if (call is None or getattr(call.fused, which) is not norm or which in call.inputs or args or kwargs
                or not isinstance(x, torch.Tensor)):
            return original(x, *args, **kwargs)
        call.inputs[which] = x
        return x

    return forward


def _same(got, deferred):
    if got is None or got.numel() != deferred.numel() or got.shape[-1] != deferred.shape[-1]:
        return False
    return torch.compiler.is_compiling() or got.data_ptr() == deferred.data_ptr()


def take(q, k):
    """The FusedNorms whose deferred norms q and k are (taken: the caller runs them), or None when no norm was
    deferred. Raises when only one was, or when q / k are not the tensors the norms were given."""
    call = _current()
    if call is None or not call.inputs:
        return None
    inputs, fused = call.inputs, call.fused
    call.inputs = {}
    if set(inputs) != {"q_norm", "k_norm"} or not (_same(q, inputs["q_norm"]) and _same(k, inputs["k_norm"])):
        raise ValueError(f"ropegen.hf: {fused.where}: apply_rotary_pos_emb was not given q_norm's and k_norm's "
                         "outputs as they are, so ropegen.hf cannot run the norms there; patch(model, "
                         "fuse_qk_norm=False) keeps HF's norms")
    return fused


def run_hf_norms(fused, q, k):
    """HF's own norms on q and k (for a call routed to HF's apply function)."""
    return type(fused.q_norm).forward(fused.q_norm, q), type(fused.k_norm).forward(fused.k_norm, k)
