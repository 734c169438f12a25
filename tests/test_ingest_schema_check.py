"""pipeline/ingest/schema_check.py: runs.parquet's pandera checks on whole columns. A frame
that ``passes`` is one pandera accepts; one that does not is refused by pandera itself, with
pandera's failure cases (``check_runs`` = ``contract.validate_runs``)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pandera.pandas as pda
import pytest
from pandera import errors as pa_errors

from pipeline.ingest.contract import (RUN_COLUMNS, RUNS_FRAME_CHECKS, RUNS_FRAME_SCHEMA,
                                      pandas_dtype)
from pipeline.ingest.schema_check import (BUILTIN, check_runs, passes, understood,
                                          validate_fast)
from pipeline.vocab import Y_METRICS
from tests.synthetic_upstream import make_runs

CHECKS = RUNS_FRAME_CHECKS


def _ok() -> pd.DataFrame:
    return make_runs().astype({n: pandas_dtype(t) for n, t, _ in RUN_COLUMNS})


def _pandera_accepts(df: pd.DataFrame) -> bool:
    try:
        RUNS_FRAME_SCHEMA.validate(df, lazy=True)
    except pa_errors.SchemaErrors:
        return False
    return True


def test_the_runs_schema_is_understood_whole_and_a_good_frame_passes() -> None:
    assert understood(RUNS_FRAME_SCHEMA, CHECKS)
    assert {c.name for col in RUNS_FRAME_SCHEMA.columns.values() for c in col.checks} <= set(BUILTIN)
    ok = _ok()
    assert passes(RUNS_FRAME_SCHEMA, ok, CHECKS) and _pandera_accepts(ok)
    assert check_runs(ok) is ok


def _broken(df: pd.DataFrame, column: str, value: object) -> pd.DataFrame:
    out = df.copy()
    values = out[column].astype(object)
    values.iloc[1] = value
    try:  # keep the column's dtype where the value fits it
        out[column] = pd.array(values.tolist(), dtype=df[column].dtype)
    except (TypeError, ValueError):
        out[column] = values
    return out


BAD = [  # (column, value): one of every rule (dtype, nullable, unique, each check's kind)
    ("run_id", 12345), ("run_id", b"0123456789abcdef"), ("run_id", "0123456789ABCDEF"),
    ("run_id", None), ("source", None), ("model", 7.0), ("notes", np.int64(3)),
    ("source_kind", "table"), ("precision", "int4"), ("status", "OK"),
    ("strategy_family", "magic"), ("mfu", 0.0), ("mfu", 1.5), ("hfu", -0.1),
    ("mfu_source_count", 1.01), ("zero_stage", 4), ("zero_stage", -1),
    ("energy_j_interconnect", -1.0), ("energy_j", 0.0), ("params", -1.0),
    ("n_accelerators", 0), ("n_accelerators", None), ("tp", -2), ("params", None),
    ("sequence_parallel", "yes"), ("tokens_per_s", "fast"), ("power_measurement", "ac"),
]


@pytest.mark.parametrize("column, value", BAD)
def test_a_broken_value_fails_both_and_pandera_reports_it(column: str, value: object) -> None:
    df = _broken(_ok(), column, value)
    assert not passes(RUNS_FRAME_SCHEMA, df, CHECKS)
    assert not _pandera_accepts(df)
    with pytest.raises(pa_errors.SchemaErrors, match=column):
        check_runs(df)


def test_a_duplicate_run_id_and_the_checks_across_columns_fail_both() -> None:
    ok = _ok()
    cases = {"unique": _broken(ok, "run_id", ok["run_id"].iloc[0]),
             "active_params > params": _broken(ok, "active_params",
                                               float(ok["params"].iloc[1]) * 2)}
    no_measure = _broken(_broken(ok, "status", "ok"), "series_id", None)
    for m in ("tokens_per_s", "model_flops_per_s", "mfu", "hfu", "step_time_s",
              "time_to_train_s", *Y_METRICS):
        no_measure = _broken(no_measure, m, None)
    cases["an ok run has no measure"] = no_measure
    no_y = _broken(ok, "series_id", "s/1")
    for m in Y_METRICS:
        no_y = _broken(no_y, m, None)
    cases["a run in a series has no y metric"] = no_y
    for rule, df in cases.items():
        assert not passes(RUNS_FRAME_SCHEMA, df, CHECKS), rule
        with pytest.raises(pa_errors.SchemaErrors, match=rule):
            check_runs(df)


def test_columns_missing_extra_or_out_of_order_fail_both() -> None:
    ok = _ok()
    names = list(ok.columns)
    for df in (ok.drop(columns="notes"), ok.assign(extra=1.0),
               ok[[names[1], names[0], *names[2:]]]):
        assert not passes(RUNS_FRAME_SCHEMA, df, CHECKS)
        assert not _pandera_accepts(df)


def test_what_passes_pandera_accepts_on_every_column_and_many_values() -> None:
    """Any value in any column: a frame that ``passes`` is one pandera accepts (the other way
    round costs only time, and the broken cases above show both refuse)."""
    ok = _ok()
    values = (None, -1, 0, 3, 4, 0.5, 1.5, True, "", "bf16", "published")
    passed = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for column in ok.columns:
            for value in values:
                df = _broken(ok, column, value)
                if passes(RUNS_FRAME_SCHEMA, df, CHECKS):
                    passed.append((column, value, df))
    assert len(passed) > 100  # nulls in nullable columns, in-range numbers, vocabulary words
    assert not [(c, v) for c, v, df in passed[::4] if not _pandera_accepts(df)]


def test_an_unknown_check_leaves_the_judgement_to_pandera() -> None:
    schema = pda.DataFrameSchema({"x": pda.Column(float, pda.Check.str_length(1, 2))})
    df = pd.DataFrame({"x": [1.0]})
    assert not understood(schema, {}) and not passes(schema, df, {})
    custom = pda.DataFrameSchema({"x": pda.Column(float, pda.Check(lambda s: s > 0))})
    assert not passes(custom, df, {})
    assert validate_fast(custom, df, {}) is not None  # pandera accepts it
    frame_level = pda.DataFrameSchema({"x": pda.Column(float)},
                                      checks=[pda.Check(lambda d: d["x"] > 0)])
    assert not understood(frame_level, {})
    with pytest.raises(pa_errors.SchemaErrors):
        validate_fast(frame_level, pd.DataFrame({"x": [-1.0]}), {})
