"""Every stage's contracts, found by file name: the one place a writer or a reader checks them.

Each contract lives with the stage that writes the file (``pipeline/<stage>/contract.py``, built
with pipeline/contracts.py); this module gathers them. ``check_output(name, frame)`` validates a
Parquet frame against the contract of ``name`` (pandera for the values, pyarrow for the types)
and every stage calls it on what it writes; ``check_metrics(stage, obj)`` does the same for
``reports/metrics/<stage>.json`` with pydantic models, and ``check_headline(stage, obj)`` for the
short ``reports/headline/<stage>.json``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pandera.pandas as pda
from pydantic import ValidationError

from pipeline.calibrate import contract as calibrate_contract
from pipeline.compare import contract as compare_contract
from pipeline.contracts import ContractError, arrow_schema, check_frame, frame_schema
from pipeline.fit import contract as fit_contract
from pipeline.ingest import contract as ingest_contract
from pipeline.release import contract as release_contract
from pipeline.theory import contract as theory_contract

# The stage that writes each file, and its contract module, in the order dvc repro runs them
# (pipeline/runner.py takes its stage list from here).
PRODUCERS = {"ingest": ingest_contract, "fit": fit_contract, "theory": theory_contract,
             "calibrate": calibrate_contract, "compare": compare_contract,
             "release": release_contract}

OUTPUT_COLUMNS: dict[str, tuple[tuple, ...]] = {
    name: cols for c in PRODUCERS.values() for name, cols in c.OUTPUTS.items()}
PRODUCER_OF: dict[str, str] = {
    name: stage for stage, c in PRODUCERS.items() for name in c.OUTPUTS}
FRAME_CHECKS: dict[str, list[pda.Check]] = {
    name: checks for c in PRODUCERS.values()
    for name, checks in getattr(c, "FRAME_CHECKS", {}).items()}
OUTPUT_SCHEMAS: dict[str, pda.DataFrameSchema] = {
    name: frame_schema(cols, FRAME_CHECKS.get(name, [])) for name, cols in OUTPUT_COLUMNS.items()}
HEADLINES = {stage: c.HEADLINE for stage, c in PRODUCERS.items()}
_METRICS = {stage: c.METRICS for stage, c in PRODUCERS.items()}

__all__ = ["ContractError", "check_output", "check_metrics", "check_headline", "empty_frame",
           "output_column_names", "OUTPUT_COLUMNS", "HEADLINES", "PRODUCER_OF"]


def empty_frame(name: str) -> pd.DataFrame:
    """A frame with no rows and the contract columns of output ``name`` (typed)."""
    return arrow_schema(OUTPUT_COLUMNS[name]).empty_table().to_pandas()


def output_column_names(name: str) -> list[str]:
    """The contract columns of output ``name``, in order."""
    return [n for n, _, _, _ in OUTPUT_COLUMNS[name]]


def check_output(name: str, frame: pd.DataFrame) -> pd.DataFrame:
    """Validate ``frame`` against the contract of output ``name`` (e.g. ``"fits.parquet"``):
    every contract column present with its pyarrow type (or all null), every value check
    passing. Returns ``frame`` unchanged; raises ContractError listing what failed."""
    return check_frame(name, OUTPUT_COLUMNS[name], OUTPUT_SCHEMAS[name], frame)


def check_headline(stage: str, obj: dict[str, Any]) -> dict[str, Any]:
    """Validate a stage's headline dict against its model; returns it unchanged."""
    try:
        HEADLINES[stage].model_validate(obj)
    except (ValidationError, KeyError) as exc:
        raise ContractError(f"reports/headline/{stage}.json: {str(exc)[:2000]}") from None
    return obj


def check_metrics(stage: str, obj: dict[str, Any]) -> dict[str, Any]:
    """Validate a stage's metrics dict against its model; returns it unchanged."""
    try:
        _METRICS[stage](obj)
    except (ValidationError, KeyError) as exc:
        raise ContractError(f"reports/metrics/{stage}.json: {str(exc)[:2000]}") from None
    return obj
