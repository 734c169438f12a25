"""Plain table rows normalized column-wise: a block of records -> the same runs and rejects as
``normalize`` one record at a time, at a fraction of its cost on a large published table.

A record is *plain* (``plain_record``) when it is a candidate run with no reader metadata whose
fields are all in ``STATIC_FIELDS`` (values a table's rows usually share: who, what, which
model and chip) or ``VECTOR_FIELDS`` (the numbers that differ from row to row: N and the
throughput). The rows of a block that share every static value and state the same vector
fields form a *group*; a group has one template: its first row whose numbers pass the
column-wise checks, normalized by ``normalize`` itself. Everything that does not depend on the
vector fields (catalog look-ups, shape, peak, notes, derived names, precision) is the
template's; the columns that do (``PER_ROW_COLUMNS``) are computed on numpy arrays with the
per-row path's formulas and operation order, so each float is the same double.

Rows the column-wise checks flag (a number that is not plain decimal text, N not an integer
in range, a value <= 0, a step time out of range, two throughputs that disagree, a derived
MFU above 1 or above the plausibility rule's limit or its record note) go through
``normalize`` one by one, so every reject keeps its field and its reason. A group whose
template is rejected, or whose template's column-wise row differs from its per-row row in any
value (a safety net: it never should), goes through ``normalize`` whole.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.ingest.core.derive import CONSISTENCY_RTOL, Reject, strategy_family
from pipeline.ingest.core.normalize import (ID_FIELDS, MAX_COUNT, CatalogCache, canonical,
                                             normalize)
from pipeline.ingest.core.plausible import MAX_STEP_TIME_S, MIN_STEP_TIME_S
from pipeline.ingest.core.rows import BASE_COLUMN_SET, RunRow, row_maker
from pipeline.ingest.records import Record
from pipeline.measures import flop_per_token
from pipeline.numbers import MAX_NUMBER_CHARS
from pipeline.plausibility import mfu_ceiling, mfu_limit

if TYPE_CHECKING:
    from pipeline.config import IngestSettings

# Fields whose values a group shares (the group key holds them).
STATIC_FIELDS = frozenset(("source", "citation", "model", "params_b", "active_params_b",
                           "n_layers", "d_model", "seq_len", "accelerator", "precision",
                           "strategy", "scaling", "series", "status", "notes", "derived"))
# Fields computed on per row (n_accelerators is required: a group without it is rejected by
# its template and goes through ``normalize``).
VECTOR_FIELDS = ("n_accelerators", "tokens_per_s", "tokens_per_s_per_accelerator",
                 "global_batch_tokens", "step_time_s")
_VECTOR = frozenset(VECTOR_FIELDS)
PLAIN_FIELDS = STATIC_FIELDS | _VECTOR
# Run columns that depend on the vector fields (everything else is the template's).
PER_ROW_COLUMNS = ("run_id", "provenance", "n_accelerators", "tokens_per_s",
                   "tokens_per_s_per_accelerator", "global_batch_tokens", "step_time_s",
                   "model_flops_per_s", "mfu", "strategy_family")
# ``pipeline.numbers``' decimal text, for a whole column at once (one C call): the values
# joined by a separator no value holds (checked by counting).
# One way to match each text (digits, then an optional fraction): with ``\d+\.?\d*`` a run of
# digits splits many ways, and a column whose last text fails backtracked through all of them
# (exponential in the rows).
_DECIMAL = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_SEP = "\n"
_COLUMN = re.compile(rf"{_DECIMAL}(?:{_SEP}{_DECIMAL})*", re.ASCII)
_ONE = re.compile(_DECIMAL, re.ASCII)

Normalized = dict[str, Any] | Reject


def plain_record(record: Record) -> bool:
    """Whether ``record`` may be normalized column-wise (see the module docstring)."""
    return (record.reason is None and not record.meta and record.fields is not None
            and record.fields.keys() <= PLAIN_FIELDS)


def normalize_block(records: Sequence[Record], catalog: CatalogCache, options: IngestSettings,
                    make_base: Callable[[dict[str, Any], str], dict[str, Any]]
                    ) -> list[Normalized]:
    """One result per record of ``records`` (all ``plain_record``), in order: a run row (a
    ``RunRow`` on the base ``make_base(template row, path)`` gives, for column-wise rows;
    a dict from ``normalize`` for the others) or the ``Reject`` that ``normalize`` raised."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, record in enumerate(records):
        fields = record.fields
        assert fields is not None
        key = (record.source, record.path,
               tuple([(k, v) for k, v in fields.items() if k not in _VECTOR]),
               tuple([k for k in fields if k in _VECTOR]))
        groups.setdefault(key, []).append(i)
    out: list[Normalized | None] = [None] * len(records)
    for key, rows in groups.items():
        group = [records[i] for i in rows]
        for i, result in zip(rows, _group(group, key[3], catalog, options, make_base)):
            out[i] = result
    return out  # type: ignore[return-value]


def _one(record: Record, catalog: CatalogCache, options: IngestSettings) -> Normalized:
    try:
        return normalize(record, catalog, options)
    except Reject as exc:
        return exc


def _numbers(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(values, plain): each text as ``float`` where it is ``pipeline.numbers``' plain decimal
    text of at most ``MAX_NUMBER_CHARS`` characters (NaN elsewhere)."""
    joined = _SEP.join(texts)
    if (joined.count(_SEP) == len(texts) - 1 and _COLUMN.fullmatch(joined)
            and max(map(len, texts)) <= MAX_NUMBER_CHARS):
        return np.array(list(map(float, texts)), dtype=np.float64), np.ones(len(texts), bool)
    plain = np.array([len(t) <= MAX_NUMBER_CHARS and _ONE.fullmatch(t) is not None
                      for t in texts], dtype=bool)
    return (np.array([float(t) if ok else np.nan for t, ok in zip(texts, plain)],
                     dtype=np.float64), plain)


def _checked(group: list[Record], present: tuple[str, ...], options: IngestSettings
             ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The vector fields of ``group`` as float arrays, and which rows pass every check of
    ``normalize`` that reads them alone (a row that fails one is normalized by itself)."""
    values: dict[str, np.ndarray] = {}
    ok = np.ones(len(group), dtype=bool)
    with np.errstate(invalid="ignore", over="ignore"):
        for name in present:
            column, plain = _numbers([r.fields[name] for r in group])  # type: ignore[index]
            values[name] = column
            ok &= plain & (column > 0)  # every vector field is a positive quantity
        n = values.get("n_accelerators")
        if n is not None:
            ok &= (n == np.floor(n)) & (n >= 1) & (n <= min(MAX_COUNT, options.max_accelerators))
        step = values.get("step_time_s")
        if step is not None:
            ok &= (step > MIN_STEP_TIME_S) & (step <= MAX_STEP_TIME_S)
        tps, tpa = values.get("tokens_per_s"), values.get("tokens_per_s_per_accelerator")
        if tps is not None and tpa is not None and n is not None:
            ok &= ~(np.abs(tpa * n - tps) > CONSISTENCY_RTOL * tps)
    return values, ok


def _group(group: list[Record], present: tuple[str, ...], catalog: CatalogCache,
           options: IngestSettings, make_base: Callable[[dict[str, Any], str], dict[str, Any]]
           ) -> list[Normalized]:
    """The results of one group (see the module docstring)."""
    values, checked = _checked(group, present, options)
    stated_precision = "precision" in group[0].fields  # type: ignore[operator]
    done: dict[int, Normalized] = {}  # rows normalized one by one so far
    for _ in range(3):  # a template whose own derived values are flagged: the next row
        ok = checked & ~np.isin(np.arange(len(group)), list(done))
        if not ok.any() or "n_accelerators" not in values:
            break
        first = int(np.argmax(ok))
        template = done[first] = _one(group[first], catalog, options)
        if not isinstance(template, dict):
            break
        columns, ok = _derived(values, ok, template, stated_precision, catalog, options)
        if ok[first]:
            out = _rows(group, template, columns, ok, stated_precision, make_base)
            if _same(out[first], template):  # the safety net: it never should differ
                return [row if row is not None else done[i] if i in done
                        else _one(r, catalog, options) for i, (r, row) in enumerate(zip(group, out))]
            break
    return [done[i] if i in done else _one(r, catalog, options) for i, r in enumerate(group)]


def _same(row: Any, template: dict[str, Any]) -> bool:
    """Whether the column-wise ``row`` holds the per-row ``template``'s values (and types)."""
    mine = {k: v for k, v in row.items() if k not in ("_path", "_line")}  # the stage's
    theirs = {k: v for k, v in template.items() if v is not None}
    return mine == theirs and all(type(v) is type(theirs[k]) for k, v in mine.items())


def _rows(group: list[Record], template: dict[str, Any], columns: dict[str, np.ndarray],
          ok: np.ndarray, stated_precision: bool,
          make_base: Callable[[dict[str, Any], str], dict[str, Any]]) -> list[RunRow | None]:
    """The run rows of the rows ``ok`` marks, None for the others. A row's own values are the
    template's that are not its base's, then its id, provenance, numbers and line (``_line``,
    the stage's), in one layout for the group (``rows.row_maker``)."""
    families = _families(columns["n_accelerators"], template)
    ids = _run_ids(group[0].source, template, columns, stated_precision)
    static = {k: v for k, v in template.items()
              if v is not None and k not in BASE_COLUMN_SET and k not in PER_ROW_COLUMNS}
    names = [c for c in PER_ROW_COLUMNS[2:-1] if c in columns]
    make = row_maker((*static, "run_id", "provenance", *names, "_line"))
    head = tuple(static.values())
    path = group[0].path
    lines = [record.line for record in group]
    own = zip(ids, [f"{path}:{line}" for line in lines], *[columns[c].tolist() for c in names],
              lines)
    bases: dict[str, dict[str, Any]] = {}
    out: list[RunRow | None] = []
    for i, (taken, values) in enumerate(zip(ok.tolist(), own)):
        if not taken:
            out.append(None)
            continue
        family = families(i)
        base = bases.get(family)
        if base is None:
            base = bases[family] = make_base(dict(template, strategy_family=family), path)
        out.append(make(head + values, base))
    return out


def _derived(values: dict[str, np.ndarray], ok: np.ndarray, template: dict[str, Any],
             stated_precision: bool, catalog: CatalogCache, options: IngestSettings
             ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """``derive_measures`` and the plausibility rule on whole columns: the run columns that
    depend on the vector fields, and ``ok`` narrowed to the rows whose derived values the
    per-row path would accept without a reject or a per-row note."""
    n = values["n_accelerators"]
    out = {"n_accelerators": np.where(ok, n, 1).astype(np.int64)}
    tps, tpa = values.get("tokens_per_s"), values.get("tokens_per_s_per_accelerator")
    gbt, step = values.get("global_batch_tokens"), values.get("step_time_s")
    with np.errstate(all="ignore"):
        if tps is None and tpa is not None:
            tps = tpa * n
        if tps is None and step is not None and gbt is not None:
            tps = gbt / step
        if tpa is None and tps is not None:
            tpa = tps / n
        if step is None and tps is not None and gbt is not None:
            step = gbt / tps
        for name, column in (("tokens_per_s", tps), ("tokens_per_s_per_accelerator", tpa),
                             ("global_batch_tokens", gbt), ("step_time_s", step)):
            if column is not None:
                out[name] = column
        mfu = None
        if tps is not None:
            fpt, _ = flop_per_token(template["active_params"], template["n_layers"],
                                    template["d_model"], template["seq_len"],
                                    options.attention_flops)
            model_flops = out["model_flops_per_s"] = tps * fpt
            peak = _peak(template, stated_precision, catalog, options)
            if peak is not None:
                mfu = out["mfu"] = model_flops / (n * peak)
        for column in out.values():
            if column.dtype == np.float64:
                ok = ok & np.isfinite(column) & (column > 0)
        if mfu is not None:
            ok = ok & (mfu <= _mfu_bound(template, catalog))
    return out, ok


def _peak(template: dict[str, Any], stated_precision: bool, catalog: CatalogCache,
          options: IngestSettings) -> float | None:
    """The peak ``normalize`` derives measures from: none when it withholds an assumed
    precision's peak on a chip with fp8 units (``normalize._chip``)."""
    withheld = (not stated_precision and not options.mfu_on_assumed_precision
                and catalog.peak(template["accelerator"], "fp8")[0] is not None)
    return None if withheld else template["peak_flops_per_s_per_accelerator"]


def _mfu_bound(template: dict[str, Any], catalog: CatalogCache) -> float:
    """The highest MFU that ``normalize._check_plausible`` passes without a reject or a note."""
    if catalog.plausibility_dir is None:
        return 1.0
    precision = template["precision"] or template["peak_precision"]
    bound = min(1.0, mfu_limit(template["accelerator"], precision,
                               catalog.plausibility_dir).value)
    ceiling = mfu_ceiling(template["accelerator"], precision, catalog.plausibility_dir).value
    return bound if ceiling is None else min(bound, ceiling)


def _families(n: np.ndarray, template: dict[str, Any]) -> Callable[[int], str]:
    """Row index -> strategy family: the template's, unless a stated strategy makes it depend
    on N (``derive.strategy_family``)."""
    if template["strategy"] is None:
        family = template["strategy_family"]
        return lambda i: family
    counts = n.tolist()
    cache: dict[int, str] = {}

    def family_of(i: int) -> str:
        count = counts[i]
        if count not in cache:
            cache[count] = strategy_family(count, None, None, None, None, template["strategy"])
        return cache[count]
    return family_of


def _run_ids(source: str, template: dict[str, Any], columns: dict[str, np.ndarray],
             stated_precision: bool) -> list[str]:
    """``normalize.run_id`` of every row: the template's identifying values with each row's
    own N and global batch (a published row's id holds no path)."""
    parts = [source] + ["" if (v := template[name]) is None else v if type(v) is str
                        else canonical(v) for name in ID_FIELDS]
    if not stated_precision:
        parts[1 + ID_FIELDS.index("precision")] = ""
    n_at = 1 + ID_FIELDS.index("n_accelerators")
    g_at = 1 + ID_FIELDS.index("global_batch_tokens")
    counts = columns["n_accelerators"].tolist()
    batches = (list(map(canonical, columns["global_batch_tokens"].tolist()))
               if "global_batch_tokens" in columns else None)
    ids = []
    for i, count in enumerate(counts):
        parts[n_at] = str(count)
        if batches is not None:
            parts[g_at] = batches[i]
        ids.append(hashlib.sha1("\x1f".join(parts).encode("utf-8")).hexdigest()[:16])
    return ids
