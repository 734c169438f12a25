"""Scaling series: runs of one source that differ only in the number of accelerators.

A series groups runs with ``status == ok`` and a usable y (one of ``schema.Y_METRICS``) by
source, model, accelerator, precision, strategy family and batch policy, and for MLPerf by
submitter and round too: a round is a separate publication with its own software stack, so runs
of two rounds differ in more than N. A ``series`` field in the input overrides the automatic
grouping (within its source).

Batch policy (the ``scaling`` label), when the source does not state it:

* every run's ``global_batch_tokens`` known and equal -> ``strong`` (fixed global batch);
* known, not all equal, never smaller at a larger N -> ``weak`` (batch grows with N);
* known but neither: the group splits by batch value into ``strong`` series (id suffix
  ``gbt-<tokens>``);
* any batch unknown -> ``unknown``.

A source's ``strong`` label with differing batches splits the same way; its other labels are kept
as given. MLPerf states no batch policy: its labels come from the logged global batch, which each
submitter picks per system, so ``weak`` there means "the chosen batch grows with N" (and a
time-to-train y then also absorbs the extra samples a larger batch needs to converge). ``y_metric`` is the first of ``Y_METRICS`` present on every run of the series. Every
eligible run gets a ``series_id``; ``series.parquet`` lists the series with at least two
distinct N and a common y.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from pipeline.schema import SERIES_COLUMNS, Y_METRICS

_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def slug(text: Any, lower: bool = True) -> str:
    """Path-safe, readable component: ``GPT 175B (dense)`` -> ``gpt-175b-dense``."""
    out = _UNSAFE.sub("-", str(text)).strip("-")
    return (out.lower() if lower else out) or "na"


def _eligible(row: dict[str, Any]) -> bool:
    return row["status"] == "ok" and any(row[m] is not None for m in Y_METRICS)


def _batch_label(group: list[dict[str, Any]]) -> str:
    """``strong``, ``weak``, ``split`` (several fixed batches) or ``unknown``; see module doc."""
    batches = [r["global_batch_tokens"] for r in group]
    if any(b is None for b in batches):
        return "unknown"
    if len(set(batches)) == 1:
        return "strong"
    by_n: dict[int, set[float]] = defaultdict(set)
    for r in group:
        by_n[r["n_accelerators"]].add(r["global_batch_tokens"])
    ordered = [by_n[n] for n in sorted(by_n)]
    single = all(len(b) == 1 for b in ordered)
    if single and all(min(a) <= min(b) for a, b in zip(ordered, ordered[1:])):
        return "weak"
    return "split"


def _base_key(row: dict[str, Any]) -> tuple[Any, ...]:
    if row["_series"] is not None:
        return ("explicit", row["source"], row["_series"])
    return (row["source"], row["submitter"], row["mlperf_version"], row["model_id"] or row["model"],
            row["accelerator"], row["precision"], row["strategy_family"], row["scaling"])


def _series_id(row: dict[str, Any], label: str, batch: float | None) -> str:
    if row["_series"] is not None:
        return f"{slug(row['source'])}/{slug(row['_series'])}"
    parts = [slug(row["source"])]
    parts += [slug(row[k]) for k in ("submitter", "mlperf_version") if row[k]]
    parts += [slug(row["model_id"] or row["model"]), slug(row["accelerator"], lower=False),
              slug(row["precision"] or "unstated"), slug(row["strategy_family"]), label]
    if batch is not None:
        parts.append(f"gbt-{batch:.0f}")
    return "/".join(parts)


def assign_series(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Set ``series_id`` and ``scaling`` on ``rows`` (in place); return the series table rows.

    ``rows`` should be in a stable order (the stage sorts by ``run_id``); the result is sorted
    by ``series_id``.
    """
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if _eligible(row):
            groups[_base_key(row)].append(row)
    for key, group in groups.items():
        explicit = key[0] == "explicit"
        given = _common_label(group) if explicit else group[0]["scaling"]
        inferred = _batch_label(group)
        if given == "strong" and inferred in ("weak", "split") and not explicit:
            label = "split"  # a fixed-batch series cannot mix batches: one series per batch
        elif given is not None:
            label = given
        else:
            label = "unknown" if explicit and inferred == "split" else inferred
        for row in group:
            batch = row["global_batch_tokens"] if label == "split" else None
            row_label = "strong" if label == "split" else label
            if row["scaling"] is None:
                row["scaling"] = row_label
                row["derived"] = f"{row['derived']};scaling" if row["derived"] else "scaling"
            row["series_id"] = _series_id(row, row_label, batch)
    return _series_table(rows)


def _common_label(group: list[dict[str, Any]]) -> str | None:
    labels = {r["scaling"] for r in group if r["scaling"] is not None}
    return labels.pop() if len(labels) == 1 else None


def _series_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    members: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row["series_id"] is not None:
            members[row["series_id"]].append(row)
    table = []
    for sid in sorted(members):
        group = members[sid]
        ns = [r["n_accelerators"] for r in group]
        if len(set(ns)) < 2:
            continue
        y = next((m for m in Y_METRICS if all(r[m] is not None for r in group)), None)
        if y is None:
            continue
        first = group[0]
        labels = {r["scaling"] for r in group}
        entry = {
            "series_id": sid, "source": first["source"], "model": first["model"],
            "accelerator": first["accelerator"], "precision": first["precision"],
            "strategy_family": first["strategy_family"],
            "scaling": labels.pop() if len(labels) == 1 else "unknown",
            "n_points": len(group), "n_distinct": len(set(ns)), "n_min": min(ns),
            "n_max": max(ns), "y_metric": y,
        }
        table.append({name: entry[name] for name, _ in SERIES_COLUMNS})
    return table
