"""The ingest stage: published tables, MLPerf trees and step logs -> runs, rejects, series, steps.

Every parser yields one ``Record`` per input record; each record ends as exactly one run or one
reject, and the stage checks ``read = runs + rejects`` for every (source, file) before writing
anything. A run seen twice in a source (same ``run_id``, or the same ``log_sha1``) is a
``duplicate`` reject the second time. Outputs (``data/processed``): ``runs.parquet`` sorted by
``run_id``, ``rejects.parquet`` sorted by (source, path, line), ``series.parquet`` sorted by
``series_id``, ``steps.parquet`` sorted by (run_id, path, step); counts in
``reports/metrics/ingest.json``.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import replace
from itertools import repeat
from operator import is_not
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from tqdm import tqdm

from pipeline.bounded import cap, short
from pipeline.config import (PROJ_ROOT, ConfigError, IngestSettings, project_relative,
                             settings, strip_project_root)
from pipeline.ingest.core.conflicts import one_per_configuration
from pipeline.ingest.core.derive import Reject
from pipeline.ingest.core.flop_count import flag_misprints
from pipeline.ingest.core.rows import (RunRow, base_of, columns_getter, compact, own_names,
                                        own_values)
from pipeline.ingest.sources.mlperf.tree import read_tree
from pipeline.ingest.core.normalize import CatalogCache, normalize
from pipeline.ingest.core.table_block import normalize_block, plain_record
from pipeline.ingest.sources.published import read_published
from pipeline.ingest.records import Record
from pipeline.ingest.core.series import assign_series, why_alone
from pipeline.ingest.sources.steplogs.store import write_steps_parquet
from pipeline.ingest.roots import local_root, logs_root
from pipeline.ingest.sources.steplogs.reader import stream_logs
from pipeline.ingest.sources.steplogs.remote import RemoteRoot
from pipeline.io import pid_alive, write_json, write_parquet
from pipeline.io_parts import PartsWriter
from pipeline.ingest.contract import (POWER_COLUMNS, POWER_SCHEMA, REJECTS_SCHEMA, RUNS_SCHEMA,
                                      RUN_COLUMNS, SERIES_COLUMNS, SERIES_SCHEMA, STEPS_SCHEMA,
                                      pandas_dtype)
from pipeline.ingest.schema_check import check_runs
from pipeline.schema import check_metrics, check_output

REJECTS_SCHEMA_COLUMNS = tuple((f.name, f.type) for f in REJECTS_SCHEMA)


def _warn(message: str) -> None:
    print(f"ingest: warning: {message}", file=sys.stderr)


def read_options(params: dict[str, Any]) -> tuple[IngestSettings, list[Path]]:
    """The ``ingest`` settings, checked (a missing or wrong field is a ConfigError naming it),
    and its MLPerf roots as folders."""
    cfg = settings(params, "ingest")
    paths = []
    for i, root in enumerate(cfg.mlperf_roots):
        path = local_root(root, f"params: field 'ingest.mlperf_roots.{i}'")
        path = path if path.is_absolute() else PROJ_ROOT / path
        if not path.is_dir():
            raise ConfigError(f"params: field 'ingest.mlperf_roots.{i}': folder {short(root)} "
                              f"does not exist")
        # Inputs outside the project are not tracked by DVC (a result would depend on files no
        # one versioned): refused unless the setting says so.
        if (not cfg.allow_mlperf_roots_outside_project
                and not path.resolve().is_relative_to(PROJ_ROOT.resolve())):
            raise ConfigError(f"params: field 'ingest.mlperf_roots.{i}': folder {short(root)} lies "
                              "outside the project; set 'ingest.allow_mlperf_roots_outside_"
                              "project: true' to read it anyway")
        paths.append(path)
    return cfg, paths


def load_catalog(catalog_dir: Path) -> Any:
    """The hardware and model catalog (``pipeline.catalog``), imported when the stage runs."""
    from pipeline.catalog import load_catalog as _load
    return _load(catalog_dir)


@contextlib.contextmanager
def scratch_dir(out_dir: Path) -> Iterator[Path]:
    """A scratch folder for per-log step files: ``<out_dir>/.scratch/ingest-<pid>-*``.

    ``.scratch/`` is in ``.dvcignore``, so scratch never enters a stage's dependency hash. A
    folder left by a killed ingest (its pid no longer running), and the ``.steps-*`` folders of
    earlier versions, are removed first; a concurrent ingest's folder is left alone.
    """
    root = out_dir / ".scratch"
    root.mkdir(parents=True, exist_ok=True)
    for old in [*root.glob("ingest-*"), *out_dir.glob(".steps-*")]:
        pid = old.name.split("-")[1]
        if old.name.startswith(".steps-") or (pid.isdigit() and not pid_alive(int(pid))):
            shutil.rmtree(old, ignore_errors=True)
    try:
        with tempfile.TemporaryDirectory(prefix=f"ingest-{os.getpid()}-", dir=root) as scratch:
            yield Path(scratch)
    finally:  # also when the stage stops (Ctrl-C, SIGTERM, disk full): no stray folder
        with contextlib.suppress(OSError):
            root.rmdir()  # only when empty (no concurrent ingest)


def _mlperf_records(roots: list[Path], workers: int) -> Iterator[Record]:
    for root in roots:
        for record in read_tree(root, workers=workers):
            yield _relative(record)


def _relative(record: Record) -> Record:
    """The record with its path relative to the project root (run ids must not depend on where
    the checkout lies)."""
    if not Path(record.path).is_absolute():
        return record
    rel = project_relative(Path(record.path))
    fields = record.fields
    if fields is not None and str(fields.get("provenance", "")).startswith(record.path):
        fields = dict(fields, provenance=rel + fields["provenance"][len(record.path):])
    return replace(record, path=rel, fields=fields)


def _step_logs(roots: list[Path | RemoteRoot], params: dict[str, Any],
               steps_dir: Path) -> Iterator[Record]:
    """One record per step log of each root in turn, yielded as the logs are read (a root's
    reading starts when its first record is asked for and overlaps the normalizing of the
    records already yielded); each log's per-step rows go to ``steps_dir`` (one file per batch
    of logs, so memory does not grow with the number of logs; a folder per root when several)."""
    for i, root in enumerate(roots):
        there = (root.filesystem().isdir(root.path) if isinstance(root, RemoteRoot)
                 else root.is_dir())
        if not there:
            _warn(f"step logs folder {root.url if isinstance(root, RemoteRoot) else root} is "
                  "absent: no step logs read from it")
            continue
        yield from stream_logs(root, params, steps_dir if len(roots) == 1
                               else steps_dir / f"root-{i:03d}")


def _reject_row(record: Record, reason: str) -> dict[str, Any]:
    # Parsers may quote absolute paths; rejects.parquet must not depend on the checkout's place.
    return {"source": record.source, "path": record.path, "line": record.line,
            "record": cap(strip_project_root(record.raw), 500),
            "reason": cap(strip_project_root(reason))}


def _frame(rows: list[dict[str, Any]], columns: Any) -> pd.DataFrame:
    """DataFrame with the dtypes of ``columns`` (name, pyarrow type[, doc]); nullable ints."""
    if rows and type(rows[0]) is RunRow:
        values = _transposed(rows, [c[0] for c in columns])
    else:  # other rows hold every column
        values = {c[0]: [r[c[0]] for r in rows] for c in columns}
    # copy=False: the frame keeps the new arrays as they are (no block of ~70 columns copied)
    return pd.DataFrame({c[0]: _column(values.pop(c[0], None), pandas_dtype(c[1]), len(rows))
                         for c in columns}, copy=False)


def _transposed(rows: list[RunRow], names: list[str]) -> dict[str, list[Any]]:
    """Column lists of ``rows`` (None where a row lacks the column): a RunRow holds only its
    given values (~20 of ~70 columns) over a base that many rows share, so the bases' columns
    are laid out by index (one look-up a row) and the rows' own values by their layout (the
    rows of one layout transposed at once, ``zip(*values)``); a row's own value of a name wins
    over its base's, as in ``RunRow``. A column no row holds has no list. Rows are read by C
    loops (``map``) where they all are RunRows."""
    wanted = set(names)  # not the stage's own keys (_path, _line, _series)
    if set(map(type, rows)) <= {RunRow}:
        base_list, owns = list(map(base_of, rows)), list(map(own_names, rows))
        values, keys = list(map(own_values, rows)), list(map(id, owns))
    else:  # a plain dict row: no base, its own names by value
        base_list = [row.base if type(row) is RunRow else {} for row in rows]
        owns = [own_names(row) if type(row) is RunRow else tuple(row) for row in rows]
        values = [own_values(row) if type(row) is RunRow else tuple(row.values())
                  for row in rows]
        keys = [id(own) if type(row) is RunRow else own for row, own in zip(rows, owns)]
    bases, which = _distinct(base_list, list(map(id, base_list)))
    out: dict[str, list[Any]] = {}
    for name in sorted({k for base in bases for k in base} & wanted):
        per_base = np.empty(len(bases), dtype=object)
        per_base[:] = [base.get(name) for base in bases]
        out[name] = per_base[which].tolist()
    layouts, of_row = _distinct(owns, keys)
    for j, own in enumerate(layouts):
        at = range(len(rows)) if len(layouts) == 1 else np.flatnonzero(of_row == j).tolist()
        _put_own(out, own, at, [values[i] for i in at] if len(layouts) > 1 else values,
                 wanted, len(rows))
    return out


def _distinct(items: list[Any], keys: list[Any]) -> tuple[list[Any], np.ndarray]:
    """The distinct ``items`` by ``keys`` (first seen first; items of one key are one value)
    and each item's place among them."""
    first = dict(zip(keys, items))  # a key keeps its first place
    place = {key: i for i, key in enumerate(first)}
    return list(first.values()), np.fromiter(map(place.__getitem__, keys), dtype=np.int64,
                                              count=len(keys))


def _put_own(out: dict[str, list[Any]], own: tuple[str, ...], at: Sequence[int],
             values: list[tuple[Any, ...]], wanted: set[str], n_rows: int) -> None:
    """The own values of the rows ``at`` (one layout, names ``own``) into ``out``'s columns."""
    whole = len(at) == n_rows  # every row, in order (``at`` is increasing)
    for name, column_values in zip(own, zip(*values)):
        if name not in wanted:
            continue
        column = out.get(name)
        if whole:
            out[name] = list(column_values)
            continue
        if column is None:
            column = out[name] = [None] * n_rows
        for i, value in zip(at, column_values):
            column[i] = value


def _column(values: list[Any] | None, dtype: Any, n_rows: int) -> Any:
    """``values`` (None: ``n_rows`` Nones) as a pandas array of ``dtype``. A column with no
    value (most run columns of most sources) is built from its parts: the array pandas builds
    from ``n_rows`` NaNs (``_EMPTY_DATA``: its values under an all-True mask), without pandas
    inferring each element's type."""
    # by identity: a pd.NA has no truth value
    if values is None or not any(map(is_not, values, repeat(None))):
        if dtype is object:
            return pd.array(np.full(n_rows, None, dtype=object), dtype=object)
        empty = _EMPTY_DATA.get(str(dtype))
        if empty is None:
            return pd.array(np.full(n_rows, np.nan), dtype=dtype)
        kind, fill = empty
        return kind(np.full(n_rows, fill), np.ones(n_rows, dtype=bool))
    return pd.array(values, dtype=dtype)


# pandas' masked arrays of all-missing values, as ``pd.array(np.full(n, np.nan), dtype)`` makes
# them (array class, value under the mask).
_EMPTY_DATA: dict[str, tuple[Any, Any]] = {"Int64": (pd.arrays.IntegerArray, np.int64(1)),
                                           "boolean": (pd.arrays.BooleanArray, np.False_)}


ENERGY_COLUMNS = ("energy_j", "energy_j_nodes", "energy_j_interconnect", "power_measurement",
                  "power_w_per_accelerator", "energy_j_per_token")


def _power_row(owner: dict[str, Any], record: Record, row: dict[str, Any],
               used: bool) -> dict[str, Any]:
    """A ``power.parquet`` row: the measurement read with ``record``, for the run ``owner``."""
    out = {c[0]: None for c in POWER_COLUMNS}
    out.update(record.meta["power"])
    out["power_folder"] = project_relative(Path(out["power_folder"]))
    for key in ("run_id", "source", "model", "accelerator", "n_accelerators", "mlperf_version"):
        out[key] = owner[key]
    for key in ("result_path", "benchmark", "system", "submitter"):
        out[key] = row[key]
    out["used_in_runs"] = used
    return out


def _take_energy(owner: dict[str, Any], row: dict[str, Any]) -> bool:
    """Give ``owner`` (the run kept) the energy of ``row`` (the same run read again, from a
    result tree with power logs) when it has none; True when it did."""
    if row["energy_j"] is None or owner["energy_j"] is not None:
        return False
    for key in ENERGY_COLUMNS:
        owner[key] = row[key]
    derived = [d for d in (owner["derived"] or "").split(";") if d]
    derived += [k for k in ENERGY_COLUMNS if k != "power_measurement" and row[k] is not None]
    owner["derived"] = ";".join(sorted(set(derived)))
    energy_notes = [n for n in (row["notes"] or "").split("; ")
                    if n.startswith(("energy", "power", "node_"))]
    owner["notes"] = "; ".join([n for n in [owner["notes"]] if n] + energy_notes +
                               [f"energy read from {row['provenance']} (same log)"])
    return True


# Plain table records normalized column-wise per block (``core.table_block``): one block is
# at most this many consecutive plain records.
BLOCK_ROWS = 16_384


class _Runs:
    """What ``convert`` accumulates: runs, rejects, records read, and the run first read under
    each key, by scope (a source, or '*'): no key tuple and no index object a run, which a
    10^6-row table would hold 10^6 times."""

    def __init__(self, power_rows: list[dict[str, Any]]) -> None:
        self.runs: list[dict[str, Any]] = []
        self.rejects: list[dict[str, Any]] = []
        self.read: Counter = Counter()
        self.seen: dict[str, dict[str, RunRow]] = {}
        self.shared: dict[Any, Any] = {}
        self.bases: dict[tuple[Any, ...], dict[str, Any]] = {}
        self.power_rows = power_rows

    def base(self, row: dict[str, Any], path: str) -> dict[str, Any]:
        """The shared base of a run row read from ``path`` (``rows.compact``)."""
        return compact(row, path, self.shared, self.bases).base

    def take_plain(self, record: Record, row: RunRow) -> None:
        """A column-wise run (``table_block``, its ``_line`` set): its only key is its id in
        its source."""
        scope = self.seen.setdefault(record.source, {})
        run_id = row["run_id"]
        owner = scope.get(run_id)
        if owner is not None:
            self.rejects.append(_reject_row(record, f"duplicate: same run as "
                                                    f"{owner['provenance']}"))
            return
        scope[run_id] = row
        self.runs.append(row)

    def take(self, record: Record, row: dict[str, Any]) -> None:
        """A run normalized by itself: a duplicate of a run already read, or a new run."""
        # The same run twice: same identifying fields within a source, the same log file (by
        # content hash) in any source (MLPerf re-publications, a result tree pointed at rounds
        # that the published MLPerf table already holds), or, within a source, the same MLPerf
        # run re-published in an edited file (same benchmark, run_start and run_stop ms).
        keys = [(record.source, row["run_id"])]
        digest = record.fields.get("log_sha1") if record.fields else None
        if digest:
            keys.append(("*", f"log_sha1={digest}"))
        if record.meta.get("dedup_key"):
            keys.append((record.source, f"mlperf_run={record.meta['dedup_key']}"))
        seen = self.seen
        owner = next((seen[s][k] for s, k in keys if k in seen.get(s, ())), None)
        if owner is not None:
            self.rejects.append(_reject_row(record, f"duplicate: same run as "
                                                    f"{owner['provenance']}"))
            if record.meta.get("power"):
                used = _take_energy(owner, row)
                self.power_rows.append(_power_row(owner, record, row, used))
            return
        row = compact(row, record.path, self.shared, self.bases)  # its "_path" too
        for scope, key in keys:
            seen.setdefault(scope, {})[key] = row
        row["_line"] = record.line
        self.runs.append(row)
        if record.meta.get("power"):
            self.power_rows.append(_power_row(row, record, row, row["energy_j"] is not None))

    def result(self, record: Record, result: dict[str, Any] | Reject) -> None:
        """One record's normalization (a run row or a reject) taken."""
        self.read[(record.source, record.path)] += 1
        if isinstance(result, Reject):
            self.rejects.append(_reject_row(record, str(result)))
        elif type(result) is RunRow:
            self.take_plain(record, result)
        else:
            self.take(record, result)


def convert(records: Iterator[Record], catalog: Any, options: IngestSettings,
            power_rows: list[dict[str, Any]] | None = None, plausibility: bool = True,
            block_rows: int = BLOCK_ROWS
            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Counter]:
    """Normalize every record: (run rows, reject rows, records read per (source, path)).

    Runs of one configuration are one measurement (``core.conflicts``: a repeat keeps the
    first, a disagreement rejects them all as ``conflict``). A run read twice keeps its first row; a power measurement read with the second copy (an
    MLPerf tree with power logs, whose runs the published table already holds) is attached to
    the first when that has none. Each power measurement becomes a row of ``power_rows``.
    ``plausibility=False`` skips the MFU rule (``scripts/mfu_ceilings.py`` finds the records).
    Plain table records (``table_block.plain_record``) are normalized column-wise, up to
    ``block_rows`` consecutive ones at a time (0: every record by itself, as the equivalence
    tests compare); the runs and rejects are the same.
    """
    cache = CatalogCache(catalog, plausibility)
    state = _Runs(power_rows if power_rows is not None else [])
    block: list[Record] = []

    def flush() -> None:
        if not block:
            return
        for plain, result in zip(block, normalize_block(block, cache, options, state.base)):
            state.result(plain, result)
        block.clear()

    for record in records:
        if block_rows and plain_record(record):
            block.append(record)
            if len(block) >= block_rows:
                flush()
            continue
        flush()
        if record.reason is not None:
            state.read[(record.source, record.path)] += 1
            state.rejects.append(_reject_row(record, record.reason))
            continue
        try:
            state.result(record, normalize(record, cache, options))
        except Reject as exc:
            state.result(record, exc)
    flush()
    runs, dropped = one_per_configuration(state.runs)
    flag_misprints(runs)  # a row whose tokens/s and FLOP figure disagree (core.flop_count)
    rejects = state.rejects
    rejects += [{"source": r["source"], "path": r["_path"], "line": r["_line"],
                 "record": cap(strip_project_root(_shown(r)), 500),
                 "reason": cap(strip_project_root(reason))} for r, reason in dropped]
    return runs, rejects, state.read


def _shown(row: dict[str, Any]) -> str:
    """What a run dropped after normalization shows as its record: where it was read."""
    return str(row["provenance"] or row["_path"])


def check_accounting(read: Counter, runs: list[dict[str, Any]], rejects: list[dict[str, Any]]
                     ) -> None:
    """Raise when some (source, file) has records that are neither a run nor a reject."""
    ended: Counter = Counter(map(columns_getter(("source", "_path")), runs))
    ended.update((r["source"], r["path"]) for r in rejects)
    if ended != read:
        broken = sorted(k for k in set(read) | set(ended) if read[k] != ended[k])
        detail = ", ".join(f"{s} {p}: read {read[(s, p)]}, ended {ended[(s, p)]}"
                           for s, p in broken[:5])
        raise AssertionError(f"ingest accounting broken (a bug): {detail}")


def _metrics(read: Counter, runs: list[dict[str, Any]], rejects: list[dict[str, Any]],
             series: list[dict[str, Any]], n_steps: int) -> dict[str, Any]:
    sources: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"read": 0, "runs": 0, "rejects": Counter(), "files": set()})
    for (source, path), count in read.items():
        sources[source]["read"] += count
        sources[source]["files"].add(path)
    by_family: Counter = Counter()
    by_kind: Counter = Counter()
    # the runs counted by (source, family, kind): a few distinct triples, one C loop
    for (source, family, kind), count in Counter(map(columns_getter(
            ("source", "accelerator_family", "source_kind")), runs)).items():
        sources[source]["runs"] += count
        by_family[family or "unknown"] += count
        by_kind[kind] += count
    for row in rejects:
        sources[row["source"]]["rejects"][row["reason"].split(":", 1)[0]] += 1
    by_code = Counter(r["reason"].split(":", 1)[0] for r in rejects)
    return {
        "totals": {"read": sum(read.values()), "runs": len(runs), "rejects": len(rejects),
                   "files": len({p for _, p in read}), "series": len(series),
                   "steps": n_steps},
        "rejects_by_code": dict(sorted(by_code.items())),
        "sources": {s: {"read": v["read"], "runs": v["runs"], "files": len(v["files"]),
                        "rejects": dict(sorted(v["rejects"].items()))}
                    for s, v in sorted(sources.items())},
        "runs_by_accelerator_family": dict(sorted(by_family.items())),
        "runs_by_source_kind": dict(sorted(by_kind.items())),
        "n_series": len(series),
        "runs_in_series": sum(s["n_points"] for s in series),
    }


def _power_metrics(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Power measurements read, used, and not used by reason code."""
    not_used = Counter(code.split(":", 1)[0] for r in rows if r["status"] != "ok"
                       for code in [r["status"]])
    return {"measurements": len(rows), "ok": sum(r["status"] == "ok" for r in rows),
            "runs_with_energy": sum(bool(r["used_in_runs"]) for r in rows),
            "not_used_by_code": dict(sorted(not_used.items()))}


# Young collections between two full ones (``gc``'s third threshold, 10 by default) while the
# stage holds its runs: every full collection walks every run held so far (~20 of them over a
# 10^6-row table: ~8 of its ~60 CPU-s), while the rows live to the end anyway. Cycles that
# die young (a reject's traceback) are still collected by the young collections.
FULL_GC_EVERY = 1000


@contextlib.contextmanager
def rare_full_collections() -> Iterator[None]:
    """Python's cyclic collector with full collections ``FULL_GC_EVERY`` young collections
    apart, within the block (its thresholds restored after)."""
    old = gc.get_threshold()
    gc.set_threshold(old[0], old[1], max(old[2], FULL_GC_EVERY))
    try:
        yield
    finally:
        gc.set_threshold(*old)


def run(params: dict[str, Any], *, published_dir: Path,
        logs_dir: Path | str | list[Path | str], catalog_dir: Path,
        out_dir: Path, metrics_path: Path) -> dict[str, Any]:
    """Run the ingest stage; return the metrics written to ``metrics_path``. ``logs_dir``: one
    step-log root or a list of them, each a path or an fsspec URL (``roots.logs_root``)."""
    options, mlperf_roots = read_options(params)
    catalog = load_catalog(Path(catalog_dir))
    published_dir, out_dir = Path(published_dir), Path(out_dir)
    logs_roots = [logs_root(root, "--logs") for root in (
        logs_dir if isinstance(logs_dir, (list, tuple)) else [logs_dir])]
    if not published_dir.is_dir():
        _warn(f"published folder {published_dir} is absent: no published tables read")
    out_dir.mkdir(parents=True, exist_ok=True)
    with scratch_dir(out_dir) as scratch, contextlib.ExitStack() as stack, \
            rare_full_collections():

        def records() -> Iterator[Record]:
            if published_dir.is_dir():
                yield from read_published(published_dir)
            yield from _mlperf_records(mlperf_roots, options.power_workers)
            # Started after the MLPerf trees, whose power logs a pool reads: no process is
            # forked beside another pool's threads.
            yield from _step_logs(logs_roots, params, Path(scratch))

        source = stack.enter_context(contextlib.closing(records()))
        stream = tqdm(source, desc="ingest", unit="rec", file=sys.stderr, delay=2.0,
                      disable=not sys.stderr.isatty())
        power_rows: list[dict[str, Any]] = []
        runs, rejects, read = convert(stream, catalog, options, power_rows)
        check_accounting(read, runs, rejects)
        power_rows.sort(key=lambda r: (r["run_id"], r["power_measurement"] or "",
                                       r["power_folder"]))
        write_parquet(check_output("power.parquet", _frame(power_rows, POWER_COLUMNS)),
                      out_dir / "power.parquet", POWER_SCHEMA)

        runs.sort(key=lambda r: r["run_id"])
        series = assign_series(runs)
        alone = why_alone(runs, series)
        rejects.sort(key=lambda r: (r["source"], r["path"], r["line"], r["reason"], r["record"]))
        # Steps of a rejected log belong to no run and are left out (the log is in rejects).
        run_by_path = {r["_path"]: r["run_id"] for r in runs if r["source_kind"] == "log"}
        metrics = _metrics(read, runs, rejects, series, 0)  # steps counted below
        write_runs(runs, out_dir / "runs.parquet",  # empties ``runs``: its rows are written
                   max_rows=options.partition_rows)
        write_parquet(check_output("rejects.parquet", _frame(rejects, REJECTS_SCHEMA_COLUMNS)),
                      out_dir / "rejects.parquet", REJECTS_SCHEMA)
        write_parquet(check_output("series.parquet", _frame(series, SERIES_COLUMNS)),
                      out_dir / "series.parquet", SERIES_SCHEMA)
        n_steps = write_steps_parquet(Path(scratch), run_by_path, out_dir / "steps.parquet",
                                      STEPS_SCHEMA, max_rows=options.partition_rows)
    metrics["totals"]["steps"] = n_steps
    metrics["power"] = _power_metrics(power_rows)
    metrics["logs_without_series"] = _alone_metrics(alone)
    metrics = check_metrics("ingest", metrics)
    write_json(metrics, metrics_path)
    t = metrics["totals"]
    for line in console_summary(rejects, alone):
        print(line, file=sys.stderr)
    print(f"ingest: {t['read']} records from {t['files']} files -> {t['runs']} runs, "
          f"{t['rejects']} rejects, {t['series']} series", file=sys.stderr)
    return metrics


# Runs checked and written per slice (``write_runs``): a 10^6-row table's runs as one frame and
# one Arrow table would cost ~2 kB a run on top of the rows themselves.
RUNS_SLICE_ROWS = 16_384
# ``ingest.partition_rows``'s default: runs/steps of more rows are written as folders of parts.
PARTITION_ROWS = 10_000_000


def write_runs(runs: list[RunRow], path: Path, slice_rows: int | None = None,
               max_rows: int = PARTITION_ROWS) -> None:
    """``runs.parquet`` from ``runs`` (sorted by ``run_id``), checked against the contract
    (``schema_check.check_runs``: ``validate_runs``' checks on whole columns) and written
    ``slice_rows`` runs at a time, each slice a row group; the rows of a written slice are
    dropped from ``runs`` (left empty), so the peak memory is the rows plus one slice's frame.
    Up to ``slice_rows`` runs the file is byte for byte what ``write_parquet`` writes
    (pyarrow's ``write_table`` is this writer and one ``write_table`` call). ``run_id`` is
    unique within a slice by the contract and across slices because the rows are sorted: the
    two runs either side of a cut differ. ``slice_rows``: ``RUNS_SLICE_ROWS`` unless given.
    More than ``max_rows`` runs (``ingest.partition_rows``): a folder of one part per
    ``run_id`` prefix (``pipeline.io_parts``)."""
    slice_rows = slice_rows or RUNS_SLICE_ROWS
    with PartsWriter(path, max_rows, RUNS_SCHEMA, rows=len(runs)) as writer:
        last_id: str | None = None
        first = True
        while runs or first:  # an empty table is written too
            first = False
            chunk = runs[:slice_rows]
            if chunk and chunk[0]["run_id"] == last_id:
                raise AssertionError(f"runs.parquet: run_id {last_id} twice (a bug)")
            table = pa.Table.from_pandas(check_runs(_frame(chunk, RUN_COLUMNS)),
                                         schema=RUNS_SCHEMA, preserve_index=False)
            writer.write_table(table)
            last_id = chunk[-1]["run_id"] if chunk else None
            del runs[:slice_rows], table, chunk
            pa.default_memory_pool().release_unused()  # Arrow's pool keeps freed memory


def _code(reason: str) -> str:
    return reason.split(":", 1)[0]


def _alone_metrics(alone: list[dict[str, Any]]) -> dict[str, Any]:
    """Step-log runs in no series: how many, by reason code, and each with its reason."""
    return {"count": len(alone),
            "by_reason": dict(sorted(Counter(_code(a["reason"]) for a in alone).items())),
            "logs": [{"path": a["path"], "n_accelerators": a["n"], "reason": a["reason"]}
                     for a in alone]}


def console_summary(rejects: list[dict[str, Any]], alone: list[dict[str, Any]],
                    width: int = 160) -> list[str]:
    """Lines for the terminal: rejects by reason code (most first) with the first example of
    each, then the step logs that joined no series, by reason, with the first of each."""
    def clip(text: str) -> str:
        text = "  " + " ".join(str(text).split())  # one line, indented under its heading
        return text if len(text) <= width else text[:width - 3] + "..."

    lines = []
    by_code: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rejects:
        by_code[_code(r["reason"])].append(r)
    if by_code:
        lines.append(f"ingest: {len(rejects)} rejects by reason (first example of each):")
    for code, rows in sorted(by_code.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        first = rows[0]
        lines.append(clip(f"{code}: {len(rows)}, e.g. {first['path']}:{first['line']} "
                          f"{first['reason']}"))
    by_alone: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for a in alone:
        by_alone[_code(a["reason"])].append(a)
    if by_alone:
        lines.append(f"ingest: {len(alone)} step log(s) in no scaling series (no other N "
                     "beside them):")
    for code, rows in sorted(by_alone.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        lines.append(clip(f"{code}: {len(rows)}, e.g. {rows[0]['path']} (N={rows[0]['n']}): "
                          f"{rows[0]['reason']}"))
    return lines
