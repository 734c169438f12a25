"""Compare stage: measured scaling against the theory's ceilings, per run and per series.

Inputs (``data/processed``): ``runs``, ``series``, ``fits``, ``fit_curves`` (each law on the
extrapolation grid, written by fit), ``bounds`` and ``theory_curves`` (each series' ceiling on the
same grid, written by theory), ``reports/metrics/fit.json`` and ``selected_targets.parquet``
(calibrate's recommended predictor at ``extrapolate_n``, which replaces the law's prediction and
interval on the ``target`` rows where it predicts them; ``predictor`` names which). It joins and
summarises them; it imports no fit, theory or calibrate code. Outputs:

* ``comparison.parquet``: one row per measured run: MFU, the theory's ``bound_mfu``, the fraction
  of the ceiling achieved, the measured step time split into the share the theory explains (by
  component, then its ``overhead``) and the ``residual`` it leaves unexplained, and the run's
  place on the frontier.
* ``comparison_curves.parquet``: per series and N, the measured scaling efficiency, the default
  law's fitted/extrapolated throughput with its prediction interval, and the theory's efficiency
  (``kind`` = ``measured`` | ``curve`` | ``target``; ``target`` rows are the ``extrapolate_n``).
* ``comparison_series.parquet``: one row per series: efficiency at its largest N, and the N at
  which the fitted law, the theory's ceiling and the measurements fall below
  ``compare.efficiency_threshold`` (``n_at_threshold_law`` etc.; 0.5 by default).
* ``reports/metrics/compare.json``: headline figures; ``reports/plots/compare_*.csv`` for
  ``dvc plots``.

Definitions. Scaling efficiency at N is per-accelerator throughput relative to the smallest N of
the series, eff(N) = (y(N)/N) / (y(N0)/N0) (Fernandez et al. 2024, arXiv:2411.13055, use the same
per-device ratio). The theory's efficiency for the same family is bound_mfu(N)/bound_mfu(N0).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
from tqdm import tqdm

from pipeline.config import CompareSettings, Settings
from pipeline.measures import (extrapolation_grid, finished, n_at_efficiency, series_runs,
                               training_flop, y_column)
from pipeline.runner import Inputs, Result, run_stage
from pipeline.schema import empty_frame
from pipeline.vocab import SHARE_SLOTS

SECONDS_PER_DAY = 86_400.0
OVERLAPPED = ("hbm", "net_tp", "net_dp", "net_pp", "net_ep")
SHARES = SHARE_SLOTS


# -- per run -----------------------------------------------------------------------------------
def gap_shares(mfu: float, bound: pd.Series) -> dict[str, float]:
    """Split a run's measured step time into what the theory explains and what it does not.

    Times are put on one basis through the ideal arithmetic time t_ideal (FLOP at peak):
    the theory's step time is t_ideal / bound_mfu and the measured one t_ideal / mfu (the
    definitions of MFU and of the bound). Of the theory's overhead, the bubble and latency add
    to the step (Erdil & Schneider-Joseph 2024, theory.md §2.4: phases add); the remainder is the
    overlapped resources' excess over compute, split in proportion to each one's excess
    max(0, t_x - t_compute). Returns fractions of the measured step time that sum to 1; the
    ``residual`` share is negative when a run beats the ceiling.
    """
    out = dict.fromkeys(SHARES, np.nan)
    b = float(bound.get("bound_mfu", np.nan))
    t_compute = float(bound.get("t_compute_s", np.nan))
    if not (np.isfinite(mfu) and mfu > 0 and np.isfinite(b) and b > 0 and np.isfinite(t_compute)):
        return out
    t_step = float(bound["t_step_s"]) if np.isfinite(bound.get("t_step_s", np.nan)) else t_compute / b
    t_ideal = b * t_step
    t_meas = t_ideal / mfu
    overhead = max(t_step - t_ideal, 0.0)
    added = {k: max(float(bound.get(f"t_{k}_s", 0.0) or 0.0), 0.0) for k in ("bubble", "latency")}
    scale = min(1.0, overhead / sum(added.values())) if sum(added.values()) > 0 else 0.0
    added = {k: v * scale for k, v in added.items()}
    rest = overhead - sum(added.values())
    excess = {k: max(float(bound.get(f"t_{k}_s", 0.0) or 0.0) - t_compute, 0.0) for k in OVERLAPPED}
    total_excess = sum(v for v in excess.values() if np.isfinite(v))
    out.update({k: 0.0 for k in SHARES})
    out["compute"] = t_ideal / t_meas
    for k, v in excess.items():
        out[k] = rest * v / total_excess / t_meas if total_excess > 0 else 0.0
    out["overhead"] = 0.0 if total_excess > 0 else rest / t_meas
    out.update({k: v / t_meas for k, v in added.items()})
    out["residual"] = (t_meas - t_step) / t_meas
    return out


def compare_runs(runs: pd.DataFrame, bounds: pd.DataFrame, duration_s: float) -> pd.DataFrame:
    """One row per measured run: MFU against its ceiling, gap shares, place on the frontier."""
    ok = finished(runs).copy()
    keep = ["run_id", "source", "source_kind", "citation", "model", "accelerator",
            "accelerator_family", "n_accelerators", "strategy_family", "scaling", "series_id",
            "precision", "active_params", "mfu", "hfu", "model_flops_per_s", "tokens_per_s",
            "tokens_per_s_per_accelerator", "peak_flops_per_s_per_accelerator",
            "power_w_per_accelerator", "energy_j_per_token", "time_to_train_s"]
    keep += [c for c in ("training_tokens", "flops_per_hbm_byte") if c in ok.columns]
    df = ok[keep].merge(bounds, on="run_id", how="left")
    df["fraction_of_ceiling"] = df["mfu"] / df["bound_mfu"]
    df["exceeds_bound"] = df["fraction_of_ceiling"] > 1.0
    shares = [gap_shares(m, b) for m, (_, b) in zip(df["mfu"], df.iterrows())]
    for k in SHARES:
        df[f"share_{k}"] = [s[k] for s in shares]
    df["tokens_per_accelerator_hour"] = df["tokens_per_s_per_accelerator"] * 3600.0
    flop, basis = [], []
    for r in df.itertuples():
        tokens = getattr(r, "training_tokens", np.nan)
        if np.isfinite(tokens if tokens is not None else np.nan) and np.isfinite(r.active_params):
            flop.append(training_flop(r.active_params, tokens)), basis.append("tokens")
        elif np.isfinite(r.time_to_train_s) and np.isfinite(r.model_flops_per_s):
            flop.append(r.model_flops_per_s * r.time_to_train_s), basis.append("time_to_train")
        elif np.isfinite(r.model_flops_per_s):
            flop.append(r.model_flops_per_s * duration_s), basis.append("duration_at_throughput")
        else:
            flop.append(np.nan), basis.append(None)
    df["training_flop"], df["training_flop_basis"] = flop, basis
    return df.sort_values("run_id").reset_index(drop=True)


# -- per series --------------------------------------------------------------------------------
def usable_laws(fits: pd.DataFrame, law_order: list[str]) -> dict[str, tuple[str, str | None]]:
    """Per series, the first law of ``law_order`` that the fit stage fitted (converged), with
    its ``scale``. A series whose default law cannot be fitted (a 3-parameter law on 3 points)
    falls back to the next law in the fit stage's held-out ranking."""
    if fits.empty:
        return {}
    ok = fits[fits["converged"].fillna(False).astype(bool)] if "converged" in fits else fits
    rank = {law: i for i, law in enumerate(law_order)}
    ok = ok.assign(_rank=ok["law"].map(lambda x: rank.get(x, len(rank)))).sort_values(
        ["series_id", "_rank", "law"])
    first = ok.groupby("series_id").head(1)
    scale = first["scale"] if "scale" in first else pd.Series(None, index=first.index)
    return {r: (law, sc if isinstance(sc, str) else None)
            for r, law, sc in zip(first["series_id"], first["law"], scale)}


def _curve_on(curves: pd.DataFrame, grid: np.ndarray, columns: list[str]) -> pd.DataFrame | None:
    """A series' curve rows as columns on ``grid``; None when they are absent or were written
    on another grid."""
    if curves is None or not len(curves):
        return None
    curves = curves.sort_values("n_accelerators")
    if not np.array_equal(curves["n_accelerators"].to_numpy(float), grid):
        return None
    return curves[columns].reset_index(drop=True)


def compare_series(runs: pd.DataFrame, series: pd.DataFrame, per_run: pd.DataFrame,
                   fits: pd.DataFrame, law_order: list[str], cfg: CompareSettings,
                   fit_curves: pd.DataFrame, theory_curves: pd.DataFrame
                   ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Measured, fitted and theoretical efficiency curves per series, and their summaries.

    The series are those the fit stage fitted; each is drawn with its law (the default law,
    or the next in ranking where the default could not be fitted: ``usable_laws``) from the
    curve the fit stage wrote on the extrapolation grid (``fit_curves.parquet``: predictions
    and intervals), and with the ceiling curve the theory stage wrote on the same grid
    (``theory_curves.parquet``; its efficiency is relative to the ceiling at the series'
    smallest N). Nothing is refitted or recomputed here.
    """
    default_law = law_order[0]
    laws_of = usable_laws(fits, law_order)
    bound_of = per_run.set_index("run_id")["bound_mfu"]
    series = series[series["series_id"].isin(set(fits["series_id"]))] if len(fits) else series
    law_curve = {key: g for key, g in fit_curves.groupby(["series_id", "law"], sort=False)}
    # N at the threshold efficiency of each fitted law: the fit stage's root (one answer)
    law_n_at_threshold = dict(zip(zip(fits["series_id"], fits["law"]),
                                  fits["n_at_threshold"].astype(float))) if len(fits) else {}
    theory_curve = {sid: g for sid, g in theory_curves.groupby("series_id", sort=False)}
    # each series' runs found once (a mask over all runs per series would cost series x runs)
    runs_of = {sid: g for sid, g in runs.groupby("series_id", sort=False)}
    no_runs = runs.iloc[0:0]
    rows, summary = [], []
    # progress on a terminal only (tqdm disable=None)
    for s in tqdm(list(series.sort_values("series_id").itertuples()), desc="compare",
                  unit="series", file=sys.stderr, disable=None, delay=1.0):
        law = laws_of.get(s.series_id, (None, None))[0]
        drawn = _draw_series(s, runs_of.get(s.series_id, no_runs), bound_of, law, default_law,
                             law_curve, theory_curve, cfg,
                             law_n_at_threshold.get((s.series_id, law), np.nan))
        if drawn is None:
            continue
        rows += drawn[0]
        note = drawn[1].pop("_note")
        summary.append({**drawn[1], "note": note})
    if not rows:  # no series: the contract's columns, no rows
        return empty_frame("comparison_curves.parquet"), empty_frame("comparison_series.parquet")
    curves = pd.DataFrame(rows)
    curves = curves.sort_values(["series_id", "kind", "n_accelerators"]).reset_index(drop=True)
    return curves, pd.DataFrame(summary)


def _draw_series(s: Any, runs: pd.DataFrame, bound_of: pd.Series, law: str | None,
                 default_law: str, law_curve: dict, theory_curve: dict, cfg: CompareSettings,
                 n_at_threshold_law: float = np.nan
                 ) -> tuple[list[dict], dict[str, Any]] | None:
    """One series' curve rows (measured points, then the grid) and its summary row (with its
    own note under ``_note``), from ``runs`` (those of the series suffice); None when it has
    fewer than two measured N.
    ``n_at_threshold_law`` is the fit stage's N at the threshold efficiency for the series'
    law, quoted when it lies within the grid (up to the largest target)."""
    ycol = y_column(runs, s.y_metric)
    g = series_runs(runs, s.series_id, ycol)
    by_n = g.groupby("n_accelerators")[ycol].median().sort_index()
    if len(by_n) < 2:
        return None
    n_obs, y_obs = by_n.index.to_numpy(float), by_n.to_numpy(float)
    n0, per0 = n_obs[0], y_obs[0] / n_obs[0]
    targets = sorted(cfg.extrapolate_n)
    grid = extrapolation_grid(float(n0), targets, cfg.curve_points)
    theory_obs = g.assign(b=g["run_id"].map(bound_of)).groupby("n_accelerators")["b"].median()
    theory_obs = theory_obs.reindex(by_n.index).to_numpy(float)
    base = dict(series_id=s.series_id, source=s.source, model=s.model, scaling=s.scaling,
                strategy_family=s.strategy_family, accelerator=s.accelerator,
                accelerator_family=g["accelerator_family"].iloc[0], y_metric=ycol, law=law,
                law_is_default=law == default_law)
    rows = [{**base, "kind": "measured", "n_accelerators": n, "y": y,
             "efficiency": (y / n) / per0, "efficiency_theory": tb / theory_obs[0]}
            for n, y, tb in zip(n_obs, y_obs, theory_obs)]
    pred = pd.DataFrame(np.nan, index=range(len(grid)), columns=["predicted", "pi_low", "pi_high"])
    note = "" if law else "no law could be fitted by the fit stage"
    if law:
        drawn = _curve_on(law_curve.get((s.series_id, law)), grid,
                          ["predicted", "pi_low", "pi_high"])
        if drawn is None:
            note = f"fit failed: the fit stage wrote no {law} curve on this grid"
        else:
            pred = drawn
    pred0 = float(pred["predicted"].iloc[0]) / n0
    ceiling = _curve_on(theory_curve.get(s.series_id), grid, ["bound_mfu"])
    th = ceiling["bound_mfu"].to_numpy(float) if ceiling is not None else np.full(len(grid), np.nan)
    eff_law = pred["predicted"].to_numpy() / grid / pred0
    eff_theory = th / th[0] if th[0] > 0 else np.full(len(grid), np.nan)
    peak = float(g["peak_flops_per_s_per_accelerator"].iloc[0])
    ratio = (g[ycol] / g["model_flops_per_s"]).dropna()
    y_per_flop = 1.0 if ycol == "model_flops_per_s" else (
        float(ratio.median()) if len(ratio) else np.nan)
    for i, n in enumerate(grid):
        rows.append({**base, "kind": "target" if n in targets else "curve",
                     "n_accelerators": n, "y": np.nan, "efficiency": np.nan,
                     "predicted": pred["predicted"].iloc[i], "pi_low": pred["pi_low"].iloc[i],
                     "pi_high": pred["pi_high"].iloc[i], "efficiency_law": eff_law[i],
                     "efficiency_law_low": pred["pi_low"].iloc[i] / n / pred0,
                     "efficiency_law_high": pred["pi_high"].iloc[i] / n / pred0,
                     "bound_mfu": th[i], "efficiency_theory": eff_theory[i],
                     "y_ceiling": th[i] * peak * n * y_per_flop})
    eff_obs = (y_obs / n_obs) / per0
    threshold = cfg.efficiency_threshold
    summary = {**base, "n_min": n0, "n_max": n_obs[-1], "n_distinct": len(n_obs),
               "efficiency_at_n_max": eff_obs[-1],
               "theory_efficiency_at_n_max": theory_obs[-1] / theory_obs[0],
               "n_at_threshold_law": (n_at_threshold_law if law and np.isfinite(pred0)
                                      and n_at_threshold_law <= grid[-1] else np.nan),
               "n_at_threshold_theory": n_at_efficiency(grid, eff_theory, threshold),
               "n_at_threshold_measured": n_at_efficiency(n_obs, eff_obs, threshold),
               "theory_curve": bool(np.isfinite(th).any()), "_note": note}
    return rows, summary


def apply_selected(curves: pd.DataFrame, selected: pd.DataFrame) -> pd.DataFrame:
    """compare's curves with the ``target`` rows (extrapolate_n) predicted by ``selected``
    where it has a prediction for that series and N: predicted and interval replaced, the
    efficiencies relative to the measured per-accelerator y at the series' smallest N, and
    ``predictor`` naming what predicted each target row (the law otherwise)."""
    if curves.empty:
        return curves
    out = curves.copy()
    out["predictor"] = out.get("law")
    if selected.empty:
        return out
    sel = selected.set_index(["series_id", "n_accelerators"])
    measured = out[out["kind"] == "measured"].sort_values("n_accelerators")
    per0 = measured.groupby("series_id").apply(
        lambda g: g["y"].iloc[0] / g["n_accelerators"].iloc[0], include_groups=False)
    target = out["kind"] == "target"
    keys = list(zip(out.loc[target, "series_id"], out.loc[target, "n_accelerators"].astype(float)))
    hit = np.array([k in sel.index for k in keys], bool)
    rows = out.index[target][hit]
    chosen = sel.loc[[k for k, h in zip(keys, hit) if h]]
    n = out.loc[rows, "n_accelerators"].to_numpy(float)
    base = out.loc[rows, "series_id"].map(per0).to_numpy(float) * n
    for col, eff in (("predicted", "efficiency_law"), ("pi_low", "efficiency_law_low"),
                     ("pi_high", "efficiency_law_high")):
        out.loc[rows, col] = chosen[col].to_numpy(float)
        if eff in out:
            out.loc[rows, eff] = chosen[col].to_numpy(float) / base
    out.loc[rows, "predictor"] = chosen["predictor"].to_numpy(object)
    return out


# -- stage -------------------------------------------------------------------------------------
def law_order_of(fit_metrics: dict[str, Any], fits: pd.DataFrame) -> list[str]:
    """The fit stage's default law first, then the others by its held-out scores
    (``default_law_scores``, lower is better), then any remaining law by name."""
    scores = fit_metrics.get("default_law_scores") or {}
    ranked = sorted((v, k) for k, v in scores.items() if isinstance(v, (int, float)))
    order = [k for _, k in ranked]
    law = fit_metrics.get("default_law")
    if not (isinstance(law, str) and law):
        finite = fits[np.isfinite(fits["aicc"].astype(float))] if len(fits) else fits
        law = str(finite.groupby("law")["aicc"].median().idxmin()) if len(finite) else "power"
    rest = sorted(set(fits["law"]) if len(fits) else set()) + ["power"]
    return list(dict.fromkeys([law] + order + rest))


def headline(per_run: pd.DataFrame, summ: pd.DataFrame, curves: pd.DataFrame,
             s: Settings, default_law: str) -> dict[str, Any]:
    """Headline figures for compare.json (printed by ``dvc metrics show``)."""
    targets = sorted(s.compare.extrapolate_n)
    frac = per_run["fraction_of_ceiling"].dropna()
    out: dict[str, Any] = {
        "n_runs": int(len(per_run)), "n_runs_with_bound": int(len(frac)),
        "median_fraction_of_ceiling": float(frac.median()) if len(frac) else None,
        "n_runs_exceeding_bound": int((frac > 1).sum()), "default_law": default_law,
        "n_series": int(len(summ)),
        "efficiency_threshold": s.compare.efficiency_threshold, "extrapolate_n": targets,
        "interval": s.fit.interval, "frontier_duration_days": s.theory.duration_days,
    }
    def median(values: pd.Series) -> float | None:
        values = values.dropna()
        return float(values.median()) if len(values) else None

    for scaling in ("strong", "weak"):
        s = summ[summ["scaling"] == scaling] if len(summ) else pd.DataFrame(
            columns=["efficiency_at_n_max", "n_at_threshold_law"])
        out[f"{scaling}_median_efficiency_at_n_max"] = median(s["efficiency_at_n_max"])
        out[f"{scaling}_median_n_at_threshold_law"] = median(s["n_at_threshold_law"])
    if len(curves):
        t = curves[curves["kind"] == "target"]
        for n in targets:
            strong = t[(t["n_accelerators"] == n) & (t["scaling"] == "strong")]
            out[f"strong_median_efficiency_law_at_{n}"] = median(strong["efficiency_law"])
            out[f"strong_median_efficiency_theory_at_{n}"] = median(strong["efficiency_theory"])
    return out


def compute(inputs: Inputs, s: Settings) -> Result:
    """The compare stage (declared in pipeline/compare/contract.py): runs against their
    ceilings, series against their laws and ceilings, targets from calibrate's ``selected``."""
    runs, fits = inputs["runs.parquet"], inputs["fits.parquet"]
    law_order = law_order_of(inputs.metrics["fit"], fits)
    default_law = law_order[0]
    per_run = compare_runs(runs, inputs["bounds.parquet"], s.theory.duration_days * SECONDS_PER_DAY)
    curves, summ = compare_series(runs, inputs["series.parquet"], per_run, fits, law_order,
                                  s.compare, inputs["fit_curves.parquet"],
                                  inputs["theory_curves.parquet"])
    # Extrapolations to extrapolate_n: the calibrate stage's `selected` where it predicts them.
    curves = apply_selected(curves, inputs["selected_targets.parquet"])
    measured = curves[curves["kind"] == "measured"] if len(curves) else pd.DataFrame(
        columns=["series_id", "n_accelerators", "efficiency", "efficiency_theory"])
    plots = {
        "compare_efficiency.csv": measured[["series_id", "n_accelerators", "efficiency",
                                            "efficiency_theory"]],
        "compare_frontier_runs.csv": per_run[["run_id", "accelerator_family", "training_flop",
                                              "mfu", "bound_mfu"]].dropna(
                                                  subset=["training_flop"]),
    }
    return Result(frames={"comparison.parquet": per_run, "comparison_curves.parquet": curves,
                          "comparison_series.parquet": summ},
                  metrics=headline(per_run, summ, curves, s, default_law), plots=plots)


def run(params: Mapping[str, Any], **paths: Path) -> dict[str, Any]:
    """Run the compare stage through the runner (``processed_dir``, ``out_dir``,
    ``metrics_path``, ``plots_dir``, ``metrics_dir``); returns its metrics."""
    return run_stage("compare", params, **paths)
