"""Run a Hugging Face transformers model's RoPE through rope-gen kernels, per model instance.

    import ropegen.hf
    model = ropegen.hf.patch(model)    # in place; returns the model
    ropegen.hf.unpatch(model)          # exactly as before (bit-identical outputs)

Where transformers applies RoPE: the model-level rotary module (`LlamaRotaryEmbedding`, ...)
turns position_ids into (cos, sin) once per forward; every attention layer then calls its
modeling file's `apply_rotary_pos_emb(q, k, cos, sin)` (DeepSeek-V3: `..._interleave`). GPT-J
calls `apply_rotary_pos_emb(tensor, sin, cos)` once for k and once for q; up to transformers
5.23 its attention takes position_ids and looks (sin, cos) up in its own table, from 5.24 a
`GPTJRotaryEmbedding` module (without a `config`) returns them. A rope-gen kernel wants the
position ids, not cos/sin: it computes its own angles, with the spec's exact scaling.

Mechanism (how the position ids reach the kernel):
- The rotary module's instance `forward` is wrapped: it returns HF's own (cos, sin), unchanged
  (anything else that reads them still works), and tags both with an attribute naming the
  position ids of this call and the rope-gen spec of this rotary module (and layer type:
  Gemma-3 calls the module once per layer type). Qwen2-VL's [3, B, S] M-RoPE ids are kept as
  they are and moved to [B, S, 3] for the kernel. A rotary module without a `config` (GPT-J's)
  gets its spec from the model's config.
- The apply function the attention forward calls is looked up in that forward's module
  globals, so it is replaced there by a dispatcher: cos tagged -> the rope-gen kernel; cos
  untagged -> the function that was there before. Only a patched model's rotary module tags
  its cos, so another model of the same class in the same process keeps HF's path even while
  the dispatcher is installed. The dispatcher is reference-counted per modeling module and
  the previous function is put back when the last patched model using it is unpatched.
- GPT-J with its own table (transformers up to 5.23): its attention instances' `forward` is
  wrapped to set a context variable with the call's position_ids, which the dispatcher for
  GPT-J's apply function reads (with a rotary module it reads the tag, as above).
- Per-head QK-norm (Qwen3, Gemma 3, GLM-4 MoE, ...: the attention's q_norm / k_norm, RMSNorm over head_dim
  with a [head_dim] weight, feed apply_rotary_pos_emb): the attention's forward is wrapped so that, during its
  call, q_norm and k_norm hand back their input and the dispatcher runs norm + RoPE in one kernel (a spec with
  `qk_norm`), with the norms' own weights (trained through it). A norm is fused only when a probe on a copy shows
  rope-gen's `rms` (x̂·w) or `rms_one_plus` (x̂·(1 + w), Gemma) with the module's eps; others (OLMo 2 normalises
  the whole projection) stay HF's. ropegen/_hf_norm.py says what is checked at each call.
  `patch(model, fuse_qk_norm=False)` keeps HF's norms.
- Before changing anything, patch() checks every (rotary module, layer type, apply function)
  pair it is going to route: HF's own apply function on HF's own cos/sin against the rope-gen
  kernel, on random q/k at short positions and at positions up to max_position_embeddings - 1
  (both LongRoPE lists). A family whose spec rope-gen cannot build, or whose RoPE the spec does
  not reproduce, is refused with a ValueError naming the module and what differs; so is a model
  whose modules are in a form this module does not know (never another exception).

Why not transformers' hook: integrations/hub_kernels.py decorates the apply function with
`use_kernel_forward_from_hub("rotary_pos_emb")` and the attention classes with
`use_kernelized_func(apply_rotary_pos_emb)`. Both are no-ops unless the `kernels` package is
installed; with it, `kernelize(model)` sets `forward` on the function's wrapper module to a kernel
loaded from a Hub (or local) kernel repository, chosen by layer name, device and mode. That
wrapper is one object per modeling file, the one the attention forward calls by its module-level
name, so the swap reaches every model in the process; and the replacement must keep HF's
signature (q, k, cos, sin, unsqueeze_dim), which carries no position ids, so an exact-angle
kernel that computes its own cos/sin cannot be plugged in through it. The mechanism above
replaces the same function, but dispatches per model and brings the ids along.

Covered: the model's text RoPE. Vision towers (Qwen2-VL's `...VisionRotaryEmbedding` /
`apply_rotary_pos_emb_vision`) are left on HF's path. Refused: a model without RoPE, a rotary
module whose forward is not (x, position_ids[, layer_type]), an attention that applies RoPE
through another function (e.g. DeepSeek-V2 / Llama-4's complex `apply_rotary_emb(xq, xk,
freqs_cis)`), and a spec that does not reproduce HF's rotation. q/k in float32, float16 or
bfloat16. torch.compile (after patch) traces it in one graph: dynamo follows the tag, a Python
object, at trace time into ropegen.torch's op, and the ids stay graph inputs.
"""
import contextvars
import functools
import inspect
import re
import threading
import weakref

import torch

import ropegen
from . import _hf_norm
from ._hf_check import _compare_gptj, _compare_rotary
from ._hf_kernel import _Positions, _RopeSpec

__all__ = ["patch", "unpatch", "is_patched"]

_TAG = "_ropegen_positions"  # attribute set on the cos a patched rotary module returns
_LAYOUT_OF_UNSQUEEZE = {1: "bhsd", 2: "bshd"}  # HF's unsqueeze_dim for [B,S,D] cos -> q's layout
_APPLY_NAMES = ("apply_rotary_pos_emb", "apply_rotary_pos_emb_interleave")
_ROPE_FUNCTION = re.compile(r"^apply_\w*(rotary|rope)")
_lock = threading.RLock()


# --- dispatchers that replace the apply functions ------------------------------------------

def _unsqueeze_dim(signature, q, k, cos, sin, args, kwargs):
    if not args and not kwargs:
        return 1
    bound = signature.bind(q, k, cos, sin, *args, **kwargs)
    bound.apply_defaults()
    return bound.arguments.get("unsqueeze_dim", 1)


def _qk_dispatcher(previous, via):
    """For apply_rotary_pos_emb(q, k, cos, sin, [position_ids,] unsqueeze_dim=1)."""
    signature = inspect.signature(previous)

    def apply_rotary_pos_emb(q, k, cos, sin, *args, **kwargs):
        positions = getattr(cos, _TAG, None)
        norms = _hf_norm.take(q, k)  # q_norm / k_norm a patched attention deferred to this call
        if positions is None:
            if norms is not None:
                q, k = _hf_norm.run_hf_norms(norms, q, k)
            return previous(q, k, cos, sin, *args, **kwargs)
        unsqueeze_dim = _unsqueeze_dim(signature, q, k, cos, sin, args, kwargs)
        layout = _LAYOUT_OF_UNSQUEEZE.get(unsqueeze_dim)
        if layout is None or q.dim() != 4:
            raise ValueError(f"ropegen.hf: {positions.rope_spec.where}: q of shape {tuple(q.shape)} with "
                             f"unsqueeze_dim={unsqueeze_dim} is neither [B, H, S, D] nor [B, S, H, D]")
        return positions.rotate(q, k, cos.shape[-1], layout, via, norms)

    return functools.wraps(previous, updated=())(apply_rotary_pos_emb)


_GPTJ_POSITIONS = contextvars.ContextVar("ropegen_gptj_positions", default=None)


def _gptj_dispatcher(previous, via):
    """For GPT-J's apply_rotary_pos_emb(tensor, sin, cos), tensor [B, S, H, rotary_dim]."""

    def apply_rotary_pos_emb(tensor, sin, cos):
        positions = getattr(cos, _TAG, None) or _GPTJ_POSITIONS.get()
        if positions is None:
            return previous(tensor, sin, cos)
        return positions.rotate(tensor, None, 2 * cos.shape[-1], "bshd", via)[0]

    return functools.wraps(previous, updated=())(apply_rotary_pos_emb)


def _parameters(fn):
    fn = fn.forward if isinstance(fn, torch.nn.Module) else fn
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None


def _apply_kind(fn):
    """'qk' (q, k, cos, sin, ...), 'gptj' (tensor, sin, cos), or None (not a form this module knows)."""
    params = _parameters(fn)
    if params is None:
        return None
    if params[:4] == ["q", "k", "cos", "sin"] and set(params[4:]) <= {"position_ids", "unsqueeze_dim"}:
        return "qk"
    if params == ["tensor", "sin", "cos"]:
        return "gptj"
    return None


_DISPATCHERS = {"qk": _qk_dispatcher, "gptj": _gptj_dispatcher}


class _Swap:
    """A dispatcher installed in a modeling module's globals, shared by the patched models using it."""

    def __init__(self, module_globals, name, kind, users=0):
        self.globals, self.name = module_globals, name
        self.previous = module_globals[name]
        self.dispatcher = _DISPATCHERS[kind](self.previous, _qualified(module_globals, name))
        self.users = users


_swaps = {}  # (id(module globals), name) -> _Swap


def _acquire(module_globals, name, kind):
    key = (id(module_globals), name)
    swap = _swaps.get(key)
    if swap is not None and module_globals.get(name) is not swap.dispatcher:
        # replaced behind our back (by another patcher, or put back): wrap what is there now
        swap = _Swap(module_globals, name, kind, users=swap.users)
        _swaps[key] = swap
        module_globals[name] = swap.dispatcher
    if swap is None:
        swap = _swaps[key] = _Swap(module_globals, name, kind)
        module_globals[name] = swap.dispatcher
    swap.users += 1
    return key


def _release(key):
    swap = _swaps[key]
    swap.users -= 1
    if swap.users == 0:
        del _swaps[key]
        if swap.globals.get(swap.name) is swap.dispatcher:
            swap.globals[swap.name] = swap.previous
        # else someone replaced it after us; ours passes untagged calls through, so leave theirs


# --- finding what to patch -----------------------------------------------------------------

def _qualified(module_globals, name):
    return f"{module_globals.get('__name__', '?')}.{name}"


def _is_vision(module):
    return "Vision" in type(module).__name__


def _forward_function(cls):
    return inspect.unwrap(cls.forward)


def _rope_functions_called(cls):
    """{name: function} of the module-level RoPE functions the class's forward calls."""
    forward = _forward_function(cls)
    code, module_globals = getattr(forward, "__code__", None), getattr(forward, "__globals__", {})
    if code is None:
        return {}, module_globals
    names = {name for name in code.co_names if _ROPE_FUNCTION.match(name) and callable(module_globals.get(name))}
    return {name: module_globals[name] for name in names}, module_globals


class _Specs:
    """The _RopeSpec of each (config, layer type), made once per patch."""

    def __init__(self):
        self._specs = {}

    def get(self, config, layer_type, where):
        key = (id(config), layer_type)
        if key not in self._specs:
            try:
                text = ropegen.from_hf(config.to_dict(), layer_type=layer_type)
            except ValueError as e:
                raise ValueError(f"ropegen.hf.patch: {where}: rope-gen cannot make a spec from its config: "
                                 f"{e}") from None
            self._specs[key] = _RopeSpec(text, where)
        return self._specs[key]


def _rotary_config(rotary, model):
    """The config a rotary module was built from: its own, else (GPT-J's module keeps none) the model's text
    config; None when neither is there."""
    config = getattr(rotary, "config", None)
    if config is None:
        config = getattr(model, "config", None)
        config = config.get_text_config() if hasattr(config, "get_text_config") else config
    return config if hasattr(config, "to_dict") else None


def _rotary_specs(rotary, name, specs, config):
    """{layer_type or None: _RopeSpec} for one rotary module built from `config`."""
    cls = type(rotary)
    params = _parameters(_forward_function(cls))
    if params not in (["self", "x", "position_ids"], ["self", "x", "position_ids", "layer_type"]):
        takes = ", ".join(params or ["?"])
        raise ValueError(f"ropegen.hf.patch: {name} ({cls.__name__}): its forward takes ({takes}); only "
                         "forward(x, position_ids[, layer_type]) returning (cos, sin) is supported")
    if config is None:
        raise ValueError(f"ropegen.hf.patch: {name} ({cls.__name__}) has no `config` and neither has the model: "
                         "there is no config to make its spec from")
    where = f"{name} ({cls.__name__}, model_type {config.model_type}"
    if "layer_type" not in params:
        return {None: specs.get(config, None, where + ")")}
    rope_types = getattr(rotary, "rope_type", None)
    layer_types = rope_types if isinstance(rope_types, dict) else getattr(rotary, "layer_types", ())
    return {t: specs.get(config, t, f"{where}, layer_type {t})") for t in sorted(layer_types)}


# --- patch / unpatch -----------------------------------------------------------------------

class _Patch:
    def __init__(self):
        self.forwards = []  # (module, the instance `forward` it had or None)
        self.swaps = []     # keys of _swaps this model holds


_patched = weakref.WeakKeyDictionary()  # model -> _Patch


def _tagging_forward(original, specs):
    def forward(x, position_ids, *args, **kwargs):
        out = original(x, position_ids, *args, **kwargs)
        layer_type = args[0] if args else kwargs.get("layer_type")
        rope_spec = specs.get(layer_type)
        if rope_spec is not None and position_ids is not None and isinstance(out, tuple) and len(out) == 2:
            tag = _Positions(rope_spec, position_ids)
            for t in out:  # (cos, sin), or GPT-J's (sin, cos): each apply function finds it on its `cos`
                setattr(t, _TAG, tag)
        return out

    return forward


def _gptj_forward(original, rope_spec):
    signature = inspect.signature(original)

    def forward(*args, **kwargs):
        position_ids = signature.bind_partial(*args, **kwargs).arguments.get("position_ids")
        token = _GPTJ_POSITIONS.set(None if position_ids is None else _Positions(rope_spec, position_ids))
        try:
            return original(*args, **kwargs)
        finally:
            _GPTJ_POSITIONS.reset(token)

    return forward


def _signature_text(fn):
    params = _parameters(fn)
    return f"({', '.join(params)})" if params is not None else ""


def _looks_up_own_table(attention):
    """GPT-J up to transformers 5.23: the attention takes position_ids and indexes its own (sin, cos) table."""
    return hasattr(attention, "embed_positions") and "position_ids" in (
        _parameters(_forward_function(type(attention))) or [])


def _fused_norms(attention, name, kinds):
    """A FusedNorms when `attention` (whose forward calls apply functions of `kinds`) normalises q and k per head
    with norms rope-gen's qk_norm reproduces, else None (its norms stay HF's)."""
    q_norm, k_norm = getattr(attention, "q_norm", None), getattr(attention, "k_norm", None)
    head_dim = getattr(attention, "head_dim", None)
    if (kinds != {"qk"} or not isinstance(q_norm, torch.nn.Module) or not isinstance(k_norm, torch.nn.Module)
            or not isinstance(head_dim, int) or q_norm._forward_hooks or k_norm._forward_hooks):
        return None  # (a forward hook on a norm would see, and could replace, an output that is not there yet)
    kind = _hf_norm.norm_kind(q_norm, head_dim)
    if kind is None or _hf_norm.norm_kind(k_norm, head_dim) != kind:
        return None
    return _hf_norm.FusedNorms(f"{name} ({type(attention).__name__})", q_norm, k_norm, *kind)


def _plan(model, fuse_qk_norm):
    """What patch() will change, checked: ([(rotary module, config, {layer_type: spec})], [(GPT-J
    attention, spec)], [(module globals, apply function name, kind)], [(attention, FusedNorms)]).
    Changes nothing."""
    specs = _Specs()
    rotaries, gptj, swaps, unknown, table_keys, fused = [], [], {}, {}, set(), []
    for name, module in model.named_modules():
        cls = type(module)
        if _is_vision(module):
            continue
        if cls.__name__.endswith("RotaryEmbedding"):
            config = _rotary_config(module, model)
            rotaries.append((module, config, _rotary_specs(module, name or "model", specs, config)))
            continue
        functions, module_globals = _rope_functions_called(cls)
        kinds = set()
        for fn_name, fn in functions.items():
            kind = _apply_kind(fn) if fn_name in _APPLY_NAMES else None
            if kind is None:
                unknown.setdefault(f"{cls.__name__} calls {fn_name}{_signature_text(fn)}", name)
                continue
            kinds.add(kind)
            key = (id(module_globals), fn_name)
            swaps[key] = (module_globals, fn_name, kind)
            if kind == "gptj" and _looks_up_own_table(module):
                table_keys.add(key)
                where = f"{name} ({cls.__name__}, model_type {module.config.model_type})"
                gptj.append((module, specs.get(module.config, None, where)))
        norms = _fused_norms(module, name, kinds) if fuse_qk_norm and functions else None
        if norms is not None:
            fused.append((module, norms))
    if unknown:
        raise ValueError("ropegen.hf.patch: unsupported RoPE application: "
                         + "; ".join(f"{what} (in {name})" for what, name in sorted(unknown.items()))
                         + ". Supported: apply_rotary_pos_emb(q, k, cos, sin[, unsqueeze_dim]) fed by a "
                         "...RotaryEmbedding module, DeepSeek-V3's apply_rotary_pos_emb_interleave, and GPT-J's "
                         "apply_rotary_pos_emb(tensor, sin, cos)")
    tagged = [s for key, s in swaps.items() if key not in table_keys]  # fed by a rotary module's (cos, sin)
    if not tagged and not gptj:
        raise ValueError(f"ropegen.hf.patch: {type(model).__name__} has no rotary position embedding that "
                         "ropegen.hf can route (no attention calls apply_rotary_pos_emb)")
    if tagged and not rotaries:
        raise ValueError(f"ropegen.hf.patch: {type(model).__name__}: attention calls apply_rotary_pos_emb but "
                         "no ...RotaryEmbedding module makes its cos/sin")
    # HF's own rotation against the spec's, per apply function the attentions may call; a function
    # that differs (DeepSeek-V3's forward names both the half and the interleaved one) is recorded
    # and raises if it is ever called with this spec; none agreeing refuses the model.
    for module, config, layer_specs in rotaries:
        for layer_type, rope_spec in layer_specs.items():
            for module_globals, fn_name, kind in tagged:
                via = _qualified(module_globals, fn_name)
                why = _compare_rotary(module, config, layer_type, rope_spec, module_globals[fn_name], kind)
                if why:
                    rope_spec.mismatch[via] = (f"ropegen.hf: {rope_spec.where}: rope-gen's spec does not reproduce "
                                               f"{via}: {why}")
            if tagged and len(rope_spec.mismatch) == len(tagged):
                raise ValueError("ropegen.hf.patch: refusing to patch: " + "; ".join(rope_spec.mismatch.values()))
    for module, rope_spec in gptj:
        module_globals = _forward_function(type(module)).__globals__
        via = _qualified(module_globals, "apply_rotary_pos_emb")
        why = _compare_gptj(module, rope_spec, module_globals["apply_rotary_pos_emb"], module_globals)
        if why:
            raise ValueError(f"ropegen.hf.patch: refusing to patch: {rope_spec.where}: rope-gen's spec does not "
                             f"reproduce {via}: {why}")
    return [(module, layer_specs) for module, _, layer_specs in rotaries], gptj, list(swaps.values()), fused


def _set_forward(record, module, forward):
    record.forwards.append((module, module.__dict__.get("forward")))
    module.forward = forward


def patch(model, fuse_qk_norm=True):
    """Route `model`'s RoPE through rope-gen kernels made from its config (see the module
    docstring); returns the model. Raises ValueError, changing nothing, for what it cannot route.
    fuse_qk_norm: run attentions' per-head q_norm / k_norm inside the RoPE kernel (False: HF's)."""
    with _lock:
        if model in _patched:
            raise ValueError(f"ropegen.hf.patch: this {type(model).__name__} is already patched")
        try:
            rotaries, gptj, swaps, fused = _plan(model, fuse_qk_norm)
        except ValueError:
            raise
        except Exception as e:  # noqa: BLE001 - HF code in a form this module does not know; nothing changed yet
            raise ValueError(f"ropegen.hf.patch: {type(model).__name__}: its RoPE modules are in a form ropegen.hf "
                             f"does not know ({type(e).__name__}: {e}); nothing was patched") from e
        record = _Patch()
        for module_globals, name, kind in swaps:
            record.swaps.append(_acquire(module_globals, name, kind))
        for module, layer_specs in rotaries:
            _set_forward(record, module, _tagging_forward(module.forward, layer_specs))
        for module, rope_spec in gptj:
            _set_forward(record, module, _gptj_forward(module.forward, rope_spec))
        for module, norms in fused:
            _set_forward(record, module, _hf_norm.attention_forward(module.forward, norms))
            for which in ("q_norm", "k_norm"):
                norm = getattr(norms, which)
                _set_forward(record, norm, _hf_norm.norm_forward(norm.forward, norm, which))
        _patched[model] = record
    return model


def unpatch(model):
    """Undo patch(model): its modules' forwards and the apply functions are as they were."""
    with _lock:
        record = _patched.pop(model, None)
        if record is None:
            raise ValueError(f"ropegen.hf.unpatch: this {type(model).__name__} is not patched")
        for module, previous in reversed(record.forwards):
            if previous is None:
                del module.forward
            else:
                module.forward = previous
        for key in record.swaps:
            _release(key)
    return model


def is_patched(model):
    """Whether patch(model) is in effect."""
    return model in _patched
