"""The configs hf_model_table.py runs HF's code on, and what it learns from the config classes alone.

Everything here instantiates transformers' own config classes and reads what they did; nothing is parsed from
source text. Used only by hf_model_table.py.
"""

import copy
import json
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
REAL_CONFIGS = HERE / "hf_configs"  # real config.json files (reconstructed, see its README)

# The keys from-hf reads; their defaults come from each config class.
DEFAULT_KEYS = ["head_dim", "hidden_size", "num_attention_heads", "partial_rotary_factor", "rotary_pct",
                "rotary_dim", "rotary_emb_base", "max_position_embeddings", "original_max_position_embeddings",
                "qk_rope_head_dim", "qk_nope_head_dim", "rope_interleave", "rope_parameters", "layer_types",
                "no_rope_layers", "dtype"]
TINY_HEAD = 16
# 4.x-style kwargs that config classes move into one layer type's rope parameters, with marker values.
THETA_KEYS = {"rope_theta": 1111.0, "rope_local_base_freq": 2222.0, "compress_rope_theta": 3333.0}
# Kwargs that config classes turn into one layer type's override of a key (Gemma 4: global_head_dim).
LAYER_KEYS = {"head_dim": ["global_head_dim"]}


def jsonable(v):
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, (bool, int, str)) or v is None:
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None  # HF writes Infinity (not JSON) for keys from-hf never reads
    return str(v)


def readable(cfg):
    """The config with per-layer attributes (Gemma 4's head_dim) readable as their global value; HF raises
    AmbiguousGlobalPerLayerAttributeError on them otherwise."""
    if hasattr(type(cfg), "allow_global_per_layer_attribute_access"):
        cfg.allow_global_per_layer_attribute_access = True
    return cfg


def config_dict(cfg):
    """cfg.to_dict() as config.json holds it (without readable()'s switch)."""
    d = cfg.to_dict()
    d.pop("allow_global_per_layer_attribute_access", None)
    for v in d.values():
        if isinstance(v, dict):
            v.pop("allow_global_per_layer_attribute_access", None)
    return d


def text_config_path(cfg):
    """Attribute names from a config to its text model's: ["text_config"], Qwen3-Omni's ["thinker_config",
    "text_config"] (where HF's get_text_config finds it among the sub-configs), or [] (the config itself)."""
    sub = getattr(cfg, "text_config", None)
    if sub is not None and hasattr(sub, "to_dict"):
        return ["text_config"]
    try:
        target = cfg.get_text_config(decoder=True)
    except Exception:  # noqa: BLE001 - a config class without text config
        return []

    def find(c, path):
        for name in getattr(type(c), "sub_configs", None) or {}:
            v = getattr(c, name, None)
            if v is target:
                return path + [name]
            if hasattr(v, "to_dict") and len(path) < 3:
                found = find(v, path + [name])
                if found:
                    return found
        return None
    return (find(cfg, []) or []) if target is not cfg else []


def text_config(cfg):
    for name in text_config_path(cfg):
        cfg = getattr(cfg, name)
    return readable(cfg)


def with_text_config(full, text):
    """`full` with its text config replaced by `text` (or `text` when full is the text config)."""
    path = text_config_path(full)
    if not path:
        return text
    parent = full
    for name in path[:-1]:
        parent = getattr(parent, name)
    setattr(parent, path[-1], text)
    return full


def mla(c):
    """DeepSeek-V2/V3 MLA: q = [q_nope | q_pe] and HF's apply function gets q_pe alone."""
    return bool(getattr(c, "qk_rope_head_dim", None)) and getattr(c, "qk_nope_head_dim", None) is not None


def partial_factor(c):
    """The smallest partial rotary factor the config gives any layer type (1 when none)."""
    rp = getattr(c, "rope_parameters", None) or {}
    sets = [v for v in rp.values() if isinstance(v, dict)] or [rp]
    factors = [p.get("partial_rotary_factor") for p in sets] + [getattr(c, "partial_rotary_factor", None)]
    return min([f for f in factors if isinstance(f, (int, float)) and 0 < f <= 1] or [1.0])


def mrope(c):
    rp = getattr(c, "rope_parameters", None) or {}
    return isinstance(rp, dict) and "mrope_section" in rp


def rope_dim_of(c):
    if mla(c):
        return c.qk_rope_head_dim
    return getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads


def layer_config(c, layer_type):
    """The config of a layer type's layers where a heterogeneous config (Gemma 4, dots.3) gives it its own, else c."""
    if getattr(c, "is_heterogeneous", False) and layer_type in set(c.layer_types or []):
        try:
            return c.per_layer_config[layer_type]
        except ValueError:  # layers of the type differ (NeoMME): HF's rotary module reads the global values
            pass
    return c


def head_of(c, layer_type):
    """The head size HF's apply function gets for a layer type (Gemma 4's full_attention layers: their own)."""
    return rope_dim_of(layer_config(c, layer_type))


def layer_head_dims(c):
    """{layer type: head size} where a heterogeneous config (Gemma 4) gives a layer type its own."""
    if not getattr(c, "is_heterogeneous", False):
        return {}
    return {lt: getattr(layer_config(c, lt), "head_dim", None) for lt in sorted(set(c.layer_types or []))}


def tiny(cfg, shrink=True):
    """The config with few heads, small ones unless `shrink` is false; every RoPE key stays."""
    c = readable(copy.deepcopy(cfg))
    heads = 2
    if not shrink:  # the real head, 2 of them
        head = rope_dim_of(c)
        c.num_attention_heads, c.hidden_size = heads, heads * head
        return c
    if getattr(c, "rotary_dim", None):  # GPT-J, CodeGen: a partial rotary size of its own
        c.rotary_dim = TINY_HEAD // 2
    head = TINY_HEAD
    if partial_factor(c) * head < 4:  # at least 4 pairs, so the pairing shows (DeepSeek-V4: 1/8 of the head)
        head = int(8 / partial_factor(c))
    for _ in range(8):  # HF's odd rotary sizes (MiMo: int(0.334 x 16) = 5) have no spec: a head that is even
        if int(partial_factor(c) * head) % 2 == 0:
            break
        head += 8
    scales = {}  # per-layer overrides of sizes scale as the global ones do
    if mla(c):  # MLA: every head size scaled alike (Mistral 4 ties them)
        scale = TINY_HEAD / c.qk_rope_head_dim
        head = int((getattr(c, "head_dim", None) or TINY_HEAD / scale) * scale)
        c.qk_rope_head_dim, c.qk_nope_head_dim = TINY_HEAD, int((c.qk_nope_head_dim or 0) * scale)
        scales.update(qk_rope_head_dim=scale, qk_nope_head_dim=scale)
    per_layer = config_dict(c).get("per_layer_config") or {}
    global_head = getattr(c, "head_dim", None)
    try:  # Falcon's head_dim is a property of hidden_size / heads
        if global_head:
            c.head_dim = head
            scales["head_dim"] = head / global_head
    except AttributeError:
        pass
    if any(k in o for o in per_layer.values() for k in scales):  # Gemma 4's wider global layers, dots.3's MLA
        c.per_layer_config = {int(i): {k: int(v * scales[k]) if k in scales else v for k, v in o.items()}
                              for i, o in per_layer.items()}
    if hasattr(c, "num_attention_heads"):
        c.num_attention_heads = heads
        if hasattr(c, "num_key_value_heads"):
            c.num_key_value_heads = 1
        c.hidden_size = heads * head
    return c


def real_configs():
    """{path: raw config.json} of the real configs, tests/golden/hf_configs then examples/hf_configs."""
    paths = sorted(REAL_CONFIGS.glob("*.json")) + sorted((ROOT / "examples" / "hf_configs").glob("*.json"))
    return {p: json.loads(p.read_text()) for p in paths}


def without_mrope_section(c):
    """A copy of the config without mrope_section: the rotary module's own default sections apply."""
    c = copy.deepcopy(c)
    c.rope_parameters = {k: v for k, v in c.rope_parameters.items() if k != "mrope_section"}
    return c


def realistic(hf, model_type):
    """The config of model_type built from a real config.json of it (its text part for a text model_type), for
    model types whose class defaults HF's own code cannot run on (GLM-4V: partial rotary missing, so mrope_section
    does not fit the head); (None, None) when there is none."""
    for path, raw in real_configs().items():
        parts = [raw] + [v for v in raw.values() if isinstance(v, dict)]
        parts += [w for v in raw.values() if isinstance(v, dict) for w in v.values() if isinstance(w, dict)]
        for part in parts:
            if part.get("model_type") == model_type:
                return hf.config_class(model_type).from_dict(part), path
    return None, None


def legacy_feeds(cfg_cls, default_rp):
    """Which 4.x kwargs of a text config class feed which layer type's rope parameters: instantiate with marker
    values. Per layer type:
    the kwarg its rope_theta comes from, whether rope_scaling reaches it, and the keys the class adds to a yarn
    rope_scaling there (DeepSeek-V4: attention_factor 1.0)."""
    if not default_rp or not all(isinstance(v, dict) for v in default_rp.values()):
        return None

    def nested_rope(**kwargs):
        try:
            rp = readable(cfg_cls(**kwargs)).rope_parameters or {}
        except Exception:  # noqa: BLE001 - a class that takes none of these
            return None
        return rp if rp and all(isinstance(p, dict) for p in rp.values()) else None

    rp = nested_rope(rope_scaling={"rope_type": "linear", "factor": 7.0}, **THETA_KEYS)
    if rp is None:
        return None
    yarn_given = {"rope_type": "yarn", "factor": 7.0, "original_max_position_embeddings": 512}
    yarn = nested_rope(rope_scaling=dict(yarn_given)) or {}
    out = {}
    for lt, p in rp.items():
        feed = {}
        for key, marker in THETA_KEYS.items():
            if p.get("rope_theta") == marker:
                feed["rope_theta"] = key
        feed["rope_scaling"] = p.get("factor") == 7.0
        adds = {k: v for k, v in (yarn.get(lt) or {}).items()
                if k not in yarn_given and k not in ("rope_theta", "partial_rotary_factor", "type")}
        if feed["rope_scaling"] and adds:
            feed["yarn_adds"] = jsonable(adds)
        out[lt] = feed
    return out


def splits_flat_rope_parameters(cfg_cls):
    """Whether a text config class spreads a flat rope_parameters of config.json over the layer types as it does
    rope_scaling (DeepSeek-V4), rather than keeping it beside them (Gemma 3)."""
    try:
        rp = cfg_cls(rope_parameters={"rope_type": "linear", "factor": 6.0, "rope_theta": 4444.0})
        rp = readable(rp).rope_parameters or {}
    except Exception:  # noqa: BLE001
        return False
    return bool(rp) and all(isinstance(p, dict) for p in rp.values())


def layer_key_feeds(cfg):
    """{layer type: {key: kwarg}}: the kwargs a heterogeneous config class turns into one layer type's value of a
    key (Gemma 4: global_head_dim -> full_attention's head_dim)."""
    out = {}
    for key, names in LAYER_KEYS.items():
        for name in names:
            try:
                c = type(cfg)(**{name: 24})
            except Exception:  # noqa: BLE001 - a class that does not take it
                continue
            for lt, size in (layer_head_dims(c) if key == "head_dim" else {}).items():
                if size == 24:
                    out.setdefault(lt, {})[key] = name
    return out


def layer_type_defaults(cfg):
    """{layer type: {key: default}} where a heterogeneous config class gives a layer type defaults of its own."""
    if not getattr(cfg, "is_heterogeneous", False):
        return {}
    out = {}
    for lt in sorted(set(cfg.layer_types or [])):
        try:
            lc = cfg.per_layer_config[lt]
        except ValueError:  # layers of the type differ (NeoMME): no one default per layer type
            continue
        diff = {k: jsonable(getattr(lc, k)) for k in DEFAULT_KEYS
                if getattr(lc, k, None) is not None and getattr(lc, k) != getattr(cfg, k, None)}
        if diff:
            out[lt] = diff
    return out


def head_dim_follows_hidden_size(cls, cfg):
    """Whether the class derives head_dim from hidden_size (then a config without head_dim must derive it too)."""
    try:
        return readable(cls(hidden_size=cfg.hidden_size * 2)).head_dim != cfg.head_dim
    except Exception:  # noqa: BLE001
        return True


def nope_layers(cfg):
    """NoPE layers: HF's attention reads `use_rope = config.no_rope_layers[layer_idx]` (1 = RoPE)."""
    layers = getattr(cfg, "no_rope_layers", None)
    return "no_rope_layers" if isinstance(layers, list) else None
