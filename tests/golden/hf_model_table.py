#!/usr/bin/env python3
"""The model table `rope-gen from-hf` reads, generated from the installed transformers, plus one golden case per
model type.

For every model_type of transformers' CONFIG_MAPPING whose modeling file has a rotary-embedding class, the script
*executes* HF's own code (nothing is parsed from source text):
  * the config class instantiated with its defaults gives the defaults of every key from-hf reads (head_dim,
    hidden_size, heads, rope parameters per layer type, partial rotary, layer types, NoPE layers);
  * the config class instantiated with 4.x-style kwargs (rope_scaling, rope_theta, rope_local_base_freq) tells which
    layer type each of those keys feeds;
  * the model's rotary module and apply function, run on unit vectors, give the pairing numerically: which output
    dims each input dim reaches (half: i <-> i + rd/2; interleaved: 2i <-> 2i+1; DeepSeek-V3: in (2i, 2i+1), out
    (i, i + rd/2)); dims that reach only themselves pass through (partial rotary, leading or trailing, or pairs at
    frequency 0); run at ids that set one position axis at a time, M-RoPE's layout;
  * where the class defaults do not run HF's code, a real config of the model type (hf_configs/) does.
A model type whose code does not run on its own is kept with `refused` and the reason (from-hf: --pairing decides);
one whose RoPE the spec cannot express (learned rotary parameters, an M-RoPE layout of its own) with `unsupported`.
The configs are shaped by hf_table_configs.py, HF's code is run and measured by hf_table_rotary.py.

Outputs (from the repository root):
  hf/hf_models.json                      the table (transformers and torch versions inside); the build embeds it
  tests/golden/data/hf_models/<t>.json   per model type: a tiny config of that model (real RoPE keys and defaults),
                                          q, explicit position ids up to several thousand, HF's float32 output and a
                                          float64 rerun of the same code, and the tolerance
Usage:
  python3 tests/golden/hf_model_table.py --venv      # in tests/golden/.venv (make_golden.py's), regenerate
  python3 tests/golden/hf_model_table.py --check     # regenerate in memory; exit 1 when the files differ
"""

import argparse
import contextlib
import copy
import importlib
import json
import os
import sys
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TABLE = ROOT / "hf" / "hf_models.json"
GOLDEN = HERE / "data" / "hf_models"
sys.path.insert(0, str(HERE))
from hf_table_configs import (  # noqa: E402
    DEFAULT_KEYS, config_dict, head_dim_follows_hidden_size, jsonable, layer_config, layer_head_dims,
    layer_key_feeds, layer_type_defaults, legacy_feeds, mla, mrope, nope_layers, real_configs, realistic,
    rope_dim_of, splits_flat_rope_parameters, text_config, text_config_path, tiny, with_text_config,
    without_mrope_section)
from hf_table_rotary import (  # noqa: E402
    Refuse, Unsupported, apply_function, classify, learned_parameters, mrope_axes, rope_interleave_selects,
    rope_sets, rotary_of, run_rotary)

POSITIONS = [0, 1, 7, 255, 1023, 4095, 6000, 8191]  # past 4096: scaled types' long branch with the tiny configs


def seed_of(name):
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


class Hf:
    def __init__(self):
        import torch
        import transformers
        from transformers.models.auto import configuration_auto
        self.torch = torch
        self.tf = transformers
        self.auto = configuration_auto

    def model_types(self):
        return sorted(self.auto.CONFIG_MAPPING_NAMES)

    def config_class(self, model_type):
        return self.auto.CONFIG_MAPPING[model_type]

    def modeling(self, model_type):
        name = self.auto.model_type_to_module_name(model_type)
        return importlib.import_module(f"transformers.models.{name}.modeling_{name}")


@contextlib.contextmanager
def float64_sticks(torch):
    """`.float()` and float32 tensor factories give float64 inside: HF's own code, rerun in float64."""
    orig_float = torch.Tensor.float
    orig_to = torch.Tensor.to
    orig_arange = torch.arange

    def as_double(self, *a, **k):
        return self.double()

    def to(self, *a, **k):
        a = tuple(torch.float64 if x is torch.float32 else x for x in a)
        if k.get("dtype") is torch.float32:
            k["dtype"] = torch.float64
        return orig_to(self, *a, **k)

    def arange(*a, **k):
        if k.get("dtype") is torch.float32:
            k["dtype"] = torch.float64
        return orig_arange(*a, **k)

    torch.Tensor.float, torch.Tensor.to, torch.arange = as_double, to, arange
    old_default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.Tensor.float, torch.Tensor.to, torch.arange = orig_float, orig_to, orig_arange
        torch.set_default_dtype(old_default)


def probe(hf, model_type):
    """(table entry, golden-case builder inputs) of one model type; None when it has no rotary module."""
    cfg_cls = hf.config_class(model_type)
    try:
        mod = hf.modeling(model_type)
    except Exception:
        return None, None
    full = cfg_cls()
    cfg = text_config(full)
    rot_cls = rotary_of(mod, cfg)
    if rot_cls is None:
        return None, None
    entry = {"text_model_type": getattr(cfg, "model_type", model_type)} if cfg is not full else {}
    if text_config_path(full) not in ([], ["text_config"]):
        entry["text_config_path"] = text_config_path(full)
    entry["defaults"] = {k: jsonable(getattr(cfg, k)) for k in DEFAULT_KEYS if getattr(cfg, k, None) is not None}
    # config.json spells some keys its own way (GPT-J n_embd, DBRX d_model / n_heads): the class's attribute_map
    names = {k: v for k, v in getattr(cfg, "attribute_map", {}).items() if k in DEFAULT_KEYS}
    if names:
        entry["key_names"] = names
    if "head_dim" in entry["defaults"] and head_dim_follows_hidden_size(type(cfg), cfg):
        del entry["defaults"]["head_dim"]  # derived (hidden_size // heads), not a default of its own
    for key, value in (("layer_type_defaults", layer_type_defaults(cfg)), ("layer_type_keys", layer_key_feeds(cfg))):
        if value:
            entry[key] = value
    rp = getattr(cfg, "rope_parameters", None) or {}
    feeds = legacy_feeds(type(cfg), rp)
    if feeds:
        entry["legacy_layer_keys"] = feeds
        if splits_flat_rope_parameters(type(cfg)):
            entry["splits_flat_rope_parameters"] = True
    nope = nope_layers(cfg)
    if nope:
        entry["nope_key"] = nope
    apply_name = apply_function(mod, cfg)
    entry["rotary_class"], entry["apply_function"] = rot_cls.__name__, apply_name
    if apply_name == "apply_rotary_pos_emb_interleave" and rope_interleave_selects(mod):
        entry["rope_interleave_selects"] = True
    layer_types = sorted(rp) if rp and all(isinstance(v, dict) for v in rp.values()) else [None]
    try:
        if apply_name is None:
            raise Refuse("no apply_rotary_pos_emb / apply_rotary_emb function in the modeling file")
        real, _ = realistic(hf, model_type)
        try:
            found, shrink = measure(hf, mod, rot_cls, apply_name, cfg, layer_types)
        except (Refuse, Unsupported):
            raise
        except Exception:  # noqa: BLE001 - class defaults HF's own code does not run on: a real config of it
            if real is None:
                raise
            full = real
            found, shrink = measure(hf, mod, rot_cls, apply_name, text_config(full), layer_types)
        if "mrope" in found:  # the module's own sections, where config.json names none (on the real head)
            sections = default_sections(hf, mod, rot_cls, apply_name, [cfg] + ([text_config(real)] if real else []))
            layout = {"layout": found["mrope"]["layout"]}
            found["mrope"] = dict(layout, sections=sections) if sections else layout
        entry.update(found)
        # the layer types a rope parameter set serves, seen where every layer type occurs (a real config)
        sets, inverse = rope_sets(hf, mod, rot_cls, apply_name, tiny(text_config(real or full), shrink),
                                  [t for t in layer_types if t])
        if sets:
            entry["rope_sets"] = sets
        if inverse:
            entry["output_rotation"] = "inverse"
    except Unsupported as e:
        entry["unsupported"] = str(e)
        return entry, None
    except Refuse as e:
        entry["refused"] = str(e)
        return entry, None
    except Exception as e:  # HF code that does not run on a standalone probe
        tower = [w for w in ("Vision", "Audio", "VQ", "Sam") if w in type(cfg).__name__]
        entry["refused"] = (f"{type(cfg).__name__} is a {tower[0].lower()} tower's config whose RoPE (if any) the "
                            f"text rotary class does not run; from-hf reads text models" if tower else
                            f"HF's {rot_cls.__name__} / {apply_name} did not run standalone: {type(e).__name__}: {e}")[:300]
        return entry, None
    return entry, (mod, rot_cls, apply_name, full, layer_types, shrink)


def measure(hf, mod, rot_cls, apply_name, cfg, layer_types):
    """({pairing, output_pairing, rope_slice, mrope, reads_rotary_dim}, shrink) from HF's code on a tiny `cfg`
    (the real head where sizes are fixed in the code)."""
    why = learned_parameters(hf, rot_cls, cfg)
    if why:
        raise Unsupported(why)
    shrink = not mrope(cfg)  # M-RoPE sections are sized for the real head
    try:
        small = tiny(cfg, shrink)
        found = pairing_of(hf, mod, rot_cls, apply_name, small, layer_types)
    except RuntimeError:  # sizes fixed in the code: the real head, few heads
        shrink = False
    if shrink and "mrope" in found:  # the module's own M-RoPE sections are sized for the real head too
        shrink = False
    if not shrink:
        small = tiny(cfg, shrink)
        found = pairing_of(hf, mod, rot_cls, apply_name, small, layer_types)
    if getattr(cfg, "rotary_dim", None):  # a key of that name that HF reads (GPT-J) or not (MiniMax-M3-VL)
        found["reads_rotary_dim"] = classify(hf, mod, rot_cls, apply_name, small, layer_types[0])[1] == small.rotary_dim
    return found, shrink


def default_sections(hf, mod, rot_cls, apply_name, configs):
    """The M-RoPE sections HF's rotary module uses when config.json names none, measured on the first of `configs`
    (real heads) it runs on; None when it runs on none."""
    for cfg in configs:
        try:
            small = tiny(without_mrope_section(cfg), shrink=False)
            _, _, _, sin_map = classify(hf, mod, rot_cls, apply_name, small, None)
            axes = mrope_axes(hf, mod, rot_cls, apply_name, small, None, sin_map)
        except Exception:  # noqa: BLE001 - inconsistent class defaults (GLM-4V's head without its partial rotary)
            continue
        if axes:
            return axes["sections"]
    return None


def pairing_of(hf, mod, rot_cls, apply_name, small, layer_types):
    """The pairing every layer type shares, where the rotated dims sit, and M-RoPE's axes."""
    found = None
    for lt in layer_types:
        pairing, _, where, sin_map = classify(hf, mod, rot_cls, apply_name, small, lt)
        this = dict(pairing, **({"rope_slice": where} if where != "leading" else {}))
        axes = mrope_axes(hf, mod, rot_cls, apply_name, small, lt, sin_map)
        if axes:
            this["mrope"] = axes
        if found not in (None, this):
            raise Refuse("the pairing differs between layer types")
        found = this
    return found


def golden_case(hf, model_type, built, heads=True, inverse=False):
    """HF float32 and float64 outputs on random q at explicit positions, per layer type; `heads`: a tiny config.
    M-RoPE: ids that differ per axis; layer types whose heads differ (Gemma 4): q of each one's size; `inverse`:
    HF's rotation back too (its apply function with (cos, -sin)), which rope-gen's backward kernel must match."""
    torch = hf.torch
    mod, rot_cls, apply_name, full, layer_types, shrink = built
    small_full = copy.deepcopy(full)
    small = tiny(text_config(small_full), shrink) if heads else text_config(small_full)
    small_full = with_text_config(small_full, small)
    g = torch.Generator().manual_seed(seed_of(model_type))
    pos = torch.tensor([POSITIONS], dtype=torch.long)
    if mrope_of(hf, mod, rot_cls, apply_name, small, layer_types):
        pos = torch.stack([pos, pos // 3, (pos * 7) % 8192])  # [3, 1, S]: (t, h, w)
    case = {"model_type": model_type, "positions": POSITIONS}
    if pos.dim() == 3:
        case["axis_positions"] = pos[:, 0, :].T.tolist()
    cases, qs = [], {}
    for lt in layer_types:
        # MLA: HF rotates q_pe, the head's last qk_rope_head_dim dims; q_nope passes through.
        lc = layer_config(small, lt)
        d, nope = rope_dim_of(lc), lc.qk_nope_head_dim if mla(lc) else 0
        if (nope, d) not in qs:
            q = torch.randn(1, 1, len(POSITIONS), d, generator=g, dtype=torch.float32)
            qs[nope, d] = (torch.randn(1, 1, len(POSITIONS), nope, generator=g, dtype=torch.float32), q)
        q_nope, q = qs[nope, d]
        out32 = run_rotary(hf, mod, rot_cls, apply_name, small, q, pos, lt)
        with float64_sticks(torch):
            out64 = run_rotary(hf, mod, rot_cls, apply_name, copy.deepcopy(small), q.double(), pos, lt)
        err = float((out32.double() - out64).abs().max())
        out64 = torch.cat([q_nope.double(), out64], dim=-1)
        one = {"layer_type": lt, "out_q": digits(out64, 12),
               "tolerance": 2 * err + 1e-5 * float(q.abs().max()), "hf_float32_error": err}
        if inverse:
            with float64_sticks(torch):
                back = run_rotary(hf, mod, rot_cls, apply_name, copy.deepcopy(small), q.double(), pos, lt, True)
            one["out_q_inverse"] = digits(torch.cat([q_nope.double(), back], -1), 12)
        if len(qs) > 1 or layer_head_dims(small):  # each layer type's own q
            one.update(head_dim=q_nope.shape[-1] + d, q=digits(torch.cat([q_nope, q], -1), 9))
        cases.append(one)
    q_nope, q = next(iter(qs.values()))
    case.update(config=jsonable(config_dict(small_full)), head_dim=q_nope.shape[-1] + q.shape[-1],
                q=digits(torch.cat([q_nope, q], dim=-1), 9), cases=cases)
    return case


def digits(t, n):
    """A tensor's values to n significant digits, as the golden files keep them: 9 give float32 inputs back
    exactly, 12 keep the float64 outputs far inside the tolerance (2 x HF float32's error)."""
    return [float(f"{v:.{n}g}") for v in t.reshape(-1).tolist()]


def mrope_of(hf, mod, rot_cls, apply_name, cfg, layer_types):
    """Whether HF's rotary module of `cfg` is M-RoPE (its pairs follow different position axes)."""
    try:
        _, _, _, sin_map = classify(hf, mod, rot_cls, apply_name, cfg, layer_types[0])
        return mrope_axes(hf, mod, rot_cls, apply_name, cfg, layer_types[0], sin_map) is not None
    except Exception:  # noqa: BLE001 - probe() measured it already; a failure here is not M-RoPE
        return False


def real_config_case(hf, path, raw, models):
    """A real config.json loaded by its HF config class (4.x keys and all), HF's rotary code on one full-size head;
    `models`: the table, for whether HF's attention rotates its output back."""
    full = hf.config_class(raw["model_type"]).from_dict(raw)
    cfg = text_config(full)
    mt = getattr(cfg, "model_type", raw["model_type"])
    mod = hf.modeling(mt)
    rot_cls = rotary_of(mod, cfg)
    rp = getattr(cfg, "rope_parameters", None) or {}
    layer_types = sorted(rp) if rp and all(isinstance(v, dict) for v in rp.values()) else [None]
    built = (mod, rot_cls, apply_function(mod, cfg), full, layer_types, False)
    inverse = models.get(mt, {}).get("output_rotation") == "inverse"
    case = golden_case(hf, path.stem, built, heads=False, inverse=inverse)
    del case["config"]
    case["config_file"] = str(path.relative_to(ROOT))
    return case


def generate():
    import logging
    import warnings
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    hf = Hf()
    hf.tf.utils.logging.set_verbosity_error()
    hf.torch.manual_seed(0)
    models, golden = {}, {}
    for mt in hf.model_types():
        try:
            entry, built = probe(hf, mt)
        except Exception as e:
            entry, built = {"refused": f"config class with defaults failed: {type(e).__name__}: {e}"[:300]}, None
        if entry is None:
            continue
        if built is not None:
            try:
                golden[mt] = golden_case(hf, mt, built, inverse=entry.get("output_rotation") == "inverse")
            except Exception as e:
                entry["refused"] = f"HF's rotary code on a tiny config failed: {type(e).__name__}: {e}"[:300]
        models[mt] = entry
    for path, raw in real_configs().items():
        golden[f"real/{path.stem}"] = real_config_case(hf, path, raw, models)
    table = {"transformers": hf.tf.__version__, "torch": hf.torch.__version__,
             "generated_by": "tests/golden/hf_model_table.py", "models": models}
    files = {TABLE: json.dumps(table, indent=1, sort_keys=True) + "\n"}
    for mt, case in golden.items():
        files[GOLDEN / f"{mt}.json"] = json.dumps(case, separators=(",", ":"), sort_keys=True) + "\n"
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--venv", nargs="?", const=str(HERE / ".venv"), default=None,
                    help="run inside make_golden.py's venv (created and filled when missing)")
    ap.add_argument("--check", action="store_true", help="compare with the committed files; exit 1 on a difference")
    args = ap.parse_args()
    if args.venv and not os.environ.get("ROPE_GOLDEN_IN_VENV"):
        import make_golden
        make_golden.bootstrap_venv(Path(args.venv), False, [a for a in sys.argv[1:] if not a.startswith("--venv")])
    files = generate()
    if args.check:
        bad = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
        stale = sorted(set(GOLDEN.glob("**/*.json")) - set(files))
        for p in bad + stale:
            print(f"DIFFERS {p.relative_to(ROOT)}", file=sys.stderr)
        print("check: " + ("OK" if not bad and not stale else f"{len(bad) + len(stale)} difference(s)"))
        return 1 if bad or stale else 0
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for p in set(GOLDEN.glob("**/*.json")) - set(files):
        p.unlink()
    for p, text in files.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    models = json.loads(files[TABLE])["models"]
    refused = sum(1 for e in models.values() if "refused" in e or "unsupported" in e)
    print(f"{len(models)} model types with a rotary module: {len(models) - refused} with a pairing, {refused} refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
