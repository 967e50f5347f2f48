"""ropegen.hf's check before routing anything: HF's own apply function on HF's own cos/sin against the rope-gen
kernel, at short positions and up to max_position_embeddings - 1 (see ropegen/hf.py)."""
import copy

import torch

from ._hf_kernel import _Positions


def _test_positions(config, n_axes):
    """Two calls' ids, [1, S] (or [3, 1, S]): short, and reaching max_position_embeddings - 1."""
    top = int(getattr(config, "max_position_embeddings", 4096) or 4096)
    short = torch.arange(8)
    long = torch.unique(torch.cat([torch.arange(8), torch.tensor([top // 3, top // 2, top - 2, top - 1])]))
    out = []
    for ids in (short, long):
        if n_axes:  # differing axes, as an image's tokens have (t, h, w)
            ids = torch.stack([ids, ids // 2, torch.flip(ids, [0])])[:, None, :]
        else:
            ids = ids[None, :]
        out.append(ids)
    return out


def _difference(expected, got, max_position):
    """None, or what differs beyond HF float32 RoPE's own error (~2^-24 * position per unit of |q|)."""
    scale = max(1.0, float(expected.abs().max()))
    tol = (2e-5 + 3e-7 * max_position) * scale
    diff = float((got - expected).abs().max())
    if diff <= tol:
        return None
    return f"max |diff| {diff:.3g} > {tol:.3g} at positions up to {max_position}"


def _float32_copy(rotary, config):
    """A copy to call: the module itself, or, where model.to(bf16/f16) has rounded its inv_freq
    buffers (HF's own rotation is then off by up to 2^-9 * angle), a new one from its config."""
    buffers = [b for b in rotary.buffers() if b.is_floating_point()]
    if all(b.dtype in (torch.float32, torch.float64) for b in buffers):
        return copy.deepcopy(rotary)
    try:
        return type(rotary)(config)
    except Exception:  # noqa: BLE001 - a constructor that wants more than the config
        return copy.deepcopy(rotary).float()


def _compare_rotary(rotary, config, layer_type, rope_spec, fn, kind):
    """None when the spec reproduces `fn` (an apply function of `kind`) on `rotary`'s cos/sin, else
    what differs."""
    rotary = _float32_copy(rotary, config)  # the call may update a dynamic / LongRoPE module's state
    gen = torch.Generator().manual_seed(0)
    x = torch.zeros(1, dtype=torch.float32)
    tested = False
    for ids in _test_positions(config, rope_spec.n_axes):
        with torch.no_grad():
            out = rotary(x, ids) if layer_type is None else rotary(x, ids, layer_type)
        positions = _Positions(rope_spec, ids)
        if kind == "gptj":  # GPT-J's module returns (sin, cos), in its apply function's order
            why = _compare_gptj_call(positions, fn, *out, gen)
            if why:
                return why
            tested = True
            continue
        cos, sin = out
        seq, width = ids.shape[-1], cos.shape[-1]
        for w in sorted({width, int(rope_spec.spec["head_dim"])}):
            q = torch.randn(1, 2, seq, w, generator=gen)
            k = torch.randn(1, 1, seq, w, generator=gen)
            try:
                expected = fn(q, k, cos, sin)
            except RuntimeError as e:
                if w == width:
                    return f"it fails on HF's own cos/sin: {e}"
                continue  # this apply function only takes the rotary part (DeepSeek-V3)
            with torch.no_grad():
                got = positions.rotate(q, k, width, "bhsd")
            for e, g in zip(expected, got):
                why = _difference(e, g, int(ids.max()))
                if why:
                    return why
            tested = True
    return None if tested else "nothing was compared"


def _compare_gptj_call(positions, fn, sin, cos, gen):
    """GPT-J's apply_rotary_pos_emb(tensor [B, S, H, rotary_dim], sin, cos) against the kernel."""
    ids = positions.position_ids
    tensor = torch.randn(1, ids.shape[-1], 2, 2 * cos.shape[-1], generator=gen)
    with torch.no_grad():
        got = positions.rotate(tensor, None, 2 * cos.shape[-1], "bshd")[0]
    return _difference(fn(tensor, sin, cos), got, int(ids.max()))


def _compare_gptj(attention, rope_spec, fn, module_globals):
    """GPT-J whose attention looks (sin, cos) up in its own table (transformers up to 5.23)."""
    table = attention.embed_positions
    if table.dtype != torch.float32 and "create_sinusoidal_positions" in module_globals:  # rounded by .to(bf16)
        table = module_globals["create_sinusoidal_positions"](attention.max_positions, attention.pos_embd_dim)
    gen = torch.Generator().manual_seed(0)
    for ids in _test_positions(attention.config, None):
        sincos = table[ids].float()
        sin, cos = torch.split(sincos, sincos.shape[-1] // 2, dim=-1)
        why = _compare_gptj_call(_Positions(rope_spec, ids), fn, sin, cos, gen)
        if why:
            return why
    return None
