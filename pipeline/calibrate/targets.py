"""``selected`` beyond the data: each series predicted at ``compare.extrapolate_n`` accelerators
(the compare stage's 10,000 and 100,000), with the interval the holdouts calibrated.

A series that states its layout: its largest run with N scaled to the target (dp scaled with it;
the global batch kept under strong scaling and scaled under weak), costed by the calibrated
step function and anchored on all the series' measured runs (as ``calibrated`` in the
holdouts). Otherwise ``naive_linear``. The interval is
the conformal one: the 95% quantile of the largest-k scores of that predictor over all series,
scaled by sd (1 + log2(n / n_max)).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from pipeline.calibrate import fitting as ft
from pipeline.calibrate import intervals as iv
from pipeline.calibrate.critical_path import Theta, step_components
from pipeline.calibrate.estimate import Data, Fitted
from pipeline.calibrate.holdout import predicted_log_time, series_table, within_series_sd
from pipeline.calibrate.step import StepModel, rows_of
from pipeline.fit.series import SeriesPoints


def pooled_quantile(pred: pd.DataFrame, predictor: str, level: float) -> float:
    """Conformal quantile of a predictor's largest-k scores over every series."""
    g = pred[pred["holdout"].str.startswith("largest_k") & (pred["predictor"] == predictor)
             & pred["predicted"].notna()]
    if g.empty:
        return np.nan
    scale = iv.distance_scale(g["sd_log"].to_numpy(float), g["n_target"], g["n_train_max"])
    return iv.conformal_quantile(np.abs(np.log(g["actual"] / g["predicted"]).to_numpy(float))
                                 / scale, level)


def _scaled_runs(largest: pd.DataFrame, targets: list[np.ndarray], weak: np.ndarray
                 ) -> pd.DataFrame:
    """Each series' largest run (``largest``: one row per series) at each of its target N: one
    row per target (``run_id@N``), its data parallelism (and under weak scaling its batch)
    grown with N, no measured MFU; series after series."""
    counts = np.array([t.size for t in targets], dtype=int)
    rows = largest.iloc[np.repeat(np.arange(len(largest)), counts)].reset_index(drop=True)
    n = np.concatenate(targets).astype(float)
    factor = n / rows["n_accelerators"].to_numpy(float)
    rows["run_id"] = [f"{rid}@{int(t)}" for rid, t in zip(rows["run_id"], n)]
    rows["n_accelerators"] = n
    rows["dp"] = rows["dp"] * factor
    grow = np.repeat(weak, counts)
    if grow.any():
        # x * 1.0 is x and NaN stays NaN: only the weak series' batches change
        rows["global_batch_tokens"] = rows["global_batch_tokens"] * np.where(grow, factor, 1.0)
    rows[["mfu", "hfu"]] = np.nan
    return rows


def _costed_rows(runs: pd.DataFrame, stated: list[tuple[SeriesPoints, np.ndarray, bool]]
                 ) -> pd.DataFrame:
    """Every stated series' runs, then its largest run at each target N, series after series
    (the order selected_targets reads the throughputs back in): two takes from ``runs`` (whose
    rows the points are) in place of a small frame per series."""
    own = [pts.runs.index.to_numpy() for pts, _, _ in stated]
    # the series' points are sorted by N: the first largest N is idxmax's row
    top = [labels[int(np.argmax(pts.n))] for labels, (pts, _, _) in zip(own, stated)]
    if not runs.index.is_unique:
        raise ValueError("selected_targets needs runs with a unique index")
    base = runs.loc[np.concatenate(own)]
    ids = np.concatenate([pts.runs["run_id"].to_numpy() for pts, _, _ in stated])
    if not np.array_equal(base["run_id"].to_numpy(), ids):
        raise ValueError("selected_targets: the series' points are not rows of these runs")
    scaled = _scaled_runs(runs.loc[top], [n_t for _, n_t, _ in stated],
                          np.array([weak for _, _, weak in stated], dtype=bool))
    n_own = np.array([labels.size for labels in own])
    n_new = np.array([n_t.size for _, n_t, _ in stated])
    own_at, new_at = np.cumsum(n_own) - n_own, len(base) + np.cumsum(n_new) - n_new
    order = np.concatenate([np.r_[np.arange(o, o + k), np.arange(t, t + m)]
                            for o, k, t, m in zip(own_at, n_own, new_at, n_new)])
    return pd.concat([base, scaled], ignore_index=True).iloc[order].reset_index(drop=True)


def _model_throughput(frame: pd.DataFrame, fitted: Fitted, model: StepModel) -> np.ndarray:
    """MFU x N x peak of the calibrated model (with the source effect) for rows of runs."""
    rows = rows_of(frame.reset_index(drop=True), model)
    with np.errstate(invalid="ignore", divide="ignore"):
        lt = ft.log_step_time(rows, fitted.theta_rows(rows.family)) \
            + fitted.source_effect(rows.source)
        ideal = step_components(rows.config, replace(rows.machine, ideal=True),
                                Theta.ideal(len(frame)))
        mfu = np.minimum(ideal["model_flop_per_rank"] / rows.peak_flops_per_s * np.exp(-lt),
                         ideal["model_flop_per_rank"] / (rows.peak_flops_per_s
                                                         * ideal["step_time_s"]))
    return np.where(rows.ok, mfu * rows.n_accelerators * rows.peak_flops_per_s, np.nan)


def selected_targets(runs: pd.DataFrame, series: pd.DataFrame, data: Data, fitted: Fitted,
                     model: StepModel, pred: pd.DataFrame, targets: list[int], level: float,
                     points: list[tuple[pd.Series, SeriesPoints]] | None = None
                     ) -> pd.DataFrame:
    """One row per (series, target N): series_id, source, n_accelerators, y_metric, predictor,
    predicted, pi_low, pi_high, assumed_layout. ``points``: the series' points
    (:func:`pipeline.calibrate.holdout.series_table`), where already at hand."""
    q = {p: pooled_quantile(pred, p, level) for p in ("calibrated", "naive_linear")}
    sd_within = within_series_sd(data, predicted_log_time(data, fitted, data.fit))
    layout = dict(zip(data.runs["run_id"].astype(str), data.has_layout))
    todo, stated_points = [], []
    for s, pts in (series_table(runs, series) if points is None else points):
        if not pts.y_metric or pts.n_distinct < 2:
            continue
        n_max = float(pts.n.max())
        n_t = np.array([n for n in targets if n > n_max], float)
        if n_t.size == 0:
            continue
        stated = all(layout.get(i, False) for i in pts.runs["run_id"].astype(str))
        if stated:
            stated_points.append((pts, n_t, str(s.get("scaling")) == "weak"))
        todo.append((s, pts, n_max, n_t, stated))
    # the step function once over every series' runs and targets (row by row, so the same
    # numbers as series by series, without a table and its lookups per series)
    y_all = (_model_throughput(_costed_rows(runs, stated_points), fitted, model)
             if stated_points else np.zeros(0))
    rows, at = [], 0
    for s, pts, n_max, n_t, stated in todo:
        predicted, sd, name = None, None, "naive_linear"
        if stated:
            n_runs = len(pts.runs)
            y_model = y_all[at:at + n_runs + n_t.size]
            at += n_runs + n_t.size
            train = y_model[:n_runs]
            if np.all(np.isfinite(y_model)) and np.all(train > 0):
                offset = float(np.mean(np.log(pts.y) - np.log(train)))
                predicted = y_model[n_runs:] * np.exp(offset)
                sd = np.full(n_t.size, sd_within * np.sqrt(1.0 + 1.0 / n_runs))
                name = "calibrated"
        if predicted is None:
            predicted = iv.naive_linear(pts.n, pts.y, n_t)
            sd = np.ones(n_t.size)
        scale = iv.distance_scale(sd, n_t, np.full(n_t.size, n_max))
        lo, hi = iv.conformal_interval(predicted, scale, np.full(n_t.size, q[name]))
        for i, n in enumerate(n_t):
            rows.append(dict(series_id=s["series_id"], source=s["source"], n_accelerators=n,
                             y_metric=pts.y_metric, predictor=f"selected:{name}",
                             predicted=float(predicted[i]), pi_low=float(lo[i]),
                             pi_high=float(hi[i]), assumed_layout=not stated))
    return pd.DataFrame(rows, columns=["series_id", "source", "n_accelerators", "y_metric",
                                       "predictor", "predicted", "pi_low", "pi_high",
                                       "assumed_layout"])
