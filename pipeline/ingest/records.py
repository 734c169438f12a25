"""The unit every input parser yields: one input record, either a candidate run or a reject.

Parsers (published tables, MLPerf trees, step logs) never write runs themselves. Each yields
exactly one ``Record`` per input record it read, so the ingest stage can prove that
``records read = runs + rejects`` for every input file. ``fields`` uses the column names of
published format v1 (data/raw/published/README.md; ``params_b``, ``n_accelerators``, ``accelerator`` as a
name or alias, ...) plus the run extras listed in ``RUN_EXTRAS``; the ingest core resolves
aliases, fills shapes from the catalog, derives missing measures and validates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from pipeline.bounded import cap
from pipeline.text import INVISIBLE, strip_invisible

# Reject reasons are "<code>: <detail>"; metrics count them by code.
REJECT_CODES = (
    "malformed_row",        # cannot be parsed at all (wrong column count, bad CSV/JSON)
    "missing_required",     # a required field is empty
    "bad_value",            # wrong type or not a number where one is needed
    "out_of_range",         # non-positive throughput, N not a positive integer, MFU > 1 ...
    "unit_slip",            # a value off by a unit factor (MFU 43 instead of 0.43)
    "unknown_accelerator",  # not in the catalog, never guessed
    "no_measure",           # no throughput, utilization, step time or time-to-train
    "duplicate",            # the same run published again (MLPerf re-publications)
    "not_a_run",            # a record that describes no run (claims, power logs, benchmarks)
    "binary_file",          # an input that is not text
    "truncated_log",        # a log cut off before it says enough
    "no_run_start",         # MLPerf log without run_start
    "missing_file",         # a result the source lists but whose log is absent
    "too_few_steps",        # step log with fewer steady-state steps than the minimum
    "conflict",             # log and sidecar disagree (both values named)
    "unreadable",           # I/O error
    "bad_link",             # a symlink that dangles, loops or leads out of the data folder
    "special_file",         # a FIFO, socket, device or directory where an input file was looked for
    "phase_change",         # a log whose N, batch or layout changes mid-run
    "implausible",          # an MFU above its chip's limit (pipeline/plausibility.py)
)

# Fields a parser may set beyond format v1.
RUN_EXTRAS = (
    "source_kind", "accelerators_per_node", "benchmark", "mlperf_version", "system",
    "olympic_score_s", "provenance", "inverse_time_to_train_per_s", "model_flops_per_s",
    "status", "energy_j", "energy_j_nodes", "energy_j_interconnect", "power_measurement",
    "framework", "cluster",
)


@dataclass(frozen=True, slots=True)
class Record:
    """One input record. Exactly one of ``fields`` and ``reason`` is set."""

    source: str
    path: str
    line: int
    raw: str = ""
    fields: Mapping[str, Any] | None = None
    reason: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.fields is None) == (self.reason is None):
            raise ValueError("a Record carries either fields or a reject reason, not both")
        if INVISIBLE.search(self.source):  # a source name is an identity: never with bidi
            object.__setattr__(self, "source", strip_invisible(self.source)[0])  # or ZW chars

    @classmethod
    def reject(cls, source: str, path: str, line: int, raw: str, code: str,
               detail: str = "") -> "Record":
        if code not in REJECT_CODES:
            raise ValueError(f"unknown reject code {code!r}")
        reason = cap(f"{code}: {detail}" if detail else code)
        return cls(source=source, path=path, line=line, raw=raw[:500], reason=reason)
