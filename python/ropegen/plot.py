"""Figures of what a positional encoding does, from rope-gen's own numbers.

    python -m ropegen.plot SPEC [SPEC ...] -o FILE.png|.svg [--kind KIND]

Kinds (docs/explain.md shows each):
  wavelengths  wavelength of every rotary pair after (solid) and before (dashed) its scaling, log scale,
               the original and extended contexts marked, the scaling's regimes shaded
  decay        RoFormer's long-term decay: the relative upper bound of the attention score against distance
  precision    largest error of cos/sin against float64 per power-of-two range of positions, 1..max_pos:
               float32 angles (HF), bf16 and f16 tables (vLLM's cache), rope-gen's kernel
  heatmap      the table as an image, position x column: RoPE's cos, the sinusoidal PE, a learned table (--table)
  axes         multi-axis RoPE: the axis and the frequency of every pair

Every kind has a data function (numpy arrays and numbers, from ropegen.explain: rope-gen's frequency
math, the kernels' constants) and a render function drawing that data on a matplotlib Figure. Only
`main` (the command) needs matplotlib; nothing here uses pyplot, so a program that imports this module
keeps its own matplotlib state. matplotlib is the `plot` extra: pip install 'ropegen[plot]'.
"""
import argparse
import math
import os
import sys
import secrets

import numpy as np

from . import explain

KINDS = ("wavelengths", "decay", "precision", "heatmap", "axes")
FIGSIZE = (10, 6)  # inches; at DPI, the PNG is 1000 x 600 pixels
DPI = 100
HEATMAP_POSITIONS = 512

# The regimes of rope_math's scaling (rope-gen explain's "regime"), in the colours that shade them.
REGIME_COLOURS = {
    "kept": "tab:green", "extrapolated": "tab:green",
    "blended": "tab:orange", "ramp": "tab:orange",
    "interpolated": "tab:blue",
    "long": "tab:purple", "short": "tab:cyan",
    "scaled": "tab:gray",
}


class PlotError(ValueError):
    """A figure that cannot be drawn for these specs or arguments."""


# ----------------------------------------------------------------------------------------------
# Data: numpy arrays from rope-gen's numbers
# ----------------------------------------------------------------------------------------------

def wavelength_data(spec, seq_len=None):
    """Per rotary pair (rope) or frequency (sinusoidal): index, wavelength after and before
    scaling (positions; inf for a zero frequency), regime; and the contexts to mark."""
    e = explain(spec, seq_len=seq_len, precision=False)
    if not e["pairs"]:
        raise PlotError(f"{e['name']}: {e['encoding']} has no frequencies to plot")
    pairs = e["pairs"]
    inv = np.array([p["inv_freq"] for p in pairs], dtype=np.float64)
    unscaled = np.array([p["inv_freq_unscaled"] for p in pairs], dtype=np.float64)
    with np.errstate(divide="ignore"):
        return {
            "name": e["name"],
            "scaling": e["scaling"],
            "index": np.array([p["index"] for p in pairs]),
            "wavelength": 2 * np.pi / inv,
            "wavelength_unscaled": 2 * np.pi / unscaled,
            "regime": [p["regime"] for p in pairs],
            "original_context": e["original_max_position"],
            "extended_context": e["extended_context"],
        }


def decay_bound(inv_freq, distances):
    """RoFormer's relative upper bound (section 3.4.3) at each distance r:
    (1 / n) * sum_{j=1..n} |sum_{k<j} exp(i r theta_k)|, theta_k the n pair frequencies in order."""
    theta = np.asarray(inv_freq, dtype=np.float64)
    r = np.asarray(distances, dtype=np.float64)[:, None]
    partial = np.cumsum(np.exp(1j * r * theta[None, :]), axis=1)
    return np.abs(partial).mean(axis=1)


def decay_data(spec, max_distance=None, points=150, seq_len=None):
    """RoFormer's long-term decay bound against relative distance 1..max_distance (default: the
    spec's max_pos), at `points` log-spaced integer distances; all axes of a multi-axis spec move
    together."""
    e = explain(spec, seq_len=seq_len, precision=False)
    if e["encoding"] != "rope" or not e["pairs"]:
        raise PlotError(f"{e['name']}: the decay bound is RoPE's (a rope spec with frequencies)")
    max_distance = int(max_distance or e["max_pos"])
    distances = np.unique(np.round(np.logspace(0, math.log10(max_distance), points)).astype(np.int64))
    inv = np.array([p["inv_freq"] for p in e["pairs"]], dtype=np.float64)
    return {"name": e["name"], "distance": distances, "bound": decay_bound(inv, distances),
            "original_context": e["original_max_position"], "extended_context": e["extended_context"]}


def precision_data(spec, max_pos=None, seq_len=None, kernel=True):
    """The largest error against float64 of cos/sin (x attention factor; sinusoidal: the PE) per
    position range 0..1, 2..3, ..., ..max_pos, for float32 angles, bf16 and f16 tables and rope-gen's
    kernel (nan where not run), from rope-gen explain."""
    e = explain(spec, max_pos=max_pos, seq_len=seq_len, kernel=kernel)
    p = e["precision"]
    if p is None:
        raise PlotError(f"{e['name']}: {e['encoding']} has no cos/sin to measure")
    bins = p["by_position"]

    def column(key):
        return np.array([np.nan if b[key] is None else b[key] for b in bins], dtype=np.float64)

    return {"name": e["name"], "first": np.array([b["first"] for b in bins], dtype=np.int64),
            "last": np.array([b["last"] for b in bins], dtype=np.int64),
            "f32_angle": column("f32_angle"), "bf16_table": column("bf16_table"), "f16_table": column("f16_table"),
            "rope_gen": column("rope_gen"), "max_pos": p["max_pos"], "sampled": p["sampled"],
            "positions_checked": p["positions_checked"]}


def heatmap_data(spec, positions=HEATMAP_POSITIONS, table=None, seq_len=None):
    """The table at positions 0..positions-1 as a [positions, columns] float64 array: RoPE's cos of
    each pair (x attention factor), the sinusoidal PE in the spec's column order, or a learned
    encoding's table (`table`, its weights: an array or a .npy path)."""
    e = explain(spec, seq_len=seq_len, precision=False)
    p = np.arange(positions, dtype=np.float64)[:, None]
    if e["encoding"] == "learned":
        if table is None:
            raise PlotError(f"{e['name']}: a learned encoding's table is the model's weights: pass it (--table T.npy)")
        values = np.asarray(np.load(table) if isinstance(table, (str, os.PathLike)) else table, dtype=np.float64)
        if values.ndim != 2 or values.shape[1] != e["rotary_dim"]:
            raise PlotError(f"{e['name']}: the table must be [max_len, {e['rotary_dim']}], not {list(values.shape)}")
        return {"name": e["name"], "values": values[:positions], "xlabel": "dim", "title": "learned PE"}
    if not e["pairs"]:
        raise PlotError(f"{e['name']}: {e['encoding']} has no table to show")
    inv = np.array([q["inv_freq"] for q in e["pairs"]], dtype=np.float64)
    if e["encoding"] == "sinusoidal":
        values = np.empty((positions, e["rotary_dim"]))
        for q, f in zip(e["pairs"], inv):
            sin_column, cos_column = q["columns"]
            values[:, sin_column] = np.sin(p[:, 0] * f)
            if cos_column is not None:
                values[:, cos_column] = np.cos(p[:, 0] * f)
        return {"name": e["name"], "values": values, "xlabel": "column", "title": "sinusoidal PE"}
    return {"name": e["name"], "values": e["attention_factor"] * np.cos(p * inv[None, :]), "xlabel": "rotary pair",
            "title": "RoPE cos"}


def axes_data(spec):
    """Multi-axis RoPE: per pair its axis and inv_freq, and the pairs of each axis."""
    e = explain(spec, precision=False)
    if not e["pairs"] or e["pairs"][0]["axis"] is None:
        raise PlotError(f"{e['name']}: the axes figure is for multi-axis rope specs (axes: sections)")
    axis = np.array([q["axis"] for q in e["pairs"]], dtype=np.int64)
    return {"name": e["name"], "index": np.array([q["index"] for q in e["pairs"]]), "axis": axis,
            "inv_freq": np.array([q["inv_freq"] for q in e["pairs"]], dtype=np.float64),
            "pairs_per_axis": np.bincount(axis)}


# ----------------------------------------------------------------------------------------------
# Rendering: each draws its data on a matplotlib Figure
# ----------------------------------------------------------------------------------------------

def _mark_contexts(ax, data, horizontal):
    line = ax.axhline if horizontal else ax.axvline
    marked = set()
    for d in data:
        for key, style, label in (("original_context", ":", "original context"),
                                  ("extended_context", "-.", "extended context")):
            value = d.get(key)
            if value and (key, value) not in marked:
                marked.add((key, value))
                line(value, color="black", linestyle=style, linewidth=1, label=f"{label} {value}")


def render_wavelengths(fig, data):
    ax = fig.add_subplot()
    shaded = data[0]  # the first spec's regimes
    labelled = set()
    for i, regime in zip(shaded["index"], shaded["regime"]):
        colour = REGIME_COLOURS.get(regime)
        if colour is None:
            continue
        label = regime + (f" ({shaded['name']})" if len(data) > 1 else "")
        ax.axvspan(i - 0.5, i + 0.5, color=colour, alpha=0.15, linewidth=0,
                   label=None if label in labelled else label)
        labelled.add(label)
    for d in data:
        line, = ax.plot(d["index"], d["wavelength"], marker=".", label=f"{d['name']} ({d['scaling']})")
        if not np.array_equal(d["wavelength"], d["wavelength_unscaled"]):
            ax.plot(d["index"], d["wavelength_unscaled"], linestyle="--", color=line.get_color(),
                    label=f"{d['name']} before scaling")
    _mark_contexts(ax, data, horizontal=True)
    ax.set_yscale("log")
    ax.set_xlabel("rotary pair i")
    ax.set_ylabel("wavelength 2π / inv_freq (positions)")
    ax.set_title("Wavelength of each rotary pair")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)


def render_decay(fig, data):
    ax = fig.add_subplot()
    for d in data:
        ax.plot(d["distance"], d["bound"], linewidth=1, label=d["name"])
    if len(data) == 1:
        _mark_contexts(ax, data, horizontal=False)
    ax.set_xscale("log")
    ax.set_xlabel("relative distance (positions)")
    ax.set_ylabel("relative upper bound of the score")
    ax.set_title("Long-term decay (RoFormer's bound: mean over j of |Σ_{k<j} exp(i r θ_k)|)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)


def render_precision(fig, data):
    ax = fig.add_subplot()
    series = (("f32_angle", "float32 angle (HF)", "-"), ("bf16_table", "bf16 table (vLLM)", "--"),
              ("f16_table", "f16 table (vLLM)", "-."), ("rope_gen", "rope-gen kernel", ":"))
    for n, d in enumerate(data):
        colour = f"C{n}"
        # Each range's largest error drawn over the range: from its first position to the next range's.
        x = np.append(np.maximum(d["first"], 1), max(d["last"][-1], 2))
        for key, label, style in series:
            y = np.where(d[key] > 0, d[key], np.nan)
            if np.all(np.isnan(y)):
                continue
            name = f"{d['name']}: {label}" if len(data) > 1 else label
            ax.step(x, np.append(y, y[-1]), where="post", linestyle=style, color=colour if len(data) > 1 else None,
                    label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(1, max(d["max_pos"] for d in data))
    ax.set_xlabel("position (the largest error over each range 2^k .. 2^(k+1)-1)")
    ax.set_ylabel("max |error| of cos, sin vs float64")
    sampled = [d for d in data if d["sampled"]]
    note = f" ({sampled[0]['positions_checked']} positions sampled)" if sampled else ""
    ax.set_title("Precision of cos/sin tables against float64" + note)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)


def render_heatmap(fig, data):
    axes = fig.subplots(1, len(data), squeeze=False)[0]
    limit = max(1.0, *(float(np.nanmax(np.abs(d["values"]))) for d in data))
    for ax, d in zip(axes, data):
        image = ax.imshow(d["values"], aspect="auto", origin="lower", cmap="RdBu", vmin=-limit, vmax=limit,
                          interpolation="nearest")
        ax.set_xlabel(d["xlabel"])
        ax.set_ylabel("position")
        ax.set_title(f"{d['name']}: {d['title']}")
    fig.colorbar(image, ax=list(axes))


def render_axes(fig, data):
    axes = fig.subplots(1, len(data), squeeze=False)[0]
    for ax, d in zip(axes, data):
        for a, count in enumerate(d["pairs_per_axis"]):
            mine = d["axis"] == a
            ax.scatter(d["index"][mine], d["inv_freq"][mine], s=14, color=f"C{a}",
                       label=f"axis {a}: {count} pairs")
            for i in d["index"][mine]:
                ax.axvspan(i - 0.5, i + 0.5, color=f"C{a}", alpha=0.1, linewidth=0)
        ax.set_yscale("log")
        ax.set_xlabel("rotary pair i")
        ax.set_ylabel("inv_freq (radians per position)")
        ax.set_title(f"{d['name']}: the axis of each pair")
        ax.legend(fontsize=8)


# ----------------------------------------------------------------------------------------------
# The command
# ----------------------------------------------------------------------------------------------

def figure(kind, specs, max_pos=None, seq_len=None, positions=HEATMAP_POSITIONS, table=None):
    """A matplotlib Figure (FIGSIZE at DPI) of `kind` for the specs (paths, YAML text or dicts)."""
    from matplotlib.figure import Figure
    if kind == "wavelengths":
        data, render = [wavelength_data(s, seq_len) for s in specs], render_wavelengths
    elif kind == "decay":
        data, render = [decay_data(s, max_pos, seq_len=seq_len) for s in specs], render_decay
    elif kind == "precision":
        data, render = [precision_data(s, max_pos, seq_len) for s in specs], render_precision
    elif kind == "heatmap":
        data, render = [heatmap_data(s, positions, table, seq_len) for s in specs], render_heatmap
    elif kind == "axes":
        data, render = [axes_data(s) for s in specs], render_axes
    else:
        raise PlotError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    fig = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    render(fig, data)
    return fig


def save(fig, path):
    """Writes the figure to path (.png or .svg) through a temporary file and a rename, so a failed
    run leaves no partial file."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".png", ".svg"):
        raise PlotError(f"{path}: the output must end in .png or .svg")
    if os.path.isdir(path):
        raise PlotError(f"{path} is a directory")
    target = os.path.realpath(path)
    # A new file of this process's own (O_EXCL), its mode as the umask makes it.
    tmp = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format=ext[1:], dpi=DPI, **({"pil_kwargs": {"optimize": True}} if ext == ".png" else {}))
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m ropegen.plot", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("specs", nargs="+", metavar="SPEC", help="spec files (YAML)")
    parser.add_argument("-o", "--output", required=True, help="the figure: .png or .svg")
    parser.add_argument("--kind", choices=KINDS, default="wavelengths")
    parser.add_argument("--max-pos", type=int, help="precision: largest position; decay: largest distance "
                                                     "(default: the spec's, as rope-gen explain)")
    parser.add_argument("--seq-len", type=int, help="run-time sequence length for dynamic and longrope")
    parser.add_argument("--positions", type=int, default=HEATMAP_POSITIONS, help="heatmap: rows shown")
    parser.add_argument("--table", help="heatmap of a learned spec: its table (.npy [max_len, dim])")
    args = parser.parse_args(argv)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("error: ropegen.plot needs matplotlib: pip install 'ropegen[plot]' (or pip install matplotlib)",
              file=sys.stderr)
        return 2
    try:
        for spec in args.specs:
            if not os.path.isfile(spec):
                raise PlotError(f"{spec}: no such spec file")
        fig = figure(args.kind, args.specs, args.max_pos, args.seq_len, args.positions, args.table)
        save(fig, args.output)
    except (PlotError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ValueError as e:  # rope-gen's own diagnostics (FILE:LINE:COL: error: ...)
        print(str(e).rstrip("\n"), file=sys.stderr)
        return 2
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
