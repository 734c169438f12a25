"""The schedule columns of a run record: ``recompute``, ``virtual_pipeline``,
``sequence_parallel``, ``pipeline_flushes`` (optional in published tables and step-log
sidecars; empty = not stated),
and the kernel facts ``fused_attention``, ``tp_comm_overlap``, ``dp_comm_overlap`` (optional in
published tables; true/false).

A value that is present but not one of the allowed forms rejects the record with the field
named; nothing is guessed. The model's defaults for unstated values live with the model
(``pipeline/calibrate/families.py``), not here: runs.parquet keeps what the source said.
"""

from __future__ import annotations

from typing import Any

from pipeline.ingest.core.derive import Reject
from pipeline.vocab import KERNEL_COLUMNS, RECOMPUTE_MODES
from pipeline.bounded import short
from pipeline.numbers import NumberError, parse_count

# Spellings seen in framework flags and papers: Megatron's --recompute-granularity
# full|selective (with --recompute-method uniform|block for full), "activation checkpointing".
_RECOMPUTE_ALIASES = {"no": "none", "off": "none", "false": "none", "0": "none",
                      "uniform": "full", "block": "full", "true": "full", "ac": "full"}
_TRUE = ("true", "yes", "1", "on")
_FALSE = ("false", "no", "0", "off")


def _text(fields: Any, name: str) -> str | None:
    value = fields.get(name)
    if value is None or isinstance(value, float) and value != value:
        return None
    text = str(value).strip()
    return text or None


def parse_recompute(fields: Any) -> str | None:
    """``none`` | ``selective`` | ``full`` (aliases above), None when empty."""
    text = _text(fields, "recompute")
    if text is None:
        return None
    key = _RECOMPUTE_ALIASES.get(text.lower(), text.lower())
    if key not in RECOMPUTE_MODES:
        raise Reject("bad_value", f"recompute={short(text, 40)} not one of "
                                  f"{', '.join(RECOMPUTE_MODES)}")
    return key


def parse_pipeline_count(fields: Any, name: str) -> int | None:
    """The count column ``name`` (an integer >= 1), None when empty."""
    text = _text(fields, name)
    if text is None:
        return None
    try:  # the one number parser (pipeline.numbers): no float() spellings such as "1_0"
        return parse_count(text, name, 1, 2**31 - 1)
    except NumberError as exc:
        raise Reject(exc.code, str(exc)) from None


def parse_virtual_pipeline(fields: Any) -> int | None:
    """Virtual pipeline chunks per stage: an integer >= 1, None when empty."""
    return parse_pipeline_count(fields, "virtual_pipeline")


def parse_pipeline_flushes(fields: Any) -> int | None:
    """Pipeline schedules per optimizer step (each fills and drains the pipeline): an integer
    >= 1, None when empty."""
    return parse_pipeline_count(fields, "pipeline_flushes")


def parse_flag(fields: Any, name: str) -> bool | None:
    """The true/false column ``name`` (yes/no, 1/0, on/off), None when empty."""
    value = fields.get(name)
    if isinstance(value, bool):
        return value
    text = _text(fields, name)
    if text is None:
        return None
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise Reject("bad_value", f"{name}={short(text, 40)} is not true or false")


def parse_sequence_parallel(fields: Any) -> bool | None:
    """``sequence_parallel``: true/false, None when empty."""
    return parse_flag(fields, "sequence_parallel")


def parse_schedule(fields: Any, row: dict[str, Any]) -> None:
    """Fill ``row``'s schedule and kernel columns from ``fields``; a virtual pipeline and more
    than one pipeline flush per step need pp > 1."""
    row["recompute"] = parse_recompute(fields)
    row["virtual_pipeline"] = parse_virtual_pipeline(fields)
    row["sequence_parallel"] = parse_sequence_parallel(fields)
    row["pipeline_flushes"] = parse_pipeline_flushes(fields)
    for name in KERNEL_COLUMNS:
        row[name] = parse_flag(fields, name)
    pp = row.get("pp")
    for name in ("virtual_pipeline", "pipeline_flushes"):
        v = row[name]
        if v is not None and v > 1 and pp is not None and pp <= 1:
            raise Reject("out_of_range", f"{name}={v} needs pp > 1 (pp={pp})")
