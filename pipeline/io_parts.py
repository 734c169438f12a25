"""Tables written as one Parquet file, or as a folder of part files when large; one reader for both.

``steps.parquet`` and ``runs.parquet`` (the ingest stage's) hold one row per logged step and per
run: a fleet's can outgrow one file. ``PartsWriter`` writes a table streamed in slices: up to
``max_rows`` rows it is one file at ``path``, byte for byte what one ``pyarrow.parquet.
ParquetWriter`` given the same slices writes; past ``max_rows`` rows ``path`` is a folder of
``part-00000.parquet``, ``part-00001.parquet``, ... of ``max_rows`` rows each (the last fewer),
the rows in the same order, cut wherever the count falls (a run's steps may span two parts).
The names and cuts follow from the rows alone, so a rerun writes the same bytes, and DVC
tracks the folder as one out (at the same path as the file). ``read_frame`` and
``read_schema`` read either form: the frame of a folder is its parts' rows in name order,
the same frame as the one file would give.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.io import PARQUET_OPTIONS, PARTIAL_PREFIX, pid_alive

PART_NAME = "part-{:05d}.parquet"
PART_GLOB = "part-*.parquet"


def part_files(path: str | Path) -> list[Path]:
    """The files holding the table at ``path``: itself, or its folder's parts in name order."""
    path = Path(path)
    return sorted(path.glob(PART_GLOB)) if path.is_dir() else [path]


def read_schema(path: str | Path) -> pa.Schema:
    """The Arrow schema of the table at ``path`` (a file, or the first part of a folder)."""
    return pq.read_schema(part_files(path)[0])


def read_frame(path: str | Path, columns: list[str] | None = None) -> pd.DataFrame:
    """The table at ``path`` (one file or a folder of parts) as a DataFrame, ``columns`` only
    when given: a file as ``pandas.read_parquet`` reads it; a folder's parts concatenated in
    name order and converted once (the pandas metadata of its parts restores the dtypes)."""
    files = part_files(path)
    if len(files) == 1 and not Path(path).is_dir():
        return pd.read_parquet(files[0], columns=columns)
    tables = [pq.read_table(f, columns=columns) for f in files]
    return pa.concat_tables(tables).to_pandas()


class PartsWriter:
    """Write a table slice by slice to ``path``: one file up to ``max_rows`` rows, else a
    folder of parts of ``max_rows`` rows (module docstring). Written under a temporary name
    in ``path``'s folder (``pipeline.io.atomic_path``'s: ``.partial-<pid>-<name>``, a folder
    ``...-<name>.d`` once a second part begins) and renamed into place on ``close``, so a
    stage stopped half-way leaves the old output or none: a file is replaced in one
    ``rename``; a folder by moving the old output aside, the new one in, then deleting the old
    (a stop between the two leaves none, which DVC reruns). ``schema`` is written when no
    slice is (an empty table); else the first slice's."""

    def __init__(self, path: str | Path, max_rows: int, schema: pa.Schema) -> None:
        self.path, self.max_rows, self.schema = Path(path), int(max_rows), schema
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale(self.path)
        self.first = self.path.with_name(f"{PARTIAL_PREFIX}{os.getpid()}-{self.path.name}")
        self.folder = self.first.with_name(self.first.name + ".d")
        self.writer: pq.ParquetWriter | None = None
        self.parts = 0
        self.rows_in_part = 0
        self.rows = 0

    def _next_part(self, schema: pa.Schema) -> None:
        """Close the part being written and open the next (the first at ``first``; from the
        second on in ``folder``, the first moved there)."""
        if self.writer is not None:
            self.writer.close()
        if self.parts == 1:
            _clear(self.folder)
            self.folder.mkdir()
            os.rename(self.first, self.folder / PART_NAME.format(0))
        target = self.first if self.parts == 0 else self.folder / PART_NAME.format(self.parts)
        self.writer = pq.ParquetWriter(target, schema, **PARQUET_OPTIONS)
        self.parts += 1
        self.rows_in_part = 0

    def write_table(self, table: pa.Table) -> None:
        """Append ``table``'s rows (one row group per call and part it reaches)."""
        if self.writer is None:
            self.schema = table.schema
            self._next_part(self.schema)
        while table.num_rows:
            room = self.max_rows - self.rows_in_part
            if room <= 0:
                self._next_part(self.schema)
                room = self.max_rows
            piece = table.slice(0, room) if table.num_rows > room else table
            self.writer.write_table(piece)
            self.rows_in_part += piece.num_rows
            self.rows += piece.num_rows
            table = table.slice(piece.num_rows)

    def close(self) -> None:
        """Finish the last part and move the table into place (one file, or the folder)."""
        if self.writer is None:
            self._next_part(self.schema)
        self.writer.close()
        if self.parts == 1:
            if self.path.is_dir() and not self.path.is_symlink():
                shutil.rmtree(self.path)  # a folder of parts of an earlier, larger table
            os.replace(self.first, self.path)
            return
        old = self.path.with_name(f"{PARTIAL_PREFIX}{os.getpid()}-old-{self.path.name}")
        if self.path.exists() or self.path.is_symlink():
            os.rename(self.path, old)
        os.replace(self.folder, self.path)
        _clear(old)

    def abort(self) -> None:
        """Drop what was written; ``path`` is left as it was."""
        if self.writer is not None:
            self.writer.close()
        self.first.unlink(missing_ok=True)
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> PartsWriter:
        return self

    def __exit__(self, kind: Any, exc: Any, _: Any) -> None:
        try:
            if kind is None:
                self.close()
                return
        except BaseException as failed:  # the rename failed or the stage was stopped in it
            self.abort()
            _name_output(failed, self.path)
            raise
        self.abort()
        _name_output(exc, self.path)


def _name_output(exc: BaseException, path: Path) -> None:
    """pyarrow's "no space left" names no file: name the output."""
    if isinstance(exc, OSError) and exc.filename is None:
        exc.filename = str(path)


def _clear(path: Path) -> None:
    """Remove ``path``, a file or a folder of parts, when it exists."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _remove_stale(path: Path) -> None:
    """Temporary folders and old outputs of ``path`` left by writers killed mid-write (their
    pid no longer runs)."""
    for stale in path.parent.glob(f"{PARTIAL_PREFIX}*-{path.name}*"):
        pid = stale.name[len(PARTIAL_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            _clear(stale)
