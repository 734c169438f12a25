"""Power law: ``X(N) = a * N**b``.

The simplest description of diminishing returns: ``b = 1`` is perfect linear scaling, ``b < 1``
means each doubling of N multiplies throughput by ``2**b``. Fernandez et al. 2024 (arXiv
2411.13055) summarise their strong-scaling curves this way; it has no peak (``n_peak`` = inf).

Estimation: OLS on logs, ``log X = log a + b log N`` (statsmodels' ``OLS`` arithmetic,
:mod:`pipeline.fit.ols`), which *is* the
maximum-likelihood fit on the log response scale; on the linear response scale the same OLS
fit is the start for nonlinear least squares (see :mod:`pipeline.fit.nls`).
"""

from __future__ import annotations

import numpy as np
from pipeline.fit.base import Law, SeriesContext
from pipeline.fit.ols import ols_params


class PowerLaw(Law):
    name = "power"
    param_names = ("a", "b")

    def bounds(self, ctx: SeriesContext) -> tuple[np.ndarray, np.ndarray]:
        return np.array([0.0, -np.inf]), np.array([np.inf, np.inf])

    def scales(self, y_ref: float, ctx: SeriesContext) -> np.ndarray:
        return np.array([y_ref, 1.0])

    def model(self, n: np.ndarray, theta: np.ndarray, ctx: SeriesContext) -> np.ndarray:
        a, b = theta
        return a * np.power(n, b)

    def jacobian(self, n: np.ndarray, theta: np.ndarray, ctx: SeriesContext) -> np.ndarray:
        a, b = theta
        n_b = np.power(n, b)
        return np.column_stack([n_b, a * n_b * np.log(n)])

    def initial(self, n: np.ndarray, y: np.ndarray, ctx: SeriesContext) -> np.ndarray:
        log_n = np.log(n)
        log_a, b = ols_params(np.log(y), np.column_stack([np.ones(log_n.size), log_n]))
        return np.array([np.exp(log_a), b])

    def derived(self, params: dict[str, float], ctx: SeriesContext) -> dict[str, float]:
        # The gain of one doubling, 2**b - 1, is the law's whole story; rising throughput
        # (b > 0) never peaks, falling throughput (b <= 0) has no interior peak either.
        return {"n_peak": np.inf if params["b"] > 0 else np.nan,
                "doubling_gain": float(2.0 ** params["b"] - 1.0)}


LAW = PowerLaw()
