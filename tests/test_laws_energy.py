"""Energy laws (pipeline/fit/energy.py): known slopes recovered, intervals cover, series rules."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipeline.fit.energy import energy_laws, lack_of_fit_p, submitter_family
from pipeline.ingest.contract import POWER_COLUMNS


def _power(rows: list[dict]) -> pd.DataFrame:
    base = {c[0]: None for c in POWER_COLUMNS}
    return pd.DataFrame([{**base, **r} for r in rows], columns=[c[0] for c in POWER_COLUMNS])


def _series(factor: float, measurement: str, submitter: str, rng, noise=0.02, ns=(8, 64, 512),
            reps=5, status="ok") -> list[dict]:
    b = np.log2(factor)
    rows = []
    for n in ns:
        for i in range(reps):
            e_tok = 0.5 * n ** b * np.exp(rng.normal(0, noise))
            rows.append({"run_id": f"{measurement}{n}-{i}", "model": "M", "accelerator": "H100",
                         "power_measurement": measurement, "submitter": submitter,
                         "mlperf_version": "v4.0", "status": status, "n_accelerators": n,
                         "energy_j_per_token": e_tok, "power_w_per_accelerator": 700.0,
                         "energy_j": e_tok * 1e7, "energy_j_interconnect": 1e5 if n > 8 else None,
                         "time_to_train_s": 100.0})
    return rows


def test_submitter_family() -> None:
    assert submitter_family("smc-ac-power") == "smc" == submitter_family("smc-dc-power")
    assert submitter_family("Lenovo") == "Lenovo"


def test_known_doubling_factor_is_recovered_with_an_interval() -> None:
    rng = np.random.default_rng(0)
    fits, points, metrics = energy_laws(_power(_series(1.1, "AC", "x-ac-power", rng)))
    row = fits[(fits["quantity"] == "energy_j_per_token")].iloc[0]
    assert row["converged"] and row["n_distinct"] == 3 and row["n_runs"] == 15
    assert row["doubling_low"] < 1.1 < row["doubling_high"]
    assert row["doubling_factor"] == pytest.approx(1.1, abs=0.01)
    flat = fits[fits["quantity"] == "power_w_per_accelerator"].iloc[0]
    assert flat["doubling_factor"] == pytest.approx(1.0, abs=1e-9)
    assert list(points["n_accelerators"]) == [8, 64, 512]
    assert points["interconnect_share"].iloc[0] is None or np.isnan(points["interconnect_share"].iloc[0])
    assert points["interconnect_share"].iloc[1] == pytest.approx(1e5 / points["energy_j_median"].iloc[1], rel=0.05)


def test_cross_series_pools_series_and_skips_single_n() -> None:
    rng = np.random.default_rng(1)
    rows = (_series(1.2, "AC", "a-ac-power", rng) + _series(1.2, "DC", "a-dc-power", rng)
            + _series(1.2, "AC", "b", rng, ns=(8,)))
    fits, _, metrics = energy_laws(_power(rows))
    cross = metrics["cross_series"]["energy_j_per_token"]
    assert len(cross["series"]) == 2  # the single-N series carries no slope
    assert cross["doubling_low"] < 1.2 < cross["doubling_high"]
    assert cross["n_level_doubling_low"] < 1.2 < cross["n_level_doubling_high"]
    assert metrics["series"] == 3 and metrics["series_fitted"] == 2
    single = fits[fits["series_id"].str.contains("\\|b\\|")]
    assert not single["converged"].any() and single["note"].str.contains("distinct N").all()


def test_unused_measurements_are_left_out() -> None:
    rng = np.random.default_rng(2)
    rows = _series(1.1, "AC", "x", rng) + _series(5.0, "AC", "x", rng, status="out_of_range: gap")
    fits, _, metrics = energy_laws(_power(rows))
    assert metrics["measurements"] == 15
    assert fits.iloc[0]["doubling_factor"] == pytest.approx(1.1, abs=0.01)


def test_intervals_cover_about_95_percent() -> None:
    rng = np.random.default_rng(3)
    hits = 0
    for _ in range(200):
        fits, _, _ = energy_laws(_power(_series(0.9, "DC", "x", rng, noise=0.05)))
        row = fits[fits["quantity"] == "energy_j_per_token"].iloc[0]
        hits += row["doubling_low"] <= 0.9 <= row["doubling_high"]
    assert 0.90 <= hits / 200 <= 0.99


def test_lack_of_fit_flags_a_bent_curve() -> None:
    n = np.repeat([8.0, 64.0, 512.0], 10)
    rng = np.random.default_rng(4)
    straight = 2.0 * n ** 0.1 * np.exp(rng.normal(0, 0.01, n.size))
    bent = np.where(n == 64, 3.0, 2.0) * np.exp(rng.normal(0, 0.01, n.size))
    b_s = np.polyfit(np.log(n), np.log(straight), 1)
    b_b = np.polyfit(np.log(n), np.log(bent), 1)
    assert lack_of_fit_p(n, straight, np.exp(b_s[1]), b_s[0]) > 0.01
    assert lack_of_fit_p(n, bent, np.exp(b_b[1]), b_b[0]) < 1e-6
    assert lack_of_fit_p(np.array([8.0, 64.0]), np.array([1.0, 2.0]), 1.0, 0.3) is None
