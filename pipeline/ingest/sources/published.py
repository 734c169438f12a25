"""Published tables (format v1, ARCHITECTURE.md): one ``Record`` per CSV data row.

Rows are streamed with the standard ``csv`` module; nothing here interprets values (that is
``normalize``'s job). A row that cannot be parsed at all becomes a reject carrying the text it
was read from, so ``records read = runs + rejects`` holds for every file:

* ``table.csv.gz`` / ``table.csv.zst`` are read like ``table.csv``, streamed
  (``pipeline.ingest.sources.common.open_binary``); a file that cannot be read or decompressed
  -> one ``unreadable`` reject (rows read before a cut stream stay records);
* a file whose first bytes are not text (``common.looks_binary``) -> one ``binary_file``
  (UTF-16, archives, images);
* a row with the wrong number of fields, undecodable bytes, NUL bytes, or a field over the csv
  field-size limit -> ``malformed_row``;
* blank lines are not records and are skipped.

``line`` is the 1-based physical line where the record starts (a quoted field may span lines).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from pathlib import Path

from pipeline.config import PROJ_ROOT
from pipeline.ingest.records import Record
from pipeline.ingest.sources.common import (READ_ERRORS, SNIFF_BYTES, logical_stem,
                                            logical_suffix, looks_binary, open_binary, read_error,
                                            rel_path)

__all__ = ["looks_binary", "read_file", "read_published", "rel_path"]


class _LineTap:
    """Feeds lines to ``csv.reader`` while keeping the text and line number of each record."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = iter(lines)
        self.buffer: list[str] = []
        self.consumed = 0

    def __iter__(self) -> "_LineTap":
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.consumed += 1
        self.buffer.append(line)
        return line

    def take(self) -> str:
        text = "".join(self.buffer)
        self.buffer = []
        return text


def _has_bad_chars(text: str) -> str | None:
    if "\x00" in text:
        return "NUL byte"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # surrogate escapes stand for undecodable bytes
        return "undecodable bytes (not UTF-8)"
    return None


def read_file(path: Path, root: Path = PROJ_ROOT) -> Iterator[Record]:
    """Yield one Record per data row of one format-v1 CSV file; never raises on bad content."""
    rel = rel_path(path, root)
    stem = logical_stem(path)
    try:
        with open_binary(path) as raw_fh:
            head = raw_fh.read(SNIFF_BYTES)
    except READ_ERRORS as exc:
        yield Record.reject(stem, rel, 0, "", "unreadable", read_error(exc))
        return
    if looks_binary(head):
        yield Record.reject(stem, rel, 0, repr(head[:80]), "binary_file",
                            "NUL, control or undecodable bytes in the first 64 KiB")
        return
    try:
        fh = io.TextIOWrapper(open_binary(path), encoding="utf-8-sig", errors="surrogateescape",
                              newline="")
    except READ_ERRORS as exc:
        yield Record.reject(stem, rel, 0, "", "unreadable", read_error(exc))
        return
    with fh:
        tap = _LineTap(fh)
        reader = csv.reader(tap)
        header: list[str] | None = None
        source_col: int | None = None
        while True:
            start = tap.consumed + 1
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                yield Record.reject(stem, rel, start, _clean(tap.take()), "malformed_row",
                                    str(exc))
                continue
            except READ_ERRORS as exc:  # I/O failure or a cut compressed stream mid-file
                yield Record.reject(stem, rel, start, _clean(tap.take()), "unreadable",
                                    read_error(exc))
                return
            raw = tap.take()
            if not row or all(not cell.strip() for cell in row):
                continue  # blank line: not a record
            if header is None:
                header = [h.strip() for h in row]
                source_col = header.index("source") if "source" in header else None
                bad = _has_bad_chars(raw)
                if bad or len(set(header)) != len(header):
                    # Without a usable header no row of this file can be read: one reject for
                    # the header, and every data row below is rejected against it.
                    header = []
                    yield Record.reject(stem, rel, start, _clean(raw), "malformed_row",
                                        f"header: {bad or 'duplicate column names'}")
                continue
            source = stem
            if source_col is not None and source_col < len(row) and row[source_col].strip():
                source = row[source_col].strip()
            bad = _has_bad_chars(raw)
            if bad:
                yield Record.reject(_safe(source, stem), rel, start, _clean(raw),
                                    "malformed_row", bad)
                continue
            if not header:
                yield Record.reject(source, rel, start, raw, "malformed_row",
                                    "the file has no usable header")
                continue
            if len(row) != len(header):
                yield Record.reject(source, rel, start, raw, "malformed_row",
                                    f"expected {len(header)} fields, got {len(row)}")
                continue
            fields = {h: cell.strip() for h, cell in zip(header, row) if cell.strip()}
            yield Record(source=source, path=rel, line=start, raw=raw[:500], fields=fields)


def _safe(source: str, stem: str) -> str:
    return stem if _has_bad_chars(source) else source


def _clean(raw: str) -> str:
    """Printable form of a row with bad bytes, for the rejects file (valid UTF-8, no NUL)."""
    return raw.encode("utf-8", errors="backslashreplace").decode("utf-8").replace("\x00", "\\x00")


def read_published(published_dir: Path, root: Path = PROJ_ROOT) -> Iterator[Record]:
    """Yield Records for every ``*.csv`` (also ``.csv.gz``, ``.csv.zst``) under ``published_dir``
    (recursively, sorted by path)."""
    for path in sorted(Path(published_dir).rglob("*")):
        if path.is_file() and logical_suffix(path) == ".csv":
            yield from read_file(path, root)
