"""The report's "What the data cover" section: runs per accelerator family and job size, from
``runs.parquet`` (``pipeline.coverage``, shared with the dataset release's data card), so a
reader sees where the findings rest on one source or on none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.coverage import N_BIN_LABELS, draw, family_by_n
from pipeline.report.style import new_figure, note, save

COLUMNS = ("source", "accelerator_family", "n_accelerators")


def _has_runs(runs: pd.DataFrame) -> bool:
    return len(runs) > 0 and all(c in runs for c in COLUMNS)


def figure(data: Any, out: Path) -> Path:
    """The coverage heat map (``pipeline.coverage.draw``) in the report's style."""
    runs = data.frames.get("runs", pd.DataFrame())
    if not _has_runs(runs):
        fig, ax = new_figure(1, 2.0)
        note(ax, "no runs")
        return save(fig, out / "coverage.png")
    table = family_by_n(runs)
    fig, ax = new_figure(1, 0.3 * max(len(table.index), 3) + 1.3)
    draw(ax, table)
    return save(fig, out / "coverage.png")


def section(runs: pd.DataFrame) -> dict[str, Any]:
    """Template context: totals, and where the data are thin (cells with one source); zero
    runs when there are none (the section then says so)."""
    if not _has_runs(runs):
        return {"runs": 0, "sources": 0, "families": 0, "cells": 0, "filled": 0,
                "one_source": 0, "one_source_runs": 0, "large_families_two_sources": [],
                "large_families": []}
    table = family_by_n(runs)
    cells = [(family, label, int(row[label]), int(row[f"{label} sources"]))
             for family, row in table.iterrows() for label in N_BIN_LABELS]
    filled = [c for c in cells if c[2] > 0]
    one_source = [c for c in filled if c[3] == 1]
    large = N_BIN_LABELS[3:]  # past 512 accelerators
    many = sorted({c[0] for c in filled if c[1] in large and c[3] >= 2})
    return {"runs": len(runs), "sources": int(runs["source"].nunique()),
            "families": len(table.index), "cells": len(cells), "filled": len(filled),
            "one_source": len(one_source),
            "one_source_runs": sum(c[2] for c in one_source),
            "large_families_two_sources": many,
            "large_families": sorted({c[0] for c in filled if c[1] in large})}
