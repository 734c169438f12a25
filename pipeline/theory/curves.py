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

from pipeline.measures import extrapolation_grid, series_runs, y_column
from pipeline.theory.bounds import compute_bounds

CURVE_COLUMNS = ("series_id", "n_accelerators", "bound_mfu")


def _reference_points(runs: pd.DataFrame, series: pd.DataFrame, targets: Sequence[int],
                      points: int) -> list[tuple[str, dict, np.ndarray]]:
    """(series_id, reference run, N grid) for every series with one model and >= 2 N."""
    refs = []
    # each series' runs found once (a mask over all runs per series would cost series x runs)
    runs_of = {sid: g for sid, g in runs.groupby("series_id", sort=False)}
    no_runs = runs.iloc[0:0]
    for s in series.sort_values("series_id").itertuples():
        g = series_runs(runs_of.get(s.series_id, no_runs), s.series_id,
                        y_column(runs, s.y_metric))
        n_levels = np.unique(g["n_accelerators"].to_numpy(float))
        if n_levels.size < 2 or g["params"].nunique(dropna=False) > 1:
            continue
        grid = extrapolation_grid(float(n_levels[0]), targets, points)
        refs.append((s.series_id, g.loc[g["n_accelerators"].idxmax()].to_dict(), grid))
    return refs


def series_ceilings(runs: pd.DataFrame, series: pd.DataFrame, catalog: Any,
                    params: Mapping[str, Any], targets: Sequence[int], points: int
                    ) -> pd.DataFrame:
    """``CURVE_COLUMNS`` rows: each series' ceiling at every N of its extrapolation grid."""
    refs = _reference_points(runs, series, targets, points)
    if not refs:
        return pd.DataFrame({"series_id": pd.Series(dtype=object),
                             "n_accelerators": pd.Series(dtype=float),
                             "bound_mfu": pd.Series(dtype=float)})
    bounds = compute_bounds(_grid_runs(refs), catalog, params).set_index("run_id")["bound_mfu"]
    frames = [pd.DataFrame({"series_id": sid, "n_accelerators": grid,
                            "bound_mfu": bounds.reindex([f"{sid}|{i:04d}" for i in
                                                         range(len(grid))]).to_numpy(float)})
              for sid, _, grid in refs]
    return pd.concat(frames, ignore_index=True)[list(CURVE_COLUMNS)]


def _grid_runs(refs: list[tuple[str, dict, np.ndarray]]) -> pd.DataFrame:
    """Each series' reference run repeated at every N of its grid (``dp`` left to the search,
    a weak series' batch grown with N), built by repeating rows: one dict per grid point would
    hold the run's ~100 fields 400,000 times at 16x the shipped data."""
    base = pd.DataFrame([ref for _, ref, _ in refs])
    sizes = [len(grid) for _, _, grid in refs]
    frame = base.loc[base.index.repeat(sizes)].reset_index(drop=True)
    n = np.concatenate([grid for _, _, grid in refs]).astype(float)
    n_ref = frame["n_accelerators"].to_numpy(float)
    frame["n_accelerators"] = n
    frame["dp"] = np.nan
    frame["run_id"] = [f"{sid}|{i:04d}" for sid, _, grid in refs for i in range(len(grid))]
    if "global_batch_tokens" in frame:
        batch = pd.to_numeric(frame["global_batch_tokens"], errors="coerce").to_numpy(float)
        weak = (frame.get("scaling") == "weak").to_numpy(bool) & np.isfinite(batch) & (batch != 0)
        frame.loc[weak, "global_batch_tokens"] = batch[weak] * n[weak] / n_ref[weak]
    return frame
