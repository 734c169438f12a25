"""The stages' contracts (pipeline/<stage>/contract.py, found by file name in pipeline/schema.py):
every output and metrics file, and the fixtures built from them."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from pipeline.schema import OUTPUT_COLUMNS, ContractError, check_metrics, check_output, empty_frame
from tests.synthetic_upstream import build, make_bounds, make_fit_metrics, make_fits, \
    make_runs, make_series


def test_every_parquet_output_of_the_pipeline_has_a_contract():
    import yaml

    from pipeline.config import PROJ_ROOT
    dvc = yaml.safe_load((PROJ_ROOT / "dvc.yaml").read_text())
    outs = {out if isinstance(out, str) else next(iter(out))
            for stage in dvc["stages"].values() for out in stage.get("outs", [])}
    parquet = {o.rsplit("/", 1)[-1] for o in outs if o.endswith(".parquet")}
    assert len(parquet) >= 14 and parquet == set(OUTPUT_COLUMNS)


def test_fixtures_pass_the_contracts_and_write_the_real_fit_keys(tmp_path):
    paths = build(tmp_path / "p", tmp_path / "m")
    fit = json.loads((paths["metrics"] / "fit.json").read_text())
    # the keys the report reads, as the fit stage writes them (no invented ones)
    assert fit["cross_series"]["hardware"]["hbm"]["mfu_points_per_doubling_of_ratio"] == -5.0
    assert set(fit["extrapolation"]["power"]) == {"k1", "k2"}
    for name in ("fits", "extrapolation", "bounds", "frontier", "runs", "series", "rejects"):
        check_output(f"{name}.parquet", pd.read_parquet(paths["processed"] / f"{name}.parquet"))


def test_report_renders_the_hardware_regression_from_fit_json(tmp_path):
    from pipeline.report.findings import hardware_regression
    runs = make_runs()
    series = make_series(runs)
    _, extra = make_fits(runs, series)
    reg = hardware_regression(make_fit_metrics(extra, series).model_dump())
    assert reg["slope_per_doubling"] == pytest.approx(-0.05)
    assert (reg["ci_low"], reg["ci_high"]) == (pytest.approx(-0.08), pytest.approx(-0.02))


def test_a_broken_output_is_refused_naming_column_and_check():
    runs = make_runs()
    bounds = make_bounds(runs)
    bad = bounds.assign(bound_mfu=np.where(np.arange(len(bounds)) == 0, 1.5, bounds.bound_mfu))
    with pytest.raises(ContractError, match="bounds.parquet.*bound_mfu.*less_than_or_equal_to"):
        check_output("bounds.parquet", bad)
    with pytest.raises(ContractError, match="column_in_dataframe|t_step_s"):
        check_output("bounds.parquet", bounds.drop(columns="t_step_s"))
    one = empty_frame("comparison_series.parquet").reindex([0]).assign(series_id="s")
    check_output("comparison_series.parquet", one)
    with pytest.raises(ContractError, match="column 'note' is int64, the contract says string"):
        check_output("comparison_series.parquet", one.assign(note=3))


def test_metrics_missing_a_key_are_refused():
    runs = make_runs()
    series = make_series(runs)
    _, extra = make_fits(runs, series)
    fit = make_fit_metrics(extra, series).model_dump()
    del fit["default_law"]
    with pytest.raises(ContractError, match="(?s)fit.json.*default_law"):
        check_metrics("fit", fit)
    with pytest.raises(ContractError, match="theory.json"):
        check_metrics("theory", {"baseline": {"knee_flop": 1e28}})
