"""How a stage's output contract is written and checked (the machinery, no contract itself).

A contract lives with the stage that writes the file, in ``pipeline/<stage>/contract.py``:
``OUTPUTS`` maps each Parquet file name to its columns ``(name, pyarrow type, meaning, rule)``
built with :func:`col`, ``FRAME_CHECKS`` adds checks across columns, and the stage's metrics and
headline models derive from :class:`Metrics` and :class:`Headline`. ``pipeline/schema.py``
gathers them and checks a frame or a JSON by its file name. A contract lists the columns and
keys other stages read; producers may add more.

Each contract module also holds its stage's declaration, ``STAGE`` (:class:`Stage`): the
params keys the stage reads, the files it reads and writes by name, and its compute function;
pipeline/runner.py runs every stage from it and tests/test_dvc_stages.py checks ``dvc.yaml``
against it.

Contract modules import only this module, ``pipeline/vocab.py`` and other contract modules
(tests/test_import_contracts.py checks it), so a consumer that reads a file may import its
contract without importing the producer's code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pandera.pandas as pda
import pyarrow as pa
from pydantic import BaseModel, ConfigDict

S, F, I, B = pa.string(), pa.float64(), pa.int64(), pa.bool_()  # noqa: E741
NULL = pa.null()

# Value rules of a column (pandera checks and nullability).
ID = dict(checks=[], nullable=False)
POS = dict(checks=[pda.Check.gt(0)], nullable=True)
NONNEG = dict(checks=[pda.Check.ge(0)], nullable=True)
UNIT = dict(checks=[pda.Check.gt(0), pda.Check.le(1)], nullable=True)
UNIT_CLOSED = dict(checks=[pda.Check.ge(0), pda.Check.le(1)], nullable=True)
# shares are differences of floats: allow rounding noise
SHARE = dict(checks=[pda.Check.ge(-1e-9), pda.Check.le(1 + 1e-9)], nullable=True)
ANY = dict(checks=[], nullable=True)

Column = tuple  # (name, pyarrow type, meaning, rule)


def col(name: str, arrow: pa.DataType, meaning: str, **rule: Any) -> Column:
    """One contract column: name, pyarrow type, meaning and value rule (``ANY`` if none)."""
    return (name, arrow, meaning, rule or ANY)


def isin(values: tuple[str, ...] | list[str], nullable: bool = True) -> dict[str, Any]:
    """Rule: the value is one of ``values``."""
    return dict(checks=[pda.Check.isin(list(values))], nullable=nullable)


def typed_columns(columns: tuple[tuple[str, pa.DataType], ...]) -> tuple[Column, ...]:
    """Contract columns of ``(name, type)`` pairs with no value rule beyond the type."""
    return tuple((n, t, "", ANY) for n, t in columns)


def arrow_schema(columns: tuple[Column, ...]) -> pa.Schema:
    """The pyarrow schema of contract columns, in order."""
    return pa.schema([pa.field(n, t) for n, t, _, _ in columns])


class ContractError(ValueError):
    """A stage's output breaks its contract: a bug in the stage, not bad input."""


class InsufficientData(ContractError):
    """A stage's inputs keep their contracts but hold nothing it can compute from (no run that
    calibrate can fit): not a bug but the data, reported as a ContractError is (``error: ...``,
    exit 1), with a message saying what the data lack."""


class Metrics(BaseModel):
    """Base of a metrics JSON model: the keys other stages and the report read; a stage may
    write more."""
    model_config = ConfigDict(extra="allow")


class Headline(BaseModel):
    """Base of a headline JSON model: a headline is short by design (pipeline/headline.py), so
    no key beyond the model's."""
    model_config = ConfigDict(extra="forbid", strict=True)


def frame_schema(columns: tuple[Column, ...], checks: list[pda.Check]) -> pda.DataFrameSchema:
    """The pandera schema of a contract: every column's rule, plus the checks across columns."""
    return pda.DataFrameSchema({n: pda.Column(None, coerce=False, **rule)
                                for n, _, _, rule in columns}, strict=False, checks=checks)


def check_frame(name: str, columns: tuple[Column, ...], schema: pda.DataFrameSchema,
                frame: pd.DataFrame) -> pd.DataFrame:
    """Validate ``frame`` against contract ``columns`` (value checks by ``schema``, types by
    pyarrow): every column present with its type (or all null). Returns ``frame`` unchanged;
    raises ContractError naming ``name`` and listing what failed."""
    try:
        schema.validate(frame, lazy=True)
    except pda.errors.SchemaErrors as exc:
        cases = exc.failure_cases
        parts = [f"column {c!r} fails {check} ({len(g)} rows, e.g. {g['failure_case'].iloc[0]!r})"
                 for (c, check), g in cases.groupby(["column", "check"], dropna=False, sort=True)]
        raise ContractError(f"{name}: " + "; ".join(parts)[:2000]) from None
    types = pa.Schema.from_pandas(frame, preserve_index=False)
    for c, arrow, _, _ in columns:
        got = types.field(c).type
        if got != arrow and got != NULL and not (frame[c].isna().all()):
            raise ContractError(f"{name}: column {c!r} is {got}, the contract says {arrow}")
    return frame


@dataclass(frozen=True)
class Stage:
    """One DVC stage, declared once (in its ``pipeline/<stage>/contract.py``).

    ``params``: the params.yaml keys it reads (a group such as ``"fit"`` or one key such as
    ``"compare.extrapolate_n"``), exactly the ``params`` of its ``dvc.yaml`` entry.
    ``reads`` / ``writes``: contract files (``OUTPUTS`` of their producer) read from and written
    to the processed-data folder; ``reads_metrics``: stages whose ``reports/metrics/<stage>.json``
    it reads; ``plots``: the CSVs it writes under ``reports/plots``; ``catalog``: whether it reads
    ``data/catalog``. ``compute`` (``"module:function"``) is the pure step
    ``compute(inputs, settings) -> Result`` that :func:`pipeline.runner.run_stage` calls between
    checking the inputs and writing the checked outputs. ``entry`` replaces the runner for a
    stage that streams its own files (ingest: raw inputs; report: documents): it is then called
    with the paths of the command line. ``raw``: project paths it reads that no stage writes.
    """

    name: str
    help: str
    params: tuple[str, ...]
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    reads_metrics: tuple[str, ...] = ()
    plots: tuple[str, ...] = ()
    plot_significant: int = 10
    catalog: bool = False
    compute: str = ""
    entry: str = ""
    raw: tuple[str, ...] = ()
    outs: tuple[str, ...] = field(default=())  # other outputs (entry stages), project paths

    @property
    def module(self) -> str:
        """The module that holds the stage's code (its compute or entry function)."""
        return (self.compute or self.entry).split(":")[0]
