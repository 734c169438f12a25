"""Figure style shared by every report figure: one colour per accelerator family, fixed sizes,
deterministic PNG output."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from pipeline.io import atomic_path  # noqa: E402

# One colour per accelerator family, the same in every figure (NVIDIA generations warm to cool
# in release order, TPUs greens, others greys).
FAMILY_COLOURS = {
    "V100": "#8c564b", "A100": "#1f77b4", "H100": "#d62728", "H200": "#ff7f0e",
    "B200": "#9467bd", "GB200": "#e377c2", "GB300": "#c51b7d", "MI300X": "#7f7f7f",
    "B300": "#6a3d9a", "L40S": "#f7b6d2", "MI325X": "#525252", "MI350X": "#a3a3a3",
    "MI355X": "#cccccc",
    "Gaudi2": "#252525", "TPU-v3": "#bcbd22", "TPU-v4": "#2ca02c", "TPU-v5e": "#17becf",
    "TPU-v5p": "#006d2c", "TPU-v6e": "#74c476",
}
_SPARE = ("#636363", "#969696", "#6baed6", "#fd8d3c", "#807dba")
STRATEGY_COLOURS = {
    "fsdp": "#d95f02", "ddp": "#e6ab02", "hybrid_fsdp": "#a6761d", "tp": "#7570b3",
    "pp": "#66a61e", "tp_pp": "#1b9e77", "3d": "#e7298a", "unknown": "#999999",
}
# Readable names of pipeline.vocab.STRATEGY_FAMILIES for prose and legends.
STRATEGY_NAMES = {
    "ddp": "DDP", "fsdp": "FSDP/ZeRO-3", "hybrid_fsdp": "hybrid FSDP", "tp": "TP", "pp": "PP",
    "tp_pp": "TP+PP", "3d": "3D", "unknown": "unstated",
}
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
DPI = 110
WIDTH_IN = 8.0  # 880 px at DPI: page width of the HTML report


# One colour per step-time slot (pipeline/vocab.py: SHARE_SLOTS), shared by the theory's
# decomposition and the calibrated one, so a part keeps its colour in every figure.
COMPONENT_COLOURS = {"compute": "#4daf4a", "hbm": "#984ea3", "net_tp": "#377eb8",
                     "net_dp": "#e41a1c", "net_pp": "#ff7f00", "net_ep": "#a65628",
                     "bubble": "#f781bf", "latency": "#999999", "overhead": "#dede00",
                     "residual": "#d9d9d9"}

def family_colour(family: object) -> str:
    """Colour of an accelerator family; unknown families get a stable spare colour."""
    name = str(family) if family is not None else "unknown"
    if name in FAMILY_COLOURS:
        return FAMILY_COLOURS[name]
    for key, colour in FAMILY_COLOURS.items():  # "H100-SXM5-80GB" -> H100
        if name.upper().startswith(key.upper()):
            return colour
    return _SPARE[sum(map(ord, name)) % len(_SPARE)]


def new_figure(ncols: int = 1, height_in: float = 4.2, nrows: int = 1, **kw: object
               ) -> tuple[plt.Figure, object]:
    """A figure of the report's width; ``ncols`` panels side by side (or ``nrows`` stacked:
    then ``ncols`` counts the panels and they are drawn one per row)."""
    plt.rcParams.update({"font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9,
                         "legend.fontsize": 7.5, "svg.hashsalt": "scalewall"})
    if nrows > 1:
        return plt.subplots(ncols, 1, figsize=(WIDTH_IN, height_in), **kw)
    return plt.subplots(1, ncols, figsize=(WIDTH_IN, height_in), **kw)


def save(fig: plt.Figure, path: Path, right: float | None = None,
         bottom: float | None = None, key_height: float = 0.0) -> Path:
    """Write a PNG with no software/date metadata so identical inputs give identical bytes.
    ``right``/``bottom``: figure fractions kept free (line-end labels, a key under the axes);
    ``key_height``: a strip at the bottom the layout leaves to a key written with ``fig.text``
    (the axes, their labels and legends are laid out above it)."""
    plain_text(fig)
    for t in fig.findobj(Text):
        if (t.get_gid() or "").startswith("label:"):
            t.set_in_layout(False)  # placed in the margin ``right`` keeps
    fig.tight_layout(rect=(0.0, key_height, 1.0, 1.0) if key_height else None)
    if right is not None or bottom is not None:
        fig.subplots_adjust(right=right, bottom=bottom)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=DPI, format="png", metadata={"Software": None})
    write_audit(fig, path)
    plt.close(fig)
    return path


def audit_path(png: Path) -> Path:
    """Where ``save`` writes a figure's ``audit`` (next to the PNG)."""
    return Path(png).with_suffix(".audit.json")


def write_audit(fig: plt.Figure, png: Path) -> None:
    import json

    from pipeline.io import write_text

    write_text(json.dumps(audit(fig), sort_keys=True) + "\n", audit_path(png))


def plain_text(fig: plt.Figure) -> None:
    """Show every label already set on ``fig`` as typed: no mathtext.

    Labels, titles, legends and fixed tick labels are built from data (source, model, series
    and scenario names); a ``$...$`` pair in one would be parsed as mathtext and could raise.
    The figures' own labels use no mathtext. Tick labels that a formatter writes at draw time
    (``10^2`` on log axes) are still empty here and keep their mathtext.
    """
    for text in fig.findobj(Text):
        if text.get_text():
            text.set_parse_math(False)


def note(ax: object, text: str) -> None:
    """Write a 'no data' note in an empty panel rather than leaving it blank."""
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=9,
            color="#555555", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


# --- Readability rules every figure is held to (checked by ``audit`` and the browser test) ---
# At most this many coloured series per panel; the rest are grey context or another facet.
MAX_SERIES = 8
# A prediction band whose top is more than this factor above its bottom says nothing: it is
# not drawn (the text says "not constrained by the data").
BAND_SPAN = 10.0
CONTEXT_GREY = "#c8c8c8"
# Colours that are context, reference lines or annotations, not series.
_NEUTRAL = {"#000000", "#c8c8c8", "#bbbbbb", "#bdbdbd", "#cccccc", "#d9d9d9", "#999999",
            "#777777", "#555555", "#444444", "#808080", "#e0e0e0", "#dddddd"}


def _flat(artists: object) -> list:
    from matplotlib.container import Container

    if isinstance(artists, Container):
        return [a for child in artists.get_children() for a in _flat(child)]
    if isinstance(artists, (list, tuple)):
        return [a for child in artists for a in _flat(child)]
    return [artists] if artists is not None else []


def tag(artists: object, series_id: str) -> None:
    """Mark ``artists`` (an artist, a list or a container such as ``errorbar``'s) as one
    series for ``audit``: a series is counted once however many artists draw it."""
    for a in _flat(artists):
        a.set_gid(f"series:{series_id}")


def context(artists: object) -> None:
    """Mark ``artists`` as grey context or a reference line (not a series)."""
    for a in _flat(artists):
        a.set_gid("context")


def end_label(ax: object, x: float, y: float, text: str, series_id: str, colour: str,
              dy_px: float = 0.0) -> None:
    """Label a series at its line end (right of the last point), in its colour."""
    t = ax.annotate(text, (x, y), xytext=(4, dy_px), textcoords="offset points", fontsize=6.5,
                    color=colour, va="center", ha="left", annotation_clip=False)
    t.set_gid(f"label:{series_id}")


def band(ax: object, x: object, low: object, high: object, colour: str, series_id: str,
         upper: float | None = None, alpha: float = 0.12) -> float:
    """Fill a prediction band where it constrains something: points whose ``high / low``
    exceeds ``BAND_SPAN`` (or whose low end is not positive) are left out, and the band is
    clipped at ``upper`` (a physical limit: MFU 1, the ceiling). Returns the widest ratio
    drawn (0 when nothing was)."""
    import numpy as np

    x, lo, hi = (np.asarray(v, float) for v in (x, low, high))
    if upper is not None:
        hi, lo = np.minimum(hi, upper), np.minimum(lo, upper)
    ok = np.isfinite(lo) & np.isfinite(hi) & (lo > 0) & (hi / np.where(lo > 0, lo, 1) <= BAND_SPAN)
    if ok.sum() < 2:
        return 0.0
    poly = ax.fill_between(x, np.where(ok, lo, np.nan), np.where(ok, hi, np.nan), color=colour,
                           alpha=alpha, lw=0)
    ratio = float(np.max(hi[ok] / lo[ok]))
    poly.set_gid(f"band:{series_id}:{ratio:.4g}")
    return ratio


def _hex(colour: object) -> str:
    from matplotlib.colors import to_hex

    try:
        return to_hex(colour)
    except (TypeError, ValueError):
        return "#000000"


def _style_key(artist: object) -> str:
    """A series key for an artist drawn without ``tag``: its colour, marker and line style."""
    from matplotlib.lines import Line2D

    if isinstance(artist, Line2D):
        return f"{_hex(artist.get_color())}|{artist.get_marker()}|{artist.get_linestyle()}"
    try:
        face = artist.get_facecolor()
        colour = face[0] if len(face) else artist.get_edgecolor()[0]
    except (AttributeError, IndexError):
        colour = "#000000"
    return f"{_hex(colour)}|c|"


def audit(fig: plt.Figure) -> list[dict[str, object]]:
    """Per panel with data: coloured series drawn, how many of them carry a label (a legend
    entry or a line-end label), grey context artists, and the widest band drawn.

    A series is what ``tag`` named, else one colour/marker/line-style combination; grey and
    black artists are context. Legend entries label the series of the same key."""
    from matplotlib.collections import PathCollection
    from matplotlib.lines import Line2D

    panels = []
    labels = {t.get_gid()[6:] for t in fig.findobj(Text)
              if (t.get_gid() or "").startswith("label:")}
    # a legend labels the series of the same key in every panel of the figure (shared
    # legend): the keys of the artists it was drawn from (its handles are copies without gid)
    legend_keys: set[str] = set()
    for ax in fig.axes:
        if ax.get_legend() is None and not fig.legends:
            continue
        for h in ax.get_legend_handles_labels()[0]:
            legend_keys.update(a.get_gid() or _style_key(a) for a in _flat(h))
    for ax in fig.axes:
        series: dict[str, bool] = {}
        n_context, widest = 0, 0.0
        for a in [*ax.lines, *ax.collections]:
            gid = a.get_gid() or ""
            if gid.startswith("band:"):
                widest = max(widest, float(gid.rsplit(":", 1)[1]))
                continue
            if isinstance(a, Line2D):
                has_data = len(a.get_xdata()) > 0
            elif isinstance(a, PathCollection):
                has_data = len(a.get_offsets()) > 0
            else:
                continue  # bands, bars, error-bar stems belong to a series drawn elsewhere
            if not has_data or gid == "context":
                n_context += has_data
                continue
            key = gid if gid.startswith("series:") else _style_key(a)
            if _hex(a.get_color() if isinstance(a, Line2D) else a.get_facecolor()[0]
                    if len(a.get_facecolor()) else "#000000") in _NEUTRAL and not gid:
                n_context += 1
                continue
            named = key in legend_keys \
                or (gid.startswith("series:") and gid[7:] in labels)
            series[key] = series.get(key, False) or named
        if series or n_context or widest:
            panels.append({"title": ax.get_title(), "series": len(series),
                           "labelled": sum(series.values()), "context": n_context,
                           "widest_band": round(widest, 3),
                           "labels_outside": _labels_outside(ax)})
    return panels


def _labels_outside(ax: object) -> int:
    """Line-end labels (``end_label``) of ``ax`` that reach past its axes box."""
    texts = [t for t in ax.texts if (t.get_gid() or "").startswith("label:")]
    if not texts:
        return 0
    renderer = ax.figure.canvas.get_renderer()
    box = ax.get_window_extent(renderer)
    outside = 0
    for t in texts:
        e = t.get_window_extent(renderer)
        outside += e.x0 < box.x0 - 0.5 or e.x1 > box.x1 + 0.5 or e.y0 < box.y0 - 0.5 \
            or e.y1 > box.y1 + 0.5
    return int(outside)


def end_labels(ax: object, items: list[tuple[float, float, str, str, str]],
               min_gap_px: float = 10.0) -> None:
    """Line-end labels ``(x, y, text, series_id, colour)``, nudged apart vertically so that no
    two overlap (call after the axes' limits are set)."""
    if not items:
        return
    fig = ax.figure
    pts = [(ax.transData.transform((x, y))[1], i) for i, (x, y, *_rest) in enumerate(items)]
    pts.sort()
    placed: list[tuple[float, int]] = []
    for y_px, i in pts:
        if placed and y_px < placed[-1][0] + min_gap_px:
            y_px = placed[-1][0] + min_gap_px
        placed.append((y_px, i))
    scale = 72.0 / fig.dpi  # display pixels -> points
    for y_px, i in placed:
        x, y, text, sid, colour = items[i]
        dy = (y_px - ax.transData.transform((x, y))[1]) * scale
        end_label(ax, x, y, text, sid, colour, dy_px=dy)


def read_audits(figures: dict[str, Path]) -> dict[str, list]:
    """Each figure's audit as ``save`` wrote it (empty where absent)."""
    import json

    out = {}
    for name, png in figures.items():
        path = audit_path(png)
        out[name] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
    return out
