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
import pyarrow.parquet as pq

from pipeline.io import PARQUET_OPTIONS, atomic_path
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


def write_steps(rows: dict[str, Any], path: Path) -> None:
    """One log's rows to an Arrow IPC file (no compression: written and read at memory speed;
    ``path`` and ``format`` dictionary-encoded, the numbers wrapped without copying)."""
    n = n_rows(rows)
    codes = pa.array(np.zeros(n, dtype=np.int8))
    arrays = {c: pa.DictionaryArray.from_arrays(codes, pa.array([rows[c]], pa.string()))
              for c in _TEXT}
    arrays.update((c, pa.array(rows[c])) for c in STEP_COLUMNS[2:])
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


def _log_path(file: Path) -> str | None:
    with pa.memory_map(str(file)) as source:
        reader = ipc.open_file(source)
        if not reader.num_record_batches or not reader.get_batch(0).num_rows:
            return None
        return reader.get_batch(0).column("path").dictionary[0].as_py()


def write_steps_parquet(steps_dir: Path, run_by_path: dict[str, str], out_path: Path,
                        schema: pa.Schema) -> int:
    """Stream the per-log files of ``steps_dir`` into one Parquet file; returns its row count.

    Rows of logs with no run in ``run_by_path`` (rejected logs) are left out; the others get
    their ``run_id`` and come in (run_id, path) order, each log's rows already sorted by
    (step, segment, rank, line), so the file is sorted by all six. ``schema`` names the
    columns written, in order, with their types (``run_id`` plus any of ``STEP_COLUMNS``).
    Memory: one slice of ``SLICE_ROWS`` rows at a time, read memory-mapped. Writer settings
    are those of ``pipeline.io.write_parquet`` (deterministic bytes), without pandas metadata.
    """
    logs = []
    for file in sorted(Path(steps_dir).glob("*.arrow")):
        path = _log_path(file)
        if path is not None and path in run_by_path:
            logs.append((run_by_path[path], path, file))
    rows = 0
    with atomic_path(out_path) as tmp, pq.ParquetWriter(tmp, schema, **PARQUET_OPTIONS) as writer:
        for run_id, _, file in sorted(logs):
            with pa.memory_map(str(file)) as source:
                table = ipc.open_file(source).read_all()
                for start in range(0, table.num_rows, SLICE_ROWS):
                    part = table.slice(start, SLICE_ROWS)
                    arrays = [pa.array([run_id] * part.num_rows, field.type)
                              if field.name == "run_id"
                              else part.column(field.name).cast(field.type) for field in schema]
                    writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
                    rows += part.num_rows
                del table
    return rows
