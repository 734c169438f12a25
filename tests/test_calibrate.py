"""The calibrated step-time model: parameter recovery, interval coverage, unseen hardware,
shares, and its settings."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest

from pipeline.calibrate import intervals as iv
from pipeline.calibrate.features import SHARES, design, x_matrix
from pipeline.calibrate.forms import fit_frame
from pipeline.calibrate.settings import load_settings
from pipeline.calibrate.simulate import TRUE_THETA, simulate_runs
from pipeline.calibrate.stage import calibrated_runs
from pipeline.config import ConfigError, settings
from pipeline.theory.bounds import compute_bounds

TERMS = list(TRUE_THETA)


def test_parameter_recovery_ci_coverage_over_200_seeds() -> None:
    """True efficiencies inside the 95% CI in 90-98% of 200 simulated data sets, per term."""
    hits = []
    for seed in range(200):
        runs = simulate_runs(seed, n_sources=8)
        cal = fit_frame(runs, TERMS, balance=0.0, em_rounds=6)
        assert cal.terms == TERMS and cal.stderr_kind == "cluster"
        truth = np.log([TRUE_THETA[t] for t in cal.terms])
        hits.append(np.abs(cal.log_theta - truth) <= 1.959964 * cal.stderr_log_theta())
    coverage = np.mean(hits, axis=0)
    assert np.all((coverage >= 0.90) & (coverage <= 0.98)), dict(zip(TERMS, coverage))


def test_recovery_is_unbiased() -> None:
    """Median estimate over 40 data sets within 3% of the truth, every term."""
    est = [fit_frame(simulate_runs(seed, n_sources=8), TERMS, balance=0.0, em_rounds=6).theta
           for seed in range(40)]
    np.testing.assert_allclose(np.median(est, axis=0), [TRUE_THETA[t] for t in TERMS], rtol=0.03)


def test_term_without_runs_is_held_at_ideal_and_dead_term_dropped() -> None:
    runs = simulate_runs(0, n_sources=8)
    runs["x_net_pp"] = 0.0   # no run exercises PP: its efficiency cannot be estimated
    runs["x_hbm"] = 1e-9     # exercised, but contributes nothing: estimated ~0 and dropped
    cal = fit_frame(runs, TERMS + ["net_pp", "hbm"], balance=0.0, em_rounds=3)
    assert cal.fixed == {"net_pp": 1.0}
    assert "hbm" in cal.dropped and "hbm" not in cal.terms
    table = pd.DataFrame(cal.parameter_table())
    assert table.set_index("parameter").loc["net_pp", "group"] == "efficiency_fixed"
    # a new run with PP time is charged its full ideal PP time
    x = x_matrix(runs.head(1).assign(x_net_pp=0.5), cal.all_terms)
    base = x_matrix(runs.head(1), cal.all_terms)
    m1, _ = cal.predict_log_time(x, np.array(["src0"]))
    m0, _ = cal.predict_log_time(base, np.array(["src0"]))
    expected = np.log((cal.components(base).sum() + 0.5) / cal.components(base).sum())
    assert m1[0] - m0[0] == pytest.approx(expected, rel=1e-9)


def test_unseen_source_interval_adds_between_source_spread() -> None:
    runs = simulate_runs(3, n_sources=8)
    cal = fit_frame(runs, TERMS, balance=0.0, em_rounds=6)
    x = x_matrix(runs.head(5), cal.all_terms)
    seen_mean, seen_sd = cal.predict_log_time(x, runs["source"].head(5).to_numpy(object))
    new_mean, new_sd = cal.predict_log_time(x, np.array(["never-seen"] * 5, dtype=object))
    assert cal.sigma_u > 0
    u, _ = cal.source_effect(runs["source"].head(5).to_numpy(object))
    np.testing.assert_allclose(new_mean, seen_mean - u)
    assert np.all(new_sd ** 2 >= cal.sigma_pool ** 2 + cal.sigma_u ** 2 - 1e-12)
    assert np.all(new_sd > seen_sd)


def _synthetic_run(accelerator: str, n: int, **extra) -> dict:
    row = dict(run_id=f"r-{accelerator}-{n}", source="syn", series_id=f"syn/{accelerator}",
               accelerator=accelerator, accelerator_family=accelerator.split("-")[0],
               n_accelerators=float(n), params=70e9, active_params=70e9, n_layers=80.0,
               d_model=8192.0, seq_len=4096.0, tp=8.0, pp=4.0, dp=n / 32.0, cp=np.nan,
               ep=np.nan, zero_stage=1.0, micro_batch=1.0, global_batch_tokens=4096.0 * 512,
               precision="bf16", mfu=np.nan, hfu=np.nan, strategy_family="3d",
               peak_flops_per_s_per_accelerator=np.nan)
    row.update(extra)
    return row


def test_unseen_accelerator_predicted_from_catalog_alone(params, catalog) -> None:
    """A B200 run (no B200 run was fitted) gets its component times from the catalog's B200
    specs through the theory's bounds, and the population efficiencies."""
    runs = simulate_runs(1, n_sources=8)
    cal = fit_frame(runs, TERMS, balance=0.0, em_rounds=6)
    new = pd.DataFrame([_synthetic_run("B200-SXM-180GB", 256), _synthetic_run("H100-SXM5-80GB", 256)])
    bounds = compute_bounds(new, catalog, params)
    frame = design(new, bounds, catalog.hardware["scaleup_domain_size"],
                   settings(params, "theory").bounds)
    x = x_matrix(frame, cal.all_terms)
    mfu, lo, hi, sd = cal.predict_mfu(x, frame["source"].to_numpy(object))
    # by hand: 1 / sum theta_j x_j, with x from the catalog-based bounds
    b = bounds.set_index("run_id").loc[frame["run_id"]]
    t_c = b["t_compute_s"].to_numpy()
    by_hand = 1.0 / (cal.theta[0] + cal.theta[1] * b["t_net_tp_s"] / t_c
                     + cal.theta[2] * b["t_net_dp_s"] / t_c + cal.theta[3] * b["t_bubble_s"] / t_c
                     + cal.theta[4] / t_c)
    np.testing.assert_allclose(mfu, by_hand.to_numpy(), rtol=1e-12)
    assert catalog.hardware.loc["B200-SXM-180GB", "peak_bf16_flops_per_s"] > \
        catalog.hardware.loc["H100-SXM5-80GB", "peak_bf16_flops_per_s"]
    assert mfu[0] != pytest.approx(mfu[1], rel=1e-3)  # the specs matter
    assert np.all((lo < mfu) & (mfu < hi) & (mfu < 1.0))
    assert np.all(sd ** 2 >= cal.sigma_pool ** 2 + cal.sigma_u ** 2 - 1e-12)


def test_shares_sum_to_one_and_residual_is_the_unexplained_time() -> None:
    runs = simulate_runs(2, n_sources=8)
    runs["has_layout"] = True
    runs["bound_mfu"] = 0.9
    runs["n_accelerators"] = 64.0
    cal = fit_frame(runs, TERMS, balance=0.0, em_rounds=3)
    out = calibrated_runs(runs, cal, 0.95)
    shares = out[[f"share_{s}" for s in SHARES]].to_numpy()
    np.testing.assert_allclose(shares.sum(axis=1), 1.0, atol=1e-12)
    # residual = 1 - predicted step time / measured step time
    np.testing.assert_allclose(out["share_residual"],
                               1.0 - out["measured_mfu"] / out["predicted_mfu"], rtol=1e-9,
                               atol=1e-12)
    assert 0.90 <= out["covered"].mean() <= 0.99


def _series_cases(seed: int, n_series: int = 80):
    """Series whose per-accelerator throughput falls as a noisy Amdahl law."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_series):
        serial = rng.uniform(0.0005, 0.02)
        n = 2.0 ** np.arange(3, 10)
        y = n / (1 + serial * (n - 1)) * np.exp(rng.normal(0, 0.05, n.size))
        train, test = n[:-2], n[-2:]
        pred = iv.naive_linear(train, y[:-2], test)
        for i in range(2):
            rows.append((f"s{s}", test[i], train.max(), y[-2 + i], pred[i]))
    return pd.DataFrame(rows, columns=["series_id", "n_target", "n_train_max", "actual",
                                       "predicted"])


def test_conformal_interval_covers_on_simulated_series() -> None:
    """Leave-one-series-out conformal intervals of a naive (biased) predictor cover 90-98% of
    held-out points, where an interval from its own series' errors would not exist."""
    coverage = []
    for seed in range(20):
        cases = _series_cases(seed)
        scale = iv.distance_scale(np.ones(len(cases)), cases["n_target"], cases["n_train_max"])
        score = np.abs(np.log(cases["actual"] / cases["predicted"])) / scale
        q = iv.leave_group_out_quantile(score.to_numpy(), cases["series_id"].to_numpy(), 0.95)
        lo, hi = iv.conformal_interval(cases["predicted"].to_numpy(), scale, q)
        coverage.append(np.mean((lo <= cases["actual"]) & (cases["actual"] <= hi)))
    assert 0.90 <= np.mean(coverage) <= 0.98


def test_leave_group_out_quantile_never_uses_own_group() -> None:
    scores = np.array([100.0, 1.0, 2.0, 3.0] + [0.5] * 40)
    groups = np.array(["a", "b", "b", "c"] + [f"g{i}" for i in range(40)], dtype=object)
    q = iv.leave_group_out_quantile(scores, groups, 0.95)
    # 43 other scores, rank ceil(44 x 0.95) = 42: with a's own 100 included it would be 3.0
    assert q[0] == 2.0
    assert q[1] == q[2] == 3.0  # b's reference: 40 x 0.5, 3, 100 -> the 41st of 42
    assert q[3] == 2.0
    assert np.isnan(iv.leave_group_out_quantile(np.ones(5), np.arange(5), 0.95)).all()


def test_naive_rules() -> None:
    n = np.array([8.0, 16.0, 32.0, 32.0])
    y = np.array([10.0, 18.0, 30.0, 34.0])
    assert iv.naive_linear(n, y, np.array([64.0]))[0] == pytest.approx(64.0)
    slope = np.log(32.0 / 18.0) / np.log(2.0)
    assert iv.naive_loglinear(n, y, np.array([64.0]))[0] == pytest.approx(32.0 * 2 ** slope)
    assert np.isnan(iv.naive_loglinear(np.array([8.0]), np.array([1.0]), np.array([16.0]))[0])


@pytest.mark.parametrize("field, value, message", [
    ("forms", {"bad": ["compute", "warp_drive"]}, "calibrate.forms.bad"),
    ("forms", {"bad": ["overhead", "compute"]}, "calibrate.forms.bad"),
    ("balance", 2.0, "calibrate.balance"),
    ("interval_method", {"largest": "vibes", "source": "analytic"},
     "calibrate.interval_method.largest"),
    ("selected", {"largest": "oracle", "assumed_layout": "naive_linear",
                  "fallback": "naive_linear", "source": "calibrated"}, "calibrate.selected.largest"),
])
def test_broken_settings_name_the_field(params, field, value, message) -> None:
    bad = copy.deepcopy(params)
    bad["calibrate"][field] = value
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        load_settings(bad)


def test_config_terms_are_the_model_terms() -> None:
    """params.yaml's form terms are validated against config.CalibrateTerm; it must list
    exactly the terms the model knows (features.TERMS)."""
    from typing import get_args

    from pipeline.calibrate.features import TERMS
    from pipeline.config import CalibrateTerm
    assert list(get_args(CalibrateTerm)) == list(TERMS)


def test_shipped_settings_load(params) -> None:
    cfg = load_settings(params)
    assert cfg.selected.largest == "calibrated" and cfg.interval == 0.95


def test_calibrated_step_cost_is_the_weighted_sum_of_ideal_components(params, catalog) -> None:
    from dataclasses import replace as dc_replace

    from pipeline.calibrate.frontier import Efficiencies
    from pipeline.theory.cost import step_cost
    from pipeline.theory.inputs import Layout, Shape
    from pipeline.theory.scenarios import load_scenarios
    from pipeline.theory.search import search

    scn = load_scenarios(params, catalog)[0]
    shape = Shape(params=70e9, active_params=70e9, n_layers=80.0, d_model=8192.0)
    layout = Layout(dp=np.array([16.0, 64.0]), tp1=np.array([8.0, 16.0]), pp=4.0,
                    microbatches=8.0, zero_stage=1.0)
    theta = {"compute": 1.5, "net_tp": 2.0, "net_tp_out": 5.0, "net_dp": 3.0, "bubble": 1.2,
             "latency": 10.0, "overhead": 0.05, "launch": 1e-4}
    eff = Efficiencies(theta)
    ideal = step_cost(scn.hardware, shape, layout, 4e6, scn.constants)
    cal = eff.step_cost(scn.hardware, shape, layout, 4e6, scn.constants)
    tp_theta = np.array([2.0, 5.0])  # tp 8 inside the 8-GPU domain, tp 16 beyond it
    expected = (1.5 * ideal.t_compute_s + tp_theta * ideal.t_net_tp_s + 3.0 * ideal.t_net_dp_s
                + 1.2 * ideal.t_bubble_s + 10.0 * ideal.t_latency_s + 0.05 + 1e-4 * 8 * 80 / 4)
    np.testing.assert_allclose(cal.t_step_s, expected, rtol=1e-12)
    np.testing.assert_allclose(cal.utilization, ideal.t_compute_s / expected, rtol=1e-12)
    # the search with only a compute efficiency reaches exactly 1 / theta_compute
    flat = dc_replace(scn, efficiency=Efficiencies({"compute": 2.0}))
    front = search(flat, np.array([1e24, 1e25]))
    np.testing.assert_allclose(front.utilization, 0.5, rtol=1e-9)
