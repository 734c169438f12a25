"""Ordinary least squares as statsmodels ``OLS(endog, exog).fit()`` computes it, without its
model and result objects.

The fit stage solves tens of thousands of tiny regressions (2-4 columns, a few dozen rows):
every law's linearised start and the Gauss-Newton inference at each optimum
(:mod:`pipeline.fit.nls`). statsmodels builds a model, a data handler and a results wrapper for
each, which costs far more than the arithmetic. :func:`ols` does that arithmetic in the same
order as statsmodels 0.14's default ``method="pinv"`` path, so every figure is the same to the
bit (``tests/test_fit_ols.py`` checks it against statsmodels on fuzzed designs):

- ``pinv = V diag(1/s) U'`` from the thin SVD ``X = U diag(s) V'``, singular values at or below
  ``1e-15 * max(s)`` treated as zero (``statsmodels.tools.tools.pinv_extended``);
- ``params = pinv y``, ``normalized_cov = pinv pinv'``, ``rank`` = the numerical rank of
  ``diag(s)`` (``numpy.linalg.matrix_rank``), ``df_resid = n - rank``;
- ``resid = y - X params``, ``scale = resid'resid / df_resid`` (``s^2``),
  ``cov_params = normalized_cov * scale``;
- the variance of the fitted mean at new rows ``x0`` is ``sum(x0 * (cov x0')', axis=1)``
  (``get_prediction(x0).var_pred_mean``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: statsmodels' ``pinv_extended`` cut-off, relative to the largest singular value
RCOND = 1e-15


@dataclass(frozen=True)
class LinearFit:
    """One least-squares fit: estimates, residuals, ``s^2`` and the unscaled covariance."""

    params: np.ndarray
    resid: np.ndarray
    normalized_cov: np.ndarray
    rank: int
    df_resid: float
    scale: float

    def cov_params(self) -> np.ndarray:
        """Covariance of ``params``: ``s^2 (X'X)^+``."""
        return self.normalized_cov * self.scale

    def var_pred_mean(self, exog: np.ndarray) -> np.ndarray:
        """Variance of the fitted mean at each row of ``exog``."""
        exog = np.atleast_2d(np.asarray(exog))
        return (exog * np.dot(self.cov_params(), exog.T).T).sum(1)


def _pinv(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Moore-Penrose inverse of ``x`` and its singular values (``pinv_extended``'s steps)."""
    u, s, vt = np.linalg.svd(x, False)
    s_orig = s.copy()
    cutoff = RCOND * np.maximum.reduce(s)
    keep = s > cutoff
    s[keep] = 1.0 / s[keep]
    s[~keep] = 0.0
    return np.dot(np.transpose(vt), np.multiply(s[:, np.newaxis], np.transpose(u))), s_orig


def ols_params(endog: np.ndarray, exog: np.ndarray) -> np.ndarray:
    """The least-squares estimates alone (``OLS(endog, exog).fit().params``)."""
    pinv, _ = _pinv(np.asarray(exog))
    return np.dot(pinv, np.asarray(endog))


def ols(endog: np.ndarray, exog: np.ndarray) -> LinearFit:
    """The least-squares fit of ``endog`` on the columns of ``exog`` (no constant added)."""
    endog, exog = np.asarray(endog), np.asarray(exog)
    pinv, singular = _pinv(exog)
    normalized_cov = np.dot(pinv, np.transpose(pinv))
    rank = int(np.linalg.matrix_rank(np.diag(singular)))
    params = np.dot(pinv, endog)
    resid = endog - np.dot(exog, params)
    df_resid = float(exog.shape[0]) - rank
    with np.errstate(divide="ignore", invalid="ignore"):  # no residual df: s^2 is inf or NaN
        scale = np.dot(resid, resid) / df_resid
    return LinearFit(params=params, resid=resid, normalized_cov=normalized_cov, rank=rank,
                     df_resid=df_resid, scale=scale)
