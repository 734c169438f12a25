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


def new_figure(ncols: int = 1, height_in: float = 4.2, **kw: object) -> tuple[plt.Figure, object]:
    plt.rcParams.update({"font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9,
                         "legend.fontsize": 7.5, "svg.hashsalt": "scalewall"})
    return plt.subplots(1, ncols, figsize=(WIDTH_IN, height_in), **kw)


def save(fig: plt.Figure, path: Path) -> Path:
    """Write a PNG with no software/date metadata so identical inputs give identical bytes."""
    plain_text(fig)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=DPI, format="png", metadata={"Software": None})
    plt.close(fig)
    return path


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
