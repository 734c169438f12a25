"""Scaling series among step-log runs: a folder holding the same job at several N.

Runs of one folder whose identifying fields (model, accelerator, precision, sequence length
and the tp/pp/cp/ep/ZeRO layout) agree and whose ``n_accelerators`` take at least two values
form a series; its id is ``logs/<folder>`` (``#2``, ``#3``, ... for further groups in the same
folder, in sorted key order). Scaling is ``strong`` when the global batch is the same at every
N, ``weak`` when batch / N is, ``sweep`` otherwise, ``unknown`` without a batch size.
A sidecar's own ``series`` / ``scaling`` is never replaced.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

KEY_FIELDS = ("model", "accelerator", "precision", "seq_len", "tp", "pp", "cp", "ep",
              "zero_stage")


def _same(values: list[float]) -> bool:
    return max(values) <= min(values) * (1 + 1e-6)


def scaling_of(runs: list[dict[str, Any]]) -> str:
    """strong / weak / sweep / unknown from the runs' global batch and N."""
    gbt = [r.get("global_batch_tokens") for r in runs]
    if any(g is None or not g > 0 for g in gbt):
        return "unknown"
    if _same(gbt):
        return "strong"
    if _same([g / r["n_accelerators"] for g, r in zip(gbt, runs)]):
        return "weak"
    return "sweep"


def assign_series(runs: list[dict[str, Any]]) -> None:
    """Set ``series`` and ``scaling`` in place on runs (dicts with a ``_folder`` key)."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        if run.get("series"):
            continue
        key = (run["_folder"],) + tuple(str(run.get(k, "")).lower() for k in KEY_FIELDS)
        groups[key].append(run)
    per_folder: dict[str, int] = defaultdict(int)
    for key in sorted(groups):
        members = groups[key]
        if len({r["n_accelerators"] for r in members}) < 2:
            continue
        folder = key[0]
        per_folder[folder] += 1
        base = "logs" if folder == "." else f"logs/{folder}"
        series = base if per_folder[folder] == 1 else f"{base}#{per_folder[folder]}"
        scaling = scaling_of(members)
        for run in members:
            run["series"] = series
            run.setdefault("scaling", scaling)
