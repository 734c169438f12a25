"""Tables written as one Parquet file, or as a folder of part files when large; one reader for both.

``steps.parquet`` and ``runs.parquet`` (the ingest stage's) hold one row per logged step and per
run: a fleet's can outgrow one file. Both are sorted by ``run_id`` first, a 16-digit hex hash
(``ingest/contract.py``). ``PartsWriter`` writes such a table streamed in slices: up to
``max_rows`` rows it is one file at ``path``, byte for byte what one ``pyarrow.parquet.
ParquetWriter`` given the same slices writes; past ``max_rows`` rows ``path`` is a folder with
one file per ``run_id`` prefix, ``part-<first d hex digits>.parquet`` (``d`` the fewest digits
with at most ``max_rows`` rows per prefix on average: 16^d >= rows / max_rows), holding the rows
whose ``run_id`` starts so, in the same order. A run's rows are never split, a prefix no run has
has no file, and a part's name and content depend only on its own runs: a rerun writes the same
bytes, and a run added or removed changes its own part (DVC stores only that file anew), as
long as ``d`` stays the same. How even the parts are follows the hash (runs) and the
runs' steps (steps: a run of 10^7 steps is one part of 10^7 rows). ``read_frame`` and
``read_schema`` read either form: the parts in name order are the rows in ``run_id`` order,
the same frame as the one file would give.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.io import PARQUET_OPTIONS, PARTIAL_PREFIX, name_output, remove_stale_partials

PART_NAME = "part-{}.parquet"
PART_GLOB = "part-*.parquet"
HEX_DIGITS = 16


def prefix_digits(rows: int, max_rows: int) -> int:
    """The ``run_id`` digits a part is named by: the fewest ``d >= 1`` with ``rows / 16^d <=
    max_rows`` (0: one file, ``rows <= max_rows``)."""
    digits = 0
    while rows > max_rows * HEX_DIGITS ** digits:
        digits += 1
    return digits


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
    """Write a table of ``rows`` rows sorted by ``key`` (a hex ``run_id``) slice by slice to
    ``path``: one file up to ``max_rows`` rows, else a folder of one part per ``key`` prefix
    (module docstring). Written under a temporary name in ``path``'s folder
    (``pipeline.io.atomic_path``'s: ``.partial-<pid>-<name>``, or that name plus ``.d`` for a
    folder) and renamed into place on ``close``, so a stage stopped half-way leaves the old
    output or none: a file is replaced in one ``rename``; a folder by moving the old output
    aside, the new one in, then deleting the old (a stop between the two leaves none, which
    ``dvc repro`` reruns). ``schema`` is written when no slice is (an empty table); else the
    first slice's."""

    def __init__(self, path: str | Path, max_rows: int, schema: pa.Schema, rows: int,
                 key: str = "run_id") -> None:
        self.path, self.schema, self.key = Path(path), schema, key
        self.digits = prefix_digits(rows, max_rows)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_partials(self.path, "*")
        self.first = self.path.with_name(f"{PARTIAL_PREFIX}{os.getpid()}-{self.path.name}")
        self.folder = self.first.with_name(self.first.name + ".d")
        _clear(self.folder)
        if self.digits:
            self.folder.mkdir()
        self.writer: pq.ParquetWriter | None = None
        self.prefix: str | None = None

    def _open(self, prefix: str | None) -> None:
        """Close the part being written and open the one of ``prefix`` (None: the one file)."""
        if self.writer is not None:
            self.writer.close()
        if prefix is not None and (self.prefix is not None and prefix <= self.prefix
                                   or not prefix.isalnum()):
            raise AssertionError(f"{self.path.name}: {self.key} prefix {prefix!r} after "
                                 f"{self.prefix!r}: rows not sorted by {self.key} (a bug)")
        target = self.first if prefix is None else self.folder / PART_NAME.format(prefix)
        self.writer = pq.ParquetWriter(target, self.schema, **PARQUET_OPTIONS)
        self.prefix = prefix

    def write_table(self, table: pa.Table) -> None:
        """Append ``table``'s rows (sorted by ``key``, after those written): one row group per
        call and part it reaches."""
        if self.writer is None:
            self.schema = table.schema
            if not self.digits:
                self._open(None)
        if not self.digits:
            self.writer.write_table(table)
            return
        prefixes = pc.utf8_slice_codeunits(table.column(self.key), 0,
                                           self.digits).combine_chunks()
        cuts = np.flatnonzero(pc.not_equal(prefixes[1:], prefixes[:-1]).to_numpy(
            zero_copy_only=False)) + 1 if len(prefixes) > 1 else np.array([], dtype=np.int64)
        bounds = [0, *cuts.tolist(), len(prefixes)]
        for start, end in zip(bounds[:-1], bounds[1:]):
            if end == start:
                continue
            prefix = prefixes[start].as_py()
            if prefix != self.prefix:
                self._open(prefix)
            self.writer.write_table(table.slice(start, end - start))

    def close(self) -> None:
        """Finish the last part and move the table into place (one file, or the folder)."""
        if self.writer is None and not self.digits:
            self._open(None)
        if self.writer is not None:
            self.writer.close()
        if not self.digits:
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
            name_output(failed, self.path)
            raise
        self.abort()
        name_output(exc, self.path)


def _clear(path: Path) -> None:
    """Remove ``path``, a file or a folder of parts, when it exists."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)

