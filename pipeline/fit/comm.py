"""Communication-aware step-time law: ``t(N) = t_fixed + t_work/N + t_lat*log2(N) + t_lin*N``.

Throughput is work per step over step time, ``X(N) = W / t(N)``. Each term reads as seconds:
``t_work`` the compute of one step on one accelerator (divided over N under strong scaling),
``t_fixed`` overhead that does not shrink (optimizer step, data loading, launch), ``t_lat`` the
latency of one more level of a tree/ring-of-rings collective per doubling (the ``alpha log p``
term of the Hockney / Thakur-Rabenseifner-Gropp 2005 collective cost model), ``t_lin`` a cost
linear in N (flat rings, all-to-all, or the N-1 latency steps of a ring all-reduce; ibid.).
All terms are non-negative.

Under weak scaling the global batch grows with N, so the work per step is ``W = w1 * N`` while
each accelerator's compute stays fixed: ``t_work/N`` becomes a constant absorbed in
``t_fixed``, and ``X(N) = w1 * N / (t_fixed + t_lat*log2(N) + t_lin*N)``.

``W`` (``SeriesContext.work_per_step``) is the global batch in units of ``y`` (tokens per step
for tokens/s, FLOP per step for FLOP/s, 1 run for 1/time-to-train, when the terms are then
seconds of the whole run). Without it the terms are seconds per unit of ``y``-work.

Estimation: step time ``W / X`` is *linear* in the four terms, so the start is non-negative
least squares on ``[1, 1/N, log2 N, N]`` (``scipy.optimize.nnls``; statsmodels OLS has no
sign constraints), then nonlinear least squares on throughput (:mod:`pipeline.fit.nls`).
Terms at zero are reported as fixed at their bound.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import nnls

from pipeline.fit.base import Law, SeriesContext

_STRONG = ("t_fixed_s", "t_work_s", "t_lat_s", "t_lin_s")
_WEAK = ("t_fixed_s", "t_lat_s", "t_lin_s")


def _design(n: np.ndarray, weak: bool) -> np.ndarray:
    cols = [np.ones_like(n), np.log2(n), n] if weak else [np.ones_like(n), 1.0 / n, np.log2(n), n]
    return np.column_stack(cols)


class CommLaw(Law):
    name = "comm"
    param_names = _STRONG

    def names(self, ctx: SeriesContext) -> tuple[str, ...]:
        return _WEAK if ctx.scaling == "weak" else _STRONG

    def scales(self, y_ref: float, ctx: SeriesContext) -> np.ndarray:
        work = ctx.work_per_step if ctx.work_per_step else 1.0
        return np.full(len(self.names(ctx)), work / y_ref)

    def step_time(self, n: np.ndarray, theta: np.ndarray, ctx: SeriesContext) -> np.ndarray:
        return _design(np.asarray(n, dtype=float), ctx.scaling == "weak") @ np.asarray(theta)

    def model(self, n: np.ndarray, theta: np.ndarray, ctx: SeriesContext) -> np.ndarray:
        per_step = n if ctx.scaling == "weak" else 1.0
        # A zero step time only occurs at a degenerate all-zero start; keep the ratio finite.
        return per_step / np.maximum(self.step_time(n, theta, ctx), 1e-300)

    def jacobian(self, n: np.ndarray, theta: np.ndarray, ctx: SeriesContext) -> np.ndarray:
        n = np.asarray(n, dtype=float)
        design = _design(n, ctx.scaling == "weak")
        per_step = n if ctx.scaling == "weak" else np.ones_like(n)
        t = np.maximum(design @ np.asarray(theta), 1e-300)
        return -(per_step / t**2)[:, None] * design

    def initial(self, n: np.ndarray, y: np.ndarray, ctx: SeriesContext) -> np.ndarray:
        weak = ctx.scaling == "weak"
        t = (n if weak else 1.0) / y
        theta, _ = nnls(_design(n, weak), t)
        if not np.any(theta > 0):  # all-zero NNLS: fall back to a constant step time
            theta[0] = float(np.mean(t))
        return theta

    def derived(self, params: dict[str, float], ctx: SeriesContext) -> dict[str, float]:
        if ctx.scaling == "weak":
            # X rises towards w1 / t_lin (forever when t_lin = 0): no peak.
            return {"n_peak": np.inf}
        c1, c2, c3 = params["t_work_s"], params["t_lat_s"], params["t_lin_s"]
        a = c2 / np.log(2.0)
        # dt/dN = -c1/N^2 + a/N + c3 = 0  ->  c3 N^2 + a N - c1 = 0
        if c3 > 0:
            n_peak = (-a + np.sqrt(a * a + 4.0 * c3 * c1)) / (2.0 * c3)
        elif a > 0:
            n_peak = c1 / a
        else:
            n_peak = np.inf
        out = {"n_peak": float(n_peak)}
        if np.isfinite(n_peak) and n_peak > 0:
            theta = np.array([params[k] for k in _STRONG])
            work = ctx.work_per_step if ctx.work_per_step else 1.0
            out["x_max"] = float(work / self.step_time(np.array([n_peak]), theta, ctx)[0])
        return out


LAW = CommLaw()
