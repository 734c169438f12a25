"""The fit stage: every law on every series, extrapolation tests, cross-series MFU models.

Reads ``runs.parquet``, ``series.parquet`` and ``power.parquet``; writes ``fits.parquet`` (one row
per series and law, with the derived figures), ``extrapolation.parquet``, ``cross_series.parquet``
(MFU regressions), ``fit_curves.parquet`` (each law on the extrapolation grid),
``energy_fits.parquet`` and ``energy_points.parquet`` (the energy laws),
``reports/metrics/fit.json`` and plot data ``reports/plots/fit_*.csv`` (declared in pipeline/fit/contract.py). A series
that cannot be fitted gets rows with ``converged = False`` and a ``note``; the stage goes on. A
fit that converged but says little (parameters on a bound, a peak outside the data, R2 below
``LOW_R2``, a falling power law) keeps its row and says so in ``note``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from pipeline.config import FitSettings, Settings
from pipeline.fit.laws import LAWS, SCALES, LawFitError, get_law
from pipeline.fit.crossseries import cross_series
from pipeline.fit.derived import law_figures, multiple_columns, predictions_at_multiples
from pipeline.fit.extrapolation import COLUMNS as EXTRA_COLUMNS
from pipeline.fit.extrapolation import extrapolate_series, point_ape, summarise
from pipeline.fit.nls import fit_law
from pipeline.fit.result import FitResult, prediction_columns
from pipeline.fit.series import SeriesPoints, measured_figures, point_columns, series_points
from pipeline.measures import extrapolation_grid
from pipeline.fit.workers import map_in_order
from pipeline.runner import Inputs, Result, run_stage
from pipeline.schema import empty_frame

LAW_FIGURES = ("n_peak", "n_peak_stderr", "x_max", "x_max_stderr", "peak_concurrency",
               "n_at_threshold", "next_doubling_gain", *multiple_columns())
#: below this R2 (fitting scale) a converged fit is flagged in ``note``
LOW_R2 = 0.5
MEASURED_FIGURES = ("efficiency_at_n_max", "tokens_per_accelerator_hour_at_n_min",
                    "tokens_per_accelerator_hour_at_n_max", "energy_j_per_token_at_n_min",
                    "energy_j_per_token_at_n_max", "energy_per_token_doubling_factor")
FIT_COLUMNS = ("series_id", "source", "scaling", "law", "y_metric", "scale", "params", "stderr",
               "ci_low", "ci_high", "aicc", "bic", "r2", "delta_aicc", "n_points", "n_distinct",
               "n_min", "n_max", "converged", "note", *LAW_FIGURES, *MEASURED_FIGURES)


def _json(values: dict[str, float]) -> str:
    """JSON of name -> value with 12 significant digits and NaN/inf as null (deterministic)."""
    clean = {k: (float(f"{v:.12g}") if v is not None and math.isfinite(v) else None)
             for k, v in values.items()}
    return json.dumps(clean, allow_nan=False)


def plausibility_notes(res: FitResult, figures: dict[str, float], n_min: float, n_max: float,
                       peak_beyond: float) -> list[str]:
    """Warnings for fits that converged but say little: a peak outside the data, a trend
    that the scatter swamps, throughput that falls with N."""
    notes = []
    n_peak = figures.get("n_peak", np.nan)
    if np.isfinite(n_peak) and n_peak < n_min:
        notes.append(f"n_peak {n_peak:.3g} below the smallest measured N {n_min:g}")
    elif np.isfinite(n_peak) and n_peak > peak_beyond * n_max:
        notes.append(f"n_peak {n_peak:.3g} is {n_peak / n_max:.0f}x the largest measured N: "
                     "extrapolated, not observed")
    stderr = figures.get("n_peak_stderr", np.nan)
    if np.isfinite(n_peak) and np.isfinite(stderr) and stderr > n_peak:
        notes.append("n_peak stderr exceeds n_peak: the peak is not identified")
    if np.isfinite(res.r2) and res.r2 < LOW_R2:
        notes.append(f"R2 {res.r2:.2f}: the scatter swamps the trend in N")
    if res.law == "power" and res.params.get("b", 1.0) < 0:
        notes.append("b < 0: throughput falls with N over the measured range")
    return notes


def fit_series(points: SeriesPoints, laws: Sequence[str], *, scale: str, interval: float,
               min_distinct_n: int, peak_beyond: float = 10.0,
               curve_n: np.ndarray | None = None, curves_out: list | None = None,
               threshold: float = 0.5) -> list[dict]:
    """One row per law for one series (``peak_beyond``: see :func:`plausibility_notes`).

    With ``curve_n``, each converged law's predictions and ``interval`` prediction intervals
    at those N are appended to ``curves_out`` (one :func:`_curve` per law; :func:`curves_frame`
    makes ``CURVE_COLUMNS`` of them), so later stages draw the fit without refitting it.
    """
    base_note = "; ".join(points.notes)
    n_min = float(points.n.min()) if points.n.size else np.nan
    n_max = float(points.n.max()) if points.n.size else np.nan
    rows = []
    for law in laws:
        row: dict[str, Any] = dict(law=law, y_metric=points.y_metric, scale=scale,
                                   n_points=int(points.n.size), n_distinct=points.n_distinct,
                                   converged=False, params="{}", stderr="{}", ci_low="{}",
                                   ci_high="{}")
        notes = [base_note] if base_note else []
        if law == "comm" and points.comm_note:
            notes.append(points.comm_note)
        if points.n_distinct < min_distinct_n:
            notes.append(f"only {points.n_distinct} distinct N (fit needs {min_distinct_n})")
        else:
            try:
                res = fit_law(get_law(law), points.n, points.y, scale=scale, ctx=points.ctx)
                ci_low, ci_high = res.conf_limits(1.0 - interval)
                row.update(params=_json(res.params), stderr=_json(res.stderr),
                           ci_low=_json(ci_low), ci_high=_json(ci_high),
                           aicc=res.aicc, bic=res.bic, r2=res.r2, converged=res.converged)
                if curve_n is not None and curves_out is not None and res.converged:
                    curve = _curve(points.series_id, law, scale, res, curve_n, interval)
                    if curve is not None:
                        curves_out.append(curve)
                figures = law_figures(res, n_min, n_max, threshold)
                if res.converged:
                    figures |= predictions_at_multiples(res, n_min, n_max, interval)
                row.update({k: v for k, v in figures.items() if k in LAW_FIGURES})
                if res.note:
                    notes.append(res.note)
                notes += plausibility_notes(res, figures, n_min, n_max, peak_beyond)
            except LawFitError as exc:
                notes.append(str(exc))
        row["note"] = "; ".join(notes)
        rows.append(row)
    return rows


CURVE_COLUMNS = ("series_id", "law", "scale", "n_accelerators", "predicted", "pi_low", "pi_high")


def _curve(series_id: str, law: str, scale: str, res: FitResult, n: np.ndarray,
           interval: float) -> dict[str, Any] | None:
    """A fitted law on the extrapolation grid, with its prediction interval: the three
    labels and the arrays of ``CURVE_COLUMNS`` (one entry per N); None when it cannot predict."""
    try:
        pred = prediction_columns(res, n, interval)
    except Exception:  # noqa: BLE001 - no curve; compare notes the series
        return None
    n = np.asarray(n, float)
    if not n.size:
        return None
    return {"series_id": series_id, "law": law, "scale": scale, "n_accelerators": n,
            **{k: np.asarray(v, float) for k, v in pred.items()}}


def curves_frame(curves: list[dict[str, Any]]) -> pd.DataFrame:
    """``fit_curves.parquet``: every law's curve, one row per (series, law, N), in that order."""
    if curves:
        sizes = [c["n_accelerators"].size for c in curves]
        cols = {k: np.repeat(np.array([c[k] for c in curves], dtype=object), sizes)
                for k in ("series_id", "law", "scale")}
        cols |= {k: np.concatenate([c[k] for c in curves])
                 for k in ("n_accelerators", "predicted", "pi_low", "pi_high")}
        frame = pd.DataFrame({k: cols[k] for k in CURVE_COLUMNS})
    else:
        frame = empty_frame("fit_curves.parquet")
    return frame.sort_values(["series_id", "law", "n_accelerators"],
                             kind="mergesort").reset_index(drop=True)


def _score(extra: pd.DataFrame) -> pd.DataFrame:
    """Fill ``ape`` for every predicted row in one scikit-learn call (validation is costly)."""
    extra = extra.copy()
    floats = ["actual", "predicted", "pi_low", "pi_high", "ape"]
    extra[floats] = extra[floats].astype(float)
    extra[["k", "n_train_max", "n_target"]] = extra[["k", "n_train_max", "n_target"]].astype("int64")
    extra[["covered", "converged"]] = extra[["covered", "converged"]].astype(bool)
    ok = np.isfinite(extra["predicted"].to_numpy(float))
    ape = np.full(len(extra), np.nan)
    ape[ok] = point_ape(extra["actual"].to_numpy(float)[ok], extra["predicted"].to_numpy(float)[ok])
    extra["ape"] = ape
    return extra


def _one_series(all_runs: pd.DataFrame, s: Settings, task: tuple[pd.Series, np.ndarray]
                ) -> tuple[list[dict], list[dict], list[dict], pd.DataFrame, list[dict]]:
    """One series (its row and the positions of its runs in ``all_runs``): its fit rows,
    extrapolation rows (chosen scale, other scale), efficiency curve and laws' curves on the
    extrapolation grid (``compare.extrapolate_n``, ``compare.curve_points``: the grid compare
    draws on). A function of the series alone (``workers.map_in_order``; the runs and settings
    reach each worker once, a task carries only the series' row and run positions)."""
    srow, positions = task
    runs = all_runs.take(positions)
    cfg, laws, holdout_k = s.fit, list(s.fit.laws), list(s.fit.holdout_k)
    law_curves: list[dict] = []
    fit_rows: list[dict] = []
    extra_rows: list[dict] = []
    other_rows: list[dict] = []
    points = series_points(runs, srow)
    measured, curve = measured_figures(points)
    ident = dict(series_id=points.series_id, source=srow.get("source"),
                 scaling=srow.get("scaling"),
                 n_min=int(points.n.min()) if points.n.size else None,
                 n_max=int(points.n.max()) if points.n.size else None)
    grid = (extrapolation_grid(float(points.n.min()), sorted(s.compare.extrapolate_n),
                               s.compare.curve_points)
            if np.unique(points.n).size >= 2 else None)
    for row in fit_series(points, laws, scale=cfg.scale, interval=cfg.interval,
                          min_distinct_n=cfg.min_distinct_n,
                          peak_beyond=cfg.flag_peak_beyond, curve_n=grid,
                          curves_out=law_curves, threshold=s.compare.efficiency_threshold):
        fit_rows.append({**ident, **row, **measured})
    if points.n_distinct >= cfg.extrapolation_min_distinct_n:
        source = str(srow.get("source"))
        extra_rows += extrapolate_series(points, source, laws, holdout_k,
                                         scale=cfg.scale, interval=cfg.interval)
        if cfg.score_other_scale:
            other_scale = next(sc for sc in SCALES if sc != cfg.scale)
            other_rows += extrapolate_series(points, source, laws, holdout_k,
                                             scale=other_scale, interval=cfg.interval)
    return fit_rows, extra_rows, other_rows, curve, law_curves


def _collect(runs: pd.DataFrame, series: pd.DataFrame, s: Settings
             ) -> tuple[list[dict], list[dict], list[dict], list[pd.DataFrame], list[dict]]:
    """Fit rows, extrapolation rows (chosen scale, other scale), efficiency curves and the
    laws' curves, series by series (``fit.workers`` processes)."""
    positions = runs.groupby("series_id", sort=True).indices   # each series' rows, in order
    none = np.zeros(0, dtype=np.intp)
    tasks = [(srow, positions.get(srow["series_id"], none)) for _, srow in series.iterrows()]
    points_runs = point_columns(runs, series.get("y_metric", pd.Series(dtype=object)).unique())
    done = map_in_order(_one_series, tasks, s.fit.workers, shared=(points_runs, s))
    fit_rows = [row for d in done for row in d[0]]
    extra_rows = [row for d in done for row in d[1]]
    other_rows = [row for d in done for row in d[2]]
    return fit_rows, extra_rows, other_rows, [d[3] for d in done], [c for d in done for c in d[4]]


def _fits_frame(fit_rows: list[dict]) -> pd.DataFrame:
    fits = pd.DataFrame(fit_rows, columns=[c for c in FIT_COLUMNS if c != "delta_aicc"])
    floats = ["aicc", "bic", "r2", *LAW_FIGURES, *MEASURED_FIGURES]
    fits[floats] = fits[floats].astype(float)
    fits["converged"] = fits["converged"].astype(bool)
    # AICc against the series' best law (finite AICc only: 3-point fits have none)
    finite = fits["converged"].astype(bool) & np.isfinite(fits["aicc"])
    best = fits[finite].groupby("series_id")["aicc"].min()
    fits["delta_aicc"] = np.where(finite, fits["aicc"] - fits["series_id"].map(best), np.nan)
    fits = fits[list(FIT_COLUMNS)]
    for col in ("n_min", "n_max"):
        fits[col] = fits[col].astype("Int64")
    return fits.sort_values(["series_id", "law"]).reset_index(drop=True)


def compute(inputs: Inputs, s: Settings) -> Result:
    """The fit stage (declared in pipeline/fit/contract.py): every law on every series, the
    held-out extrapolation test, the cross-series models and the energy laws
    (``pipeline.fit.energy``) on ``power.parquet``."""
    from pipeline.fit.energy import FIT_COLUMNS as E_FITS, POINT_COLUMNS, energy_laws
    cfg, laws, holdout_k = s.fit, list(s.fit.laws), list(s.fit.holdout_k)
    runs = inputs["runs.parquet"]
    series = inputs["series.parquet"].sort_values("series_id").reset_index(drop=True)
    fit_rows, extra_rows, other_rows, curves, law_curves = _collect(runs, series, s)
    fits = _fits_frame(fit_rows)
    extra = _score(pd.DataFrame(extra_rows, columns=list(EXTRA_COLUMNS)))
    extra = extra.sort_values(["series_id", "law", "k", "n_target", "run_id"]).reset_index(drop=True)
    cross, cross_headlines = cross_series(runs, cfg.interval)
    fit_curves = curves_frame(law_curves)
    eff = (pd.concat(curves, ignore_index=True) if curves else
           pd.DataFrame(columns=["series_id", "n_accelerators", "efficiency"]))
    energy_fits, energy_points, energy = energy_laws(inputs["power.parquet"], cfg.interval,
                                                     cfg.min_distinct_n)
    metrics = _metrics(fits, extra, cfg, cross_headlines, n_series=len(series))
    metrics["energy"] = energy
    if cfg.score_other_scale:
        # metrics only: does `fit.scale` predict better than the other scale on this data?
        other = summarise(_score(pd.DataFrame(other_rows, columns=list(EXTRA_COLUMNS))),
                          laws, holdout_k, cfg.default_law_min_success)
        metrics["other_scale"] = {"scale": next(sc for sc in SCALES if sc != cfg.scale),
                                  "default_law": other["default_law"],
                                  "default_law_scores": other.get("common_mean_median_ape"),
                                  "all_laws_common": other.get("all_laws_common"),
                                  "extrapolation": other["laws"]}
    frames = {"fits.parquet": fits, "extrapolation.parquet": extra,
              "cross_series.parquet": cross,
              "fit_curves.parquet": fit_curves,
              "energy_fits.parquet": energy_fits.reindex(columns=list(E_FITS)),
              "energy_points.parquet": energy_points.reindex(columns=list(POINT_COLUMNS))}
    plots = {"fit_extrapolation.csv": extra.loc[np.isfinite(extra["predicted"]),
                                                ["series_id", "law", "k", "n_target", "actual",
                                                 "predicted", "pi_low", "pi_high"]],
             "fit_efficiency.csv": eff.sort_values(["series_id", "n_accelerators"])}
    return Result(frames=frames, metrics=metrics, plots=plots)


def run(params: Mapping[str, Any], **paths: Path) -> dict[str, Any]:
    """Run the fit stage through the runner (``processed_dir``, ``out_dir``, ``metrics_path``,
    ``plots_dir``); returns its metrics."""
    return run_stage("fit", params, **paths)


def _metrics(fits: pd.DataFrame, extra: pd.DataFrame, cfg: FitSettings, cross: dict,
             n_series: int) -> dict[str, Any]:
    laws, holdout_k = list(cfg.laws), list(cfg.holdout_k)
    fitted = fits[fits["converged"]]
    best_law = fits.loc[fits["delta_aicc"] == 0.0, "law"]
    summary = summarise(extra, laws, holdout_k, cfg.default_law_min_success)
    usl = fitted[fitted["law"] == "usl"]
    return {
        "scale": cfg.scale,
        "interval": cfg.interval,
        "holdout_k": holdout_k,
        "n_series": n_series,
        "n_series_fitted": int(fitted["series_id"].nunique()),
        "n_series_extrapolated": int(extra["series_id"].nunique()) if len(extra) else 0,
        "converged": {law: int((fitted["law"] == law).sum()) for law in laws},
        "best_aicc": {law: int((best_law == law).sum()) for law in laws},
        "usl_series_with_peak_in_range": int(((usl["n_peak"] >= usl["n_min"]) &
                                              (usl["n_peak"] <= usl["n_max"])).sum()),
        "extrapolation": summary["laws"],
        "default_law": summary["default_law"],
        "default_law_reason": summary.get("default_law_reason"),
        "default_law_scores": summary.get("common_mean_median_ape"),
        "all_laws_common": summary.get("all_laws_common"),
        "coverage_note": _coverage_note(summary["laws"], cfg.interval),
        "cross_series": cross,
    }


def _coverage_note(laws: dict, interval: float) -> str:
    """Say plainly when held-out runs fall outside the prediction intervals more than nominal."""
    values = [v["coverage"] for law in laws.values() for key, v in law.items()
              if key.startswith("k") and isinstance(v, dict) and v.get("coverage") is not None]
    if not values:
        return ""
    low, high = min(values), max(values)
    if high >= interval - 0.05:
        return f"extrapolation coverage {low:.2f}-{high:.2f} (nominal {interval:.2f})"
    return (f"extrapolation coverage {low:.2f}-{high:.2f}, below the nominal {interval:.2f}: "
            "the prediction intervals carry the within-series scatter only, not the error of "
            "extrapolating a law beyond the measured N")
