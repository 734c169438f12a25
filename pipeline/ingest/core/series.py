"""Scaling series: runs of one source that differ only in the number of accelerators.

A series groups runs with ``status == ok`` and a usable y (one of ``schema.Y_METRICS``) by
source, model, accelerator, precision, strategy family and batch policy, and for MLPerf by
submitter and round too, and for step logs by the sidecar's ``system`` (a log's source is its
campaign folder, ``pipeline.ingest.sources.steplogs.reader.campaign_source``): a round is a separate publication with its own software stack, so runs
of two rounds differ in more than N. A ``series`` field in the input overrides the automatic
grouping (within its source).

Batch policy (the ``scaling`` label), when the source does not state it:

* every run's ``global_batch_tokens`` known and equal -> ``strong`` (fixed global batch);
* known, not all equal, never smaller at a larger N -> ``weak`` (batch grows with N);
* known but neither: the group splits by batch value into ``strong`` series (id suffix
  ``gbt-<tokens>``);
* any batch unknown -> ``unknown``.

A source's ``strong`` label with differing batches splits the same way; its other labels are kept
as given. A stated ``strong`` or ``weak`` that the batches contradict gets a note saying so. MLPerf states no batch policy: its labels come from the logged global batch, which each
submitter picks per system, so ``weak`` there means "the chosen batch grows with N" (and a
time-to-train y then also absorbs the extra samples a larger batch needs to converge). ``y_metric`` is the first of ``Y_METRICS`` present on every run of the series. Every
eligible run gets a ``series_id``; ``series.parquet`` lists the series with at least two
distinct N and a common y.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from pipeline.ingest.contract import SERIES_COLUMNS
from pipeline.ingest.core.rows import columns_getter
from pipeline.vocab import Y_METRICS

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


# What a run's group depends on (``_group_of``), read at once (``rows.columns_getter``).
_GROUP_FIELDS = ("status", *Y_METRICS, "_series", "source", "source_kind", "system",
                 "submitter", "mlperf_version", "model_id", "model", "accelerator", "precision",
                 "strategy_family", "scaling")


def _group_of(values: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """A run's group key from its ``_GROUP_FIELDS`` values; None for a run in no series (not
    ``_eligible``)."""
    status, ys = values[0], values[1:1 + len(Y_METRICS)]
    if status != "ok" or all(y is None for y in ys):
        return None
    (series, source, kind, system, submitter, version, model_id, model, accelerator, precision,
     family, scaling) = values[1 + len(Y_METRICS):]
    if series is not None:
        return ("explicit", source, series)
    # A log's source is its campaign folder, whose job folders may hold several clusters: the
    # sidecar's ``system`` keeps them apart (published tables name a system per row, so not there).
    system = system if kind == "log" else None
    return (source, submitter, version, model_id or model, accelerator, precision, family,
            scaling, system)


def _series_id(row: dict[str, Any], label: str, batch: float | None) -> str:
    if row["_series"] is not None:
        return f"{slug(row['source'])}/{slug(row['_series'])}"
    parts = [slug(row["source"])]
    parts += [slug(row[k]) for k in ("submitter", "mlperf_version") if row[k]]
    parts += [slug(row["model_id"] or row["model"]), slug(row["accelerator"], lower=False),
              slug(row["precision"] or "unstated"), slug(row["strategy_family"]), label]
    if row["source_kind"] == "log" and row["system"]:
        parts.append(slug(row["system"]))
    if batch is not None:
        parts.append(f"gbt-{batch:.0f}")
    return "/".join(parts)


def assign_series(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Set ``series_id`` and ``scaling`` on ``rows`` (in place); return the series table rows.

    ``rows`` should be in a stable order (the stage sorts by ``run_id``); the result is sorted
    by ``series_id``.
    """
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    values_of = columns_getter(_GROUP_FIELDS)
    for row in rows:
        key = _group_of(values_of(row))
        if key is not None:  # an ``_eligible`` run
            groups[key].append(row)
    scaled: dict[str | None, str] = {}
    read = columns_getter(("scaling", "derived", "global_batch_tokens"))
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
        _set_group(group, label, inferred, scaled, read)
    return _series_table(rows)


def _set_group(group: list[dict[str, Any]], label: str, inferred: str,
               scaled: dict[str | None, str],
               read: Callable[[dict[str, Any]], tuple[Any, ...]]) -> None:
    """``scaling`` (where the run states none), ``derived`` and ``series_id`` set on the runs
    of one group of ``label`` (``split``: one strong series per batch); ``read``: a run's
    (scaling, derived, global_batch_tokens)."""
    # The id is a function of the group's key, the label and the batch: built once for each
    # (label, batch) of the group, one string shared by its runs.
    ids: dict[tuple[str, float | None], str] = {}
    split = label == "split"
    row_label = "strong" if split else label
    for row in group:
        stated, derived, batch = read(row)
        batch = batch if split else None
        if stated in ("strong", "weak"):  # a stated label the batches may contradict
            _note_contradiction(row, inferred)
        if stated is None:
            row["scaling"] = row_label
            if derived not in scaled:  # one string for each derived list
                scaled[derived] = f"{derived};scaling" if derived else "scaling"
            row["derived"] = scaled[derived]
        series_id = ids.get((row_label, batch))
        if series_id is None:
            series_id = ids[(row_label, batch)] = _series_id(row, row_label, batch)
        row["series_id"] = series_id


_BATCH_SAYS = {"strong": "every run of its group has the same global batch",
               "weak": "the global batch grows with N in its group",
               "split": "the global batch of its group neither stays fixed nor only grows "
                        "with N"}


def _note_contradiction(row: dict[str, Any], inferred: str) -> None:
    """A note when the run's stated ``scaling`` (strong/weak) is not what the batches of its
    group show (``_batch_label``); the stated label is kept, or split into fixed batches."""
    stated = row["scaling"]
    if stated not in ("strong", "weak") or inferred in ("unknown", stated):
        return
    note = (f"[scaling {stated} stated, but {_BATCH_SAYS[inferred]}"
            + (": one series per global batch]" if stated == "strong" else "]"))
    row["notes"] = f"{row['notes']} {note}" if row["notes"] else note


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


# Fields whose difference keeps two logs of one source out of one series (``why_alone``).
_KEY_FIELDS = ("model", "accelerator", "precision", "strategy_family", "scaling", "system",
               "global_batch_tokens", "_series")


def why_alone(rows: list[dict[str, Any]], table: list[dict[str, Any]]
              ) -> list[dict[str, Any]]:
    """Step-log runs in no listed series (no other N beside them), each with a reason.

    Reasons (``code: detail``): ``no_measure`` (no usable y), ``same_n`` (every log of its
    group has the same N), ``alone`` (no other log in its source), ``differs`` (the closest
    log of its source at another N differs in the fields named, with both values),
    ``no_common_measure`` (its group's runs share no y). Sorted by path.
    """
    listed = {t["series_id"] for t in table}
    logs = [r for r in rows if r["source_kind"] == "log" and r["status"] == "ok"]
    members: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in logs:
        if r["series_id"] is not None:
            members[r["series_id"]].append(r)
    out = []
    for r in logs:
        if r["series_id"] in listed:
            continue
        out.append({"path": r["_path"], "source": r["source"], "n": r["n_accelerators"],
                    "reason": _alone_reason(r, members.get(r["series_id"], []), logs)})
    return sorted(out, key=lambda e: e["path"])


def _alone_reason(row: dict[str, Any], group: list[dict[str, Any]],
                  logs: list[dict[str, Any]]) -> str:
    if not _eligible(row) and row.get("step_time_s") is not None:
        return ("no_measure: a step time but no tokens per step, so no throughput to compare "
                "across N (set seq_len, or global_batch_tokens, in the sidecar)")
    if not _eligible(row):
        return "no_measure: no throughput or time-to-train"
    if len({r["n_accelerators"] for r in group}) > 1:
        return "no_common_measure: its series' runs share no throughput measure"
    if len(group) > 1:
        return f"same_n: all {len(group)} logs of series {row['series_id']} are at " \
               f"N={row['n_accelerators']}"
    others = [r for r in logs if r["source"] == row["source"]
              and r["n_accelerators"] != row["n_accelerators"]]
    if not others:
        return f"alone: no log at another N in {row['source']} (logs of one campaign folder, " \
               "or one sidecar 'source:', form series)"

    def diff(other: dict[str, Any]) -> list[str]:
        return [k for k in _KEY_FIELDS if other[k] != row[k]]

    closest = min(others, key=lambda o: (len(diff(o)), o["_path"]))
    named = ", ".join(f"{k.lstrip('_')} ({row[k]} vs {closest[k]})" for k in diff(closest))
    return f"differs: from {closest['_path']} (N={closest['n_accelerators']}) in {named}"
