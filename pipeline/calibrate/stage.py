"""The ``calibrate`` stage: the data-movement model with efficiencies estimated from the runs.

Reads ``runs``, ``series``, ``bounds`` (the theory's per-run component times) and
``extrapolation`` (the fit stage's held-out law predictions) from ``data/processed`` and the
hardware catalog; writes ``calibration.parquet``, ``calibrated.parquet``, ``predictions.parquet``,
``calibrated_forms.parquet`` (the candidate forms' AICc/BIC), ``calibrated_frontier.parquet``
(the theory's frontier at the calibrated efficiencies), ``selected_targets.parquet`` (the
``selected`` rule's throughput at ``compare.extrapolate_n``; the columns of all six:
pipeline/calibrate/contract.py), ``reports/metrics/calibrate.json`` and
``reports/plots/calibrate_predictions.csv``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from pipeline.calibrate import holdout as ho
from pipeline.calibrate import scores
from pipeline.calibrate.features import SHARE_OF, SHARES, design, x_matrix
from pipeline.calibrate.forms import fit_forms
from pipeline.calibrate.frontier import calibrated_frontier
from pipeline.calibrate.model import Calibration
from pipeline.calibrate.settings import CalibrateRun, load_settings
from pipeline.calibrate.targets import selected_targets
from pipeline.config import Settings, settings
from pipeline.runner import Inputs, Result, run_stage
from pipeline.theory.frontier import flop_grid, frontier_frame
from pipeline.theory.memory_fit import overhead_of
from pipeline.theory.scenarios import load_scenarios


def fit_set_of(frame: pd.DataFrame) -> pd.DataFrame:
    """Runs the calibration is fitted on: a stated layout, a bound and a measured MFU."""
    x_cols = [c for c in frame.columns if c.startswith("x_")]
    finite = np.isfinite(frame[x_cols].to_numpy(float)).all(axis=1)
    ok = (frame["has_layout"] & (frame["measured_mfu"] > 0) & (frame["bound_mfu"] > 0) & finite)
    return frame[ok].reset_index(drop=True)


def calibrated_runs(frame: pd.DataFrame, cal: Calibration, interval: float) -> pd.DataFrame:
    """calibrated.parquet: per run with a layout and a bound, the in-sample prediction and the
    calibrated share of the measured step time per component (of the predicted one where no MFU
    is measured); the residual is what the model leaves unexplained (negative where the model
    predicts a longer step than measured)."""
    x_cols = [c for c in frame.columns if c.startswith("x_")]
    rows = frame[frame["has_layout"] & (frame["bound_mfu"] > 0)
                 & np.isfinite(frame[x_cols].to_numpy(float)).all(axis=1)].reset_index(drop=True)
    x = x_matrix(rows, cal.all_terms)
    src = rows["source"].to_numpy(object)
    mfu, lo, hi, _ = cal.predict_mfu(x, src, interval)
    u, _ = cal.source_effect(src)
    comp = cal.components(x) * np.exp(u)[:, None]   # calibrated time / t_compute, per term
    measured = rows["measured_mfu"].to_numpy(float)
    total = np.where(measured > 0, 1.0 / measured, comp.sum(axis=1))
    out = pd.DataFrame({
        "run_id": rows["run_id"], "source": rows["source"], "series_id": rows["series_id"],
        "n_accelerators": rows["n_accelerators"], "measured_mfu": measured,
        "predicted_mfu": mfu, "pi_low": lo, "pi_high": hi,
    })
    for share in SHARES[:-1]:
        cols = [j for j, t in enumerate(cal.all_terms) if SHARE_OF[t] == share]
        out[f"share_{share}"] = comp[:, cols].sum(axis=1) / total if cols else 0.0
    out["share_residual"] = 1.0 - out[[f"share_{s}" for s in SHARES[:-1]]].sum(axis=1)
    out["ape"] = np.abs(mfu / measured - 1.0)
    out["covered"] = (lo <= measured) & (measured <= hi)
    return out.sort_values("run_id", kind="mergesort").reset_index(drop=True)


def predictions(runs: pd.DataFrame, series: pd.DataFrame, extrapolation: pd.DataFrame,
                frame: pd.DataFrame, fit_set: pd.DataFrame, cal: Calibration,
                cfg: CalibrateRun) -> pd.DataFrame:
    """predictions.parquet: both holdout schemes, every predictor, scored."""
    cases = ho.series_cases(runs, series, cfg.holdout_k, cfg.min_distinct_n)
    indexed = frame.set_index("run_id", drop=False)
    parts = [ho.largest_k_predictions(cases, indexed, fit_set, cal, cfg),
             ho.source_predictions(fit_set, cal, cfg)]
    pred = pd.concat([p for p in parts if len(p)], ignore_index=True)
    pred = ho.add_intervals(pred, cfg)
    pred = pd.concat([pred, ho.selected_rows(pred, cfg), ho.law_rows(extrapolation)],
                     ignore_index=True)
    pred = ho.score(pred)
    pred = pred.loc[:, list(ho.COLUMNS) + ["sd_log"]]
    return pred.sort_values(["holdout", "predictor", "series_id", "run_id"],
                            kind="mergesort").reset_index(drop=True)


def frontier(params: Mapping[str, Any], catalog, cal: Calibration, cfg: CalibrateRun,
             ideal: dict) -> tuple[pd.DataFrame, dict]:
    """The theory's scenarios searched at the calibrated efficiencies: frontier rows and, per
    scenario, the calibrated knee and wall with CIs beside the ideal ones (theory.json)."""
    fr = settings(params, "theory").frontier
    # layouts sized by the theory stage's memory model and its fitted overhead
    overhead = overhead_of(ideal.get("_memory", {}))
    scenarios = [replace(scn, memory_overhead=overhead) for scn in load_scenarios(params, catalog)]
    result = calibrated_frontier(
        scenarios, cal, flop_grid(fr.min_flop, fr.max_flop, fr.points),
        fr.knee_fraction, cfg.frontier_samples, cfg.seed, fr.refine_rounds, fr.refine_points,
        ci_grid=flop_grid(fr.min_flop, fr.max_flop, cfg.frontier_ci_points))
    frames, metrics = [], {}
    for name, res in result.items():
        frames.append(frontier_frame(name, res.pop("frontier")))
        base = ideal.get(name, {})
        metrics[name] = dict(res, knee_flop=base.get("knee_flop"), wall_flop=base.get("wall_flop"))
    rows = pd.concat(frames, ignore_index=True).sort_values(["scenario", "training_flop"],
                                                            kind="mergesort")
    return rows.reset_index(drop=True), metrics


def _in_sample(cal_runs: pd.DataFrame) -> dict:
    fitted = cal_runs[cal_runs["measured_mfu"] > 0]
    per = {str(s): dict(n=int(len(g)), median_ape=float(g["ape"].median()),
                        coverage=float(g["covered"].mean()))
           for s, g in fitted.groupby("source")}
    return dict(n=int(len(fitted)), median_ape=float(fitted["ape"].median()),
                coverage=float(fitted["covered"].mean()),
                median_ape_source_mean=float(np.mean([v["median_ape"] for v in per.values()])),
                by_source=per)


def compute(inputs: Inputs, s: Settings) -> Result:
    """The calibrate stage (declared in pipeline/calibrate/contract.py)."""
    cfg = load_settings(s)
    catalog = inputs.catalog
    runs, bounds = inputs["runs.parquet"], inputs["bounds.parquet"]
    series, extrapolation = inputs["series.parquet"], inputs["extrapolation.parquet"]

    frame = design(runs, bounds, catalog.hardware["scaleup_domain_size"], s.theory.bounds)
    fit_set = fit_set_of(frame)
    best, fits, form_table = fit_forms(fit_set, cfg.forms, cfg.criterion, balance=cfg.balance,
                                       em_rounds=cfg.em_rounds)
    cal = fits[best]
    table = pd.DataFrame(cal.parameter_table(cfg.interval))
    table.insert(2, "form", best)
    cal_runs = calibrated_runs(frame, cal, cfg.interval)
    pred = predictions(runs, series, extrapolation, frame, fit_set, cal, cfg)
    tab = scores.predictor_table(pred)
    front_rows, front = frontier(s, catalog, cal, cfg, inputs.metrics["theory"])
    beyond = selected_targets(runs, series, frame, fit_set, cal, pred, s, catalog,
                              sorted(s.compare.extrapolate_n), cfg.interval)
    metrics = {
        "form": best, "forms": form_table.to_dict(orient="records"),
        "fit_runs": int(len(fit_set)), "fit_runs_by_source": fit_set["source"].value_counts()
        .sort_index().to_dict(), "stderr_kind": cal.stderr_kind, "sigma_u": cal.sigma_u,
        "parameters": {r["parameter"]: {k: r[k] for k in ("estimate", "ci_low", "ci_high")}
                       for r in table.to_dict(orient="records") if r["group"] == "efficiency"},
        "in_sample": _in_sample(cal_runs),
        "predictors": tab.to_dict(orient="records"),
        "against_naive": scores.against_naive(tab, pred=pred, seed=cfg.seed),
        "frontier": front,
        "selected_rule": cfg.selected.model_dump(),
        "interval_method": cfg.interval_method.model_dump(),
    }
    frames = {"calibration.parquet": table, "calibrated_forms.parquet": form_table,
              "calibrated.parquet": cal_runs, "predictions.parquet": pred,
              "calibrated_frontier.parquet": front_rows, "selected_targets.parquet": beyond}
    plots = {"calibrate_predictions.csv": pred.loc[pred["predictor"].isin(["selected",
                                                                           "naive_linear"]),
                                                   ["holdout", "predictor", "actual",
                                                    "predicted"]]}
    return Result(frames=frames, metrics=metrics, plots=plots)


def run(params: Mapping[str, Any], **paths: Path) -> dict[str, Any]:
    """Run the calibrate stage through the runner (``processed_dir``, ``catalog_dir``,
    ``out_dir``, ``metrics_path``, ``plots_dir``, ``metrics_dir`` for theory.json); returns its
    metrics."""
    return run_stage("calibrate", params, **paths)
