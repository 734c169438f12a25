"""Per-step rows of the step logs: one Arrow table per log, gathered into one DataFrame or
written to disk one file per log.

``read_logs`` (``pipeline.ingest.sources.steplogs.reader``) either returns every log's rows in one DataFrame
(memory grows with the number of steps: ~120 bytes a row) or, given ``steps_dir``, has the
process that parsed a log write its rows to ``steps_dir/<n>.arrow`` (Arrow IPC, uncompressed,
``n`` the log's place in sorted path order) and keeps none of them: memory then stays that of
the largest single log being parsed, whatever the number of logs. Read such a folder with
``pyarrow.dataset.dataset(steps_dir, format="arrow")`` or file by file
(``pyarrow.ipc.open_file``); each file holds one log's rows sorted by (step, segment, rank,
line), ``path`` and ``format`` dictionary-encoded. ``write_steps_parquet`` turns such a folder
into one Parquet file sorted by (run_id, path, step, ...), one log slice at a time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.ipc as ipc

from pipeline.io_parts import PartsWriter
from pipeline.ingest.contract import STEP_COLUMNS as SCHEMA_STEP_COLUMNS
from pipeline.ingest.contract import STEPS_SCHEMA

# The columns of steps.parquet (``ingest/contract.py: STEP_COLUMNS``) without run_id (known only once the
# log became a run), the identifying ones first.
_KEYS = ("path", "format", "step", "segment", "rank", "line")
STEP_COLUMNS = _KEYS + tuple(n for n, _ in SCHEMA_STEP_COLUMNS if n not in _KEYS and n != "run_id")
_TEXT = ("path", "format")


def _in_order(columns: dict[str, np.ndarray]) -> np.ndarray | None:
    """Row order by (step, segment, rank, line), stable; None when the rows are in it already
    (step numbers strictly rising: the usual log, checked in one pass instead of sorted)."""
    step = columns["step"]
    if len(step) < 2 or bool((step[1:] > step[:-1]).all()):
        return None
    return np.lexsort([columns[k] for k in ("line", "rank", "segment", "step")])


def steps_rows(shown: str, fmt: str, columns: dict[str, np.ndarray]) -> dict[str, Any]:
    """One log's step rows, sorted: ``path`` and ``format`` (one text each) and a numpy
    array per other column of ``STEP_COLUMNS`` (views, not copies, where already in order).
    numpy, not Arrow, so that rows sent back by a worker are freed to the system as soon as
    ``gather`` has copied them."""
    order = _in_order(columns)
    rows: dict[str, Any] = {"path": shown, "format": fmt}
    for name in STEP_COLUMNS[2:]:
        col = np.asarray(columns[name])
        rows[name] = col if order is None else col[order]
    return rows


def n_rows(rows: dict[str, Any]) -> int:
    """Number of step rows in ``steps_rows`` output."""
    return len(rows["step"])


def write_steps(logs: list[dict[str, Any]], path: Path) -> None:
    """Some logs' rows, one log after another, to one Arrow IPC file (no compression: written
    and read at memory speed; ``path`` and ``format`` dictionary-encoded). One file for a batch
    of small logs, not one each: creating a file and an Arrow table costs ~1 ms, more than
    parsing a log of 30 steps."""
    counts = np.array([n_rows(rows) for rows in logs])
    arrays = {}
    for c in _TEXT:
        names = list(dict.fromkeys(rows[c] for rows in logs))  # a dictionary holds each once
        index = {name: i for i, name in enumerate(names)}
        codes = np.repeat(np.array([index[rows[c]] for rows in logs], dtype=np.int32), counts)
        arrays[c] = pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(names, pa.string()))
    arrays.update((c, pa.array(np.concatenate([rows[c] for rows in logs])))
                  for c in STEP_COLUMNS[2:])
    table = pa.table({c: arrays[c] for c in STEP_COLUMNS})
    with pa.OSFile(str(path), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def empty_frame() -> pd.DataFrame:
    """A steps frame with no rows (the columns and dtypes of ``gather``'s)."""
    return pd.DataFrame({c: pd.Series(dtype=STEPS_SCHEMA.field(c).type.to_pandas_dtype())
                         for c in STEP_COLUMNS})


def gather(logs: list[dict[str, Any]]) -> pd.DataFrame:
    """Stack the logs' rows (in the given order) into one frame, freeing each log's as it is
    copied: peak is the result plus one log's rows, not twice the result. ``path`` and
    ``format`` are object columns (one shared ``str`` per log)."""
    if not logs:
        return empty_frame()
    total = sum(n_rows(rows) for rows in logs)
    out = {c: np.empty(total, dtype=object if c in _TEXT else logs[0][c].dtype)
           for c in STEP_COLUMNS}
    start = 0
    while logs:
        rows = logs.pop(0)
        end = start + n_rows(rows)
        for c in STEP_COLUMNS:
            out[c][start:end] = rows[c]
        start = end
        del rows
    return pd.DataFrame(out, copy=False)


SLICE_ROWS = 1 << 18


def _logs_in(file: Path) -> list[tuple[str, int, int]]:
    """(path, first row, rows) of each log in one file of ``write_steps``."""
    with pa.memory_map(str(file)) as source:
        column = ipc.open_file(source).read_all().column("path")
        if not len(column):
            return []
        codes = np.concatenate([c.indices.to_numpy() for c in column.chunks])
        names = column.chunks[0].dictionary.to_pylist()
    starts = np.concatenate([[0], np.flatnonzero(np.diff(codes)) + 1])
    ends = np.append(starts[1:], len(codes))
    return [(names[codes[a]], int(a), int(b - a)) for a, b in zip(starts, ends)]


def _groups(logs: list[tuple[str, str, Path, int, int]]) -> list[list[tuple]]:
    """Consecutive logs gathered up to ``SLICE_ROWS`` rows (a larger log alone): one Parquet
    row group each, whatever number of files the logs were spread over."""
    groups: list[list[tuple]] = []
    rows = 0
    for log in logs:
        if not groups or rows + log[4] > SLICE_ROWS:
            groups.append([])
            rows = 0
        groups[-1].append(log)
        rows += log[4]
    return groups


def _with_run_id(part: pa.Table, run_id: str | pa.Array, schema: pa.Schema) -> pa.Table:
    """``part`` with its ``run_id`` (one for all rows, or one per row) in ``schema``."""
    ids = pa.array([run_id] * part.num_rows, schema.field("run_id").type) if isinstance(
        run_id, str) else run_id
    arrays = [ids if field.name == "run_id" else part.column(field.name).cast(field.type)
              for field in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def _gathered(group: list[tuple], schema: pa.Schema) -> pa.Table:
    """The rows of a group of small logs, in the group's order, as one table. Each file is read
    once, memory-mapped, and only the group's rows of it are copied out before the next is
    opened: memory holds the group's rows, not every file they lie in (run ids scatter a group
    over all the files). A table per log would cost ~1 kB per column chunk, more than the rows
    of a 30-step log. The columns are cast to ``schema`` and the run ids added once for the
    group, not once per file: a group of 2^18 rows lies in ~1,500 files at 10^5 logs."""
    by_file: dict[Path, list[int]] = {}
    for pos, log in enumerate(group):
        by_file.setdefault(log[2], []).append(pos)
    parts, first_row, rows = [], [0] * len(group), 0
    for file, positions in by_file.items():
        index = np.concatenate([np.arange(group[p][3], group[p][3] + group[p][4])
                                for p in positions])
        with pa.memory_map(str(file)) as source:
            taken = ipc.open_file(source).read_all().take(pa.array(index))
            for name in _TEXT:  # the file's own dictionary: to plain text while it is mapped
                i = taken.schema.get_field_index(name)
                taken = taken.set_column(i, name, taken.column(i).cast(pa.string()))
            parts.append(taken)
        for p in positions:
            first_row[p], rows = rows, rows + group[p][4]
    order = np.concatenate([np.arange(first_row[p], first_row[p] + log[4])
                            for p, log in enumerate(group)])
    ids = pa.array(np.repeat(np.array([log[0] for log in group], dtype=object),
                             [log[4] for log in group]), schema.field("run_id").type)
    return _with_run_id(pa.concat_tables(parts).take(pa.array(order)), ids,
                        schema).combine_chunks()


def write_steps_parquet(steps_dir: Path, run_by_path: dict[str, str], out_path: Path,
                        schema: pa.Schema, max_rows: int = 10_000_000) -> int:
    """Stream the per-log files of ``steps_dir`` into one Parquet file; returns its row count.

    Rows of logs with no run in ``run_by_path`` (rejected logs) are left out; the others get
    their ``run_id`` and come in (run_id, path) order, each log's rows already sorted by
    (step, segment, rank, line), so the file is sorted by all six. ``schema`` names the
    columns written, in order, with their types (``run_id`` plus any of ``STEP_COLUMNS``).
    Memory: one slice of ``SLICE_ROWS`` rows at a time, read memory-mapped. Writer settings
    are those of ``pipeline.io.write_parquet`` (deterministic bytes), without pandas metadata.
    More than ``max_rows`` rows (``ingest.partition_rows``): a folder of one part per ``run_id``
    prefix (``pipeline.io_parts.PartsWriter``), the same rows in the same order.
    """
    logs = []
    for file in sorted(Path(steps_dir).rglob("*.arrow")):  # a folder per logs root when several
        logs += [(run_by_path[path], path, file, start, n) for path, start, n in _logs_in(file)
                 if path in run_by_path]
    logs.sort()
    rows = 0
    rows_in = sum(log[4] for log in logs)
    with PartsWriter(out_path, max_rows, schema, rows=rows_in) as writer:
        for group in _groups(logs):
            if len(group) == 1:  # one log (maybe of millions of rows): zero-copy slices
                run_id, _, file, start, n = group[0]
                with pa.memory_map(str(file)) as source:
                    table = ipc.open_file(source).read_all().slice(start, n)
                    for first in range(0, n, SLICE_ROWS):
                        writer.write_table(_with_run_id(table.slice(first, SLICE_ROWS), run_id,
                                                        schema))
            else:
                writer.write_table(_gathered(group, schema))
            rows += sum(log[4] for log in group)
    return rows
