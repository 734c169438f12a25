"""A pandera frame schema's checks run as whole-column operations: whether a frame passes them
all, at a fraction of ``schema.validate``'s cost on a large frame.

``schema.validate`` checks a string column's type one element at a time (a Python call a value:
most of the time of checking a 10^6-row ``runs.parquet``) and pays a fixed cost per column and
check (some 0.06 s a call for the ~70 run columns). ``passes`` reads the schema itself (its
columns, their dtypes, ``nullable``, ``unique`` and checks, and its own checks across columns)
and runs every one of them on whole columns: the dtype by pandera's own dtype check (a string
column's values by ``pandas.api.types.infer_dtype``, one C loop), the built-in checks
(``BUILTIN``, by their pandera name and statistics) as the same pandas comparison pandera's
implementation makes, on the column without its nulls (pandera's ``ignore_na``), and the checks
across columns by the functions given for them. Each is at least as strict as pandera's, so a
frame that ``passes`` is one that ``schema.validate`` accepts; a frame that does not (or a
schema with a check or an option this module does not know) is for ``schema.validate`` to
judge, which then raises its usual ``SchemaErrors`` listing every failure
(``validate_fast``; ``check_runs`` for ``runs.parquet``, the ingest's ``write_runs``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import pandera.pandas as pda
from pandera.engines import pandas_engine

from pipeline.ingest.contract import RUNS_FRAME_CHECKS, RUNS_FRAME_SCHEMA

# pandera's built-in checks (``pandera/backends/pandas/builtin_checks.py``), by name: the
# column (nulls dropped) and the check's statistics -> one boolean per value.
BUILTIN: dict[str, Callable[[pd.Series, dict[str, Any]], Any]] = {
    "greater_than": lambda s, k: s > k["min_value"],
    "greater_than_or_equal_to": lambda s, k: s >= k["min_value"],
    "less_than": lambda s, k: s < k["max_value"],
    "less_than_or_equal_to": lambda s, k: s <= k["max_value"],
    "equal_to": lambda s, k: s == k["value"],
    "not_equal_to": lambda s, k: s != k["value"],
    "in_range": lambda s, k: (((s >= k["min_value"]) if k["include_min"]
                               else (s > k["min_value"]))
                              & ((s <= k["max_value"]) if k["include_max"]
                                 else (s < k["max_value"]))),
    "isin": lambda s, k: s.isin(k["allowed_values"]),
    "notin": lambda s, k: ~s.isin(k["forbidden_values"]),
    # ``s.str.match(pattern)`` of a column of str (the dtype check comes first): the same
    # ``re.match`` on each value, in one C loop (``map``); a value not a str raises (and then
    # pandera judges)
    "str_matches": lambda s, k: all(map(re.compile(k["pattern"]).match, s)),
}
# Schema options under which ``passes`` is what ``validate`` does (anything else: validate).
_FRAME_OPTIONS = {"coerce": False, "unique": None, "index": None, "dtype": None,
                  "add_missing_columns": False, "drop_invalid_rows": False}
_COLUMN_OPTIONS = {"coerce": False, "regex": False, "required": True,
                   "drop_invalid_rows": False, "default": None}


def _all(result: Any) -> bool:
    """Whether every value of a check's result is True (an NA is not)."""
    if isinstance(result, (bool, np.bool_)):
        return bool(result)
    if isinstance(result, pd.Series) and result.dtype == bool:
        return bool(result.to_numpy().all())
    values = np.asarray(pd.array(result, dtype="boolean").fillna(False), dtype=bool)
    return bool(values.all())


def _known(check: pda.Check) -> bool:
    """Whether ``passes`` runs ``check`` as pandera would (a plain column check)."""
    return (check.name in BUILTIN and check.ignore_na and not check.element_wise
            and check.groupby is None and not check.raise_warning)


@functools.lru_cache(maxsize=64)
def _engine_dtype(dtype: Any) -> Any:
    """pandera's data type of a pandas dtype (one look-up per dtype)."""
    return pandas_engine.Engine.dtype(dtype)


def _dtype_ok(column: pda.Column, values: pd.Series) -> bool:
    """pandera's dtype check of one column: a string column's non-null values all ``str``."""
    dtype = column.dtype
    if dtype is None:
        return True
    if isinstance(dtype, pandas_engine.NpString):
        return (dtype.check(_engine_dtype(values.dtype))
                and pd.api.types.infer_dtype(values, skipna=True) in ("string", "empty"))
    return _all(dtype.check(_engine_dtype(values.dtype), values))


def _column_ok(column: pda.Column, values: pd.Series) -> bool:
    """Every rule of ``column`` (dtype, nulls, uniqueness, checks) holds on ``values``."""
    if not _dtype_ok(column, values):
        return False
    if column.nullable and not column.unique and not column.checks:
        return True  # nothing more to check: no need to find the nulls
    nulls = values.isna()
    if nulls.any():
        if not column.nullable:
            return False
        values = values[~nulls.to_numpy()]
    if column.unique and values.duplicated().any():
        return False
    return all(_all(BUILTIN[c.name](values, c.statistics)) for c in column.checks)


def understood(schema: pda.DataFrameSchema, frame_checks: Mapping[str, Callable]) -> bool:
    """Whether ``passes`` knows every option and check of ``schema`` (else it says False)."""
    return (schema.strict in (True, False)
            and all(getattr(schema, k) == v for k, v in _FRAME_OPTIONS.items())
            and not getattr(schema, "parsers", None)
            and all(getattr(c, k) == v for c in schema.columns.values()
                    for k, v in _COLUMN_OPTIONS.items())
            and all(not getattr(c, "parsers", None) for c in schema.columns.values())
            and all(_known(k) for c in schema.columns.values() for k in c.checks)
            and all(k.name in frame_checks and not k.element_wise and k.groupby is None
                    for k in schema.checks))


def passes(schema: pda.DataFrameSchema, df: pd.DataFrame,
           frame_checks: Mapping[str, Callable[[pd.DataFrame], Any]]) -> bool:
    """Whether ``df`` passes every rule of ``schema`` (see the module docstring); False also
    when the schema has a rule this module does not know. ``frame_checks``: the function of
    each of the schema's own checks, by its name."""
    if not understood(schema, frame_checks):
        return False
    try:
        return _passes(schema, df, frame_checks)
    except Exception:  # a check that cannot run here: pandera says why
        return False


def _passes(schema: pda.DataFrameSchema, df: pd.DataFrame,
            frame_checks: Mapping[str, Callable[[pd.DataFrame], Any]]) -> bool:
    names = list(schema.columns)
    if schema.strict and (list(df.columns) != names if schema.ordered
                          else sorted(map(str, df.columns)) != sorted(names)):
        return False
    if not set(names) <= set(df.columns) or df.columns.duplicated().any():
        return False
    if not all(_column_ok(column, df[name]) for name, column in schema.columns.items()):
        return False
    return all(_all(frame_checks[check.name](df)) for check in schema.checks)


def validate_fast(schema: pda.DataFrameSchema, df: pd.DataFrame,
                  frame_checks: Mapping[str, Callable[[pd.DataFrame], Any]]) -> pd.DataFrame:
    """``schema.validate(df, lazy=True)``'s answer: ``df`` when it ``passes``, else pandera's
    own validation (its result, or its ``SchemaErrors`` listing every failure)."""
    if passes(schema, df, frame_checks):
        return df
    return schema.validate(df, lazy=True)


def check_runs(df: pd.DataFrame) -> pd.DataFrame:
    """``contract.validate_runs(df)``'s answer (``df``, or pandera's ``SchemaErrors``), from
    ``RUNS_FRAME_SCHEMA``'s checks on whole columns when they all pass."""
    return validate_fast(RUNS_FRAME_SCHEMA, df, RUNS_FRAME_CHECKS)
