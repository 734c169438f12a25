"""From ``runs.parquet`` rows to the points a law is fitted on, and the per-series measured figures.

A series' response is its ``y_metric`` (``series.parquet``; schema.Y_METRICS order of preference:
model FLOP/s, tokens/s, 1/time-to-train). Runs that did not finish (``status != ok``) or carry no
positive value of the metric are dropped, and the drop is counted in the fit's ``note``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pipeline.fit.base import SeriesContext
from pipeline.vocab import Y_METRICS

SECONDS_PER_HOUR = 3600.0
#: the runs.parquet columns :func:`series_points` and :func:`measured_figures` read (with each
#: series' declared ``y_metric``)
POINT_COLUMNS = ("series_id", "status", "run_id", "n_accelerators", *Y_METRICS, "step_time_s",
                 "global_batch_tokens", "tokens_per_s", "energy_j_per_token",
                 "power_w_per_accelerator")


@dataclass
class SeriesPoints:
    """The points of one series ready for fitting, with what was dropped and why."""

    series_id: str
    y_metric: str
    n: np.ndarray
    y: np.ndarray
    ctx: SeriesContext
    runs: pd.DataFrame
    notes: list[str]
    #: a caveat that concerns only the ``comm`` law (its scaling context)
    comm_note: str = ""

    @property
    def n_distinct(self) -> int:
        return int(np.unique(self.n).size)


def _positive_values(values: pd.Series) -> np.ndarray:
    """A column as floats, with non-numeric, missing, infinite and non-positive values NaN."""
    v = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return np.where(np.isfinite(v) & (v > 0), v, np.nan)


def _positive(values: pd.Series) -> pd.Series:
    return pd.Series(_positive_values(values), index=values.index)


def _finished_mask(runs: pd.DataFrame) -> np.ndarray:
    """``pipeline.measures.finished`` as a mask: ``status`` ok or missing."""
    if "status" not in runs.columns:
        return np.ones(len(runs), dtype=bool)
    status = runs["status"].to_numpy(dtype=object)
    done = pd.isna(status)
    done[~done] = status[~done] == "ok"
    return done


def choose_metric(runs: pd.DataFrame, declared: object) -> str | None:
    """The series' declared y_metric, or the first of Y_METRICS that every finished run carries."""
    return _choose_metric(runs.columns, lambda metric: _positive_values(runs[metric]), declared,
                          len(runs))


def _choose_metric(columns: pd.Index, positive, declared: object, n_runs: int) -> str | None:
    """:func:`choose_metric` given ``positive(metric)``, the finished runs' positive values."""
    if isinstance(declared, str) and declared in columns:
        return declared
    for metric in Y_METRICS:
        if metric in columns and not np.isnan(positive(metric)).any() and n_runs:
            return metric
    return None


def work_per_step(runs: pd.DataFrame, metric: str, scaling: str) -> float | None:
    """Units of ``metric`` per optimizer step (per step and accelerator under weak scaling).

    From step time where measured (``y * step_time_s``), else from the global batch in tokens
    (``y * global_batch_tokens / tokens_per_s``). For 1/time-to-train the "step" is the whole
    run, so the work is 1 and ``comm``'s terms are seconds of the run. None when unknown.
    """
    return _work_per_step(runs.columns, lambda name: _positive_values(runs[name]),
                          lambda: runs["n_accelerators"].astype(float).to_numpy(), metric,
                          scaling, len(runs))


def _work_per_step(columns: pd.Index, positive, n_of, metric: str, scaling: str,
                   n_runs: int) -> float | None:
    """:func:`work_per_step` given ``positive(column)`` and ``n_of()`` (the runs' N)."""
    if metric == "inverse_time_to_train_per_s":
        return 1.0
    y = positive(metric)
    step_s = positive("step_time_s") if "step_time_s" in columns else np.full(n_runs, np.nan)
    work = y * step_s
    if np.isnan(work).all() and {"global_batch_tokens", "tokens_per_s"} <= set(columns):
        work = y * positive("global_batch_tokens") / positive("tokens_per_s")
    if scaling == "weak":
        work = work / n_of()
    work = work[~np.isnan(work)]
    # np.nanmedian of the values left: what pandas' Series.median computes
    return float(np.nanmedian(work)) if work.size else None


def point_columns(runs: pd.DataFrame, declared: object = ()) -> pd.DataFrame:
    """The columns of ``runs`` that :func:`series_points` and :func:`measured_figures` read
    (``POINT_COLUMNS`` and the ``declared`` y metrics, those present): they give the same points
    and figures from this narrow frame as from all of ``runs``, and copy less per series."""
    wanted = dict.fromkeys([*POINT_COLUMNS, *(m for m in declared if isinstance(m, str))])
    return runs[[c for c in wanted if c in runs.columns]]


def series_points(runs: pd.DataFrame, series_row: pd.Series) -> SeriesPoints:
    """Select the finished runs of one series and their response.

    ``runs`` may be all runs or (faster) only this series' runs.
    """
    sid = str(series_row["series_id"])
    ids = runs["series_id"].to_numpy()
    mine = runs if bool(np.all(ids == sid)) else runs[ids == sid]
    notes: list[str] = []
    ok_at = np.flatnonzero(_finished_mask(mine))  # positions of the finished runs in ``mine``
    if ok_at.size < len(mine):
        notes.append(f"{len(mine) - ok_at.size} run(s) not ok (oom/error/aborted) left out")
    positives: dict[str, np.ndarray] = {}

    def positive(name: str) -> np.ndarray:  # a column's positive values over the finished runs
        if name not in positives:
            positives[name] = _positive_values(mine[name])[ok_at]
        return positives[name]

    metric = _choose_metric(mine.columns, positive, series_row.get("y_metric"), ok_at.size)
    scaling = str(series_row.get("scaling") or "unknown")
    if metric is None:
        notes.append("no y metric: none of " + ", ".join(Y_METRICS) + " is measured")
        empty = np.zeros(0)
        return SeriesPoints(sid, "", empty, empty, SeriesContext(), mine.iloc[ok_at[:0]], notes)
    y = positive(metric)
    n = pd.to_numeric(mine["n_accelerators"], errors="coerce").to_numpy(
        dtype=float, na_value=np.nan)[ok_at]
    keep = ~np.isnan(y) & ~np.isnan(n) & (n >= 1)
    if not keep.all():
        notes.append(f"{int((~keep).sum())} run(s) without a positive {metric} or N left out")
    order = _by_n_and_run(mine, ok_at[keep])
    kept = mine.iloc[ok_at[keep][order]]
    comm_note = (f"scaling '{scaling}' treated as strong for comm"
                 if scaling not in ("strong", "weak") else "")
    # A time-to-train run has a fixed amount of work (train to the target quality) whatever
    # its batch, so for comm it is strong scaling even where the batch grows with N.
    ctx_scaling = ("weak" if scaling == "weak" and metric != "inverse_time_to_train_per_s"
                   else "strong")
    n_kept = kept["n_accelerators"].to_numpy(float)
    work = (_work_per_step(mine.columns, lambda name: positive(name)[keep][order],
                           lambda: n_kept, metric, ctx_scaling, len(kept))
            if len(kept) else None)
    ctx = SeriesContext(scaling=ctx_scaling, work_per_step=work)
    return SeriesPoints(sid, metric, n_kept, y[keep][order], ctx, kept, notes, comm_note)


def _by_n_and_run(runs: pd.DataFrame, at: np.ndarray) -> np.ndarray:
    """The order that ``sort_values(["n_accelerators", "run_id"])`` (``["n_accelerators"]``
    without run ids) gives the runs at positions ``at``."""
    by = ["n_accelerators", "run_id"] if "run_id" in runs.columns else ["n_accelerators"]
    if len(by) == 2:
        n = runs["n_accelerators"].to_numpy(dtype=float, na_value=np.nan)[at]
        run_id = runs["run_id"].to_numpy()[at]
        if not np.isnan(n).any() and all(isinstance(r, str) for r in run_id):
            # pandas sorts on two keys by a stable lexsort of their ranks: a stable sort on
            # (N, run id), without building a frame
            return np.array(sorted(range(at.size), key=lambda i: (n[i], run_id[i])),
                            dtype=np.intp)
    keys = runs[by].iloc[at].reset_index(drop=True)
    return keys.sort_values(by).index.to_numpy()


def _column(runs: pd.DataFrame, name: str) -> np.ndarray:
    """A numeric column as floats, non-positive and missing values as NaN."""
    if name not in runs.columns:
        return np.full(len(runs), np.nan)
    return _positive(runs[name]).to_numpy(dtype=float)


def _median_at(n: np.ndarray, n_value: float, values: np.ndarray) -> float:
    at = values[(n == n_value) & np.isfinite(values)]
    return float(np.median(at)) if at.size else np.nan


def measured_figures(points: SeriesPoints) -> tuple[dict[str, float], pd.DataFrame]:
    """Per-series measured figures (no law) and the per-N efficiency curve for plots.

    Efficiency ``E(N) = X(N) / (N * X(N_min) / N_min)`` on medians over repeated runs; tokens per
    accelerator-hour ``3600 * tokens_per_s / N``; energy per token (measured, else
    ``power_w_per_accelerator * N / tokens_per_s``) and its slope against log2 N.
    """
    figures: dict[str, float] = {}
    runs = points.runs
    if not len(runs):
        return figures, pd.DataFrame(columns=["series_id", "n_accelerators", "efficiency"])
    n_levels = np.unique(points.n)
    per_n = np.array([np.median(points.y[points.n == level]) for level in n_levels])
    n_min, n_max = float(n_levels[0]), float(n_levels[-1])
    eff = per_n / (n_levels * per_n[0] / n_min)
    figures["efficiency_at_n_max"] = float(eff[-1])
    curve = pd.DataFrame({"series_id": points.series_id, "n_accelerators": n_levels.astype(int),
                          "efficiency": eff})
    n = runs["n_accelerators"].to_numpy(dtype=float)
    tps = _column(runs, "tokens_per_s")
    tok_hour = SECONDS_PER_HOUR * tps / n
    figures["tokens_per_accelerator_hour_at_n_min"] = _median_at(n, n_min, tok_hour)
    figures["tokens_per_accelerator_hour_at_n_max"] = _median_at(n, n_max, tok_hour)
    energy = _column(runs, "energy_j_per_token")
    energy = np.where(np.isfinite(energy), energy, _column(runs, "power_w_per_accelerator") * n / tps)
    figures["energy_j_per_token_at_n_min"] = _median_at(n, n_min, energy)
    figures["energy_j_per_token_at_n_max"] = _median_at(n, n_max, energy)
    has = np.isfinite(energy)
    if np.unique(n[has]).size >= 2:
        slope = np.polyfit(np.log2(n[has]), np.log2(energy[has]), 1)[0]
        # log2-log2 slope: energy per token multiplies by 2**slope per doubling of N
        figures["energy_per_token_doubling_factor"] = float(2.0 ** slope)
    else:
        figures["energy_per_token_doubling_factor"] = np.nan
    return figures, curve
