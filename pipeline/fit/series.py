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
from pipeline.measures import finished
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


def _positive(values: pd.Series) -> pd.Series:
    v = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return pd.Series(np.where(np.isfinite(v) & (v > 0), v, np.nan), index=values.index)


def choose_metric(runs: pd.DataFrame, declared: object) -> str | None:
    """The series' declared y_metric, or the first of Y_METRICS that every finished run carries."""
    if isinstance(declared, str) and declared in runs.columns:
        return declared
    for metric in Y_METRICS:
        if metric in runs.columns and _positive(runs[metric]).notna().all() and len(runs):
            return metric
    return None


def work_per_step(runs: pd.DataFrame, metric: str, scaling: str) -> float | None:
    """Units of ``metric`` per optimizer step (per step and accelerator under weak scaling).

    From step time where measured (``y * step_time_s``), else from the global batch in tokens
    (``y * global_batch_tokens / tokens_per_s``). For 1/time-to-train the "step" is the whole
    run, so the work is 1 and ``comm``'s terms are seconds of the run. None when unknown.
    """
    if metric == "inverse_time_to_train_per_s":
        return 1.0
    y = _positive(runs[metric])
    work = y * _positive(runs.get("step_time_s", pd.Series(np.nan, index=runs.index)))
    if work.isna().all() and {"global_batch_tokens", "tokens_per_s"} <= set(runs.columns):
        work = y * _positive(runs["global_batch_tokens"]) / _positive(runs["tokens_per_s"])
    if scaling == "weak":
        work = work / runs["n_accelerators"].astype(float)
    work = work.dropna()
    return float(work.median()) if len(work) else None


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
    mine = runs[runs["series_id"] == sid]
    notes: list[str] = []
    ok = finished(mine)
    if len(ok) < len(mine):
        notes.append(f"{len(mine) - len(ok)} run(s) not ok (oom/error/aborted) left out")
    metric = choose_metric(ok, series_row.get("y_metric"))
    scaling = str(series_row.get("scaling") or "unknown")
    if metric is None:
        notes.append("no y metric: none of " + ", ".join(Y_METRICS) + " is measured")
        empty = np.zeros(0)
        return SeriesPoints(sid, "", empty, empty, SeriesContext(), ok.iloc[0:0], notes)
    y = _positive(ok[metric])
    n = pd.to_numeric(ok["n_accelerators"], errors="coerce")
    keep = y.notna() & n.notna() & (n >= 1)
    if (~keep).any():
        notes.append(f"{int((~keep).sum())} run(s) without a positive {metric} or N left out")
    kept = ok[keep].sort_values(["n_accelerators", "run_id"] if "run_id" in ok else
                                ["n_accelerators"])
    comm_note = (f"scaling '{scaling}' treated as strong for comm"
                 if scaling not in ("strong", "weak") else "")
    # A time-to-train run has a fixed amount of work (train to the target quality) whatever
    # its batch, so for comm it is strong scaling even where the batch grows with N.
    ctx_scaling = ("weak" if scaling == "weak" and metric != "inverse_time_to_train_per_s"
                   else "strong")
    ctx = SeriesContext(scaling=ctx_scaling,
                        work_per_step=work_per_step(kept, metric, ctx_scaling) if len(kept) else None)
    return SeriesPoints(sid, metric, kept["n_accelerators"].to_numpy(float),
                        _positive(kept[metric]).to_numpy(float), ctx, kept, notes, comm_note)


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
