"""What the runs cover: counts by accelerator family x accelerator-count range (and by source
and year), and the figure that shows them.

Shared by the release's data card (pipeline/release) and the report's coverage section
(pipeline/report), which may not import each other; it reads only a runs frame (``runs.parquet``
columns ``source``, ``accelerator_family``, ``n_accelerators`` and, for the card, ``year``).
Nothing here is typed by hand: every count comes from the frame it is given.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

# Accelerator-count ranges: one node (<= 8), a rack-scale job, a pod, a large cluster, a
# frontier-scale job. Upper bounds inclusive.
N_BINS: tuple[tuple[str, int], ...] = (("1-8", 8), ("9-64", 64), ("65-512", 512),
                                       ("513-4,096", 4096), (">4,096", 2**62))
N_BIN_LABELS = tuple(label for label, _ in N_BINS)


def n_bin(n_accelerators: pd.Series) -> pd.Series:
    """The ``N_BINS`` label of each accelerator count (an ordered categorical)."""
    edges = [0, *(upper for _, upper in N_BINS)]
    return pd.cut(n_accelerators.astype("float64"), bins=edges, labels=list(N_BIN_LABELS),
                  right=True)


def family_by_n(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs per accelerator family (rows, most runs first) and ``N_BINS`` range (columns), with
    the number of distinct sources in each cell as ``<range> sources``."""
    frame = runs.assign(n_range=n_bin(runs["n_accelerators"]),
                        family=runs["accelerator_family"].fillna("unknown"))
    counts = frame.pivot_table(index="family", columns="n_range", values="source",
                               aggfunc="size", fill_value=0, observed=False)
    sources = frame.pivot_table(index="family", columns="n_range", values="source",
                                aggfunc="nunique", fill_value=0, observed=False)
    counts = counts.reindex(columns=list(N_BIN_LABELS), fill_value=0).astype("int64")
    sources = sources.reindex(columns=list(N_BIN_LABELS), fill_value=0).astype("int64")
    order = counts.sum(axis=1).sort_values(ascending=False, kind="mergesort").index
    out = counts.loc[order].copy()
    for label in N_BIN_LABELS:
        out[f"{label} sources"] = sources.loc[order, label]
    out.index.name = "accelerator_family"
    out.columns.name = None
    return out


def by_source(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (source, accelerator family): runs, smallest and largest N, the years the
    runs were published (``year`` column), and runs per ``N_BINS`` range."""
    frame = runs.assign(n_range=n_bin(runs["n_accelerators"]),
                        family=runs["accelerator_family"].fillna("unknown"))
    keys = ["source", "family"]
    grouped = frame.groupby(keys, sort=True)
    out = grouped.agg(runs=("source", "size"), n_min=("n_accelerators", "min"),
                      n_max=("n_accelerators", "max"),
                      year_min=("year", "min"), year_max=("year", "max"))
    bins = frame.pivot_table(index=keys, columns="n_range", values="n_accelerators",
                             aggfunc="size", fill_value=0, observed=False)
    bins = bins.reindex(columns=list(N_BIN_LABELS), fill_value=0).astype("int64")
    out = out.join(bins).reset_index().rename(columns={"family": "accelerator_family"})
    out.columns.name = None
    return out


def draw(ax: Any, table: pd.DataFrame) -> None:
    """A heat map of ``family_by_n(runs)`` on ``ax``: runs per cell (log colour scale), each
    cell labelled with its runs and its sources; empty cells blank, so the gaps show."""
    counts = table[list(N_BIN_LABELS)].to_numpy(dtype="float64")
    sources = table[[f"{b} sources" for b in N_BIN_LABELS]].to_numpy()
    shown = np.where(counts > 0, np.log10(np.maximum(counts, 1.0)) + 1.0, np.nan)
    ax.imshow(shown, aspect="auto", cmap="Blues", vmin=0.0,
              vmax=max(1.0, float(np.nanmax(shown)) if np.isfinite(shown).any() else 1.0) + 0.6)
    for i in range(counts.shape[0]):
        for j in range(counts.shape[1]):
            if counts[i, j] > 0:
                ax.text(j, i, f"{int(counts[i, j]):,}\n{int(sources[i, j])} src",
                        ha="center", va="center", fontsize=7, color="black")
    ax.set_xticks(range(len(N_BIN_LABELS)), labels=list(N_BIN_LABELS))
    ax.set_yticks(range(len(table.index)), labels=[str(f) for f in table.index])
    ax.set_xlabel("accelerators in the job (N)")
    ax.set_ylabel("accelerator family")
    ax.set_title("Runs per accelerator family and job size (blank: no run)")
