"""The fit-result object: estimates, Wald inference and intervals for one law on one series.

Inference is the Gauss-Newton linearisation of the nonlinear model at its optimum (Bates &
Watts, *Nonlinear Regression Analysis*, 1988, ch. 2): ordinary least squares (statsmodels'
``OLS`` arithmetic, :mod:`pipeline.fit.ols`) of the working
response ``z = r + J theta_hat`` on the Jacobian ``J`` (free parameters only) gives the
covariance ``s^2 (J'J)^-1`` with ``s^2 = SSR / (n - p)``, Student-t parameter intervals, the
standard error of the fitted mean at new N and, adding ``s^2``, of a new
observation. Intervals are built on the fitting scale (linear or log) and mapped back to
original units, so a log-scale interval is asymmetric in throughput. Parameters that end on a
bound are held fixed (their stderr and interval are NaN; ``note`` says so).

``llf``, ``aicc`` and ``bic`` are Gaussian likelihoods of the *original* response ``y`` (a
log-scale fit adds the Jacobian term ``-sum(log y)``), so they compare across laws and scales;
``k`` counts the free parameters plus the residual variance.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd
from scipy import stats

from pipeline.fit.base import Law, SeriesContext
from pipeline.fit.ols import LinearFit


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """Student-t quantile ``stats.t.ppf(p, df)``, worked out once per (p, df): every series'
    laws and holdouts ask for the same few."""
    return stats.t.ppf(p, df)


@dataclass
class FitResult:
    """One law fitted to one series. Build with :func:`pipeline.fit.laws.fit`.

    Attributes
    ----------
    law, scale:
        Law name and response scale (``linear``: least squares on ``X``; ``log``: on ``log X``).
    params, stderr:
        Estimates and standard errors in original units (name -> value).
    converged:
        True when the optimiser converged, the free parameters are identifiable and there are
        residual degrees of freedom for inference; otherwise ``note`` says why.
    residuals:
        Residuals on the fitting scale (``y - f`` or ``log y - log f``), in the input's order.
    """

    law: str
    scale: str
    n: np.ndarray
    y: np.ndarray
    params: dict[str, float]
    stderr: dict[str, float]
    converged: bool
    note: str
    residuals: np.ndarray
    llf: float
    aicc: float
    bic: float
    r2: float
    df_resid: int
    n_free: int
    ctx: SeriesContext
    _law: Law = field(repr=False)
    _theta_n: np.ndarray = field(repr=False)
    _free: np.ndarray = field(repr=False)
    _col_scale: np.ndarray = field(repr=False)
    _y_ref: float = field(repr=False)
    _ols: LinearFit | None = field(repr=False, default=None)

    # -- evaluation --------------------------------------------------------------------------
    @property
    def n_points(self) -> int:
        return int(self.n.size)

    def _to_fit_scale(self, x: np.ndarray) -> np.ndarray:
        return np.log(np.maximum(x, 1e-300)) if self.scale == "log" else x

    def _from_fit_scale(self, x: np.ndarray) -> np.ndarray:
        return np.exp(x) if self.scale == "log" else x

    def _jacobian(self, n: np.ndarray) -> np.ndarray:
        """d f / d theta_free on the fitting scale (analytic), column-scaled."""
        jac = self._law.jacobian(n, self._theta_n, self.ctx)[:, self._free]
        if self.scale == "log":
            jac = jac / np.maximum(self._law.model(n, self._theta_n, self.ctx), 1e-300)[:, None]
        return jac / self._col_scale

    def fitted(self, n: np.ndarray | None = None) -> np.ndarray:
        """Fitted throughput (original units) at ``n`` (default: the data's N)."""
        n = self.n if n is None else np.asarray(n, dtype=float)
        return self._y_ref * self._law.model(n, self._theta_n, self.ctx)

    def conf_int(self, alpha: float = 0.05) -> pd.DataFrame:
        """Wald (Student-t, ``df_resid``) intervals: DataFrame indexed by parameter, low/high."""
        low, high = self.conf_limits(alpha)
        rows = {k: (low[k], high[k]) for k in self.params}
        return pd.DataFrame.from_dict(rows, orient="index", columns=["low", "high"])

    def conf_limits(self, alpha: float = 0.05) -> tuple[dict[str, float], dict[str, float]]:
        """:meth:`conf_int` as two dicts, parameter -> low and parameter -> high."""
        q = t_quantile(1.0 - alpha / 2.0, self.df_resid) if self.df_resid > 0 else np.nan
        low = {k: v - q * self.stderr[k] for k, v in self.params.items()}
        high = {k: v + q * self.stderr[k] for k, v in self.params.items()}
        return low, high

    def predict(self, n: Any, interval: float = 0.95) -> pd.DataFrame:
        """Predicted throughput at ``n`` with confidence (mean) and prediction (new run) intervals.

        Columns: ``n, predicted, ci_low, ci_high, pi_low, pi_high`` in original units. The
        prediction interval is for one new measurement at that N.
        """
        return pd.DataFrame(self.prediction_arrays(n, interval))

    def prediction_arrays(self, n: Any, interval: float = 0.95) -> dict[str, np.ndarray]:
        """:meth:`predict`'s columns as arrays (column name -> array), without a frame."""
        n = np.atleast_1d(np.asarray(n, dtype=float))
        f = self._to_fit_scale(self._law.model(n, self._theta_n, self.ctx))
        cols: dict[str, np.ndarray] = {"n": n, "predicted": self._y_ref * self._from_fit_scale(f)}
        if self._ols is None or self.df_resid < 1:
            nan = np.full(n.size, np.nan)
            cols.update(ci_low=nan, ci_high=nan, pi_low=nan, pi_high=nan)
            return cols
        jac = self._jacobian(n)
        # rounding can leave a tiny negative variance on an ill-conditioned design
        var_mean = self._ols.var_pred_mean(jac)
        se_mean = np.sqrt(np.clip(var_mean, 0.0, None))
        se_obs = np.sqrt(se_mean**2 + self._ols.scale)
        q = t_quantile(0.5 + interval / 2.0, self.df_resid)
        for name, se in (("ci", se_mean), ("pi", se_obs)):
            lo, hi = f - q * se, f + q * se
            if self.scale == "linear":  # throughput cannot be negative
                lo = np.maximum(lo, 0.0)
            cols[f"{name}_low"] = self._y_ref * self._from_fit_scale(lo)
            cols[f"{name}_high"] = self._y_ref * self._from_fit_scale(hi)
        return cols

    def delta_stderr(self, g: Callable[[dict[str, float]], float]) -> float:
        """Delta-method standard error of a derived figure ``g(params)`` (e.g. ``n_peak``)."""
        if self._ols is None or self.df_resid < 1 or not self._free.any():
            return np.nan
        names = list(self.params)
        d = self._law.scales(self._y_ref, self.ctx)
        base = float(g(self.params))
        grad = []
        for j in np.flatnonzero(self._free):
            h = 1e-6 * max(abs(self._theta_n[j]), 1e-8)
            p = dict(self.params)
            p[names[j]] = (self._theta_n[j] + h) * d[j]
            grad.append((float(g(p)) - base) / h)
        grad_s = np.asarray(grad) / self._col_scale  # per column-scaled parameter
        cov = np.asarray(self._ols.cov_params())
        var = float(grad_s @ cov @ grad_s)
        return float(np.sqrt(var)) if np.isfinite(var) and var >= 0 else np.nan

    def derived(self) -> dict[str, float]:
        """The law's own figures (``n_peak``, ``x_max``...) with delta-method ``*_stderr``."""
        values = self._law.derived(self.params, self.ctx)
        out = dict(values)
        for key, value in values.items():
            # a peak at 0 sits on the sigma = 1 bound: no gradient, so no stderr (not 0)
            if key in ("n_peak", "x_max") and np.isfinite(value) and value > 0:
                out[f"{key}_stderr"] = self.delta_stderr(
                    lambda p, key=key: self._law.derived(p, self.ctx).get(key, np.nan))
        return out

    def summary(self) -> str:
        """A short plain-text report (in the spirit of lmfit's ``fit_report``)."""
        lines = [f"law {self.law} ({self.scale} scale), {self.n_points} points, "
                 f"converged={self.converged}" + (f": {self.note}" if self.note else "")]
        ci = self.conf_int()
        for k, v in self.params.items():
            lines.append(f"  {k:>10} = {v:.6g} +/- {self.stderr[k]:.3g} "
                         f"[{ci.loc[k, 'low']:.6g}, {ci.loc[k, 'high']:.6g}]")
        lines.append(f"  AICc {self.aicc:.4g}  BIC {self.bic:.4g}  R2 {self.r2:.4f}")
        return "\n".join(lines)


PREDICTION_COLUMNS = ("predicted", "pi_low", "pi_high")


def predict_frame(result: FitResult, n, interval: float) -> pd.DataFrame:
    """A fit's predictions at ``n``: columns predicted, pi_low, pi_high (the ``interval``
    prediction interval for one new measurement at that N), one row per N."""
    return pd.DataFrame(prediction_columns(result, n, interval))


def prediction_columns(result: FitResult, n, interval: float) -> dict[str, np.ndarray]:
    """:func:`predict_frame`'s columns as arrays (the fit stage builds one frame of all)."""
    cols = result.prediction_arrays(np.asarray(n, float), interval)
    return {k: cols[k] for k in PREDICTION_COLUMNS}
