"""Energy at the frontier (pipeline/theory/energy.py) and the report's energy findings."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from pipeline.report.data import ReportData
from pipeline.report.energy import energy_section
from pipeline.theory.energy import J_PER_GWH, frontier_energy, measured_power
from pipeline.theory.laws import Laws, training_tokens


def _runs() -> pd.DataFrame:
    rows = [("H100", 512, "gpt3", "AC", 850.0), ("H100", 512, "gpt3", "AC", 860.0),
            ("H100", 512, "llama2_70b_lora", "AC", 636.0), ("H100", 8, "gpt3", "AC", 900.0),
            ("H100", 512, "gpt3", "DC", 10.0), ("B200", 8, "llama2_70b_lora", "AC", 1124.0)]
    return pd.DataFrame(rows, columns=["accelerator", "n_accelerators", "benchmark",
                                       "power_measurement", "power_w_per_accelerator"])


def test_measured_power_prefers_pretraining_ac_at_the_largest_n() -> None:
    m = measured_power(_runs())
    assert m["H100"]["power_w_per_accelerator"] == pytest.approx(855.0)
    assert m["H100"]["n_accelerators"] == 512 and m["H100"]["benchmarks"] == "gpt3"
    assert m["B200"]["power_w_per_accelerator"] == 1124.0  # LoRA only: used, and named
    assert measured_power(pd.DataFrame()) == {}


class _Catalog:
    def spec(self, acc: str) -> dict:
        return {"tdp_w": {"H100": 700.0, "B200": 1000.0}.get(acc)}


def test_knee_and_wall_power_and_energy() -> None:
    flop = np.array([1e24, 1e26, 1e28, 1e30])
    front = pd.DataFrame({"scenario": "s", "training_flop": flop,
                          "n_accelerators": [1e3, 1e4, 1e6, 1e8],
                          "train_time_s": [7.0e6] * 4, "feasible": [True, True, True, False]})
    scn = SimpleNamespace(name="s", accelerator="H100", laws=Laws(), duration_s=90 * 86400.0)
    heads = {"s": {"knee_flop": 1e26, "wall_flop": 1e27}}
    frame, metrics = frontier_energy(front, heads, [scn], _Catalog(), _runs(), 90.0)
    s = metrics["scenarios"]["s"]
    assert s["power_w_per_accelerator"] == pytest.approx(855.0) and s["tdp_w"] == 700.0
    assert s["knee"]["n_accelerators"] == pytest.approx(1e4)
    assert s["knee"]["power_mw"] == pytest.approx(1e4 * 855.0 / 1e6)
    assert s["knee"]["energy_gwh"] == pytest.approx(1e4 * 855.0 * 7.0e6 / J_PER_GWH)
    assert s["knee_tdp"]["power_mw"] == pytest.approx(7.0)
    # the wall lies between grid points: N interpolated on log C (1e4 -> 1e6 at 1e26 -> 1e28)
    assert s["wall"]["n_accelerators"] == pytest.approx(1e5)
    assert s["duration_days"] == pytest.approx(90.0)
    # energy per token along the frontier: N W T / D(C); infeasible points have none
    d = training_tokens(flop, Laws())
    expect = 1e3 * 700.0 * 7.0e6 / d[0]
    assert frame["energy_j_per_token_tdp"].iloc[0] == pytest.approx(expect)
    assert np.isnan(frame["energy_j_per_token_measured"].iloc[3])


def test_no_power_figure_gives_no_mw() -> None:
    front = pd.DataFrame({"scenario": "t", "training_flop": [1e24, 1e26],
                          "n_accelerators": [1e3, 1e4], "train_time_s": [7e6, 7e6],
                          "feasible": [True, True]})
    scn = SimpleNamespace(name="t", accelerator="TPU", laws=Laws(), duration_s=7.776e6)
    _, metrics = frontier_energy(front, {"t": {"knee_flop": 1e25, "wall_flop": 1e26}}, [scn],
                                 _Catalog(), pd.DataFrame(), 90.0)
    t = metrics["scenarios"]["t"]
    assert t["power_basis"] == "no power figure" and t["knee"]["power_mw"] is None


def test_report_energy_section_steps_and_baseline() -> None:
    pts = pd.DataFrame({
        "series_id": "e", "model": "Llama 2 70B (LoRA fine-tuning)",
        "accelerator": "H100-SXM5-80GB", "power_measurement": "AC",
        "n_accelerators": [8, 64, 512], "n_runs": [10, 10, 10],
        "energy_j_per_token_median": [0.48, 0.79, 0.80], "energy_j_per_token_min": [0.47] * 3,
        "energy_j_per_token_max": [0.81] * 3, "power_w_per_accelerator_median": [895, 728, 636],
        "power_w_per_accelerator_min": [600] * 3, "power_w_per_accelerator_max": [900] * 3,
        "energy_j_median": [12.1e6, 20.0e6, 45.1e6], "time_to_train_s_median": [1687, 318, 117],
        "interconnect_share": [None, 0.26, 0.15]})
    theory = {"_energy": {"scenarios": {"a": {}, "my_baseline": {}}}}
    d = ReportData({"energy_points": pts, "energy_fits": pd.DataFrame()},
                   {"fit": {}, "theory": theory})
    e = energy_section(d, "")
    assert e["baseline"] == "my_baseline"
    step = e["steps"][1]
    assert (step["n_from"], step["n_to"]) == (64, 512)
    assert step["speedup"] == pytest.approx(318 / 117)
    assert step["energy_ratio"] == pytest.approx(45.1 / 20.0)
    assert [p["lora"] for p in e["points"]] == [True] * 3
    assert e["points"][2]["energy_mj"] == pytest.approx(45.1)
