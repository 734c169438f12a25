"""The fit stage: every law on every series, extrapolation tests, cross-series MFU models.

Reads ``runs.parquet`` and ``series.parquet``; writes ``fits.parquet`` (one row per series and
law, with the derived figures), ``extrapolation.parquet``, ``cross_series.parquet`` (MFU
regressions), ``reports/metrics/fit.json`` and plot data ``reports/plots/fit_*.csv``. A series
that cannot be fitted gets rows with ``converged = False`` and a ``note``; the stage goes on. A
fit that converged but says little (parameters on a bound, a peak outside the data, R2 below
``LOW_R2``, a falling power law) keeps its row and says so in ``note``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from pipeline.config import ConfigError, get
from pipeline.io import write_csv, write_json, write_parquet
from pipeline.laws import LAWS, SCALES, LawFitError, get_law
from pipeline.laws.crossseries import cross_series
from pipeline.laws.derived import law_figures
from pipeline.laws.extrapolation import COLUMNS as EXTRA_COLUMNS
from pipeline.laws.extrapolation import extrapolate_series, point_ape, summarise
from pipeline.laws.nls import fit_law
from pipeline.laws.result import FitResult
from pipeline.laws.series import SeriesPoints, measured_figures, series_points

LAW_FIGURES = ("n_peak", "n_peak_stderr", "x_max", "x_max_stderr", "peak_concurrency",
               "n_half_efficiency", "next_doubling_gain")
#: below this R2 (fitting scale) a converged fit is flagged in ``note``
LOW_R2 = 0.5
MEASURED_FIGURES = ("efficiency_at_n_max", "tokens_per_accelerator_hour_at_n_min",
                    "tokens_per_accelerator_hour_at_n_max", "energy_j_per_token_at_n_min",
                    "energy_j_per_token_at_n_max", "energy_per_token_doubling_factor")
FIT_COLUMNS = ("series_id", "source", "scaling", "law", "y_metric", "scale", "params", "stderr",
               "ci_low", "ci_high", "aicc", "bic", "r2", "delta_aicc", "n_points", "n_distinct",
               "n_min", "n_max", "converged", "note", *LAW_FIGURES, *MEASURED_FIGURES)


def _settings(params: dict[str, Any]) -> dict[str, Any]:
    laws = get(params, "fit.laws", list)
    unknown = [law for law in laws if law not in LAWS]
    if not laws or unknown:
        raise ConfigError(f"params: field 'fit.laws' has unknown law(s) {unknown}; "
                          f"known: {sorted(LAWS)}")
    ks = get(params, "fit.holdout_k", list)
    if not ks or any(not isinstance(k, int) or isinstance(k, bool) or k < 1 for k in ks):
        raise ConfigError(f"params: field 'fit.holdout_k' must be a list of integers >= 1, got {ks}")
    interval = get(params, "fit.interval", float)
    if not 0.0 < interval < 1.0:
        raise ConfigError(f"params: field 'fit.interval' must be in (0, 1), got {interval}")
    scale = get(params, "fit.scale", str)
    if scale not in SCALES:
        raise ConfigError(f"params: field 'fit.scale' must be one of {SCALES}, got {scale!r}")
    min_success = get(params, "fit.default_law_min_success", float)
    if not 0.0 <= min_success <= 1.0:
        raise ConfigError("params: field 'fit.default_law_min_success' must be in [0, 1]")
    min_n = get(params, "fit.min_distinct_n", int)
    extra_n = get(params, "fit.extrapolation_min_distinct_n", int)
    if min_n < 2 or extra_n < 3:
        raise ConfigError("params: fields 'fit.min_distinct_n' (>= 2) and "
                          "'fit.extrapolation_min_distinct_n' (>= 3) are too small")
    score_other = get(params, "fit.score_other_scale", bool)
    peak_beyond = float(get(params, "fit.flag_peak_beyond", (int, float), default=10.0))
    if peak_beyond < 1.0:
        raise ConfigError(f"params: field 'fit.flag_peak_beyond' must be >= 1, got {peak_beyond}")
    return dict(laws=list(laws), score_other_scale=score_other, ks=list(ks), interval=interval,
                scale=scale, min_success=min_success, min_distinct_n=min_n,
                extra_min_distinct_n=extra_n, peak_beyond=peak_beyond)


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
               min_distinct_n: int, peak_beyond: float = 10.0) -> list[dict]:
    """One row per law for one series (``peak_beyond``: see :func:`plausibility_notes`)."""
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
                ci = res.conf_int(1.0 - interval)
                row.update(params=_json(res.params), stderr=_json(res.stderr),
                           ci_low=_json(ci["low"].to_dict()), ci_high=_json(ci["high"].to_dict()),
                           aicc=res.aicc, bic=res.bic, r2=res.r2, converged=res.converged)
                figures = law_figures(res, n_min, n_max)
                row.update({k: v for k, v in figures.items() if k in LAW_FIGURES})
                if res.note:
                    notes.append(res.note)
                notes += plausibility_notes(res, figures, n_min, n_max, peak_beyond)
            except LawFitError as exc:
                notes.append(str(exc))
        row["note"] = "; ".join(notes)
        rows.append(row)
    return rows


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


def _collect(runs: pd.DataFrame, series: pd.DataFrame, cfg: dict[str, Any]
             ) -> tuple[list[dict], list[dict], list[dict], list[pd.DataFrame]]:
    """Fit rows, extrapolation rows (chosen scale, other scale) and efficiency curves."""
    fit_rows: list[dict] = []
    extra_rows: list[dict] = []
    other_rows: list[dict] = []
    curves: list[pd.DataFrame] = []
    other_scale = next(sc for sc in SCALES if sc != cfg["scale"])
    by_series = {sid: g for sid, g in runs.groupby("series_id", sort=True)}
    no_runs = runs.iloc[0:0]
    for _, srow in tqdm(series.iterrows(), total=len(series), desc="fit", unit="series",
                        disable=None):
        points = series_points(by_series.get(srow["series_id"], no_runs), srow)
        measured, curve = measured_figures(points)
        curves.append(curve)
        ident = dict(series_id=points.series_id, source=srow.get("source"),
                     scaling=srow.get("scaling"),
                     n_min=int(points.n.min()) if points.n.size else None,
                     n_max=int(points.n.max()) if points.n.size else None)
        for row in fit_series(points, cfg["laws"], scale=cfg["scale"], interval=cfg["interval"],
                              min_distinct_n=cfg["min_distinct_n"],
                              peak_beyond=cfg["peak_beyond"]):
            fit_rows.append({**ident, **row, **measured})
        if points.n_distinct < cfg["extra_min_distinct_n"]:
            continue
        source = str(srow.get("source"))
        extra_rows += extrapolate_series(points, source, cfg["laws"], cfg["ks"],
                                         scale=cfg["scale"], interval=cfg["interval"])
        if cfg["score_other_scale"]:
            other_rows += extrapolate_series(points, source, cfg["laws"], cfg["ks"],
                                             scale=other_scale, interval=cfg["interval"])
    return fit_rows, extra_rows, other_rows, curves


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


def run(params: dict[str, Any], *, runs_path: Path, series_path: Path, out_dir: Path,
        metrics_path: Path, plots_dir: Path, power_path: Path | None = None) -> dict[str, Any]:
    """Run the fit stage; returns the metrics written to ``metrics_path``.

    With ``power_path`` (the ingest's ``power.parquet``) the energy laws
    (``pipeline.laws.energy``) go to ``energy_fits.parquet`` and ``energy_points.parquet``.
    """
    cfg = _settings(params)
    runs = pd.read_parquet(runs_path)
    series = pd.read_parquet(series_path).sort_values("series_id").reset_index(drop=True)
    fit_rows, extra_rows, other_rows, curves = _collect(runs, series, cfg)
    fits = _fits_frame(fit_rows)
    extra = _score(pd.DataFrame(extra_rows, columns=list(EXTRA_COLUMNS)))
    extra = extra.sort_values(["series_id", "law", "k", "n_target", "run_id"]).reset_index(drop=True)
    cross, cross_headlines = cross_series(runs, cfg["interval"])

    out_dir = Path(out_dir)
    write_parquet(fits, out_dir / "fits.parquet")
    write_parquet(extra, out_dir / "extrapolation.parquet")
    write_parquet(cross, out_dir / "cross_series.parquet")
    plots_dir = Path(plots_dir)
    write_csv(extra.loc[np.isfinite(extra["predicted"]),
                         ["series_id", "law", "k", "n_target", "actual", "predicted", "pi_low",
                          "pi_high"]], plots_dir / "fit_extrapolation.csv")
    eff = (pd.concat(curves, ignore_index=True) if curves else
           pd.DataFrame(columns=["series_id", "n_accelerators", "efficiency"]))
    write_csv(eff.sort_values(["series_id", "n_accelerators"]), plots_dir / "fit_efficiency.csv")

    metrics = _metrics(fits, extra, cfg, cross_headlines, n_series=len(series))
    if power_path is not None:
        metrics["energy"] = _energy(Path(power_path), out_dir, cfg)
    if cfg["score_other_scale"]:
        # metrics only: does `fit.scale` predict better than the other scale on this data?
        other = summarise(_score(pd.DataFrame(other_rows, columns=list(EXTRA_COLUMNS))),
                          cfg["laws"], cfg["ks"], cfg["min_success"])
        metrics["other_scale"] = {"scale": next(sc for sc in SCALES if sc != cfg["scale"]),
                                  "default_law": other["default_law"],
                                  "default_law_scores": other.get("common_mean_median_ape"),
                                  "all_laws_common": other.get("all_laws_common"),
                                  "extrapolation": other["laws"]}
    write_json(metrics, metrics_path)
    return metrics


def _energy(power_path: Path, out_dir: Path, cfg: dict) -> dict[str, Any]:
    """Energy laws on the power measurements; an absent file gives empty outputs."""
    from pipeline.laws.energy import FIT_COLUMNS as E_FITS, POINT_COLUMNS, energy_laws
    from pipeline.schema import POWER_COLUMNS
    power = (pd.read_parquet(power_path) if power_path.is_file() else
             pd.DataFrame(columns=[c[0] for c in POWER_COLUMNS]))
    fits, points, metrics = energy_laws(power, cfg["interval"], cfg["min_distinct_n"])
    write_parquet(fits.reindex(columns=list(E_FITS)), out_dir / "energy_fits.parquet")
    write_parquet(points.reindex(columns=list(POINT_COLUMNS)), out_dir / "energy_points.parquet")
    return metrics


def _metrics(fits: pd.DataFrame, extra: pd.DataFrame, cfg: dict, cross: dict,
             n_series: int) -> dict[str, Any]:
    fitted = fits[fits["converged"]]
    best_law = fits.loc[fits["delta_aicc"] == 0.0, "law"]
    summary = summarise(extra, cfg["laws"], cfg["ks"], cfg["min_success"])
    usl = fitted[fitted["law"] == "usl"]
    return {
        "scale": cfg["scale"],
        "interval": cfg["interval"],
        "holdout_k": cfg["ks"],
        "n_series": n_series,
        "n_series_fitted": int(fitted["series_id"].nunique()),
        "n_series_extrapolated": int(extra["series_id"].nunique()) if len(extra) else 0,
        "converged": {law: int((fitted["law"] == law).sum()) for law in cfg["laws"]},
        "best_aicc": {law: int((best_law == law).sum()) for law in cfg["laws"]},
        "usl_series_with_peak_in_range": int(((usl["n_peak"] >= usl["n_min"]) &
                                              (usl["n_peak"] <= usl["n_max"])).sum()),
        "extrapolation": summary["laws"],
        "default_law": summary["default_law"],
        "default_law_reason": summary.get("default_law_reason"),
        "default_law_scores": summary.get("common_mean_median_ape"),
        "all_laws_common": summary.get("all_laws_common"),
        "coverage_note": _coverage_note(summary["laws"], cfg["interval"]),
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
