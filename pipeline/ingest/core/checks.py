"""pandera schema of ``runs.parquet``: the checks every run row satisfies after ``normalize``.

``normalize`` rejects bad records one by one; this schema is the second line that checks the
whole table before it is written. A failure here is a bug in the ingest code, not bad input,
so the stage stops (``pandera.errors.SchemaErrors`` lists every failing check and row).
"""

from __future__ import annotations

import pandas as pd
import pandera.pandas as pa

from pipeline.schema import (PRECISIONS, RUN_COLUMNS, SCALINGS, SOURCE_KINDS, STATUSES,
                             STRATEGY_FAMILIES, Y_METRICS, POWER_MEASUREMENTS)

_REQUIRED = ("run_id", "source", "source_kind", "model", "params", "active_params", "accelerator",
             "n_accelerators", "strategy_family", "status", "provenance")
_VOCAB = {"source_kind": SOURCE_KINDS, "precision": PRECISIONS, "scaling": SCALINGS,
          "status": STATUSES, "strategy_family": STRATEGY_FAMILIES,
          "power_measurement": POWER_MEASUREMENTS}
_FRACTIONS = ("mfu", "hfu")
_NON_NEGATIVE = ("zero_stage",)
_ZERO_OK = ("energy_j_interconnect",)
_PANDAS_DTYPE = {"string": object, "double": "float64", "int64": "Int64", "bool": "boolean"}


def pandas_dtype(arrow_type: object) -> object:
    """pandas dtype used for a run column of the given pyarrow type (nullable ints)."""
    return _PANDAS_DTYPE[str(arrow_type)]


def _column(name: str, arrow_type: object) -> pa.Column:
    kind = str(arrow_type)
    checks: list[pa.Check] = []
    if name in _VOCAB:
        checks.append(pa.Check.isin(list(_VOCAB[name])))
    elif name in _FRACTIONS:
        checks += [pa.Check.gt(0.0), pa.Check.le(1.0)]
    elif name in _NON_NEGATIVE:
        checks.append(pa.Check.in_range(0, 3))
    elif name in _ZERO_OK:
        checks.append(pa.Check.ge(0))
    elif kind in ("double", "int64"):
        # Every other number of a run is a positive count or a positive SI quantity.
        checks.append(pa.Check.gt(0))
    if name == "run_id":
        checks.append(pa.Check.str_matches(r"^[0-9a-f]{16}$"))
    dtype = {"string": str, "double": float, "int64": "Int64"}[kind]
    return pa.Column(dtype, checks=checks, nullable=name not in _REQUIRED,
                     unique=name == "run_id", coerce=False)


def _ok_runs_have_a_measure(df: pd.DataFrame) -> pd.Series:
    measures = ["tokens_per_s", "model_flops_per_s", "mfu", "hfu", "step_time_s",
                "time_to_train_s", *Y_METRICS]
    return (df["status"] != "ok") | df[list(dict.fromkeys(measures))].notna().any(axis=1)


def _series_runs_have_y(df: pd.DataFrame) -> pd.Series:
    return df["series_id"].isna() | df[list(Y_METRICS)].notna().any(axis=1)


RUNS_SCHEMA = pa.DataFrameSchema(
    {name: _column(name, t) for name, t, _ in RUN_COLUMNS},
    checks=[pa.Check(_ok_runs_have_a_measure, error="an ok run has no measure"),
            pa.Check(_series_runs_have_y, error="a run in a series has no y metric"),
            pa.Check(lambda df: df["active_params"] <= df["params"],
                     error="active_params > params")],
    strict=True, ordered=True,
)


def validate_runs(df: pd.DataFrame) -> pd.DataFrame:
    """Check ``df`` against ``RUNS_SCHEMA``, reporting every failure at once."""
    return RUNS_SCHEMA.validate(df, lazy=True)
