"""Law fits: golden values, recovery and interval coverage over many seeds, degenerate inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.fit.laws import LAWS, LawFitError, fit, get_law
from pipeline.fit.base import SeriesContext

# Gunther's SPEC SDM91 benchmark (R package `usl`, data `specsdm91`).
SDM91_N = [1, 18, 36, 72, 108, 144, 216]
SDM91_X = [65, 996, 1652, 1853, 1829, 1775, 1702]


def test_usl_golden_spec_sdm91() -> None:
    # Reference: R usl (nls method, lam free): sigma 0.0277299, kappa 0.000104343, lam 89.9878.
    res = fit(SDM91_N, SDM91_X, law="usl", scale="linear")
    assert res.converged
    assert res.params["sigma"] == pytest.approx(0.0277299, rel=1e-3)
    assert res.params["kappa"] == pytest.approx(0.000104343, rel=1e-3)
    assert res.params["lam"] == pytest.approx(89.9878, rel=1e-3)
    derived = res.derived()
    assert derived["peak_concurrency"] == 96
    assert derived["n_peak"] == pytest.approx(np.sqrt((1 - 0.0277299) / 0.000104343), rel=1e-3)
    assert derived["x_max"] == pytest.approx(1883.8, rel=1e-3)


def test_result_api_shapes_and_intervals() -> None:
    res = fit(SDM91_N, SDM91_X, law="usl")
    ci = res.conf_int()
    assert list(ci.index) == ["sigma", "kappa", "lam"]
    assert (ci["low"] < ci["high"]).all()
    for name, value in res.params.items():
        assert ci.loc[name, "low"] < value < ci.loc[name, "high"]
    pred = res.predict([50, 300], interval=0.95)
    assert list(pred.columns) == ["n", "predicted", "ci_low", "ci_high", "pi_low", "pi_high"]
    # the prediction interval contains the confidence interval, which contains the estimate
    assert (pred.pi_low < pred.ci_low).all() and (pred.ci_low < pred.predicted).all()
    assert (pred.predicted < pred.ci_high).all() and (pred.ci_high < pred.pi_high).all()
    narrow = res.predict([50], interval=0.5)
    assert narrow.pi_high[0] - narrow.pi_low[0] < pred.pi_high[0] - pred.pi_low[0]
    assert res.residuals.shape == (7,)
    assert np.isfinite(res.aicc) and np.isfinite(res.bic)


def test_aicc_prefers_the_true_law_across_scales() -> None:
    rng = np.random.default_rng(3)
    n = np.repeat([1, 2, 4, 8, 16, 32, 64, 128], 3).astype(float)
    y = get_law("usl").model(n, np.array([0.05, 5e-4, 100.0]), SeriesContext())
    y = y * np.exp(rng.normal(0, 0.03, n.size))
    aicc = {law: fit(n, y, law=law, scale="log").aicc for law in ("power", "amdahl", "usl")}
    assert min(aicc, key=aicc.get) == "usl"
    # likelihoods are on the original y in both scales, so the log fit (the true noise model)
    # must not lose to the linear fit of the same law
    assert fit(n, y, law="usl", scale="log").aicc < fit(n, y, law="usl", scale="linear").aicc + 2


def _coverage(law: str, theta: np.ndarray, ctx: SeriesContext, noise: float,
              seeds: int = 200) -> tuple:
    """Share of seeds whose 95% CI covers each true parameter (and USL's true n_peak), and
    whose 95% prediction interval covers a fresh draw at N = 96."""
    n = np.repeat([1, 2, 4, 8, 16, 32, 64, 128], 3).astype(float)
    truth_mean = get_law(law).model(n, theta, ctx)
    n_new = 96.0
    y_new_mean = get_law(law).model(np.array([n_new]), theta, ctx)[0]
    names = get_law(law).names(ctx)
    n_peak_true = np.sqrt((1 - theta[0]) / theta[1]) if law == "usl" else np.nan
    hits = np.zeros(len(names))
    pi_hits = peak_hits = 0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        y = truth_mean * np.exp(rng.normal(0, noise, n.size))
        res = fit(n, y, law=law, scale="log", scaling=ctx.scaling)
        ci = res.conf_int()
        for j, name in enumerate(names):
            hits[j] += ci.loc[name, "low"] <= theta[j] <= ci.loc[name, "high"]
        y_new = y_new_mean * np.exp(rng.normal(0, noise))
        p = res.predict([n_new]).iloc[0]
        pi_hits += p.pi_low <= y_new <= p.pi_high
        if law == "usl":
            d = res.derived()
            peak_hits += abs(d["n_peak"] - n_peak_true) <= 1.96 * d["n_peak_stderr"]
    return hits / seeds, pi_hits / seeds, peak_hits / seeds


@pytest.mark.parametrize("law, theta, noise", [
    ("usl", np.array([0.05, 5e-4, 100.0]), 0.05),
    ("amdahl", np.array([0.02, 100.0]), 0.05),
    ("power", np.array([100.0, 0.8]), 0.05),
    # comm's t_fixed and t_lat are nearly collinear (1 vs log2 N); at 5% noise a fifth of the
    # fits put one on its bound (no interval), so its coverage is tested at 1% noise
    ("comm", np.array([1.0, 50.0, 0.5, 0.02]), 0.01),
])
@pytest.mark.slow
def test_recovery_ci_coverage_is_nominal(law: str, theta: np.ndarray, noise: float) -> None:
    # Estimates inside their 95% CI about 95% of the time: binomial sd over 200 seeds is 1.5%.
    coverage, pi_coverage, peak_coverage = _coverage(law, theta, SeriesContext(), noise)
    assert np.all(coverage > 0.90), coverage
    assert np.all(coverage < 0.99), coverage
    assert 0.90 < pi_coverage <= 0.99
    if law == "usl":  # delta-method interval of the derived peak
        assert 0.90 < peak_coverage <= 0.99


def test_comm_recovers_step_time_terms() -> None:
    # t(N) = 0.2 + 50/N + 0.05 log2 N + 0.002 N seconds; work 1e6 tokens per step.
    theta_s = np.array([0.2, 50.0, 0.05, 0.002])
    n = np.repeat([8, 16, 32, 64, 128, 256, 512, 1024], 3).astype(float)
    t = theta_s @ np.vstack([np.ones_like(n), 1 / n, np.log2(n), n])
    rng = np.random.default_rng(0)
    y = 1e6 / t * np.exp(rng.normal(0, 0.01, n.size))
    res = fit(n, y, law="comm", scale="log", work_per_step=1e6)
    assert res.converged, res.note
    ci = res.conf_int()
    for name, true in zip(("t_fixed_s", "t_work_s", "t_lat_s", "t_lin_s"), theta_s):
        assert ci.loc[name, "low"] <= true <= ci.loc[name, "high"], (name, ci.loc[name])
    # n_peak where dt/dN = 0: 0.002 N^2 + (0.05/ln 2) N - 50 = 0
    a = 0.05 / np.log(2)
    expected = (-a + np.sqrt(a * a + 4 * 0.002 * 50)) / (2 * 0.002)
    assert res.derived()["n_peak"] == pytest.approx(expected, rel=0.1)


def test_comm_weak_scaling_drops_work_term() -> None:
    n = np.array([8, 16, 32, 64, 128, 256], dtype=float)
    t = 1.0 + 0.02 * np.log2(n) + 1e-4 * n
    res = fit(n, 4096 * n / t, law="comm", scaling="weak", work_per_step=4096)
    assert set(res.params) == {"t_fixed_s", "t_lat_s", "t_lin_s"}
    assert res.params["t_fixed_s"] == pytest.approx(1.0, rel=1e-4)
    assert res.params["t_lin_s"] == pytest.approx(1e-4, rel=1e-3)


@pytest.mark.parametrize("n, y, match", [
    ([8, 16], [1.0, 1.9], "distinct N|degrees of freedom"),
    ([8, 8, 8, 8], [1.0, 1.1, 0.9, 1.0], "distinct N"),
    ([8, 16, 32, 64], [1.0, 0.0, 3.0, 5.0], "throughput <= 0"),
    ([8, 16, 32, 64], [1.0, np.nan, 3.0, 5.0], "NaN"),
    ([0, 16, 32, 64], [1.0, 2.0, 3.0, 5.0], ">= 1"),
    ([8, 16, 32], [1.0, 2.0], "length"),
])
@pytest.mark.parametrize("law", sorted(LAWS))
def test_degenerate_inputs_raise_named_error(law: str, n: list, y: list, match: str) -> None:
    with pytest.raises(LawFitError, match=match):
        fit(n, y, law=law)


def test_single_outlier_is_flagged() -> None:
    n = np.repeat([8, 16, 32, 64, 128, 256], 2).astype(float)
    y = get_law("usl").model(n, np.array([0.03, 1e-5, 10.0]), SeriesContext())
    y = y * np.exp(np.random.default_rng(1).normal(0, 0.01, n.size))
    y[5] *= 1.6  # one run at N=32 reads 60% high
    res = fit(n, y, law="usl", scale="log")
    assert res.converged
    assert "possible outlier at N=32" in res.note
    clean = fit(np.delete(n, 5), np.delete(y, 5), law="usl", scale="log")
    assert "outlier" not in clean.note


def test_unknown_law_and_scale_are_named() -> None:
    with pytest.raises(KeyError, match="known: amdahl, comm, power, usl"):
        fit(SDM91_N, SDM91_X, law="gustafson")
    with pytest.raises(ValueError, match="scale"):
        fit(SDM91_N, SDM91_X, law="usl", scale="sqrt")


def test_parameter_at_bound_is_held_fixed() -> None:
    # Superlinear data pushes sigma and kappa below zero: both land on their bound and are
    # reported as fixed there, not as estimates.
    n = np.array([1, 2, 4, 8, 16, 32, 64], dtype=float)
    y = 10 * n * (1 + 0.002 * n) * np.exp(np.random.default_rng(2).normal(0, 0.01, 7))
    res = fit(n, y, law="usl", scale="log")
    assert res.params["kappa"] == 0.0 and res.params["sigma"] == 0.0
    assert "sigma at lower bound 0" in res.note and "kappa at lower bound 0" in res.note
    assert np.isnan(res.stderr["kappa"]) and np.isfinite(res.stderr["lam"])
    assert res.n_free == 1


@settings(max_examples=60, deadline=None)
@given(sigma=st.floats(0.0, 0.3), kappa=st.floats(0.0, 1e-3), lam=st.floats(1e-3, 1e15),
       noise=st.floats(0.0, 0.1), seed=st.integers(0, 2**16), law=st.sampled_from(sorted(LAWS)),
       scale=st.sampled_from(["linear", "log"]))
def test_fit_never_crashes_and_predicts_positive(sigma: float, kappa: float, lam: float,
                                                  noise: float, seed: int, law: str,
                                                  scale: str) -> None:
    n = np.array([1, 2, 4, 8, 16, 32, 64, 128], dtype=float)
    y = get_law("usl").model(n, np.array([sigma, kappa, lam]), SeriesContext())
    y = y * np.exp(np.random.default_rng(seed).normal(0, noise, n.size))
    res = fit(n, y, law=law, scale=scale)
    pred = res.predict([256.0])
    assert np.isfinite(pred.predicted[0]) and pred.predicted[0] >= 0
    if res.converged:
        assert pred.pi_low[0] <= pred.predicted[0] <= pred.pi_high[0]
    else:
        assert res.note


def test_outlier_statistic_matches_statsmodels() -> None:
    import statsmodels.api as sm

    from pipeline.fit.nls import _outlier_note

    rng = np.random.default_rng(0)
    x = rng.normal(size=(15, 3))
    r = rng.normal(size=15)
    r[4] += 12.0
    ols = sm.OLS(r, x).fit()
    t_ref = np.abs(ols.get_influence().resid_studentized_external)
    note = _outlier_note(x, np.asarray(ols.resid), np.arange(15.0) + 1, 12)
    assert int(np.argmax(t_ref)) == 4
    assert note == f"possible outlier at N=5 (studentised residual {t_ref[4]:.1f})"


@pytest.mark.parametrize("law", sorted(LAWS))
def test_likelihood_is_of_the_original_y_on_both_scales(law: str) -> None:
    # What makes AICc comparable across laws and scales: llf is the Gaussian log-likelihood of
    # y itself. Linear: residuals in y units. Log: residuals of log y plus the Jacobian -sum(log y).
    rng = np.random.default_rng(4)
    n = np.repeat([4, 8, 16, 32, 64, 128], 2).astype(float)
    y = 3e5 * n**0.8 * np.exp(rng.normal(0, 0.05, n.size))

    def gaussian(r: np.ndarray) -> float:
        return -0.5 * r.size * (np.log(2 * np.pi * float(r @ r) / r.size) + 1)

    lin = fit(n, y, law=law, scale="linear")
    assert lin.llf == pytest.approx(gaussian(y - lin.fitted()), rel=1e-9)
    log = fit(n, y, law=law, scale="log")
    assert log.llf == pytest.approx(gaussian(np.log(y) - np.log(log.fitted()))
                                    - np.sum(np.log(y)), rel=1e-9)
    k = log.n_free + 1
    assert log.aicc == pytest.approx(-2 * log.llf + 2 * k + 2 * k * (k + 1) / (n.size - k - 1))
    assert log.bic == pytest.approx(-2 * log.llf + k * np.log(n.size))


def test_work_per_step_is_per_accelerator_under_weak_scaling() -> None:
    import pandas as pd

    from pipeline.fit.series import work_per_step

    # 4096 tokens per accelerator and step: the global batch grows with N.
    n = np.array([8.0, 16.0, 32.0])
    step_s = np.array([1.0, 1.1, 1.2])
    runs = pd.DataFrame({"n_accelerators": n, "tokens_per_s": 4096 * n / step_s,
                         "step_time_s": step_s})
    assert work_per_step(runs, "tokens_per_s", "weak") == pytest.approx(4096.0)
    assert work_per_step(runs, "tokens_per_s", "strong") == pytest.approx(4096.0 * 16)
    # a comm fit in that context returns seconds: t(N) = 1 + 0.1 log2(N/8) here
    res = fit(n.repeat(2), np.repeat(4096 * n / step_s, 2), law="comm", scaling="weak",
              work_per_step=4096.0)
    t = res.params["t_fixed_s"] + res.params["t_lat_s"] * np.log2(n) + res.params["t_lin_s"] * n
    assert t == pytest.approx(step_s, rel=1e-6)


def test_usl_sigma_is_a_fraction_and_a_falling_series_peaks_below_one() -> None:
    # Throughput that falls from the first accelerator on: unbounded, sigma would exceed 1;
    # bounded, it sits at 1, kappa carries the fall and the peak is at N = 0 (before the data).
    n = np.array([1, 2, 4, 8, 16, 32], dtype=float)
    y = 100 * n / (1 + 1.5 * (n - 1) + 0.01 * n * (n - 1))
    y = y * np.exp(np.random.default_rng(0).normal(0, 0.01, n.size))
    res = fit(n, y, law="usl", scale="log")
    assert res.params["sigma"] == 1.0 and "sigma at upper bound 1" in res.note
    d = res.derived()
    assert d["n_peak"] == 0.0 and d["x_max"] == pytest.approx(res.fitted([1.0])[0])
    assert "n_peak_stderr" not in d
    # kappa on its bound is Amdahl exactly: the same fit and, counting free parameters, the
    # same AICc (a slightly superlinear bend pushes kappa below zero)
    n = np.array([1, 2, 4, 8, 16, 32, 64], dtype=float)
    y = 10 * n * (1 + 0.001 * n) / (1 + 0.05 * (n - 1))
    y = y * np.exp(np.random.default_rng(5).normal(0, 0.01, 7))
    usl, amdahl = fit(n, y, law="usl", scale="log"), fit(n, y, law="amdahl", scale="log")
    assert usl.params["kappa"] == 0.0
    assert usl.params["sigma"] == pytest.approx(amdahl.params["sigma"], rel=1e-6)
    assert usl.aicc == pytest.approx(amdahl.aicc, rel=1e-6)
