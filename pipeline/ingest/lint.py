"""Format checks for ``scalewall validate`` beyond what the ingest itself rejects.

The ingest is lenient where a value can still be read (a free-text ``scaling`` whose word it
cannot find is left empty, a table without a ``source`` column takes its file name). Before a
table is added, ``validate`` holds it to the letter of format v1 (``data/raw/published/README.md``):

* the header has every required column; the file has at least one record;
* ``scaling`` and ``status`` use the format's vocabularies (``precision`` is already checked by
  the ingest);
* sizes and measures are in the column's unit: ``params_b`` / ``active_params_b`` above 1e5
  (100 trillion parameters) is a raw count, ``tflops_per_accelerator`` above 1e5 is FLOP/s or
  GFLOP/s, ``step_time_s`` above an hour per step is milliseconds, ``seq_len`` above 1e7 tokens
  is not a sequence length;
* throughput a chip cannot reach: tokens/s per accelerator x 6 x active parameters (the
  model-FLOP count of Kaplan et al. 2020, a lower bound: attention adds to it) above the chip's
  highest dense peak in the catalog at any precision.

Each problem is a ``code: detail`` reason with the codes of ``pipeline.ingest.records``.
"""

from __future__ import annotations

from typing import Any, Mapping

from pipeline.ingest.contract import PUBLISHED_SCALINGS, PUBLISHED_STATUSES
from pipeline.measures import FLOP_PER_PARAM_PER_TOKEN

REQUIRED_COLUMNS = ("source", "citation", "model", "params_b", "accelerator", "n_accelerators")
# column -> (largest plausible value in the column's unit, what a larger value probably is)
UNIT_LIMITS = {
    "params_b": (1e5, "a raw parameter count: the column is in billions (8.03 for 8.03e9)"),
    "active_params_b": (1e5, "a raw parameter count: the column is in billions"),
    "tflops_per_accelerator": (1e5, "FLOP/s or GFLOP/s: the column is in 1e12 FLOP/s"),
    "step_time_s": (3600.0, "milliseconds: the column is in seconds per optimizer step"),
    "seq_len": (1e7, "not a sequence length in tokens"),
}


def table_problems(header: list[str] | None, n_records: int) -> list[str]:
    """Problems of the file as a whole: an empty file, absent required columns."""
    if header is None:
        return ["malformed_row: empty file: no header and no records"]
    problems = []
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        problems.append(f"missing_required: column(s) {', '.join(missing)} absent from the "
                        "header (format v1: data/raw/published/README.md)")
    if n_records == 0:
        problems.append("missing_required: the table has a header but no records")
    return problems


def _number(fields: Mapping[str, Any], name: str) -> float | None:
    try:
        return float(str(fields[name]).replace(",", ""))
    except (KeyError, ValueError):
        return None


def field_problem(fields: Mapping[str, Any]) -> str | None:
    """The first format problem of one record's raw fields (None: none)."""
    for name, vocab in (("scaling", PUBLISHED_SCALINGS), ("status", PUBLISHED_STATUSES)):
        value = fields.get(name)
        if value is not None and str(value).strip().lower() not in vocab:
            return f"bad_value: {name}={str(value)!r} is not one of {', '.join(vocab)}"
    for name, (limit, meaning) in UNIT_LIMITS.items():
        value = _number(fields, name)
        if value is not None and value > limit:
            return f"unit_slip: {name}={value:g} > {limit:g} looks like {meaning}"
    return None


def run_problem(row: Mapping[str, Any], max_peak_flops_per_s: float | None) -> str | None:
    """A normalized run whose throughput per chip needs more FLOP/s than the chip's peak."""
    tps, n = row.get("tokens_per_s"), row.get("n_accelerators")
    params = row.get("active_params") or row.get("params")  # counts in a run row
    if not (tps and n and params and max_peak_flops_per_s):
        return None
    per_chip = tps / n
    needed = per_chip * FLOP_PER_PARAM_PER_TOKEN * params
    if needed <= max_peak_flops_per_s:
        return None
    return (f"out_of_range: tokens_per_s per accelerator {per_chip:.6g} needs at least "
            f"{needed / 1e12:.6g} TFLOP/s per chip (6 x {params:.4g} FLOP per token), above "
            f"{row.get('accelerator')}'s highest dense peak {max_peak_flops_per_s / 1e12:g} "
            "TFLOP/s: a unit slip (per job, not per accelerator?) or a wrong model size")
