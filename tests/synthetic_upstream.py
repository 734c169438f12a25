"""Synthetic upstream outputs for the compare/report/notebook tests.

``build(root)`` writes every file the compare and report stages read (``runs``, ``rejects``,
``series``, ``fits``, ``extrapolation``, ``bounds``, ``frontier``, the energy ``power``,
``energy_fits`` and ``energy_points`` parquet files and the ingest, fit and theory metrics), with the contract columns of ``pipeline/<stage>/contract.py``. The
numbers are shaped after published behaviour (ZeRO-3 collapsing under strong scaling, PTD-P
holding, weak scaling nearly flat) but are SYNTHETIC: they exist only to exercise the code, and
the series below follow exact laws so tests can assert recovered values.

Not a test module (no ``test_`` prefix); imported by ``tests/test_compare*.py`` and friends.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline.io import write_json, write_parquet
from pipeline.fit.energy import energy_laws
from pipeline.fit.contract import FitMetrics
from pipeline.ingest.contract import (POWER_COLUMNS, POWER_SCHEMA, RUNS_SCHEMA, RUN_COLUMNS,
                                      SERIES_SCHEMA, IngestMetrics, LogsWithoutSeries, pandas_dtype)
from pipeline.schema import check_metrics, check_output
from shared_run import once_per_session

PEAK = {"A100": 312e12, "H100": 989e12, "V100": 125e12, "TPU-v4": 275e12, "B200": 2250e12}
ACCEL_ID = {"A100": "A100-SXM4-80GB", "H100": "H100-SXM5-80GB", "V100": "V100-SXM2-32GB",
            "TPU-v4": "TPU-v4", "B200": "B200-SXM-180GB"}

# (series_id, source, model, params, family, strategy_family, scaling, n list, mfu(n) callable)
SERIES_SPECS = [
    ("syn/zero3-175b-a100-strong", "megatron2021", "GPT-175B", 175e9, "A100", "fsdp", "strong",
     [384, 768, 1536], lambda n: 0.46 * (n / 384.0) ** -0.85),
    ("syn/ptdp-175b-a100-strong", "megatron2021", "GPT-175B", 175e9, "A100", "tp_pp", "strong",
     [384, 768, 1536], lambda n: 0.49 * (n / 384.0) ** -0.06),
    ("syn/llama70b-h100-weak", "nvidia_dgxc2024", "Llama 3.1 70B", 70e9, "H100", "3d", "weak",
     [64, 128, 256, 512, 1024, 2048], lambda n: 0.541 * (n / 64.0) ** -0.004),
    ("syn/8b-h100-strong", "ultrascale_playbook2025", "Llama 8B", 8e9, "H100", "hybrid_fsdp",
     "strong", [8, 16, 32, 64, 128, 256, 512], lambda n: 0.452 * (n / 8.0) ** -0.21),
]



def _hbm_bytes_per_s() -> dict[str, float]:
    """HBM bandwidth of the chips above, from the shipped catalog (as the ingest reads it)."""
    from pipeline.catalog import load_catalog
    from pipeline.config import CATALOG_DIR
    hardware = load_catalog(CATALOG_DIR).hardware
    return {family: float(hardware.loc[acc, "hbm_bytes_per_s"]) for family, acc in ACCEL_ID.items()}


HBM = _hbm_bytes_per_s()
NOISE = (0.0, 0.01, -0.01, 0.005, -0.005, 0.0, 0.01)


def _run_id(*parts: object) -> str:
    return hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest()[:16]


def _run(source: str, model: str, params: float, family: str, n: int, mfu: float, *,
         strategy_family: str, scaling: str, series_id: str | None, status: str = "ok",
         **extra: object) -> dict:
    peak = PEAK[family]
    flops_per_token = 6.0 * params
    model_flops = mfu * peak * n if status == "ok" else np.nan
    row = {c: None for c, _, _ in RUN_COLUMNS}
    row.update(
        run_id=_run_id(source, model, family, n, strategy_family, status), source=source,
        source_kind="published", citation=f"synthetic {source} table", model=model,
        params=params, active_params=params, n_layers=80, d_model=8192, seq_len=4096,
        accelerator=ACCEL_ID[family], accelerator_family=family, n_accelerators=n,
        accelerators_per_node=4 if family.startswith("TPU") else 8, precision="bf16",
        peak_flops_per_s_per_accelerator=peak, flops_per_hbm_byte=peak / HBM[family],
        dp=max(n // 8, 1), tp=8, pp=1, cp=1, ep=1,
        zero_stage=3 if strategy_family == "fsdp" else 1, micro_batch=1,
        global_batch_tokens=4.0e6 if scaling != "weak" else 4096.0 * n, strategy=strategy_family,
        strategy_family=strategy_family, tokens_per_s=model_flops / flops_per_token,
        tokens_per_s_per_accelerator=model_flops / flops_per_token / n, model_flops_per_s=model_flops,
        mfu=mfu if status == "ok" else np.nan, hfu=np.nan, step_time_s=np.nan,
        time_to_train_s=np.nan, inverse_time_to_train_per_s=np.nan, power_w_per_accelerator=np.nan,
        energy_j_per_token=np.nan, scaling=scaling, series_id=series_id, status=status,
        derived="tokens_per_s;model_flops_per_s", notes="synthetic",
        provenance=f"tests/synthetic_upstream.py:{source}",
    )
    row.update(extra)
    return row


def make_runs() -> pd.DataFrame:
    rows = []
    for sid, source, model, params, family, strat, scaling, ns, law in SERIES_SPECS:
        for i, n in enumerate(ns):
            # A fixed +-1% wobble (not random: tests stay deterministic) so fits have residuals.
            mfu_of = (lambda n, law=law, i=i: law(n) * (1.0 + NOISE[i % len(NOISE)]))
            extra = {}
            if sid.startswith("syn/8b"):  # power measured on this series only
                power = 600.0 * (1.0 - 0.06 * np.log2(n / 8.0) / 6.0)
                tps = mfu_of(n) * PEAK[family] / (6.0 * params)
                extra = {"power_w_per_accelerator": power, "energy_j_per_token": power / tps}
            rows.append(_run(source, model, params, family, n, mfu_of(n), strategy_family=strat,
                             scaling=scaling, series_id=sid, **extra))
    rows += [
        _run("palm2022", "PaLM 540B", 540e9, "TPU-v4", 6144, 0.462, strategy_family="3d",
             scaling="single", series_id=None),
        _run("palm2022", "GPT-3", 175e9, "V100", 10000, 0.213, strategy_family="tp_pp",
             scaling="single", series_id=None),
        _run("synthetic_b200", "Llama 70B", 70e9, "B200", 512, 0.38, strategy_family="3d",
             scaling="single", series_id=None),
        _run("ultrascale_playbook2025", "Llama 80B", 80e9, "H100", 16, 0.0,
             strategy_family="hybrid_fsdp", scaling="sweep", series_id=None, status="oom"),
        _run("mlperf", "gpt3", 175e9, "H100", 512, 0.40, strategy_family="3d", scaling="single",
             series_id=None, source_kind="mlperf", time_to_train_s=3000.0,
             inverse_time_to_train_per_s=1 / 3000.0),
    ]
    df = pd.DataFrame(rows, columns=[c for c, _, _ in RUN_COLUMNS])
    return df.sort_values("run_id").reset_index(drop=True)


def make_series(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for sid, g in runs.dropna(subset=["series_id"]).groupby("series_id"):
        first = g.iloc[0]
        rows.append(dict(series_id=sid, source=first.source, model=first.model,
                         accelerator=first.accelerator, precision="bf16",
                         strategy_family=first.strategy_family, scaling=first.scaling,
                         n_points=len(g), n_distinct=g.n_accelerators.nunique(),
                         n_min=int(g.n_accelerators.min()), n_max=int(g.n_accelerators.max()),
                         y_metric="model_flops_per_s"))
    return pd.DataFrame(rows).sort_values("series_id").reset_index(drop=True)


def _power_fit(n: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    b, loga = np.polyfit(np.log(n), np.log(y), 1)
    return float(np.exp(loga)), float(b)


def make_fits(runs: pd.DataFrame, series: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    fits, extra = [], []
    for sid in series.series_id:
        g = runs[runs.series_id == sid].sort_values("n_accelerators")
        n, y = g.n_accelerators.to_numpy(float), g.model_flops_per_s.to_numpy(float)
        a, b = _power_fit(n, y)
        for law, shift in (("power", 0.0), ("amdahl", 1.5), ("usl", 3.0), ("comm", 4.0)):
            fits.append(dict(series_id=sid, source=g.source.iloc[0], scaling=g.scaling.iloc[0],
                             law=law, y_metric="model_flops_per_s", scale="log",
                             params=json.dumps({"a": a, "b": b}), stderr=json.dumps({"a": 0.0}),
                             ci_low=json.dumps({"b": b - 0.01}), ci_high=json.dumps({"b": b + 0.01}),
                             aicc=-20.0 + shift, bic=-19.0 + shift, r2=0.99, delta_aicc=shift,
                             n_points=len(g), n_distinct=len(g), n_min=int(n[0]),
                             n_max=int(n[-1]), converged=True, note="synthetic", n_peak=np.nan,
                             n_at_threshold=np.nan,
                             efficiency_at_n_max=float(y[-1] / n[-1] / (y[0] / n[0]))))
        if len(g) < 4:
            continue
        for law, bias in (("power", 1.00), ("amdahl", 0.93), ("usl", 0.90), ("comm", 1.05)):
            for k in (1, 2):
                a_k, b_k = _power_fit(n[:-k], y[:-k])
                for nt, yt in zip(n[-k:], y[-k:]):
                    pred = bias * a_k * nt ** b_k
                    lo, hi = pred * 0.9, pred * 1.1
                    extra.append(dict(series_id=sid, source=g.source.iloc[0], law=law, k=k,
                                      n_train_max=int(n[-k - 1]), n_target=int(nt),
                                      y_metric="model_flops_per_s", actual=yt, predicted=pred,
                                      pi_low=lo, pi_high=hi, ape=abs(pred - yt) / yt,
                                      covered=bool(lo <= yt <= hi)))
    f = pd.DataFrame(fits).sort_values(["series_id", "law"]).reset_index(drop=True)
    e = pd.DataFrame(extra).sort_values(["series_id", "law", "k", "n_target"]).reset_index(drop=True)
    return f, e


def make_bounds(runs: pd.DataFrame) -> pd.DataFrame:
    """Ceilings a little above each measurement; the FSDP series is network-bound."""
    rows = []
    for r in runs.itertuples():
        if r.status != "ok":
            continue
        t_compute = 1.0  # normalised: one second of pure arithmetic at peak
        bound = min(0.95, (r.mfu or 0.3) * 1.6)
        fsdp = r.strategy_family == "fsdp"
        t_step = t_compute / bound
        rows.append(dict(run_id=r.run_id, bound_mfu=bound, t_compute_s=t_compute,
                         t_hbm_s=0.5 * t_compute, t_net_tp_s=0.2, t_net_dp_s=t_step if fsdp else 0.3,
                         t_net_pp_s=0.05, t_net_ep_s=0.0, t_bubble_s=0.0 if fsdp else 0.1 * (t_step - 1),
                         t_latency_s=0.01, binding="net_dp" if fsdp else "compute",
                         assumed="micro_batch", t_step_s=t_step, measured_mfu=r.mfu,
                         exceeds_bound=False, memory_bytes_per_accelerator=40e9,
                         fits_memory=True))
    return pd.DataFrame(rows).sort_values("run_id").reset_index(drop=True)


def make_frontier() -> tuple[pd.DataFrame, dict]:
    rows, theory = [], {}
    for scen, knee, wall in (("dense_h100_baseline", 2e28, 2e31), ("aggressive_batch", 3e29, 4e32)):
        for c in np.logspace(24, 33, 37):
            feasible = c <= wall
            u = 0.8 if c <= knee else 0.8 * (knee / c) ** 0.35
            rows.append(dict(scenario=scen, training_flop=float(c),
                             utilization=float(u) if feasible else np.nan,
                             n_accelerators=int(c / (989e12 * 0.8 * 7.776e6)) + 1, dp=64, tp=8, pp=16,
                             ep=1, microbatches=64, global_batch_tokens=4.2e6,
                             binding="compute" if c <= knee else "latency", feasible=bool(feasible),
                             memory_bytes_per_accelerator=50e9, fits_memory=True))
        theory[scen] = {"knee_flop": knee, "wall_flop": wall, "plateau_utilization": 0.8,
                        "knee_utilization": 0.8, "wall_beyond_grid": False,
                        "accelerator": "H100-SXM5-80GB", "precision": "bf16"}
    theory["_bounds"] = {"runs": 0, "with_bound": 0, "without_bound": 0, "exceeding_bound": 0,
                         "median_fraction_of_bound": None, "binding_counts": {}}
    return pd.DataFrame(rows).sort_values(["scenario", "training_flop"]).reset_index(drop=True), theory


# SYNTHETIC MLPerf power measurements (power.parquet): one AC and one DC series of the same runs
# at N = 8, 64, 512, three runs each with the same scatter at every N, so the energy laws
# recover the exact slopes: energy per token x1.1 and power per accelerator x0.95 per doubling,
# time to train x2^-0.8; the interconnect is 10 % of the energy.
ENERGY_PER_DOUBLING, POWER_PER_DOUBLING, TTT_EXPONENT = 1.1, 0.95, -0.8


def make_power() -> pd.DataFrame:
    rows = []
    for meas in ("AC", "DC"):
        for n in (8, 64, 512):
            doublings = np.log2(n / 8)
            for i, scatter in enumerate((1.0, 1.01, 0.99)):
                e_tok = 0.5 * ENERGY_PER_DOUBLING ** doublings * scatter
                tokens = 1e8
                rows.append({
                    "run_id": _run_id("power", meas, n, i), "source": "mlperf_training",
                    "result_path": f"syn/result_{i}.txt", "model": "Llama 2 70B (LoRA)",
                    "benchmark": "llama2_70b_lora", "accelerator": "H100-SXM5-80GB",
                    "n_accelerators": n, "system": f"syn-{n}", "submitter":
                    f"syn-{meas.lower()}-power", "mlperf_version": "v4.0",
                    "power_measurement": meas, "status": "ok", "used_in_runs": meas == "AC",
                    "n_node_files": n // 8, "n_switch_files": 1,
                    "time_to_train_s": 1000.0 * 2.0 ** (TTT_EXPONENT * doublings),
                    "tokens": tokens, "energy_j": e_tok * tokens,
                    "energy_j_nodes": 0.9 * e_tok * tokens,
                    "energy_j_interconnect": 0.1 * e_tok * tokens,
                    "power_w_per_accelerator": 800.0 * POWER_PER_DOUBLING ** doublings * scatter,
                    "energy_j_per_token": e_tok, "power_folder": f"syn/power/result_{i}",
                    "notes": "SYNTHETIC"})
    return pd.DataFrame({n: pd.array([r[n] for r in rows], dtype=pandas_dtype(t))
                         for n, t in POWER_COLUMNS})


def make_theory_energy() -> dict:
    """theory.json["_energy"] for the synthetic frontier (SYNTHETIC draw at the knee only)."""
    none = dict.fromkeys(("training_flop", "n_accelerators", "power_mw", "energy_gwh"))
    knee = {"training_flop": 2e28, "n_accelerators": 3.2e6, "power_mw": 2560.0,
            "energy_gwh": 5530.0}
    return {"duration_days": 90.0, "scenarios": {"dense_h100_baseline": {
        "accelerator": "H100-SXM5-80GB", "power_w_per_accelerator": 800.0,
        "power_basis": "SYNTHETIC node power", "tdp_w": 700.0, "measured_w": 800.0,
        "duration_days": 90.0, "knee": knee, "wall": none, "knee_tdp": none,
        "wall_tdp": none}}}


def make_rejects() -> pd.DataFrame:
    return pd.DataFrame([
        dict(source="megatron2021", path="data/raw/published/megatron2021.csv", line=7,
             record="{...}", reason="unit_slip: mfu 43 is not a fraction"),
        dict(source="mlperf", path="data/raw/mlperf/x/result_0.txt", line=0, record="",
             reason="truncated_log: no run_stop"),
        dict(source="mlperf", path="data/raw/mlperf/x/result_1.txt", line=0, record="",
             reason="truncated_log: no run_stop"),
        dict(source="palm2022", path="data/raw/published/palm2022.csv", line=3, record="{...}",
             reason="unknown_accelerator: 'TPU v9'"),
    ])


def make_fit_metrics(extra: pd.DataFrame, series: pd.DataFrame) -> FitMetrics:
    """fit.json as the fit stage writes it (the keys of ``FitMetrics``), with a hardware
    regression so that the report's regression paragraph is exercised."""
    by_law: dict[str, Any] = {}
    for law, g in extra.groupby("law"):
        by_law[law] = {f"k{k}": {"median_ape": float(h.ape.median()),
                                 "p90_ape": float(h.ape.quantile(0.9)),
                                 "coverage": float(h.covered.mean()), "n_predicted": int(len(h)),
                                 "n_failed": 0}
                       for k, h in g.groupby("k")}
    scores = {law: float(g.ape.median()) for law, g in extra.groupby("law")}
    hbm = {"mfu_points_per_doubling_of_ratio": -5.0, "ci_low": -8.0, "ci_high": -2.0,
           "n_obs": 30, "n_accelerator_types": 3, "n_clusters": 3,
           "formula": "mfu_points ~ log2_flops_per_hbm_byte + log2_n + C(scaling) + log10_params"}
    return FitMetrics(scale="log", interval=0.95, holdout_k=[1, 2], default_law="power",
                      default_law_reason="synthetic: lowest median APE",
                      default_law_scores=scores,
                      all_laws_common={"mean_median_ape": scores,
                                       "n_cases": int(extra.groupby(["series_id", "k",
                                                                     "n_target"]).ngroups)},
                      extrapolation=by_law, cross_series={"hardware": {"hbm": hbm}},
                      n_series=int(len(series)), n_series_fitted=int(len(series)),
                      n_series_extrapolated=int(extra.series_id.nunique()))


def downstream_params() -> dict:
    """params.yaml on ``coarse_settings.coarse``'s grids: the calibrated frontier's grid and
    draws are most of calibrate's time here (25 CPU-s on the shipped settings, 2.6 on these),
    and the frontier the report draws is the synthetic one above."""
    from coarse_settings import coarse
    from pipeline.config import load_params
    return coarse(load_params())


def run_downstream(root: Path, params: dict | None = None) -> dict[str, Path]:
    """Build the synthetic upstream under ``root`` and run calibrate, compare and report on it
    (with ``downstream_params`` unless given others)."""
    from pipeline.compare.stage import run as compare_run
    from pipeline.report.stage import run as report_run

    params = params or downstream_params()
    paths = build(root / "processed", root / "metrics", params)
    from pipeline.calibrate.stage import run as calibrate_run
    calibrate_run(params, processed_dir=paths["processed"],
                  catalog_dir=Path(__file__).resolve().parents[1] / "data" / "catalog",
                  out_dir=paths["processed"], metrics_path=paths["metrics"] / "calibrate.json",
                  plots_dir=root / "plots")
    compare_run(params, processed_dir=paths["processed"], metrics_dir=paths["metrics"],
                out_dir=paths["processed"], metrics_path=paths["metrics"] / "compare.json",
                plots_dir=root / "plots")
    report_run(params, processed_dir=paths["processed"], metrics_dir=paths["metrics"],
               out_dir=root / "reports")
    return {**paths, "reports": root / "reports", "plots": root / "plots"}


def shared_downstream(tmp_path_factory: Any) -> dict[str, Path]:
    """One ``run_downstream`` per test session, across xdist workers too (``shared_run``),
    shared by the report, notebook and browser tests (read-only: a test that changes files
    copies them first)."""
    return once_per_session(tmp_path_factory, "downstream", run_downstream)


def make_curves(runs: pd.DataFrame, series: pd.DataFrame, params: dict
                ) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """The laws' curves and the ceilings on the extrapolation grid, computed as the fit and
    theory stages compute them (real fits of each law, the real cost model and catalog), and
    each law's figures as fits.parquet has them ({(series_id, law): {column: value}}: the N at
    the threshold efficiency, the predictions at multiples of the largest N)."""
    from pipeline.catalog import load_catalog
    from pipeline.config import CATALOG_DIR
    from pipeline.fit.laws import LawFitError, get_law
    from pipeline.fit.derived import n_at_threshold, predictions_at_multiples
    from pipeline.fit.nls import fit_law
    from pipeline.fit.series import series_points
    from pipeline.fit.stage import _curve, curves_frame
    from pipeline.measures import extrapolation_grid
    from pipeline.theory.curves import series_ceilings

    targets, points = sorted(params["compare"]["extrapolate_n"]), params["compare"]["curve_points"]
    frames, roots = [], {}
    for _, srow in series.iterrows():
        pts = series_points(runs[runs.series_id == srow.series_id], srow)
        grid = extrapolation_grid(float(pts.n.min()), targets, points)
        for law in ("power", "amdahl", "usl", "comm"):
            try:
                res = fit_law(get_law(law), pts.n, pts.y, scale="log", ctx=pts.ctx)
            except LawFitError:
                continue
            curve = _curve(srow.series_id, law, "log", res, grid, params["fit"]["interval"])
            if curve is not None:
                frames.append(curve)
            roots[(srow.series_id, law)] = {
                "n_at_threshold": n_at_threshold(
                    res, float(pts.n.min()), params["compare"]["efficiency_threshold"]),
                **predictions_at_multiples(res, float(pts.n.min()), float(pts.n.max()),
                                           params["fit"]["interval"])}
    fit_curves = curves_frame(frames)
    ceilings = series_ceilings(runs, series, load_catalog(CATALOG_DIR), params, targets, points)
    return fit_curves, ceilings, roots


def build(processed: Path, metrics: Path, params: dict | None = None) -> dict[str, Path]:
    """Write all upstream files under ``processed`` and ``metrics``; return their paths."""
    from pipeline.config import load_params

    params = params or load_params()
    processed, metrics = Path(processed), Path(metrics)
    runs = make_runs()
    series = make_series(runs)
    fits, extra = make_fits(runs, series)
    frontier, theory = make_frontier()
    # Every file is checked against the contract the real stages write (pipeline/<stage>/contract.py),
    # so these fixtures cannot drift from the stages' outputs.
    write_parquet(check_output("runs.parquet", runs), processed / "runs.parquet",
                  schema=RUNS_SCHEMA)
    write_parquet(check_output("series.parquet", series), processed / "series.parquet",
                  schema=SERIES_SCHEMA)
    fit_curves, theory_curves, roots = make_curves(runs, series, params)
    figures = pd.DataFrame([roots.get(key, {}) for key in zip(fits.series_id, fits.law)],
                           index=fits.index)
    fits[figures.columns] = figures.astype(float)
    for name, frame in (("rejects", make_rejects()), ("fits", fits), ("extrapolation", extra),
                        ("bounds", make_bounds(runs)), ("frontier", frontier),
                        ("fit_curves", fit_curves), ("theory_curves", theory_curves)):
        write_parquet(check_output(f"{name}.parquet", frame), processed / f"{name}.parquet")
    power = make_power()
    write_parquet(check_output("power.parquet", power), processed / "power.parquet",
                  schema=POWER_SCHEMA)
    energy_fits, energy_points, energy = energy_laws(power, params["fit"]["interval"])
    write_parquet(check_output("energy_fits.parquet", energy_fits),
                  processed / "energy_fits.parquet")
    write_parquet(check_output("energy_points.parquet", energy_points),
                  processed / "energy_points.parquet")
    fit = make_fit_metrics(extra, series).model_dump() | {"energy": energy}
    write_json(check_metrics("fit", fit), metrics / "fit.json")
    theory = theory | {"_energy": make_theory_energy()}
    write_json(check_metrics("theory", theory), metrics / "theory.json")
    ingest = IngestMetrics(totals={"runs": int(len(runs)), "rejects": 4}, sources={},
                           rejects_by_code={"unit_slip": 1, "truncated_log": 2,
                                            "unknown_accelerator": 1},
                           runs_by_source_kind={"published": int(len(runs))},
                           runs_by_accelerator_family={}, n_series=int(len(series)),
                           runs_in_series=int(series.n_points.sum()),
                           logs_without_series=LogsWithoutSeries(count=0, by_reason={}, logs=[]))
    write_json(check_metrics("ingest", ingest.model_dump()), metrics / "ingest.json")
    return {"processed": processed, "metrics": metrics}


def conform(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """``frame`` with every contract column of ``name`` (missing ones all null, as a stage
    without the figure writes them), so that a hand-made test input passes the runner's input
    check."""
    from pipeline.schema import OUTPUT_COLUMNS
    cols = [n for n, _, _, _ in OUTPUT_COLUMNS[name]]
    out = frame.reindex(columns=cols + [c for c in frame.columns if c not in cols])
    for col, arrow, _, _ in OUTPUT_COLUMNS[name]:
        if out[col].notna().any() and str(arrow) in ("int64", "double"):
            out[col] = out[col].astype(pandas_dtype(arrow))
    return out
