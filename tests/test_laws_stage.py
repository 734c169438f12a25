"""The fit stage end to end on synthetic runs/series, extrapolation splits, cross-series models."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipeline.config import ConfigError, load_params
from pipeline.io import write_parquet
from pipeline.fit.crossseries import cross_series
from pipeline.fit.extrapolation import holdout_split, point_ape
from pipeline.fit.stage import run
from pipeline.schema import empty_frame
from synthetic_upstream import conform, make_runs, make_series

PARAMS = {"fit": {"laws": ["power", "amdahl", "usl", "comm"], "scale": "linear",
                  "min_distinct_n": 3, "extrapolation_min_distinct_n": 4, "holdout_k": [1, 2],
                  "interval": 0.95, "default_law_min_success": 0.8, "score_other_scale": True,
                  "flag_peak_beyond": 10, "workers": 1},
          # the extrapolation grid the laws' curves are written on (fit_curves.parquet)
          "compare": {"extrapolate_n": [10000, 100000], "efficiency_threshold": 0.5,
                      "curve_points": 48}}


def _upstream(tmp_path: Path) -> tuple[Path, Path, pd.DataFrame, pd.DataFrame]:
    runs = make_runs()
    # A USL-shaped series with replicates (MLPerf-like) and a failed run, and a 2-point series.
    rows = []
    template = runs.iloc[0].to_dict()
    rng = np.random.default_rng(0)
    for n in (8, 16, 32, 64, 128, 256):
        for rep in range(3):
            y = 5e13 * n / (1 + 0.02 * (n - 1) + 2e-4 * n * (n - 1)) * np.exp(rng.normal(0, 0.02))
            rows.append({**template, "run_id": f"usl-{n}-{rep}", "series_id": "syn/usl-reps",
                         "n_accelerators": n, "model_flops_per_s": y, "tokens_per_s": y / 6e9,
                         "scaling": "strong", "status": "ok"})
    rows.append({**template, "run_id": "usl-oom", "series_id": "syn/usl-reps",
                 "n_accelerators": 512, "model_flops_per_s": np.nan, "status": "oom"})
    for n in (8, 16, 32, 64, 128):
        rows.append({**template, "run_id": f"pow-{n}", "series_id": "syn/exact-power",
                     "n_accelerators": n, "model_flops_per_s": 1e14 * n**0.8, "status": "ok"})
    for n in (8, 16):
        rows.append({**template, "run_id": f"two-{n}", "series_id": "syn/two-points",
                     "n_accelerators": n, "model_flops_per_s": 1e14 * n, "status": "ok"})
    runs = pd.concat([runs, pd.DataFrame(rows)], ignore_index=True)
    series = make_series(runs[runs.status == "ok"])
    runs_path, series_path = tmp_path / "runs.parquet", tmp_path / "series.parquet"
    write_parquet(conform(runs, "runs.parquet"), runs_path)
    write_parquet(series, series_path)
    write_parquet(empty_frame("power.parquet"), tmp_path / "power.parquet")
    return runs_path, series_path, runs, series


def _run(tmp_path: Path, params: dict, tag: str = "a") -> tuple[dict, Path]:
    runs_path, series_path, _, _ = _upstream(tmp_path)
    out = tmp_path / tag
    metrics = run(params, processed_dir=runs_path.parent, out_dir=out,
                  metrics_path=out / "fit.json", plots_dir=out / "plots")
    return metrics, out


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, Path]:
    """One fit-stage run on the synthetic upstream, shared by the tests that only read its
    outputs: (metrics, outputs folder, upstream folder)."""
    root = tmp_path_factory.mktemp("fit")
    metrics, out = _run(root, PARAMS)
    return metrics, out, root


@pytest.mark.slow
def test_stage_outputs_follow_the_contract(fitted: tuple[dict, Path, Path]) -> None:
    metrics, out, _ = fitted
    fits = pd.read_parquet(out / "fits.parquet")
    extra = pd.read_parquet(out / "extrapolation.parquet")
    contract_fits = {"series_id", "law", "y_metric", "params", "stderr", "ci_low", "ci_high",
                     "aicc", "bic", "r2", "n_points", "converged", "note", "n_peak",
                     "n_at_threshold"}
    assert contract_fits <= set(fits.columns)
    assert {"series_id", "source", "law", "k", "n_train_max", "n_target", "y_metric", "actual",
            "predicted", "pi_low", "pi_high", "ape", "covered"} <= set(extra.columns)
    series = pd.read_parquet(fitted[2] / "series.parquet")
    # every series x law has exactly one row
    assert len(fits) == 4 * len(series)
    assert not fits.duplicated(["series_id", "law"]).any()
    two = fits[fits.series_id == "syn/two-points"]
    assert (~two.converged).all() and two.note.str.contains("2 distinct N").all()
    usl = fits[(fits.series_id == "syn/usl-reps") & (fits.law == "usl")].iloc[0]
    assert usl.converged and usl.n_points == 18
    assert "not ok" in usl.note  # the oom run is counted, not silently lost
    params, stderr = json.loads(usl.params), json.loads(usl.stderr)
    ci_low, ci_high = json.loads(usl.ci_low), json.loads(usl.ci_high)
    # 2% noise on 18 points: the true sigma 0.02, kappa 2e-4, lambda 5e13 lie within 3 standard
    # errors of the estimates and inside their 95% intervals
    for name, true in (("sigma", 0.02), ("kappa", 2e-4), ("lam", 5e13)):
        assert abs(params[name] - true) <= 3 * stderr[name], name
        assert ci_low[name] <= true <= ci_high[name], name
        assert 0 < stderr[name] < 0.1 * params[name], name
    sigma, kappa = params["sigma"], params["kappa"]
    assert usl.n_peak == pytest.approx(np.sqrt((1 - sigma) / kappa), rel=1e-9)  # Gunther's N*
    assert usl.n_peak == pytest.approx(np.sqrt(0.98 / 2e-4), rel=0.1)
    # USL is the true law of this series (comm nests it: USL is comm with t_lat = 0), so USL is
    # within 2 AICc of the best and the power law, which has no peak, far behind.
    assert usl.delta_aicc < 2.0
    power = fits[(fits.series_id == "syn/usl-reps") & (fits.law == "power")].iloc[0]
    assert power.delta_aicc > 10.0
    # fitted efficiency halves where the closed form says: E(N) = 1/(1+s(N-1)+kN(N-1)) relative
    # relative to N_min = 8: D(N) = 2 D(8) with D(N) = 1 + s(N-1) + k N(N-1), a quadratic in N
    d8 = 1 + sigma * 7 + kappa * 56
    a, b, c = kappa, sigma - kappa, 1 - sigma - 2 * d8
    assert usl.n_at_threshold == pytest.approx((-b + np.sqrt(b * b - 4 * a * c)) / (2 * a),
                                                  rel=1e-6)
    assert usl.n_at_threshold == pytest.approx(45.7, rel=0.05)  # with the true s, k
    assert metrics["default_law"] in {"power", "amdahl", "usl", "comm"}
    on_disk = json.loads((out / "fit.json").read_text())
    assert on_disk["default_law"] == metrics["default_law"]
    assert set(on_disk["extrapolation"]) == {"power", "amdahl", "usl", "comm"}
    assert (out / "plots" / "fit_extrapolation.csv").exists()
    # measured figures: the synthetic 8b series carries power; energy per token is recomputed
    # here from the runs themselves (log2-log2 slope) and must match
    runs = pd.read_parquet(fitted[2] / "runs.parquet")
    g = runs[runs.series_id == "syn/8b-h100-strong"]
    slope = np.polyfit(np.log2(g.n_accelerators.astype(float)), np.log2(g.energy_j_per_token), 1)[0]
    row = fits[fits.series_id == "syn/8b-h100-strong"].iloc[0]
    assert row.energy_per_token_doubling_factor == pytest.approx(2.0**slope, rel=1e-9)
    assert row.energy_per_token_doubling_factor > 1.0  # MFU falls faster than power
    n_max = g.n_accelerators.max()
    assert row.tokens_per_accelerator_hour_at_n_max == pytest.approx(
        3600 * g[g.n_accelerators == n_max].tokens_per_s_per_accelerator.iloc[0], rel=1e-9)
    assert np.isnan(fits[fits.series_id == "syn/usl-reps"].energy_per_token_doubling_factor).all()
    eff = pd.read_csv(out / "plots" / "fit_efficiency.csv")
    first = eff.sort_values("n_accelerators").groupby("series_id").first()
    assert np.allclose(first.efficiency, 1.0)


@pytest.mark.slow
def test_extrapolation_rows_score_held_out_points(fitted: tuple[dict, Path, Path]) -> None:
    _, out, _ = fitted
    extra = pd.read_parquet(out / "extrapolation.parquet")
    usl = extra[(extra.series_id == "syn/usl-reps") & (extra.law == "usl")]
    # k=1 holds out the 3 replicates at N=256; k=2 those at 128 and 256
    assert sorted(usl[usl.k == 1].n_target) == [256] * 3
    assert sorted(usl[usl.k == 2].n_target) == [128] * 3 + [256] * 3
    assert (usl[usl.k == 2].n_train_max == 64).all()
    ok = usl[np.isfinite(usl.predicted)]
    assert np.allclose(ok.ape, (ok.predicted - ok.actual).abs() / ok.actual)
    assert (ok.covered == ((ok.pi_low <= ok.actual) & (ok.actual <= ok.pi_high))).all()
    # 3-point series are fitted but never extrapolated
    assert not extra.series_id.str.contains("zero3").any()
    # the exact synthetic power-law series is predicted exactly by the power law
    power = extra[(extra.series_id == "syn/exact-power") & (extra.law == "power")]
    assert len(power) == 3 and (power.ape < 1e-6).all()


@pytest.mark.slow
def test_stage_is_deterministic(tmp_path: Path, fitted: tuple[dict, Path, Path]) -> None:
    _, first, _ = fitted
    _, again = _run(tmp_path, PARAMS, "b")
    for name in ("fits.parquet", "extrapolation.parquet", "cross_series.parquet", "fit.json",
                 "plots/fit_extrapolation.csv", "plots/fit_efficiency.csv"):
        assert (first / name).read_bytes() == (again / name).read_bytes(), name


@pytest.mark.parametrize("field, value, match", [
    ("laws", ["power", "gustafson"], "fit.laws"),
    ("holdout_k", [0], "fit.holdout_k"),
    ("interval", 1.5, "fit.interval"),
    ("scale", "sqrt", "fit.scale"),
    ("min_distinct_n", "three", "fit.min_distinct_n"),
])
def test_broken_config_names_the_field(tmp_path: Path, field: str, value: object,
                                       match: str) -> None:
    params = copy.deepcopy(PARAMS)
    params["fit"][field] = value
    with pytest.raises(ConfigError, match=match):
        _run(tmp_path, params)


@pytest.mark.slow
def test_project_params_are_valid(tmp_path: Path) -> None:
    fit_params = load_params()["fit"]
    assert set(PARAMS["fit"]) == set(fit_params)
    _run(tmp_path, {"fit": fit_params, "compare": load_params()["compare"]})


def test_holdout_split_uses_distinct_n() -> None:
    n = np.array([8, 8, 16, 16, 32, 64, 64, 64], dtype=float)
    train, test = holdout_split(n, 1)
    assert sorted(n[test]) == [64, 64, 64] and sorted(n[train]) == [8, 8, 16, 16, 32]
    train, test = holdout_split(n, 2)
    assert sorted(n[test]) == [32, 64, 64, 64]
    assert np.allclose(point_ape(np.array([100.0, 200.0]), np.array([110.0, 150.0])), [0.1, 0.25])


def test_cross_series_recovers_mfu_per_doubling() -> None:
    # Six sources, strong scaling loses 3 MFU points per doubling, weak 0.5.
    rng = np.random.default_rng(0)
    rows = []
    for s in range(6):
        for scaling, slope in (("strong", -3.0), ("weak", -0.5)):
            for n in (8, 16, 32, 64, 128, 256, 512):
                mfu = (50.0 + 2 * s + slope * np.log2(n) + rng.normal(0, 0.5)) / 100
                rows.append(dict(run_id=f"{s}{scaling}{n}", source=f"src{s}", status="ok",
                                 scaling=scaling, mfu=mfu, n_accelerators=n, params=7e10,
                                 accelerator="H100-SXM5-80GB", accelerator_family="H100",
                                 strategy_family="3d" if s % 2 else "fsdp",
                                 peak_flops_per_s_per_accelerator=989e12))
    frame = pd.DataFrame(rows)
    table, headline = cross_series(frame, 0.95)
    d = headline["doubling"]
    assert d["n_clusters"] == 6 and d["cov_type"] == "cluster(source)"
    for scaling, slope in (("strong", -3.0), ("weak", -0.5)):
        est = d[scaling]
        assert est["ci_low"] < slope < est["ci_high"]
        assert est["mfu_points_per_doubling"] == pytest.approx(slope, abs=0.2)
        # every source ran every N: log2 N is orthogonal to the other terms, so the slope is
        # the plain least-squares slope of that scaling's points
        mine = frame[frame.scaling == scaling]
        ols = np.polyfit(np.log2(mine.n_accelerators), 100 * mine.mfu, 1)[0]
        assert est["mfu_points_per_doubling"] == pytest.approx(ols, rel=1e-9)
        assert est["ci_low"] < ols < est["ci_high"]
    # No compute-to-bandwidth ratios in these runs: the hardware models say so, fit nothing.
    for key in ("hbm", "scaleout"):
        assert headline["hardware"][key]["note"].startswith("0 runs on 0 accelerator type(s)")
    assert set(table.model) == {"doubling"}


# HBM bandwidths of four accelerator types (test values, not catalog data).
HBM_BYTES_PER_S = {"A": 1e12, "B": 2e12, "C": 4e12, "D": 8e12}


def test_hardware_model_recovers_ratio_slope() -> None:
    rng = np.random.default_rng(1)
    rows = []
    for s in range(5):
        for acc, hbm in HBM_BYTES_PER_S.items():
            peak = 1e15
            for n in (64, 256, 1024):
                ratio = np.log2(peak / hbm)
                mfu = (90.0 - 5.0 * ratio - 1.0 * np.log2(n) + rng.normal(0, 0.5)) / 100
                rows.append(dict(run_id=f"{s}{acc}{n}", source=f"src{s}", status="ok",
                                 scaling="strong", mfu=mfu, n_accelerators=n, params=7e10,
                                 model="m", accelerator=acc, accelerator_family=acc,
                                 strategy_family="3d",
                                 peak_flops_per_s_per_accelerator=peak,
                                 flops_per_hbm_byte=peak / hbm))
    frame = pd.DataFrame(rows)
    table, headline = cross_series(frame, 0.95)
    hbm = headline["hardware"]["hbm"]
    assert hbm["n_accelerator_types"] == 4
    assert hbm["ci_low"] < -5.0 < hbm["ci_high"]
    assert hbm["mfu_points_per_doubling_of_ratio"] == pytest.approx(-5.0, abs=0.3)
    # golden: least squares of MFU points on [1, log2 ratio, log2 N] (the other terms are
    # constant here)
    design = np.column_stack([np.ones(len(frame)), np.log2(frame.flops_per_hbm_byte),
                              np.log2(frame.n_accelerators)])
    coef = np.linalg.lstsq(design, 100 * frame.mfu.to_numpy(), rcond=None)[0]
    assert hbm["mfu_points_per_doubling_of_ratio"] == pytest.approx(coef[1], rel=1e-9)
    assert "too few" in headline["hardware"]["scaleout"]["note"]
    assert "hardware_hbm" in set(table.model)


def test_hardware_model_counts_a_grid_search_once_per_n() -> None:
    """A sweep of many layouts on one chip (most of them poor) must not stand for that chip:
    each (source, model, family, N) enters with its best MFU, so adding the sweep's worse
    layouts leaves the slope unchanged; fitted on every row it would move."""
    rng = np.random.default_rng(2)
    rows = []
    for s in range(5):
        for acc, hbm in HBM_BYTES_PER_S.items():
            for n in (64, 256, 1024):
                mfu = (90.0 - 5.0 * np.log2(1e15 / hbm) - np.log2(n) + rng.normal(0, 0.5)) / 100
                rows.append(dict(run_id=f"{s}{acc}{n}", source=f"src{s}", status="ok",
                                 scaling="strong", mfu=mfu, n_accelerators=n, params=7e10,
                                 model="m", accelerator=acc, accelerator_family=acc,
                                 strategy_family="3d", peak_flops_per_s_per_accelerator=1e15,
                                 flops_per_hbm_byte=1e15 / hbm))
    best = pd.DataFrame(rows)
    # src0's sweep on chip D: 300 worse layouts beside each of its best runs
    worse = [dict(r, run_id=f"{r['run_id']}-{i}", mfu=r["mfu"] * rng.uniform(0.1, 0.9))
             for r in rows if r["source"] == "src0" and r["accelerator"] == "D"
             for i in range(100)]
    swept = pd.concat([best, pd.DataFrame(worse)], ignore_index=True)
    alone = cross_series(best, 0.95)[1]["hardware"]["hbm"]
    with_sweep = cross_series(swept, 0.95)[1]["hardware"]["hbm"]
    assert with_sweep["n_obs"] == alone["n_obs"] == len(best)
    assert with_sweep["mfu_points_per_doubling_of_ratio"] == pytest.approx(
        alone["mfu_points_per_doubling_of_ratio"], rel=1e-12)
    import statsmodels.formula.api as smf
    every_row = smf.ols("I(100 * mfu) ~ np.log2(flops_per_hbm_byte) + np.log2(n_accelerators)",
                        swept).fit().params.iloc[1]
    assert abs(every_row - alone["mfu_points_per_doubling_of_ratio"]) > 1.0


def test_default_law_rule_needs_success_and_compares_on_common_cases() -> None:
    from pipeline.fit.extrapolation import summarise

    rows = []
    for i in range(10):
        for law, ape in (("usl", 0.01), ("amdahl", 0.10), ("power", 0.20)):
            # usl predicts only 3 of 10 cases: best where it predicts, but not a default
            predicted = 1.0 + ape if (law != "usl" or i < 3) else np.nan
            rows.append(dict(series_id=f"s{i}", source="x", law=law, k=1, run_id="r", n_target=8,
                             actual=1.0, predicted=predicted, ape=abs(predicted - 1.0),
                             covered=bool(i % 2)))
    extra = pd.DataFrame(rows)
    out = summarise(extra, ["power", "amdahl", "usl"], [1], min_success=0.8)
    assert out["default_law"] == "amdahl"
    assert out["laws"]["usl"]["success_rate"] == pytest.approx(0.3)
    assert out["laws"]["amdahl"]["k1"]["median_ape"] == pytest.approx(0.10)
    assert out["laws"]["amdahl"]["k1"]["coverage"] == pytest.approx(0.5)
    assert out["all_laws_common"]["n_cases"] == 3
    assert min(out["all_laws_common"]["mean_median_ape"].items(), key=lambda kv: kv[1])[0] == "usl"
    assert summarise(extra, ["power", "amdahl", "usl"], [1], min_success=0.3)["default_law"] == "usl"


@pytest.mark.slow
def test_no_series_gives_empty_outputs_not_a_crash(tmp_path: Path) -> None:
    runs_path, series_path, _, series = _upstream(tmp_path)
    write_parquet(series.iloc[0:0], series_path)
    out = tmp_path / "empty"
    metrics = run(PARAMS, processed_dir=runs_path.parent, out_dir=out,
                  metrics_path=out / "fit.json", plots_dir=out / "plots")
    assert metrics["n_series"] == 0 and metrics["default_law"] is None
    assert len(pd.read_parquet(out / "fits.parquet")) == 0
    extra = pd.read_parquet(out / "extrapolation.parquet")
    assert len(extra) == 0 and extra["k"].dtype == "int64"


def test_implausible_fits_are_flagged_in_note() -> None:
    from pipeline.fit.laws import fit
    from pipeline.fit.derived import law_figures
    from pipeline.fit.stage import plausibility_notes

    def notes(n, y, law):
        res = fit(n, y, law=law, scale="log")
        return " | ".join(plausibility_notes(res, law_figures(res, min(n), max(n)), min(n),
                                             max(n), 10.0))

    n = np.array([8, 16, 32, 64, 128], dtype=float)
    # nearly linear with a whiff of coherency: the USL peak lies ~ 300x beyond the data
    near_linear = 10 * n / (1 + 1e-3 * (n - 1) + 1e-9 * n * (n - 1))
    assert "x the largest measured N: extrapolated" in notes(n, near_linear, "usl")
    # throughput falling over the whole range: the peak sits below the smallest N
    falling = 1e3 * n / (1 + 0.01 * (n - 1) + 0.05 * n * (n - 1))
    assert "below the smallest measured N 8" in notes(n, falling, "usl")
    assert "b < 0" in notes(n, falling, "power")
    # flat scatter: no trend for a law to explain
    scatter = np.array([5.0, 9.0, 4.0, 8.0, 5.0])
    assert "R2" in notes(n, scatter, "power")
    # a well-measured peak inside the data says nothing
    inside = 10 * n / (1 + 0.02 * (n - 1) + 2e-4 * n * (n - 1))
    assert notes(n, inside, "usl") == ""


@pytest.mark.slow
def test_comm_only_caveat_stays_on_comm_rows(fitted: tuple[dict, Path, Path]) -> None:
    _, out, _ = fitted
    fits = pd.read_parquet(out / "fits.parquet")
    flagged = fits[fits.note.str.contains("treated as strong for comm")]
    assert set(flagged.law) <= {"comm"}


def test_coverage_note_says_when_intervals_undercover() -> None:
    from pipeline.fit.stage import _coverage_note

    laws = {"usl": {"success_rate": 1.0, "k1": {"coverage": 0.55}, "k2": {"coverage": 0.61}},
            "power": {"success_rate": 1.0, "k1": {"coverage": None}, "by_source": {}}}
    note = _coverage_note(laws, 0.95)
    assert note.startswith("extrapolation coverage 0.55-0.61, below the nominal 0.95")
    laws["usl"]["k2"]["coverage"] = 0.94
    assert "below" not in _coverage_note(laws, 0.95)
    assert _coverage_note({}, 0.95) == ""


@pytest.mark.slow
def test_fit_curves_are_the_fitted_laws_on_the_extrapolation_grid(
        fitted: tuple[dict, Path, Path]) -> None:
    """What compare draws is the fit stage's own fit: each converged law's predictions on
    ``extrapolation_grid`` (n_min, 48 log-spaced N, the targets), equal to refitting it."""
    from pipeline.fit.laws import get_law
    from pipeline.fit.nls import fit_law
    from pipeline.fit.series import series_points
    from pipeline.measures import extrapolation_grid

    _, out, upstream = fitted
    curves = pd.read_parquet(out / "fit_curves.parquet")
    fits = pd.read_parquet(out / "fits.parquet")
    runs = pd.read_parquet(upstream / "runs.parquet")
    series = pd.read_parquet(upstream / "series.parquet")
    converged = fits[fits.converged]
    assert set(zip(converged.series_id, converged.law)) <= set(zip(curves.series_id, curves.law))
    sid, law = converged.series_id.iloc[0], converged.law.iloc[0]
    mine = curves[(curves.series_id == sid) & (curves.law == law)]
    srow = series.set_index("series_id").loc[sid].copy()
    srow["series_id"] = sid
    points = series_points(runs[runs.series_id == sid], srow)
    grid = extrapolation_grid(float(points.n.min()), [10000, 100000], 48)
    assert len(grid) == 49 and np.array_equal(mine.n_accelerators.to_numpy(), grid)
    res = fit_law(get_law(law), points.n, points.y, scale="linear", ctx=points.ctx)
    pred = res.predict(grid, interval=0.95)
    assert mine.predicted.to_numpy() == pytest.approx(pred["predicted"].to_numpy(), rel=1e-12)
    assert (mine.pi_low <= mine.predicted).all() and (mine.predicted <= mine.pi_high).all()
    # the predictions at 4x and 16x the largest N (the report's "your runs") are the same fit's
    row = converged[(converged.series_id == sid) & (converged.law == law)].iloc[0]
    at = res.predict(np.array([points.n.min(), 4 * points.n.max(), 16 * points.n.max()]),
                     interval=0.95)
    assert row.predicted_at_n_min == pytest.approx(at["predicted"].iloc[0], rel=1e-12)
    for i, m in ((1, 4), (2, 16)):
        assert row[f"predicted_at_{m}x_n_max"] == pytest.approx(at["predicted"].iloc[i], rel=1e-12)
        assert row[f"pi_low_at_{m}x_n_max"] == pytest.approx(at["pi_low"].iloc[i], rel=1e-12)
        assert row[f"pi_high_at_{m}x_n_max"] == pytest.approx(at["pi_high"].iloc[i], rel=1e-12)
        assert row[f"pi_low_at_{m}x_n_max"] < row[f"predicted_at_{m}x_n_max"] < row[
            f"pi_high_at_{m}x_n_max"]
    assert fits.loc[~fits.converged, "predicted_at_4x_n_max"].isna().all()
