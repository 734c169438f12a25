"""Ceiling curves per scaling series: the theory's utilization ceiling for a series'
configuration family moved along N (``theory_curves.parquet``, drawn by compare).

The reference run (the series' largest measured N) keeps its model, accelerator and
tp/pp/cp/ep degrees; data parallelism absorbs the change of N (dp = N / (tp pp cp)); under weak
scaling the global batch grows in proportion to N, under strong scaling it stays fixed. N runs
over ``pipeline.measures.extrapolation_grid`` (the grid the fit stage writes the laws' curves
on). A series whose model grows with N (Megatron's weak-scaling table) has no single
configuration family to move along N and gets no curve. All points are evaluated in one
vectorised call of ``compute_bounds``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from pipeline.measures import extrapolation_grid, finished, y_column
from pipeline.theory.bounds import compute_bounds

CURVE_COLUMNS = ("series_id", "n_accelerators", "bound_mfu")


def _reference_points(runs: pd.DataFrame, series: pd.DataFrame, targets: Sequence[int],
                      points: int) -> tuple[list[str], pd.DataFrame, list[np.ndarray]]:
    """For every series with one model and >= 2 N (in series_id order): its id, its reference
    run (a row of ``runs``: the first of its measured points at the largest N) and its N grid.
    The measured points (``series_runs``) are found for all series at once, per y column."""
    runs = runs.reset_index(drop=True)
    done = finished(runs)
    ycols = {sid: y_column(runs, y) for sid, y in zip(series["series_id"], series["y_metric"])}
    found = []
    for ycol in sorted(set(ycols.values())):
        g = done[done["series_id"].isin({sid for sid, c in ycols.items() if c == ycol})]
        found.append(g[np.isfinite(g[ycol].astype(float)) & (g[ycol] > 0)])
    measured = pd.concat(found) if found else runs.iloc[0:0]
    if not len(measured):
        return [], runs.iloc[0:0], []
    points_of = measured.groupby("series_id")
    with_n = measured[measured["n_accelerators"].notna()]
    per = pd.DataFrame({"levels": points_of["n_accelerators"].nunique(dropna=False),
                        "models": points_of["params"].nunique(dropna=False),
                        "n_min": points_of["n_accelerators"].min(),
                        "reference": with_n.groupby("series_id")["n_accelerators"].idxmax()})
    per = per[(per["levels"] >= 2) & (per["models"] <= 1)]
    per = per.reindex([sid for sid in series.sort_values("series_id")["series_id"]
                       if sid in per.index])
    grids: dict[float, np.ndarray] = {}  # the grid depends on the smallest N alone
    for n0 in set(per["n_min"].astype(float)):
        grids[n0] = extrapolation_grid(n0, targets, points)
    return (list(per.index),
            runs.loc[per["reference"].to_numpy(int)].reset_index(drop=True),
            [grids[float(n0)] for n0 in per["n_min"]])


def series_ceilings(runs: pd.DataFrame, series: pd.DataFrame, catalog: Any,
                    params: Mapping[str, Any], targets: Sequence[int], points: int
                    ) -> pd.DataFrame:
    """``CURVE_COLUMNS`` rows: each series' ceiling at every N of its extrapolation grid."""
    sids, base, grids = _reference_points(runs, series, targets, points)
    if not sids:
        return pd.DataFrame({"series_id": pd.Series(dtype=object),
                             "n_accelerators": pd.Series(dtype=float),
                             "bound_mfu": pd.Series(dtype=float)})
    frame = _grid_runs(sids, base, grids)
    bounds = compute_bounds(frame, catalog, params).set_index("run_id")["bound_mfu"]
    return pd.DataFrame({"series_id": np.repeat(np.array(sids, dtype=object),
                                                [len(grid) for grid in grids]),
                         "n_accelerators": np.concatenate(grids),
                         "bound_mfu": bounds.reindex(frame["run_id"]).to_numpy(float)}
                        )[list(CURVE_COLUMNS)]


def _grid_runs(sids: list[str], base: pd.DataFrame, grids: list[np.ndarray]) -> pd.DataFrame:
    """Each series' reference run (a row of ``base``) repeated at every N of its grid (``dp``
    left to the search, a weak series' batch grown with N), built by repeating rows: one
    dict per grid point would hold the run's ~100 fields 400,000 times at 16x the shipped
    data."""
    sizes = [len(grid) for grid in grids]
    frame = base.loc[base.index.repeat(sizes)].reset_index(drop=True)
    n = np.concatenate(grids).astype(float)
    n_ref = frame["n_accelerators"].to_numpy(float)
    frame["n_accelerators"] = n
    frame["dp"] = np.nan
    frame["run_id"] = [f"{sid}|{i:04d}" for sid, size in zip(sids, sizes) for i in range(size)]
    if "global_batch_tokens" in frame:
        batch = pd.to_numeric(frame["global_batch_tokens"], errors="coerce").to_numpy(float)
        weak = (frame.get("scaling") == "weak").to_numpy(bool) & np.isfinite(batch) & (batch != 0)
        frame.loc[weak, "global_batch_tokens"] = batch[weak] * n[weak] / n_ref[weak]
    return frame
