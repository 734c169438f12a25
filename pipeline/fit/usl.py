"""Gunther's Universal Scalability Law: ``X(N) = lam*N / (1 + sigma*(N-1) + kappa*N*(N-1))``.

Gunther, *Guerrilla Capacity Planning* (Springer 2007), ch. 4-5: ``sigma >= 0`` is contention
(the serial fraction, as in Amdahl), ``kappa >= 0`` coherency (the pairwise exchange cost that
makes throughput fall past a peak), ``lam`` the single-accelerator throughput. With
``kappa > 0`` throughput peaks at ``n_peak = sqrt((1 - sigma) / kappa)`` (ibid., eq. 5.9) at
``x_max = X(n_peak)``; ``peak_concurrency`` is ``floor(n_peak)``, the figure R's ``usl``
package (``peak.scalability``) and Gunther report.

Estimation: the start is OLS (statsmodels' arithmetic, :mod:`pipeline.fit.ols`) on the linear
form in which ``lam`` stays free,
``N / X = c0 + c1*N + c2*N**2`` with ``c0 = (1-sigma)/lam``, ``c1 = (sigma-kappa)/lam``,
``c2 = kappa/lam`` (Gunther's quadratic "deviation" form needs a measured X(1), which cluster
series rarely have); then nonlinear least squares with ``0 <= sigma <= 1``, ``kappa >= 0``
(as R ``usl``'s ``nls`` method, which gives the SPEC SDM91 golden values checked in
``tests/test_laws_fit.py``).
"""

from __future__ import annotations

import numpy as np
from pipeline.fit.base import Law, SeriesContext
from pipeline.fit.ols import ols_params


class USLLaw(Law):
    name = "usl"
    param_names = ("sigma", "kappa", "lam")

    def bounds(self, ctx: SeriesContext) -> tuple[np.ndarray, np.ndarray]:
        # sigma is a serial fraction, at most 1 (as Amdahl's, so USL with kappa = 0 is Amdahl)
        return np.zeros(3), np.array([1.0, np.inf, np.inf])

    def scales(self, y_ref: float, ctx: SeriesContext) -> np.ndarray:
        return np.array([1.0, 1.0, y_ref])

    def model(self, n: np.ndarray, theta: np.ndarray, ctx: SeriesContext) -> np.ndarray:
        sigma, kappa, lam = theta
        return lam * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))

    def jacobian(self, n: np.ndarray, theta: np.ndarray, ctx: SeriesContext) -> np.ndarray:
        sigma, kappa, lam = theta
        denom = 1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0)
        d_denom = -lam * n / denom**2
        return np.column_stack([d_denom * (n - 1.0), d_denom * n * (n - 1.0), n / denom])

    def initial(self, n: np.ndarray, y: np.ndarray, ctx: SeriesContext) -> np.ndarray:
        exog = np.column_stack([np.ones_like(n), n, n * n])
        c0, c1, c2 = ols_params(n / y, exog)
        denom = c0 + c1 + c2
        lam = 1.0 / denom if denom > 0 else float(np.max(y / n))
        return np.array([max(1.0 - c0 * lam, 0.0), max(c2 * lam, 0.0), lam])

    def derived(self, params: dict[str, float], ctx: SeriesContext) -> dict[str, float]:
        sigma, kappa = params["sigma"], params["kappa"]
        if kappa <= 0:  # Amdahl: rises (or, at sigma = 1, stays flat) towards lam / sigma
            return {"n_peak": np.inf, "x_max": params["lam"] / sigma if sigma > 0 else np.inf,
                    "peak_concurrency": np.nan}
        # sigma = 1 with kappa > 0 gives n_peak = 0: throughput falls from the first accelerator
        n_peak = float(np.sqrt(max(1.0 - sigma, 0.0) / kappa))
        x_max = float(self.model(np.array([max(n_peak, 1.0)]),
                                 np.array([sigma, kappa, params["lam"]]), ctx)[0])
        return {"n_peak": n_peak, "x_max": x_max, "peak_concurrency": float(np.floor(n_peak))}


LAW = USLLaw()
