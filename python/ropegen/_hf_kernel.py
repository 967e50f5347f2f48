"""ropegen.hf's kernel side: a rotary source's rope-gen spec and the rotation of a call's q/k by it at the
position ids a patched rotary module saw (see ropegen/hf.py)."""
import yaml

from . import torch as rt


def _make_rope(spec):
    """A ropegen.torch.Rope of the spec with explicit positions (M-RoPE axes need it said), its
    dtype and layout left to each call's tensors."""
    spec = {key: value for key, value in spec.items() if key not in ("dtype", "layout")}
    return rt.Rope(dict(spec, positions="explicit"))


class _RopeSpec:
    """One rotary source (a rotary module, per layer type): its rope-gen spec, and a kernel per
    head width that HF's apply function is given (it rotates the first rotary_dim dims of what
    it gets: all of q, DeepSeek-V3's rope part, or GPT-NeoX's q with rotary_dim < head_dim)."""

    def __init__(self, spec_text, where):
        spec = yaml.safe_load(spec_text)
        self.spec, self.where = spec, where
        self.rotary_dim = int(spec["rotary_dim"])
        self.n_axes = len(spec.get("axes", {}).get("sections", ())) or None
        self.mismatch = {}  # apply function -> why its rotation differs from the spec's (not called then)
        self._ropes = {}

    def rope(self, width, norms=None):
        """The kernel for q/k `width` dims wide; with `norms` (a FusedNorms), its q_norm / k_norm fused in."""
        key = (width, None if norms is None else (norms.kind, norms.eps))
        rope = self._ropes.get(key)
        if rope is None:
            if width < self.rotary_dim:
                raise ValueError(f"ropegen.hf: {self.where}: q/k of {width} dims are narrower than the spec's "
                                 f"rotary_dim {self.rotary_dim}")
            spec = dict(self.spec, head_dim=width, rotary_offset=0)
            if norms is not None:
                spec["qk_norm"] = norms.spec()
            rope = self._ropes[key] = _make_rope(spec)
        return rope

    def kernel_ids(self, position_ids, batch):
        """HF's ids as the kernel takes them: [B, S], or [B, S, n_axes] (HF's M-RoPE ids are [3, B, S])."""
        ids = position_ids
        if self.n_axes:
            ids = ids.unsqueeze(-1) if ids.dim() == 2 else ids.movedim(0, -1)
            ids = ids.expand(*ids.shape[:-1], self.n_axes)
        if ids.shape[0] != batch:
            ids = ids.expand(batch, *ids.shape[1:])
        return ids.contiguous()


class _Positions:
    """What a patched rotary module attaches to its cos: the call's position ids and spec."""

    def __init__(self, rope_spec, position_ids):
        self.rope_spec, self.position_ids = rope_spec, position_ids
        self._ids = {}

    def rotate(self, q, k, cos_dims, layout, via=None, norms=None):
        """q and k rotated (with `norms`, a FusedNorms: normalised by its weights first, in the same kernel)."""
        spec = self.rope_spec
        if via in spec.mismatch:
            raise ValueError(spec.mismatch[via])
        if cos_dims != spec.rotary_dim:
            raise ValueError(f"ropegen.hf: {spec.where}: HF's cos/sin rotate {cos_dims} dims but the rope-gen spec "
                             f"has rotary_dim {spec.rotary_dim}")
        batch = q.shape[0]  # bhsd or bshd
        ids = self._ids.get(batch)
        if ids is None:
            ids = self._ids[batch] = spec.kernel_ids(self.position_ids, batch)
        if norms is None:
            return spec.rope(q.shape[-1])(q, k, ids, layout=layout)
        return spec.rope(q.shape[-1], norms)(q, k, ids, layout=layout, q_norm_weight=norms.q_norm.weight,
                                             k_norm_weight=norms.k_norm.weight)
