"""The ``calibrate`` stage: the step-time model of docs/theory.md §11, its few family parameters
estimated on the measured runs, scored out of sample, and the frontier at those values.

Reads ``runs``, ``series`` and ``extrapolation`` (the fit stage's held-out law predictions) from
``data/processed`` and the catalog (hardware, measured GEMM and collective efficiencies);
writes ``calibration.parquet`` (the parameters :func:`pipeline.calibrate.step.load_model` reads
back), ``calibrated.parquet`` (per run: in-sample prediction, interval, ceiling and the share of
each component), ``predictions.parquet``, ``calibrated_forms.parquet``,
``calibrated_frontier.parquet``, ``selected_targets.parquet``, ``reports/metrics/calibrate.json``
and ``reports/plots/calibrate_predictions.csv``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
from scipy.stats import norm
from threadpoolctl import threadpool_limits

from pipeline.calibrate.classes import class_scores
from pipeline.calibrate import holdout as ho
from pipeline.calibrate import intervals as iv
from pipeline.calibrate import scores
from pipeline.calibrate.critical_path import COMPONENTS, PARAMETERS
from pipeline.calibrate.estimate import (Data, Fitted, bare_model, calibration_table,
                                         fit_forms, load_data, step_model)
from pipeline.calibrate.families import PLAYBOOK_NOISE_FLOOR, SWEEP_FAMILIES
from pipeline.frameworks import PLAYBOOK
from pipeline.calibrate.frontier import calibrated_frontier, utilization_at
from pipeline.calibrate.ranking import ranking_summary, ranking_table
from pipeline.calibrate.step import StepModel, evaluate, frame_of, theta_of
from pipeline.calibrate.contract import CALIBRATED_SHARES
from pipeline.calibrate.targets import selected_targets
from pipeline.contracts import InsufficientData
from pipeline.config import CalibrateSettings, FitSettings, Settings, settings
from pipeline.runner import Inputs, Result, run_stage
from pipeline.theory.frontier import flop_grid, frontier_frame
from pipeline.theory.memory_fit import overhead_of
from pipeline.theory.scenarios import baseline_constants, load_scenarios

# calibrated.parquet's share_<component> (the report's vocabulary) <- step components
SHARE_OF = {"compute": "compute", "kernel_overhead": "latency", "tp_comm": "net_tp", "cp_comm": "net_tp", "ep_comm": "net_ep",
            "pp_p2p": "net_pp", "bubble": "bubble", "dp_comm": "net_dp", "optimizer": "hbm",
            "fixed": "overhead"}
# Llama 3 405B pretraining compute (arXiv:2407.21783 §3: 3.8e25 FLOP on up to 16,384 H100)
LLAMA3_FLOP = 3.8e25
PLAYBOOK_SOURCE = "ultrascale_playbook2025"
VTRAIN_SOURCE = "vtrain2024"   # its single-node layout sweep, ranked like the Playbook's


def in_sample(data: Data, fitted: Fitted, model: StepModel, level: float) -> pd.DataFrame:
    """calibrated.parquet: every run with a layout the catalog can cost: the in-sample MFU (its
    source's effect included), a 95% interval (the family's residual sd, the fast end clipped
    at the ideal step time), the ideal ceiling, each component's share of the measured step
    time (of the predicted one where none is measured) and the residual."""
    mask = data.has_layout
    rows = data.subset(mask)
    theta = theta_of(model, rows.family)
    u = fitted.source_effect(rows.source, rows.family)
    with np.errstate(invalid="ignore", divide="ignore"):
        parts = evaluate(rows, theta, u)
    parts["peak"] = rows.peak_flops_per_s
    sd = np.array([model.residual_sd.get(s, np.nan) for s in rows.source])
    sd = np.where(np.isfinite(sd), sd, np.where(rows.family == PLAYBOOK, PLAYBOOK_NOISE_FLOOR,
                                                fitted.production.sigma_pool))
    z = float(norm.ppf(0.5 + level / 2))
    pred = frame_of(parts, z * sd, rows.ok)
    measured = data.measured_mfu[mask]
    measured = np.where(measured > 0, measured, np.nan)
    t_meas = np.where(np.isfinite(measured), np.exp(data.log_t[mask]), pred["step_time_s"])
    out = pd.DataFrame({
        "run_id": data.runs["run_id"].astype(str).to_numpy()[mask],
        "source": rows.source, "series_id": data.runs["series_id"].to_numpy()[mask],
        "family": rows.family, "n_accelerators": rows.n_accelerators,
        "measured_mfu": measured, "predicted_mfu": pred["mfu"].to_numpy(),
        "pi_low": pred["mfu_low"].to_numpy(), "pi_high": pred["mfu_high"].to_numpy(),
        "ceiling_mfu": pred["ceiling_mfu"].to_numpy(), "binding": pred["binding"].to_numpy()})
    for share in CALIBRATED_SHARES[:-1]:
        comps = [c for c in COMPONENTS if SHARE_OF[c] == share]
        out[f"share_{share}"] = (sum(pred[f"{c}_s"].to_numpy() for c in comps) / t_meas
                                 if comps else 0.0)
    out["share_residual"] = 1.0 - out[[f"share_{s}" for s in CALIBRATED_SHARES[:-1]]].sum(axis=1)
    out["ape"] = np.abs(out["predicted_mfu"] / out["measured_mfu"] - 1.0)
    out["covered"] = (out["pi_low"] <= out["measured_mfu"]) & (out["measured_mfu"] <= out["pi_high"])
    for c in COMPONENTS:
        out[f"{c}_s"] = pred[f"{c}_s"].to_numpy()
    out = out[rows.ok]
    return out.sort_values("run_id", kind="mergesort").reset_index(drop=True)


def predictions(runs: pd.DataFrame, series: pd.DataFrame, extrapolation: pd.DataFrame,
                data: Data, fitted: Fitted, cfg: CalibrateSettings, fit: FitSettings,
                points: list | None = None) -> tuple[pd.DataFrame, dict[str, float]]:
    """predictions.parquet (both holdout schemes, every predictor, scored) and the
    leave-source-out conformal half-widths. The interval level and the largest-N cases are the
    fit stage's (``fit.interval``, ``fit.holdout_k``, ``fit.extrapolation_min_distinct_n``):
    calibrate scores the laws of extrapolation.parquet on the same cases. ``points``:
    :func:`pipeline.calibrate.holdout.series_table` of ``runs`` and ``series``, where at hand."""
    cases = ho.series_cases(runs, series, fit.holdout_k, fit.extrapolation_min_distinct_n,
                            points)
    source_rows, q = ho.source_predictions(data, fitted, cfg, fit.interval)
    parts = [ho.largest_k_predictions(cases, data, fitted, cfg), source_rows]
    pred = pd.concat([p for p in parts if len(p)], ignore_index=True)
    pred = ho.add_intervals(pred, cfg, fit.interval)
    pred = pd.concat([pred, ho.selected_rows(pred, cfg), ho.law_rows(extrapolation)],
                     ignore_index=True)
    pred = ho.score(pred)
    pred = pred.loc[:, list(ho.COLUMNS) + ["sd_log"]]
    return (pred.sort_values(["holdout", "predictor", "series_id", "run_id"],
                             kind="mergesort").reset_index(drop=True), q)


def playbook_half_width(data: Data, fitted: Fitted, level: float,
                        family: str = PLAYBOOK) -> float:
    """A sweep's interval half-width: the conformal quantile of its in-sample absolute log
    residuals (one source: no other source of its family to hold out)."""
    pb = data.fit & (data.rows.family == family)
    if not pb.any() or fitted.playbook is None:
        return float("nan")
    lt = ho.predicted_log_time(data, fitted, pb)
    return iv.conformal_quantile(np.abs(data.log_t[pb] - lt[pb]), level)


def frontier(params: Mapping[str, Any], catalog, model: StepModel, fitted: Fitted,
             cfg: CalibrateSettings, ideal: dict) -> tuple[pd.DataFrame, dict]:
    """The theory's scenarios searched with the calibrated step function at the production
    population values: frontier rows and, per scenario, knee and wall with CIs beside the
    ideal ones (theory.json), and the utilization at Llama 3's compute."""
    fr = settings(params, "theory").frontier
    # layouts sized by the theory stage's memory model and its fitted overhead
    overhead = overhead_of(ideal.get("_memory", {}))
    scenarios = [replace(scn, memory_overhead=overhead) for scn in load_scenarios(params, catalog)]
    g = fitted.production
    result = calibrated_frontier(
        scenarios, model, g.z_pop, g.cov_z["population"], g.free,
        flop_grid(fr.min_flop, fr.max_flop, fr.points), fr.knee_fraction,
        cfg.frontier_samples, cfg.seed, fr.refine_rounds, fr.refine_points,
        ci_grid=flop_grid(fr.min_flop, fr.max_flop, cfg.frontier_ci_points), workers=cfg.workers)
    frames, metrics = [], {}
    for name, res in result.items():
        frames.append(frontier_frame(name, res.pop("frontier")))
        base = ideal.get(name, {})
        metrics[name] = dict(res, knee_flop=base.get("knee_flop"), wall_flop=base.get("wall_flop"))
    baseline = next((s for s in scenarios if s.name == "baseline"), scenarios[0])
    u, layout = utilization_at(baseline, model, g.population, LLAMA3_FLOP)
    metrics[baseline.name]["llama3_compute"] = dict(
        training_flop=LLAMA3_FLOP, utilization=u, layout=layout)
    rows = pd.concat(frames, ignore_index=True).sort_values(["scenario", "training_flop"],
                                                            kind="mergesort")
    return rows.reset_index(drop=True), metrics


def _in_sample_metrics(cal_runs: pd.DataFrame) -> dict:
    fitted = cal_runs[cal_runs["measured_mfu"] > 0]
    per = {str(s): dict(n=int(len(g)), median_ape=float(g["ape"].median()),
                        coverage=float(g["covered"].mean()),
                        median_width=float((g["pi_high"] / g["pi_low"]).median()))
           for s, g in fitted.groupby("source")}
    return dict(n=int(len(fitted)), median_ape=float(fitted["ape"].median()),
                coverage=float(fitted["covered"].mean()),
                median_ape_source_mean=float(np.mean([v["median_ape"] for v in per.values()])),
                by_source=per)


def source_scores(pred: pd.DataFrame, sweep_ids: frozenset[str] = frozenset()) -> dict:
    """Leave-source-out: median APE, coverage and median width (high/low) per source, and over
    the production sources (every source but the layout sweeps: the Playbook, and the runs of
    ``sweep_ids``, which a source that has production runs too reports as ``<source>:sweep``)."""
    src = pred[(pred["holdout"] == "source") & (pred["predictor"] == "calibrated")]
    sweep = src["run_id"].astype(str).isin(sweep_ids).to_numpy()
    mixed = set(src.loc[sweep, "source"]) & set(src.loc[~sweep, "source"])
    label = np.where(sweep & src["source"].isin(mixed).to_numpy(),
                     src["source"].astype(str) + ":sweep", src["source"].astype(str))
    out: dict = {}
    for s, g in src.groupby(label):
        width = (g["pi_high"] / g["pi_low"]).median()
        out[str(s)] = dict(n=int(len(g)), median_ape=float(g["ape"].median()),
                           coverage=float(g["covered"].mean()), median_width=float(width))
    prod = src[(src["source"] != PLAYBOOK_SOURCE).to_numpy() & ~sweep]
    if len(prod):
        width = float((prod["pi_high"] / prod["pi_low"]).median())
        cov = float(prod["covered"].mean())
        out["production"] = dict(n=int(len(prod)), median_ape=float(prod["ape"].median()),
                                 coverage=cov, median_width=width)
    return out


def largest_scores(tab: pd.DataFrame, min_cases: int = 3) -> dict:
    """Per largest_k scheme: on every source with >= ``min_cases`` cases, selected's median APE
    beside the better naive rule's on the same cases (and their difference), and the macro
    mean over those sources beside the pooled figure (which the largest source dominates)."""
    out = {}
    for holdout, h in tab[tab["holdout"].str.startswith("largest_k")].groupby("holdout"):
        per, sel, nai = {}, [], []
        for source, g in h[h["source"] != "all"].groupby("source"):
            by = g.set_index("predictor")
            if not {"selected", *scores.NAIVE} <= set(by.index) or by.loc["selected", "n"] < min_cases:
                continue
            best = min(by.loc[n, "median_ape"] for n in scores.NAIVE)
            s = by.loc["selected", "median_ape"]
            per[str(source)] = dict(selected=float(s), best_naive=float(best),
                                    minus_best_naive=float(s - best),
                                    n=int(by.loc["selected", "n"]))
            sel.append(s)
            nai.append(best)
        pooled = h[h["source"] == "all"].set_index("predictor")
        macro_sel, macro_nai = float(np.mean(sel)) if sel else np.nan, \
            float(np.mean(nai)) if nai else np.nan
        out[holdout] = dict(by_source=per, macro_selected=macro_sel, macro_best_naive=macro_nai,
                            macro_ratio=float(macro_sel / macro_nai) if macro_nai else np.nan,
                            pooled_selected=float(pooled.loc["selected", "median_ape"])
                            if "selected" in pooled.index else None,
                            pooled_best_naive=float(min(pooled.loc[n, "median_ape"]
                                                        for n in scores.NAIVE))
                            if set(scores.NAIVE) <= set(pooled.index) else None,
                            pooled_n_by_source=h[(h["source"] != "all")
                                                 & (h["predictor"] == "selected")]
                            .set_index("source")["n"].astype(int).to_dict())
    return out


def mfu_above_one(cal_runs: pd.DataFrame, pred: pd.DataFrame) -> dict:
    """Counts of MFU predictions or interval ends above 1 or above the ideal ceiling."""
    c = cal_runs[["predicted_mfu", "pi_low", "pi_high"]].to_numpy(float)
    m = pred[pred["metric"] == "mfu"][["predicted", "pi_low", "pi_high"]].to_numpy(float)
    above_ceiling = int(np.sum(cal_runs["pi_high"].to_numpy(float)
                               > cal_runs["ceiling_mfu"].to_numpy(float) * (1 + 1e-9)))
    return dict(calibrated=int(np.sum(c > 1.0)), predictions=int(np.sum(m > 1.0)),
                calibrated_above_ceiling=above_ceiling)


def check_fittable(data: Data) -> None:
    """Raise InsufficientData, counting what the runs lack, when no production run can be
    fitted (the fit needs one: a user's step logs without a layout have none)."""
    if (data.fit & ~data.playbook).any():
        return
    runs = data.runs
    measured = np.isfinite(data.log_t)
    ok = runs["status"].to_numpy() == "ok"
    all_three = data.has_layout & measured & ok
    raise InsufficientData(
        f"calibrate: no run can be fitted: of the {len(runs):,} runs, "
        f"{int(data.has_layout.sum()):,} state a layout (tp or pp), {int(measured.sum()):,} "
        f"have a measured MFU or HFU on hardware the catalog knows, {int(ok.sum()):,} have "
        f"status ok, and {int((all_three & ~data.playbook).sum()):,} have all three outside "
        "the Playbook's sweep (fitted on its own). Step logs state a layout in their sidecars "
        "(tp, pp: data/raw/logs/README.md)")


def compute(inputs: Inputs, s: Settings) -> Result:
    """The calibrate stage (declared in pipeline/calibrate/contract.py)."""
    # one BLAS thread: the solves are small and dense; more threads only contend on a shared box
    with threadpool_limits(limits=1):
        return _compute(inputs, s)


def _compute(inputs: Inputs, s: Settings) -> Result:
    cfg, interval = s.calibrate, s.fit.interval
    catalog = inputs.catalog
    runs, series = inputs["runs.parquet"], inputs["series.parquet"]
    extrapolation = inputs["extrapolation.parquet"]
    _, _, _, latency = baseline_constants(s)
    attention = bool(s.ingest.attention_flops)
    base = bare_model(catalog, Path(catalog.directory), latency, attention,
                      s.theory.bounds.aspect_ratio)

    data = load_data(runs, base)
    check_fittable(data)
    fitted = fit_forms(data, {k: list(v) for k, v in cfg.forms.items()}, cfg.criterion,
                       em_rounds=cfg.em_rounds, balance=cfg.balance, workers=cfg.workers)
    points = ho.series_table(runs, series)   # the holdout cases' and the targets'
    pred, q = predictions(runs, series, extrapolation, data, fitted, cfg, s.fit, points)
    production_q = q.get("production", np.nan)
    half = {f: production_q for f in fitted.production.families}
    half.update(q)
    for sweep in SWEEP_FAMILIES:
        half[sweep] = playbook_half_width(data, fitted, interval, sweep)
    constants = {"kernel_latency_s": base.kernel_latency_s,
                 "scaleup_latency_s": base.scaleup_latency_s,
                 "attention_flops": float(attention), "aspect_ratio": base.aspect_ratio}
    model = step_model(fitted, base, half)
    table = calibration_table(fitted, model, interval, constants)
    cal_runs = in_sample(data, fitted, model, interval)
    tab = scores.predictor_table(pred)
    front_rows, front = frontier(s, catalog, model, fitted, cfg, inputs.metrics.get("theory", {}))
    beyond = selected_targets(runs, series, data, fitted, model, pred,
                              sorted(s.compare.extrapolate_n), interval, points)
    ranks = ranking_table(cal_runs, runs, PLAYBOOK_SOURCE)
    fit_set = data.runs.loc[data.fit, "source"]
    sweep_ids = frozenset(data.runs.loc[data.playbook, "run_id"].astype(str))
    g = fitted.production
    metrics = {
        "form": fitted.form, "forms": fitted.forms.to_dict(orient="records"),
        "fit_runs": int(data.fit.sum()),
        "fit_runs_by_source": fit_set.value_counts().sort_index().to_dict(),
        "stderr_kind": "model", "sigma_u": g.sigma_u,
        "parameters": {r["parameter"]: {k: r[k] for k in ("estimate", "ci_low", "ci_high")}
                       for r in table.to_dict(orient="records")
                       if r["group"] in ("efficiency", "efficiency_fixed")},
        "schedule_defaults": data.rows.defaults,
        "in_sample": _in_sample_metrics(cal_runs),
        "predictors": tab.to_dict(orient="records"),
        "against_naive": scores.against_naive(tab, pred=pred, seed=cfg.seed),
        "scores": dict(source_holdout=source_scores(pred, sweep_ids),
                       by_class=class_scores(pred, data.runs, PLAYBOOK_SOURCE, sweep_ids),
                       largest_k=largest_scores(tab),
                       mfu_above_one=mfu_above_one(cal_runs, pred),
                       ranking=ranking_summary(ranks),
                       ranking_vtrain=ranking_summary(
                           ranking_table(cal_runs, runs, VTRAIN_SOURCE))),
        "interval_half_width_log": half,
        "frontier": front,
        "selected_rule": cfg.selected.model_dump(),
        "interval_method": cfg.interval_method.model_dump(),
        "parameter_names": list(PARAMETERS),
    }
    frames = {"calibration.parquet": table, "calibrated_forms.parquet": fitted.forms,
              "calibrated.parquet": cal_runs, "predictions.parquet": pred,
              "calibrated_frontier.parquet": front_rows, "selected_targets.parquet": beyond}
    plots = {"calibrate_predictions.csv": pred.loc[pred["predictor"].isin(
        ["selected", "naive_linear"]), ["holdout", "predictor", "actual", "predicted"]]}
    return Result(frames=frames, metrics=metrics, plots=plots)


def run(params: Mapping[str, Any], **paths: Path) -> dict[str, Any]:
    """Run the calibrate stage through the runner (``processed_dir``, ``catalog_dir``,
    ``out_dir``, ``metrics_path``, ``plots_dir``, ``metrics_dir`` for theory.json); returns its
    metrics."""
    return run_stage("calibrate", params, **paths)
