"""The plot data the report stage writes for ``dvc plots``: the series its scaling figures
highlight (``figures.scaling_choice``) and the scenarios its frontier figure draws, so that
``dvc plots show`` draws a handful of labelled lines per panel rather than every series of a
sweep or every scenario."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.config import ReportSettings
from pipeline.report.focus import Focus
from pipeline.io import write_text
from pipeline.report.data import ReportData
from pipeline.report.figures import scaling_choice, series_label

COLUMNS = ["scaling", "label", "series_id", "accelerator_family", "n_accelerators",
           "efficiency", "efficiency_theory"]


def scaling_rows(d: ReportData, limit: int, focus: tuple[str, ...] = ()) -> pd.DataFrame:
    """Measured efficiency (and the ceiling's at the same N) of the highlighted series."""
    c = d.comparison_curves
    if c.empty:
        return pd.DataFrame(columns=COLUMNS)
    parts = []
    for kind in ("strong", "weak"):
        for sid in scaling_choice(d, kind, limit, focus):
            m = c[(c["series_id"] == sid) & (c["kind"] == "measured")]
            parts.append(m.assign(label=series_label(d, sid))[COLUMNS])
    out = pd.concat(parts) if parts else pd.DataFrame(columns=COLUMNS)
    return out.sort_values(["scaling", "label", "n_accelerators"]).reset_index(drop=True)


def frontier_rows(d: ReportData, scenarios: list[str]) -> pd.DataFrame:
    """The frontier of the scenarios the report draws (``report.frontier_scenarios``; all of
    them when empty), feasible points only."""
    f = d.frontier
    cols = ["scenario", "training_flop", "utilization"]
    if f.empty:
        return pd.DataFrame(columns=cols)
    names = [s for s in scenarios if s in set(f["scenario"])] or sorted(f["scenario"].unique())
    f = f[f["scenario"].isin(names) & f["feasible"].astype(bool)]
    return f[cols].sort_values(["scenario", "training_flop"]).reset_index(drop=True)


def write(d: ReportData, out_dir: Path, cfg: ReportSettings, focus: Focus = Focus()
          ) -> dict[str, Path]:
    out = {}
    for name, rows in (("report_scaling", scaling_rows(d, cfg.series_per_panel, focus.series)),
                       ("report_frontier", frontier_rows(d, cfg.frontier_scenarios))):
        path = out[f"plot:{name}"] = Path(out_dir) / f"{name}.csv"
        write_text(rows.to_csv(index=False, float_format="%.6g", lineterminator="\n"), path)
    return out
