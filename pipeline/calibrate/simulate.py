"""Runs simulated from the calibrated step function with known family parameters (tests,
notebook, benchmark).

SYNTHETIC: layouts are drawn in the ranges the shipped production runs span (H100 and A100,
8-4096 accelerators, TP 1-8, PP 1-16, ZeRO 0-3, recompute none/full, v 1-4), a step time is
computed with :func:`pipeline.calibrate.critical_path.step_components` at ``TRUE_THETA`` and
multiplied by a source effect and log-normal noise. Used to check that the estimator recovers
what generated the data, and to time the fit as the data grows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

TRUE_THETA = {"compute_efficiency": 0.8, "tp_overlap": 0.6, "dp_overlap": 0.7, "fixed_s": 0.1,
              "layer_overhead_s": 5e-4, "attention_efficiency": 1.0, "expert_overhead_s": 0.0}
_SHAPES = ((8e9, 32, 4096), (70e9, 80, 8192), (175e9, 96, 12288), (405e9, 126, 16384))


def simulate_layouts(seed: int, n_runs: int = 240, n_sources: int = 4) -> pd.DataFrame:
    """runs.parquet-style rows (no measure yet), ``n_sources`` sources of the megatron family."""
    rng = np.random.default_rng(seed)
    shape = rng.integers(0, len(_SHAPES), n_runs)
    params = np.array([_SHAPES[i][0] for i in shape])
    layers = np.array([_SHAPES[i][1] for i in shape])
    d = np.array([_SHAPES[i][2] for i in shape])
    tp = 2.0 ** rng.integers(0, 4, n_runs)
    pp = np.where(shape >= 1, 2.0 ** rng.integers(0, 5, n_runs), 1.0)
    dp = 2.0 ** rng.integers(0, 8, n_runs)
    micro = 2.0 ** rng.integers(0, 3, n_runs)
    m = np.maximum(pp * 2.0 ** rng.integers(0, 3, n_runs), 1.0)
    seq = np.full(n_runs, 4096.0)
    acc = np.where(rng.random(n_runs) < 0.5, "H100-SXM5-80GB", "A100-SXM4-80GB")
    source = np.array([f"sim{i % n_sources}" for i in range(n_runs)])
    return pd.DataFrame({
        "run_id": [f"sim{i:05d}" for i in range(n_runs)], "source": source,
        "series_id": [f"{s}/s{i // 8}" for i, s in enumerate(source)], "strategy": "megatron",
        "params": params, "active_params": params, "n_layers": layers, "d_model": d,
        "seq_len": seq, "accelerator": acc, "n_accelerators": dp * tp * pp,
        "accelerators_per_node": 8.0, "precision": "bf16", "dp": dp, "tp": tp, "pp": pp,
        "cp": 1.0, "ep": 1.0, "zero_stage": rng.choice([0.0, 1.0, 3.0], n_runs),
        "micro_batch": micro, "global_batch_tokens": dp * micro * seq * m,
        "recompute": rng.choice(["none", "full"], n_runs),
        "virtual_pipeline": np.where(pp > 1, rng.choice([1.0, 2.0, 4.0], n_runs), 1.0),
        "sequence_parallel": tp > 1, "status": "ok", "mfu": np.nan, "hfu": np.nan,
    })


def simulate_runs(seed: int, model, n_runs: int = 240, n_sources: int = 4, sigma: float = 0.05,
                  sigma_u: float = 0.1, theta: dict[str, float] | None = None) -> pd.DataFrame:
    """Simulated layouts with a measured MFU drawn from the step function at ``theta``."""
    from pipeline.calibrate.critical_path import PARAMETERS, Theta, step_components
    from pipeline.calibrate.step import rows_of

    theta = dict(TRUE_THETA if theta is None else theta)
    rng = np.random.default_rng(seed + 1)
    runs = simulate_layouts(seed, n_runs, n_sources)
    rows = rows_of(runs, model)
    th = Theta(*(np.full(n_runs, theta[p]) for p in PARAMETERS))
    parts = step_components(rows.config, rows.machine, th)
    u = rng.normal(0.0, sigma_u, n_sources)
    src = np.array([int(s[3:]) for s in runs["source"]])
    t = parts["step_time_s"] * np.exp(u[src] + rng.normal(0.0, sigma, n_runs))
    runs["mfu"] = parts["model_flop_per_rank"] / (rows.peak_flops_per_s * t)
    return runs
