"""Published tables (format v1, data/raw/published/README.md): one ``Record`` per CSV data row.

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

from pipeline.config import PROJ_ROOT, project_relative
from pipeline.ingest.records import Record
from pipeline.ingest.sources.common import (READ_ERRORS, SNIFF_BYTES, logical_stem,
                                            logical_suffix, looks_binary, open_text_bytes,
                                            read_error, shown_path, utf16_without_bom)
from pipeline.ingest.sources.links import candidates, entry_problem, special_problem

__all__ = ["looks_binary", "read_file", "read_published"]

# A quoted field may span physical lines (a note with a line break), but no more than this
# many: an unbalanced quote would otherwise swallow every row below it into one reject.
MAX_RECORD_LINES = 20



class _TooManyLines(Exception):
    """A record has run past ``MAX_RECORD_LINES`` physical lines (an unbalanced quote)."""


class _LineTap:
    """Feeds lines to ``csv.reader`` while keeping the lines and line number of each record.

    Lines handed back with ``push_back`` are read again (after a damaged span), and a record
    may not take more than ``MAX_RECORD_LINES`` physical lines.
    """

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = iter(lines)
        self._pushed: list[str] = []  # a stack: the next line to read is last
        self.buffer: list[str] = []
        self.consumed = 0

    def __iter__(self) -> "_LineTap":
        return self

    def __next__(self) -> str:
        if len(self.buffer) >= MAX_RECORD_LINES:
            raise _TooManyLines
        line = self._pushed.pop() if self._pushed else next(self._lines)
        self.consumed += 1
        self.buffer.append(line)
        return line

    def take(self) -> list[str]:
        lines, self.buffer = self.buffer, []
        return lines

    def push_back(self, lines: list[str]) -> None:
        self._pushed.extend(reversed(lines))
        self.consumed -= len(lines)


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
    rel = project_relative(path, root)
    stem = logical_stem(path)
    special = special_problem(Path(path))
    if special is not None:  # never opened: a FIFO would block the read forever
        yield Record.reject(stem, rel, 0, "", "special_file", special)
        return
    try:
        with open_text_bytes(path) as raw_fh:  # UTF-16/32 with a BOM arrive as UTF-8
            head = raw_fh.read(SNIFF_BYTES)
    except READ_ERRORS as exc:
        yield Record.reject(stem, rel, 0, "", "unreadable", read_error(exc))
        return
    if looks_binary(head):
        yield Record.reject(stem, rel, 0, repr(head[:80]), "binary_file",
                            utf16_without_bom(head, path)
                            or "NUL, control or undecodable bytes in the first 64 KiB")
        return
    try:
        fh = io.TextIOWrapper(open_text_bytes(path), encoding="utf-8-sig", errors="surrogateescape",
                              newline="")
    except READ_ERRORS as exc:
        yield Record.reject(stem, rel, 0, "", "unreadable", read_error(exc))
        return
    with fh:
        yield from _records(fh, stem, rel)


def _damaged(lines: list[str], row: list[str] | None, header: list[str] | None) -> bool:
    """Whether a record read over several physical lines is an unbalanced quote's damage
    rather than a quoted field with line breaks: the wrong number of fields, or a physical
    line that holds a whole row's worth of commas by itself (a row the quote swallowed)."""
    if len(lines) < 2:
        return False
    if not header or row is None or len(row) != len(header):
        return True
    return any(line.count(",") >= len(header) - 1 for line in lines)


def _records(fh: Iterable[str], stem: str, rel: str) -> Iterator[Record]:
    """The records of an open table: one per data line, a multi-line record counting as one.

    A damaged span (an unbalanced quote, see ``_damaged``) costs one ``malformed_row`` reject
    for its first physical line; the lines after it are read again as records of their own.
    """
    tap = _LineTap(fh)
    reader = csv.reader(tap)
    header: list[str] | None = None
    source_col: int | None = None
    while True:
        start = tap.consumed + 1
        error: str | None = None
        row: list[str] | None = None
        try:
            row = next(reader)
        except StopIteration:
            break
        except _TooManyLines:
            error = (f"a quoted field runs past {MAX_RECORD_LINES} lines (unbalanced quote?); "
                     "this line rejected, reading resumes on the next")
        except csv.Error as exc:
            error = str(exc)
        except READ_ERRORS as exc:  # I/O failure or a cut compressed stream mid-file
            yield Record.reject(stem, rel, start, _clean("".join(tap.take())), "unreadable",
                                read_error(exc))
            return
        lines = tap.take()
        if error is None and _damaged(lines, row, header if header else None):
            error = (f"unbalanced quote: a quoted field spans lines {start}-"
                     f"{start + len(lines) - 1} but does not make one row; this line "
                     "rejected, reading resumes on the next")
        if error is not None:
            if len(lines) > 1:
                tap.push_back(lines[1:])
                if "unbalanced quote" not in error and "runs past" not in error:
                    error = f"{error} (unbalanced quote?); this line rejected, reading resumes " \
                            "on the next"
            if header is None:  # the header itself is damaged: say so, as _header's rejects do
                error = f"header: {error}"
            yield Record.reject(stem, rel, start, _clean(lines[0] if lines else ""),
                                "malformed_row", error)
            if header is None:
                header = []  # a damaged header: no row below can be read against it
            continue
        raw = "".join(lines)
        assert row is not None
        if not "".join(row).strip():  # every cell blank (or none)
            continue  # blank line: not a record
        if header is None and _excel_sep(row) == ",":
            continue  # Excel's delimiter line before the header: a directive, not a record
        if header is None:
            header, bad = _header(row, raw)
            source_col = header.index("source") if "source" in header else None
            if bad:
                # Without a usable header no row of this file can be read: one reject for
                # the header, and every data row below is rejected against it.
                header = []
                yield Record.reject(stem, rel, start, _clean(raw), "malformed_row",
                                    f"header: {bad}")
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
        fields = {h: cell for h, cell in zip(header, map(str.strip, row)) if cell}
        yield Record(source=source, path=rel, line=start, raw=raw[:500], fields=fields)


def _header(row: list[str], raw: str) -> tuple[list[str], str | None]:
    """Column names as format v1 spells them (lower case, no surrounding spaces: a
    spreadsheet's "MODEL" or "params_b " is the same column) and why the header cannot be
    read (None: it can)."""
    header = [h.strip().lower() for h in row]
    sep = _excel_sep(row)
    return header, _has_bad_chars(raw) or (
        f"Excel's 'sep={sep}' line: the table is delimited by {sep!r}; format v1 is "
        "comma-separated (export as CSV with commas)" if sep is not None
        else _header_problem(header))


def _excel_sep(row: list[str]) -> str | None:
    """The delimiter an Excel ``sep=X`` first line names (None: no such line)."""
    cells = [c.strip() for c in row]
    if cells and cells[0].lower().startswith("sep=") and not any(cells[1:]):
        text = ",".join(row).strip()  # "sep=," reads as ["sep=", ""]
        return text[4:5] or None
    return None


def _header_problem(header: list[str]) -> str | None:
    """Why a header cannot be read (None: it can)."""
    if len(set(header)) != len(header):
        return "duplicate column names"
    if len(header) == 1 and header[0].count(";") >= 2:
        return ("one column only, with ';' in it: the table looks semicolon-delimited; "
                "format v1 is comma-separated")
    if len(header) == 1 and header[0].count("\t") >= 2:
        return "one column only, with tabs in it: format v1 is comma-separated"
    return None


def _safe(source: str, stem: str) -> str:
    return stem if _has_bad_chars(source) else source


def _clean(raw: str) -> str:
    """Printable form of a row with bad bytes, for the rejects file (valid UTF-8, no NUL)."""
    return raw.encode("utf-8", errors="backslashreplace").decode("utf-8").replace("\x00", "\\x00")


def read_published(published_dir: Path, root: Path = PROJ_ROOT) -> Iterator[Record]:
    """Yield Records for every ``*.csv`` (also ``.csv.gz``, ``.csv.zst``) under ``published_dir``
    (recursively, sorted by path)."""
    tables = [p for p in Path(published_dir).rglob("*") if logical_suffix(p) == ".csv"]
    for path in sorted(candidates(tables, directories=True)):
        problem = entry_problem(path, published_dir)
        if problem:
            yield Record.reject(logical_stem(path), shown_path(path, root), 0, "", *problem)
            continue
        yield from read_file(path, root)
