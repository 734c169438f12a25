"""pipeline.fit.ols: the same bits as statsmodels OLS (pinv) on the designs the fit stage
solves: a law's linearised start (constant, N, N^2 columns) and the column-scaled Jacobian of
the Gauss-Newton inference, including ill-conditioned and rank-deficient designs."""

from __future__ import annotations

import numpy as np
import statsmodels.api as sm
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.fit.ols import ols, ols_params


def _same(a, b) -> bool:
    return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)


def _check(endog: np.ndarray, exog: np.ndarray) -> None:
    ref = sm.OLS(endog, exog).fit()
    mine = ols(endog, exog)
    assert _same(mine.params, ref.params)
    assert _same(ols_params(endog, exog), ref.params)
    assert mine.rank == ref.model.rank
    assert mine.df_resid == ref.df_resid
    assert _same(mine.resid, ref.resid)
    with np.errstate(all="ignore"):
        assert _same(mine.scale, ref.scale)
        assert _same(mine.cov_params(), ref.cov_params())
        new = exog[::2] * 1.5
        assert _same(mine.var_pred_mean(new), ref.get_prediction(new).var_pred_mean)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 12), min_size=4, max_size=40),
       st.lists(st.floats(0.05, 20.0), min_size=40, max_size=40),
       st.sampled_from([1, 2, 3]))
def test_polynomial_starts_match_statsmodels_bit_for_bit(log2_n, noise, degree):
    n = 2.0 ** np.array(log2_n, float)
    y = n ** 0.8 * np.array(noise[:n.size])
    exog = np.column_stack([n ** d for d in range(degree)]) if degree > 1 else \
        sm.add_constant(np.log(n), has_constant="add")
    _check(n / y, exog)


@settings(max_examples=150, deadline=None)
@given(st.integers(3, 30), st.integers(1, 4), st.integers(0, 2**31 - 1),
       st.sampled_from([0.0, 1e-9, 1e-16]))
def test_scaled_jacobians_match_statsmodels_bit_for_bit(rows, cols, seed, collinear):
    rng = np.random.default_rng(seed)
    jac = rng.normal(size=(rows, cols))
    if cols > 1 and collinear:  # near or exactly dependent columns
        jac[:, -1] = jac[:, 0] * (1.0 + collinear)
    jac = jac / np.sqrt(np.sum(jac**2, axis=0))
    _check(rng.normal(size=rows), jac)


def test_hand_worked_line():
    # x = 0..3, y = 1, 3, 5, 8: slope Sxy/Sxx = 11.5/5 = 2.3, intercept 4.25 - 2.3*1.5 = 0.8,
    # residuals 0.2, -0.1, -0.4, 0.3, s^2 = 0.30 / 2
    x = np.array([0.0, 1.0, 2.0, 3.0])
    fit = ols(np.array([1.0, 3.0, 5.0, 8.0]), np.column_stack([np.ones(4), x]))
    assert np.allclose(fit.params, [0.8, 2.3])
    assert np.allclose(fit.resid, [0.2, -0.1, -0.4, 0.3])
    assert fit.rank == 2 and fit.df_resid == 2.0
    assert np.isclose(fit.scale, 0.15)
    # Var(a + b x0) = s^2 (1/n + (x0 - xbar)^2 / Sxx) at x0 = 1.5 and 3.5
    assert np.allclose(fit.var_pred_mean(np.array([[1.0, 1.5], [1.0, 3.5]])),
                       [0.15 / 4, 0.15 * (0.25 + 4.0 / 5.0)])
