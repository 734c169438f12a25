"""Amdahl's law: ``X(N) = lam * N / (1 + sigma * (N - 1))``.

Amdahl (1967), in Gunther's throughput form (Gunther, *Guerrilla Capacity Planning*, 2007,
ch. 4): ``lam`` is the throughput of one accelerator, ``sigma`` in [0, 1] the serial
(contention) fraction. Throughput rises monotonically to the ceiling ``x_max = lam / sigma``;
there is no retrograde region (``n_peak`` = inf). It is USL with ``kappa = 0``.

Estimation: the start is OLS (statsmodels' arithmetic, :mod:`pipeline.fit.ols`) on the linear form
``N / X = (1 - sigma) / lam + (sigma / lam) * N``; then nonlinear least squares with
``0 <= sigma <= 1`` (:mod:`pipeline.fit.nls`).
"""

from __future__ import annotations

import numpy as np
from pipeline.fit.base import Law, SeriesContext
from pipeline.fit.ols import ols_params


class AmdahlLaw(Law):
    name = "amdahl"
    param_names = ("sigma", "lam")

    def bounds(self, ctx: SeriesContext) -> tuple[np.ndarray, np.ndarray]:
        return np.array([0.0, 0.0]), np.array([1.0, np.inf])

    def scales(self, y_ref: float, ctx: SeriesContext) -> np.ndarray:
        return np.array([1.0, y_ref])

    def model(self, n: np.ndarray, theta: np.ndarray, ctx: SeriesContext) -> np.ndarray:
        sigma, lam = theta
        return lam * n / (1.0 + sigma * (n - 1.0))

    def jacobian(self, n: np.ndarray, theta: np.ndarray, ctx: SeriesContext) -> np.ndarray:
        sigma, lam = theta
        denom = 1.0 + sigma * (n - 1.0)
        return np.column_stack([-lam * n * (n - 1.0) / denom**2, n / denom])

    def initial(self, n: np.ndarray, y: np.ndarray, ctx: SeriesContext) -> np.ndarray:
        c0, c1 = ols_params(n / y, np.column_stack([np.ones(n.size), n]))
        lam = 1.0 / (c0 + c1) if c0 + c1 > 0 else float(np.max(y / n))
        return np.array([float(np.clip(c1 * lam, 0.0, 1.0)), lam])

    def derived(self, params: dict[str, float], ctx: SeriesContext) -> dict[str, float]:
        sigma, lam = params["sigma"], params["lam"]
        return {"n_peak": np.inf, "x_max": lam / sigma if sigma > 0 else np.inf}


LAW = AmdahlLaw()
