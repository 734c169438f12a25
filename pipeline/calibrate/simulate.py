"""Runs simulated from the calibrated model with known efficiencies (tests, notebook, bench).

Regressors are drawn in the ranges the shipped runs span (relative TP/DP time 0-2, bubble
0-0.5, t_compute 0.05-20 s); log(1/MFU) = u_s + log(sum theta_j x_j) + N(0, sigma^2).
SYNTHETIC: used to check that the estimator recovers what generated the data.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline.calibrate.features import TERMS

TRUE_THETA = {"compute": 1.6, "net_tp": 0.5, "net_dp": 0.3, "bubble": 1.0, "overhead": 0.4}


def simulate_runs(seed: int, n_runs: int = 240, n_sources: int = 4, sigma: float = 0.1,
                  sigma_u: float = 0.2, theta: dict[str, float] | None = None) -> pd.DataFrame:
    """A features.design-like frame (x_<term> columns, source, series_id, measured_mfu)."""
    theta = dict(TRUE_THETA if theta is None else theta)
    rng = np.random.default_rng(seed)
    t_c = np.exp(rng.uniform(np.log(0.05), np.log(20.0), n_runs))
    x = {f"x_{t}": np.zeros(n_runs) for t in TERMS}
    x["x_compute"] = np.ones(n_runs)
    x["x_net_tp"] = rng.uniform(0.0, 2.0, n_runs)
    x["x_net_dp"] = rng.uniform(0.0, 2.0, n_runs)
    x["x_bubble"] = np.where(rng.random(n_runs) < 0.6, rng.uniform(0.0, 0.5, n_runs), 0.0)
    x["x_overhead"] = 1.0 / t_c
    source_idx = np.arange(n_runs) % n_sources
    u = rng.normal(0.0, sigma_u, n_sources)
    f = sum(theta[t] * x[f"x_{t}"] for t in theta)
    log_y = u[source_idx] + np.log(f) + rng.normal(0.0, sigma, n_runs)
    frame = pd.DataFrame(x)
    frame.insert(0, "run_id", [f"sim{i:04d}" for i in range(n_runs)])
    frame.insert(1, "source", [f"src{s}" for s in source_idx])
    frame.insert(2, "series_id", [f"src{s}/series{i // (4 * n_sources)}" for i, s in
                                  enumerate(source_idx)])
    frame["measured_mfu"] = np.exp(-log_y)
    frame["t_compute_s"] = t_c
    return frame
