"""The energy contracts (pipeline/ingest/contract.py, pipeline/fit/contract.py,
pipeline/theory/contract.py): power.parquet, energy_fits/energy_points, frontier_energy.parquet,
the energy run columns, and the energy keys of fit.json, theory.json and ingest.json. What the
stages write passes; a broken value is refused naming its column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pandera import errors as pa_errors

from pipeline.fit.energy import energy_laws
from pipeline.ingest.contract import POWER_COLUMNS, RUN_COLUMNS, pandas_dtype, validate_runs
from pipeline.schema import ContractError, check_metrics, check_output, output_column_names
from tests.synthetic_upstream import make_fit_metrics, make_fits, make_frontier, make_runs, \
    make_series


def _power() -> pd.DataFrame:
    """Three N of one AC series, two runs each: power.parquet rows as the ingest writes them."""
    rows = []
    for n in (8, 64, 512):
        for i in range(2):
            e_tok = 0.5 * n ** 0.1 * (1 + 0.01 * i)
            rows.append({"run_id": f"{n:04d}{i:012d}", "source": "mlperf_training",
                         "model": "M", "accelerator": "H100-SXM5-80GB", "n_accelerators": n,
                         "submitter": "x-ac-power", "mlperf_version": "v4.0",
                         "power_measurement": "AC", "status": "ok", "used_in_runs": True,
                         "n_node_files": max(n // 8, 1), "n_switch_files": 1,
                         "time_to_train_s": 1000.0 / n ** 0.8, "tokens": 1e8,
                         "energy_j": e_tok * 1e8, "energy_j_nodes": e_tok * 0.9e8,
                         "energy_j_interconnect": e_tok * 0.1e8,
                         "power_w_per_accelerator": 700.0 / n ** 0.05, "energy_j_per_token": e_tok,
                         "power_folder": f"power/result_{i}", "notes": ""})
    return pd.DataFrame({n: pd.array([r.get(n) for r in rows], dtype=pandas_dtype(t))
                         for n, t in POWER_COLUMNS})


def test_power_rows_and_the_energy_laws_on_them_pass_their_contracts() -> None:
    power = check_output("power.parquet", _power())
    fits, points, metrics = energy_laws(power)
    check_output("energy_fits.parquet", fits.reindex(columns=output_column_names(
        "energy_fits.parquet")))
    check_output("energy_points.parquet", points)
    assert set(fits["quantity"]) == {"energy_j_per_token", "power_w_per_accelerator", "energy_j"}
    assert points["interconnect_share"].tolist() == pytest.approx([0.1] * 3)
    fit = make_fit_metrics(*_fit_inputs()).model_dump()
    check_metrics("fit", {**fit, "energy": metrics})


def _fit_inputs():
    runs = make_runs()
    series = make_series(runs)
    _, extra = make_fits(runs, series)
    return extra, series


@pytest.mark.parametrize("column, value, check", [
    ("power_measurement", "XY", "isin"),
    ("energy_j", -1.0, "greater_than"),
    ("energy_j_interconnect", -1.0, "greater_than_or_equal_to"),
    ("n_node_files", -1, "greater_than_or_equal_to"),
    ("status", "", "str_length"),
])
def test_a_bad_power_row_is_refused_naming_the_column(column, value, check) -> None:
    power = _power()
    power.loc[0, column] = value
    with pytest.raises(ContractError, match=f"power.parquet.*{column}.*{check}"):
        check_output("power.parquet", power)


def test_energy_points_fits_and_frontier_refuse_bad_values() -> None:
    fits, points, _ = energy_laws(_power())
    with pytest.raises(ContractError, match="interconnect_share.*less_than_or_equal_to"):
        check_output("energy_points.parquet", points.assign(interconnect_share=1.5))
    with pytest.raises(ContractError, match="quantity.*isin"):
        check_output("energy_fits.parquet", fits.assign(quantity="watts"))
    frontier, _ = make_frontier()
    front = frontier.loc[:, ["scenario", "training_flop", "n_accelerators", "feasible"]].assign(
        power_mw_tdp=1.0, power_mw_measured=np.nan, energy_j_per_token_tdp=0.5,
        energy_j_per_token_measured=np.nan)
    check_output("frontier_energy.parquet", front)
    with pytest.raises(ContractError, match="power_mw_tdp.*greater_than"):
        check_output("frontier_energy.parquet", front.assign(power_mw_tdp=-1.0))


def test_run_energy_columns_are_checked_in_runs_parquet() -> None:
    runs = make_runs().astype({n: pandas_dtype(t) for n, t, _ in RUN_COLUMNS})
    ok = runs.assign(energy_j=1e9, energy_j_nodes=9e8, energy_j_interconnect=0.0,
                     power_measurement="DC")
    validate_runs(ok)  # 0 J of interconnect is a measurement; DC a vocabulary word
    for column, value in (("power_measurement", "ac"), ("energy_j", 0.0),
                          ("energy_j_interconnect", -1.0)):
        with pytest.raises(pa_errors.SchemaErrors, match=column):
            validate_runs(ok.assign(**{column: value}))


def _theory_energy() -> dict:
    point = {"training_flop": 1e28, "n_accelerators": 2e6, "power_mw": 1700.0,
             "energy_gwh": 3400.0}
    none = dict.fromkeys(point)
    return {"duration_days": 90.0, "scenarios": {"baseline": {
        "accelerator": "H100-SXM5-80GB", "power_w_per_accelerator": 856.0,
        "power_basis": "MLPerf", "tdp_w": 700.0, "measured_w": 856.0, "duration_days": 90.0,
        "knee": point, "wall": none, "knee_tdp": point, "wall_tdp": none}}}


def test_energy_metrics_missing_a_key_are_refused() -> None:
    _, theory = make_frontier()
    check_metrics("theory", {**theory, "_energy": _theory_energy()})
    broken = _theory_energy()
    del broken["scenarios"]["baseline"]["knee"]
    with pytest.raises(ContractError, match="(?s)theory.json.*knee"):
        check_metrics("theory", {**theory, "_energy": broken})

    _, _, metrics = energy_laws(_power())
    fit = make_fit_metrics(*_fit_inputs()).model_dump()
    del metrics["cross_series"]["energy_j_per_token"]["n_runs"]
    with pytest.raises(ContractError, match="(?s)fit.json.*n_runs"):
        check_metrics("fit", {**fit, "energy": metrics})

    from tests.synthetic_upstream import IngestMetrics
    ingest = IngestMetrics(totals={}, sources={}, rejects_by_code={}, runs_by_source_kind={},
                           runs_by_accelerator_family={}, n_series=0, runs_in_series=0,
                           logs_without_series={"count": 0, "by_reason": {}, "logs": []}
                           ).model_dump()
    power = {"measurements": 2, "ok": 2, "runs_with_energy": 1, "not_used_by_code": {}}
    check_metrics("ingest", {**ingest, "power": power})
    with pytest.raises(ContractError, match="(?s)ingest.json.*runs_with_energy"):
        check_metrics("ingest", {**ingest, "power": {**power, "runs_with_energy": None}})
