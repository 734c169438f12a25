"""Fitting engine: bounded nonlinear least squares, then statsmodels inference.

Estimation: ``scipy.optimize.least_squares`` (trust-region reflective, box bounds such as
``sigma, kappa >= 0``), started from each law's linearised OLS fit, on the normalised response.
``scale="linear"`` minimises ``sum (y - f)^2`` (what R's ``usl`` ``nls`` method does, and the
SPEC SDM91 golden test checks); ``scale="log"`` minimises ``sum (log y - log f)^2``, the
maximum-likelihood fit under multiplicative errors (throughput noise grows with throughput).
Inference: see :mod:`pipeline.fit.result` (Gauss-Newton linearisation, statsmodels' OLS
arithmetic in :mod:`pipeline.fit.ols`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import least_squares

from pipeline.fit.base import Law, LawFitError, SeriesContext, clip_inside
from pipeline.fit.ols import ols
from pipeline.fit.result import FitResult, t_quantile

SCALES = ("linear", "log")


def check_series(n: object, y: object) -> tuple[np.ndarray, np.ndarray]:
    """Validate and convert a series; raise :class:`LawFitError` saying what is wrong."""
    n_arr = np.asarray(n, dtype=float).ravel()
    y_arr = np.asarray(y, dtype=float).ravel()
    if n_arr.size != y_arr.size:
        raise LawFitError(f"n and y differ in length ({n_arr.size} vs {y_arr.size})")
    bad = ~(np.isfinite(n_arr) & np.isfinite(y_arr))
    if bad.any():
        raise LawFitError(f"{int(bad.sum())} point(s) with NaN/inf in n or y; drop them first")
    if (n_arr < 1).any():
        raise LawFitError(f"accelerator counts must be >= 1, got min {n_arr.min():g}")
    if (y_arr <= 0).any():
        raise LawFitError(f"{int((y_arr <= 0).sum())} point(s) with throughput <= 0 "
                          "(failed runs carry no throughput; drop them first)")
    return n_arr, y_arr


def _gaussian_llf(resid: np.ndarray) -> float:
    n = resid.size
    sigma2 = float(resid @ resid) / n
    # An exact fit has infinite likelihood; floor the variance so AICc stays finite and ranks it best.
    sigma2 = max(sigma2, 1e-300)
    return -0.5 * n * (np.log(2.0 * np.pi * sigma2) + 1.0)


def _outlier_note(jac: np.ndarray, resid: np.ndarray, n: np.ndarray, df_resid: int) -> str:
    """Flag one point whose externally studentised residual passes a Bonferroni t test.

    Closed form of the leave-one-out residual variance (Belsley, Kuh & Welsch 1980, eq. 2.8),
    the quantity statsmodels' ``OLSInfluence.resid_studentized_external`` computes by refitting.
    """
    ssr = float(resid @ resid)
    # An (almost) exact fit has no noise to compare a residual with: studentising rounding error
    # would flag arbitrary points.
    if df_resid < 3 or np.sqrt(ssr / df_resid) < 1e-8:
        return ""
    q, _ = np.linalg.qr(jac)
    leverage = np.clip(np.sum(q * q, axis=1), 0.0, 1.0 - 1e-12)
    s2_loo = (ssr - resid**2 / (1.0 - leverage)) / (df_resid - 1)
    with np.errstate(all="ignore"):
        t = np.abs(resid) / np.sqrt(np.maximum(s2_loo, 1e-300) * (1.0 - leverage))
    if not np.isfinite(t).any():
        return ""
    i = int(np.nanargmax(t))
    crit = t_quantile(1.0 - 0.05 / (2.0 * n.size), df_resid - 1)
    return f"possible outlier at N={n[i]:g} (studentised residual {t[i]:.1f})" if t[i] > crit else ""


def fit_law(law: Law, n: object, y: object, *, scale: str = "linear",
            ctx: SeriesContext | None = None) -> FitResult:
    """Fit ``law`` to the series ``(n, y)``. See :func:`pipeline.fit.laws.fit` for the contract.

    Steps: check the series can identify the law, bounded least squares on the normalised
    response (``_optimise``), the information criteria (``_criteria``), then standard errors
    from the linearised model at the optimum (``_inference``).
    """
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    ctx = ctx or SeriesContext()
    n, y = check_series(n, y)
    names = law.names(ctx)
    k = len(names)
    distinct = np.unique(n).size
    if distinct < k:
        raise LawFitError(f"law '{law.name}' has {k} parameters but the series has only "
                          f"{distinct} distinct N")
    if n.size <= k:
        raise LawFitError(f"law '{law.name}' has {k} parameters and the series {n.size} points: "
                          "no residual degrees of freedom")

    y_ref = float(np.exp(np.mean(np.log(y))))
    y_n = y / y_ref
    to_fit = (lambda v: np.log(np.maximum(v, 1e-300))) if scale == "log" else (lambda v: v)
    target = to_fit(y_n)

    def resid(theta: np.ndarray) -> np.ndarray:
        return target - to_fit(law.model(n, theta, ctx))

    theta, opt, notes = _optimise(law, n, y_n, ctx, scale, resid)
    free = opt.active_mask == 0
    r = resid(theta)
    n_free = int(free.sum())
    df_resid = n.size - n_free
    result = FitResult(
        law=law.name, scale=scale, n=n, y=y, params={}, stderr={}, converged=False, note="",
        residuals=r, llf=np.nan, aicc=np.nan, bic=np.nan, r2=np.nan, df_resid=df_resid,
        n_free=n_free, ctx=ctx, _law=law, _theta_n=theta, _free=free,
        _col_scale=np.ones(n_free), _y_ref=y_ref)
    d = law.scales(y_ref, ctx)
    result.params = {name: float(theta[j] * d[j]) for j, name in enumerate(names)}
    result.stderr = {name: np.nan for name in names}
    _criteria(result, r, y, y_ref, target, scale)

    if n_free == 0:
        result.note = "; ".join(notes + ["every parameter at a bound: nothing to infer"])
        return result
    _inference(result, theta, r, d, names, opt.success, notes)
    result.note = "; ".join(notes)
    return result


def _optimise(law: Law, n: np.ndarray, y_n: np.ndarray, ctx: SeriesContext, scale: str,
              resid) -> tuple[np.ndarray, Any, list[str]]:
    """Trust-region least squares within the law's bounds. Returns the parameters (on the
    normalised scale; those at a bound set to it exactly), the optimiser's result and notes."""
    names = law.names(ctx)
    lower, upper = law.bounds(ctx)

    def resid_jac(theta: np.ndarray) -> np.ndarray:
        jac = law.jacobian(n, theta, ctx)
        if scale == "log":
            jac = jac / np.maximum(law.model(n, theta, ctx), 1e-300)[:, None]
        return -jac

    theta0 = clip_inside(law.initial(n, y_n, ctx), lower, upper)
    with np.errstate(all="ignore"):
        opt = least_squares(resid, theta0, jac=resid_jac, bounds=(lower, upper), method="trf",
                            x_scale="jac",
                            ftol=1e-10, xtol=1e-10, gtol=1e-10, max_nfev=4000)
    theta = opt.x.copy()
    # trf stops a hair inside an active bound; report the bound itself.
    theta[opt.active_mask < 0] = lower[opt.active_mask < 0]
    theta[opt.active_mask > 0] = upper[opt.active_mask > 0]
    notes = [] if opt.success else [f"optimiser stopped: {opt.message}"]
    free = opt.active_mask == 0
    at_bound = [f"{names[j]} at {'lower' if opt.active_mask[j] < 0 else 'upper'} bound "
                f"{(lower if opt.active_mask[j] < 0 else upper)[j]:g}"
                for j in np.flatnonzero(~free)]
    if at_bound:
        notes.append("; ".join(at_bound) + " (held fixed for inference)")
    return theta, opt, notes


def _criteria(result: FitResult, r: np.ndarray, y: np.ndarray, y_ref: float,
              target: np.ndarray, scale: str) -> None:
    """Log-likelihood of the original y, BIC, AICc and R2 (on the fitting scale)."""
    n_points = y.size
    # Likelihood of the original y: undo the normalisation (and the log) by the Jacobian term.
    jac_term = -float(np.sum(np.log(y))) if scale == "log" else -n_points * np.log(y_ref)
    result.llf = _gaussian_llf(r) + jac_term
    n_par = result.n_free + 1  # + residual variance
    result.bic = -2.0 * result.llf + n_par * np.log(n_points)
    denom = n_points - n_par - 1
    result.aicc = (-2.0 * result.llf + 2.0 * n_par + 2.0 * n_par * (n_par + 1) / denom
                   if denom > 0 else np.inf)
    sst = float(np.sum((target - target.mean()) ** 2))
    result.r2 = 1.0 - float(r @ r) / sst if sst > 0 else np.nan


def _inference(result: FitResult, theta: np.ndarray, r: np.ndarray, d: np.ndarray,
               names: list[str], success: bool, notes: list[str]) -> None:
    """Standard errors of the free parameters: OLS of the working response on the
    column-scaled Jacobian at the optimum (Gauss-Newton linearisation); flags unidentifiable
    parameters and a possible outlier. Sets ``converged`` when inference was possible."""
    n, free, n_free, df_resid = result.n, result._free, result.n_free, result.df_resid
    raw = result._jacobian(n)
    col = np.sqrt(np.sum(raw**2, axis=0))
    col[col == 0] = 1.0
    result._col_scale = col
    jac = raw / col
    rank = int(np.linalg.matrix_rank(jac))
    if rank < n_free:
        notes.append(f"parameters not identifiable from these N (Jacobian rank {rank} "
                     f"< {n_free} free parameters)")
    elif df_resid < 1:
        notes.append("no residual degrees of freedom")
    else:
        # Working response: OLS of z on J returns theta (column-scaled) and its covariance.
        z = r + jac @ (theta[free] * col)
        linear = ols(z, jac)
        result._ols = linear
        se = np.sqrt(np.clip(np.diag(linear.cov_params()), 0.0, None)) / col
        for j, s in zip(np.flatnonzero(free), se):
            result.stderr[names[j]] = float(s * d[j])
        outlier = _outlier_note(jac, linear.resid, n, df_resid)
        if outlier:
            notes.append(outlier)
        result.converged = bool(success)
