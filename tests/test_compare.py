"""Compare stage: golden decomposition, invariants, and values recovered from synthetic series."""

from __future__ import annotations

import copy
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipeline.compare.stage import SHARES, gap_shares
from pipeline.fit.result import predict_frame
from pipeline.measures import n_at_efficiency as n_at_efficiency
from pipeline.compare.stage import run as compare_run
from pipeline.config import ConfigError, load_params
from pipeline.io import write_parquet
from pipeline.schema import empty_frame
from synthetic_upstream import NOISE, SERIES_SPECS, build


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("compare")
    paths = build(root / "processed", root / "metrics")
    # compare before calibrate has run: calibrate predicted no target (its contract, no rows)
    write_parquet(empty_frame("selected_targets.parquet"),
                  paths["processed"] / "selected_targets.parquet")
    metrics = compare_run(load_params(), processed_dir=paths["processed"],
                          metrics_dir=paths["metrics"], out_dir=paths["processed"],
                          metrics_path=paths["metrics"] / "compare.json", plots_dir=root / "plots")
    return {**paths, "root": root, "metrics_dict": metrics}


def test_gap_shares_golden() -> None:
    # mfu 0.4, bound 0.5, t_compute 1 s: theory step 2 s, measured 2.5 s. Overhead 1 s = bubble
    # 0.1 + latency 0.1 + 0.8 s split over excesses net_dp 0.5 and hbm 0.2 (5:2).
    bound = pd.Series({"bound_mfu": 0.5, "t_compute_s": 1.0, "t_hbm_s": 1.2, "t_net_dp_s": 1.5,
                       "t_net_tp_s": 0.3, "t_net_pp_s": 0.0, "t_net_ep_s": 0.0,
                       "t_bubble_s": 0.1, "t_latency_s": 0.1})
    s = gap_shares(0.4, bound)
    assert s["compute"] == pytest.approx(0.4)
    assert s["net_dp"] == pytest.approx(0.8 * 5 / 7 / 2.5)
    assert s["hbm"] == pytest.approx(0.8 * 2 / 7 / 2.5)
    assert s["net_tp"] == 0.0 and s["overhead"] == 0.0
    assert s["bubble"] == pytest.approx(0.04) and s["latency"] == pytest.approx(0.04)
    assert s["residual"] == pytest.approx(0.2)


def test_gap_shares_missing_bound_is_nan() -> None:
    s = gap_shares(0.4, pd.Series({"bound_mfu": np.nan, "t_compute_s": 1.0}))
    assert all(math.isnan(v) for v in s.values())


@settings(max_examples=100, deadline=None)
@given(mfu=st.floats(0.01, 1.0), bound=st.floats(0.01, 1.0),
       times=st.lists(st.floats(0.0, 10.0), min_size=7, max_size=7))
@example(mfu=1.0, bound=0.25, times=[0.0] * 6 + [1.1125369292536007e-308])  # seed 52
def test_gap_shares_sum_to_one(mfu: float, bound: float, times: list[float]) -> None:
    keys = ("t_hbm_s", "t_net_tp_s", "t_net_dp_s", "t_net_pp_s", "t_net_ep_s", "t_bubble_s",
            "t_latency_s")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # numpy's, subnormal times too
        s = gap_shares(mfu, pd.Series({"bound_mfu": bound, "t_compute_s": 1.0,
                                       **dict(zip(keys, times))}))
    assert sum(s[k] for k in SHARES) == pytest.approx(1.0)
    assert s["compute"] == pytest.approx(mfu)
    assert all(s[k] >= -1e-12 for k in SHARES if k != "residual")
    # a run above its ceiling leaves a negative residual share, one below it a positive one
    if mfu > bound * (1 + 1e-9):
        assert s["residual"] < 0
    elif mfu < bound * (1 - 1e-9):
        assert s["residual"] > 0


def test_n_at_efficiency_interpolates_in_log_n() -> None:
    n = np.array([100.0, 1000.0])
    assert n_at_efficiency(n, np.array([0.9, 0.1]), 0.5) == pytest.approx(math.sqrt(100 * 1000))
    assert math.isnan(n_at_efficiency(n, np.array([0.9, 0.8]), 0.5))


def test_predict_frame_from_a_law_fit() -> None:
    """On exact Amdahl data (serial fraction 0.01) the refit predicts the law at new N,
    inside its own prediction interval."""
    from pipeline.fit.laws import fit

    n = np.array([8.0, 16, 32, 64, 128, 256])
    amdahl = lambda x: x / (1 + 0.01 * (x - 1))  # noqa: E731
    rng = np.random.default_rng(0)
    y = amdahl(n) * (1 + 0.002 * rng.standard_normal(n.size))
    res = fit(n, y, law="amdahl", scale="log")
    f = predict_frame(res, np.array([512.0, 1e4]), 0.95)
    assert list(f.columns) == ["predicted", "pi_low", "pi_high"] and len(f) == 2
    truth = amdahl(np.array([512.0, 1e4]))
    # 0.2% noise: the refit is within the noise level even 40x beyond the data
    assert f["predicted"].to_numpy() == pytest.approx(truth, rel=2e-3)
    assert f["predicted"].to_numpy() == pytest.approx(res.fitted(np.array([512.0, 1e4])),
                                                      rel=1e-12)
    assert res.params["sigma"] == pytest.approx(0.01, rel=2e-3)
    assert ((f["pi_low"] <= f["predicted"]) & (f["predicted"] <= f["pi_high"])).all()
    # the 95% band holds the true law and is narrow (under 1% wide) on such clean data
    assert ((f["pi_low"] <= truth) & (truth <= f["pi_high"])).all()
    assert ((f["pi_high"] - f["pi_low"]) / f["predicted"] < 0.01).all()


@pytest.mark.slow
def test_theory_efficiency_follows_the_bounds(outputs: dict) -> None:
    """At measured N the theory's efficiency is the ratio of the runs' own ceilings (synthetic
    bounds are mfu x 1.6, so for an uncapped series it equals the MFU ratio)."""
    runs = pd.read_parquet(outputs["processed"] / "runs.parquet")
    bounds = pd.read_parquet(outputs["processed"] / "bounds.parquet").set_index("run_id")
    summ = pd.read_parquet(outputs["processed"] / "comparison_series.parquet").set_index("series_id")
    sid = "syn/zero3-175b-a100-strong"
    g = runs[runs["series_id"] == sid].assign(b=lambda d: d["run_id"].map(bounds["bound_mfu"]))
    b = g.groupby("n_accelerators")["b"].median().sort_index()
    assert summ.loc[sid, "theory_efficiency_at_n_max"] == pytest.approx(b.iloc[-1] / b.iloc[0])
    assert summ.loc[sid, "theory_efficiency_at_n_max"] < 0.5  # the synthetic ceiling falls too


@pytest.mark.slow
def test_per_run_rows_and_fraction(outputs: dict) -> None:
    runs = pd.read_parquet(outputs["processed"] / "runs.parquet")
    comp = pd.read_parquet(outputs["processed"] / "comparison.parquet")
    assert set(comp["run_id"]) == set(runs.loc[runs["status"] == "ok", "run_id"])
    assert np.allclose(comp["fraction_of_ceiling"], comp["mfu"] / comp["bound_mfu"])
    shares = comp[[f"share_{k}" for k in SHARES]].sum(axis=1)
    assert np.allclose(shares, 1.0)
    # synthetic bounds are mfu * 1.6 (capped at 0.95): fraction = 1/1.6 where not capped
    assert comp["fraction_of_ceiling"].median() == pytest.approx(1 / 1.6)


@pytest.mark.slow
def test_frontier_placement_basis(outputs: dict) -> None:
    comp = pd.read_parquet(outputs["processed"] / "comparison.parquet").set_index("source")
    mlperf = comp.loc["mlperf"]
    assert mlperf["training_flop_basis"] == "time_to_train"
    assert mlperf["training_flop"] == pytest.approx(mlperf["model_flops_per_s"] * 3000.0)
    palm = comp.loc["palm2022"]
    palm = palm[palm["model"] == "PaLM 540B"].iloc[0]
    assert palm["training_flop_basis"] == "duration_at_throughput"
    assert palm["training_flop"] == pytest.approx(0.462 * 275e12 * 6144 * 90 * 86400)


@pytest.mark.slow
def test_series_efficiency_recovers_synthetic_law(outputs: dict) -> None:
    summ = pd.read_parquet(outputs["processed"] / "comparison_series.parquet").set_index("series_id")
    spec = {s[0]: s for s in SERIES_SPECS}
    sid = "syn/zero3-175b-a100-strong"
    ns, law = spec[sid][7], spec[sid][8]
    # measured efficiency at N max = mfu ratio (the wobble of the fixture is at most 1%)
    assert summ.loc[sid, "efficiency_at_n_max"] == pytest.approx(law(ns[-1]) / law(ns[0]), rel=0.03)
    # eff = 4^-0.85 at 1536 ~ 0.31 < 0.5 < 2^-0.85 at 768: the crossing lies between them
    assert 768 < summ.loc[sid, "n_at_threshold_measured"] < 1536
    # exact by construction: the fixture's wobble is +0%, +1%, -1% at N = 384, 768, 1536
    eff = [law(n) * (1 + w) / law(ns[0]) for n, w in zip(ns, NOISE)]
    assert summ.loc[sid, "efficiency_at_n_max"] == pytest.approx(eff[-1], rel=1e-9)
    # 50% is crossed between 768 and 1536, interpolated linearly in log N
    frac = (eff[1] - 0.5) / (eff[1] - eff[2])
    assert summ.loc[sid, "n_at_threshold_measured"] == pytest.approx(768 * 2.0**frac, rel=1e-9)
    assert 600 < summ.loc[sid, "n_at_threshold_law"] < 1536
    # the weak series barely declines and never crosses 50%
    assert math.isnan(summ.loc["syn/llama70b-h100-weak", "n_at_threshold_law"])
    assert summ.loc["syn/llama70b-h100-weak", "efficiency_at_n_max"] > 0.95


@pytest.mark.slow
def test_extrapolation_targets_and_intervals(outputs: dict) -> None:
    curves = pd.read_parquet(outputs["processed"] / "comparison_curves.parquet")
    t = curves[curves["kind"] == "target"]
    assert sorted(t["n_accelerators"].unique()) == [10000, 100000]
    assert len(t) == 2 * curves["series_id"].nunique()
    ok = t.dropna(subset=["pi_low"])
    assert len(ok) and (ok["pi_low"] <= ok["predicted"]).all() and (ok["predicted"] <= ok["pi_high"]).all()
    # PTD-P strong: mfu ~ (n/384)^-0.06 -> efficiency at 10k ~ (10000/384)^-0.06 = 0.82
    row = t[(t["series_id"] == "syn/ptdp-175b-a100-strong") & (t["n_accelerators"] == 10000)].iloc[0]
    assert row["efficiency_law"] == pytest.approx((10000 / 384) ** -0.06, abs=0.05)
    assert row["efficiency_law_low"] <= (10000 / 384) ** -0.06 <= row["efficiency_law_high"]
    assert row["efficiency_law_low"] <= row["efficiency_law"] <= row["efficiency_law_high"]


@pytest.mark.slow
def test_metrics_headline(outputs: dict) -> None:
    m = outputs["metrics_dict"]
    assert m["n_series"] == 4 and m["default_law"] == "power"
    assert m["weak_median_efficiency_at_n_max"] > 0.95
    assert m["strong_median_efficiency_at_n_max"] < 0.5
    assert (outputs["root"] / "plots" / "compare_efficiency.csv").exists()


@pytest.mark.slow
def test_deterministic(outputs: dict, tmp_path: Path) -> None:
    out = tmp_path / "again"
    compare_run(load_params(), processed_dir=outputs["processed"], metrics_dir=outputs["metrics"],
                out_dir=out, metrics_path=out / "compare.json", plots_dir=out / "plots")
    for name in ("comparison.parquet", "comparison_curves.parquet", "comparison_series.parquet"):
        assert (out / name).read_bytes() == (outputs["processed"] / name).read_bytes()
    assert (out / "compare.json").read_bytes() == (outputs["metrics"] / "compare.json").read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("group,field,value", [
    ("compare", "extrapolate_n", [10, "x"]), ("compare", "extrapolate_n", []),
    ("fit", "interval", 1.5), ("theory", "duration_days", -1),  # shared values compare reads
    ("compare", "efficiency_threshold", 0), ("compare", "interval", 0.9)])  # not compare's own
def test_broken_config_names_field(outputs: dict, tmp_path: Path, group: str, field: str,
                                   value: object) -> None:
    params = copy.deepcopy(load_params())
    params[group][field] = value
    with pytest.raises(ConfigError, match=f"'{group}.{field}[.']".replace(".", r"\.")):
        compare_run(params, processed_dir=outputs["processed"], metrics_dir=outputs["metrics"],
                    out_dir=tmp_path, metrics_path=tmp_path / "c.json", plots_dir=tmp_path)


@pytest.mark.slow
def test_n_at_threshold_law_is_the_fit_stages_root(outputs: dict) -> None:
    """One answer for a law's N at the threshold: compare quotes fits.n_at_threshold (the
    root of the law's efficiency), not an interpolation on its own grid."""
    fits = pd.read_parquet(outputs["processed"] / "fits.parquet")
    summ = pd.read_parquet(outputs["processed"] / "comparison_series.parquet")
    root = dict(zip(zip(fits.series_id, fits.law), fits.n_at_threshold))
    quoted = summ.dropna(subset=["n_at_threshold_law"])
    assert len(quoted) >= 1
    for r in quoted.itertuples():
        assert r.n_at_threshold_law == root[(r.series_id, r.law)]
