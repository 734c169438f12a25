"""Bulk paths of the step-log parsers: a chunk of step lines to numpy columns in few C calls.

Each format module matches a chunk's step lines with one pattern (``re.findall``); these
helpers turn the captured texts into columns without a Python object per number where that
provably gives what the line-by-line path gives (``float()``, ``int()``, ``human_float``),
and fall back to it otherwise. ``StepParser`` is the choice between the two paths that the
regex formats share. The hypothesis tests check the two paths agree.
"""

from __future__ import annotations

import re
from operator import itemgetter
from typing import Callable, ClassVar, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.ingest.sources.steplogs.base import (
    ANSI_RE, ParseState, candidate_lines, floats, human_float,
)

_DECIMAL_CHARS = b"0123456789.eE+-\n"
_DIGITS = b"0123456789\n"


def _arrow_parse(texts: Sequence[str], chars: bytes, typ: pa.DataType) -> np.ndarray | None:
    """Many numbers parsed by Arrow's C++ parser (``fast_float``: correctly rounded, ~4x
    quicker than ``float()``), or None where it is not provably ``float()`` / ``int()``.

    Only texts made of ``chars`` are handed over: digits, ``.``, ``eE``, signs. Over that
    alphabet Arrow refuses every text Python refuses and gives the same double for the rest
    (checked on all texts of up to 4 such characters, 200,000 random ones up to 12 long and
    600,000 printed floats, overflow, underflow and signed zeros included); it refuses more
    (``+5``), and anything refused goes back to Python.
    """
    if len(texts) < 64:
        return None
    try:
        data = "\n".join(texts).encode("ascii")
    except UnicodeEncodeError:
        return None
    if data.translate(None, chars) or data.count(b"\n") != len(texts) - 1:
        return None  # another character, or a text holding a newline (one split per text)
    try:
        return pc.cast(pc.split_pattern(pa.array([data], pa.binary()), b"\n").flatten(),
                       typ).to_numpy()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _plain_floats(texts: Sequence[str]) -> np.ndarray | None:
    """``float()`` of each text as float64 in C: plain decimals through Arrow
    (``_arrow_parse``), else numpy, which parses Python ``str`` exactly as ``float()`` does;
    None when numpy refuses one."""
    out = _arrow_parse(texts, _DECIMAL_CHARS, pa.float64())
    if out is not None:
        return out
    try:
        return np.array(texts, dtype=np.float64)
    except (ValueError, TypeError):
        return None


def float_col(texts: Sequence[str]) -> np.ndarray:
    """``floats`` as a float64 numpy array: ``_plain_floats``; what it refuses goes through
    ``floats``."""
    out = _plain_floats(texts)
    return out if out is not None else np.frombuffer(floats(texts), dtype=np.float64)


def human_col(texts: Sequence[str]) -> np.ndarray:
    """``human_float`` of each text as float64: plain numbers in one C loop; else each distinct
    text once (``human_format`` prints 3 significant digits, so values repeat)."""
    out = _plain_floats(texts)
    if out is not None:
        return out
    value = {t: human_float(t) for t in set(texts)}
    return np.fromiter(map(value.__getitem__, texts), dtype=np.float64, count=len(texts))


def int_col(texts: Sequence[str]) -> np.ndarray:
    """Printed integers (``\\d+`` captures) as int64; too large for int64: OverflowError, as
    ``array('q')`` raises it."""
    out = _arrow_parse(texts, _DIGITS, pa.int64())
    if out is not None:
        return out
    try:
        return np.array(texts, dtype=np.int64)
    except (ValueError, TypeError, OverflowError):
        return np.array(list(map(int, texts)), dtype=np.int64)


def transpose(rows: list[tuple[str, ...]]) -> list[list[str]]:
    """The columns of ``findall`` rows; ``zip(*rows)`` costs twice as much on 10^5 rows."""
    return [list(map(itemgetter(i), rows)) for i in range(len(rows[0]))] if rows else []


def rank_col(r1: Sequence[str], r2: Sequence[str]) -> np.ndarray | list[int]:
    """Ranks from the two optional launcher-prefix captures of the bulk patterns (-1: none)."""
    n = len(r1)
    if r1.count("") == n and r2.count("") == n:
        return np.full(n, -1, dtype=np.int32)
    return [int(a or b or -1) for a, b in zip(r1, r2)]


def strip_ansi(text: str) -> str:
    """``text`` without ANSI colour codes (``ANSI_RE``)."""
    return ANSI_RE.sub("", text)


def dense_rows(text: str, pattern: re.Pattern, marker: str,
               strip: Callable[[str], str] | None = None) -> list[tuple[str, ...]] | None:
    """``pattern.findall(text)`` when every line of ``text`` (a chunk of whole lines) holds
    ``marker`` and is matched by the line-anchored ``pattern``; None otherwise.

    A chunk of nothing but step lines is matched as it stands: splitting it into lines, keeping
    those with the marker and joining them again (``candidate_lines``) would cost more than
    the regex. One match per line (the pattern spans a line and starts at ``^``) and as many
    matches as lines means every line matched, so line numbers follow from the chunk's first.
    ``strip`` (ANSI codes) is removed first; the marker must then still be there once a line.
    """
    n = text.count("\n")
    if not n or text[-1] != "\n" or text.count(marker) != n or "\x00" in text:
        return None
    if strip is not None and "\x1b" in text:
        text = strip(text)
        if text.count(marker) != n:
            return None
    rows = pattern.findall(text)
    return rows if len(rows) == n else None


class StepParser:
    """What the regex step-log parsers (Megatron, torchtitan, nanotron, NeMo, DeepSpeed) share:
    a chunk's step lines go through the format's one-line pattern ``FAST_RE`` in bulk, or one
    by one (``_step``) where any of them is off that layout.

    A format sets ``FAST_RE`` (line-anchored, ``re.MULTILINE``; its last group captures the
    rest of the line), ``MARKER`` (text every step line holds), ``COUNTER`` (the step counter's
    text: a second one in the rest of a line is two lines run together) and, where they differ
    from the defaults, ``DENSE_MARKER`` (held exactly once by each step line, for
    ``dense_rows``; default ``MARKER``) and ``STRIP_ANSI`` (colour codes removed before
    matching). It writes ``_bulk`` (rows to columns) and ``_step`` (one line), and may override
    ``_clean`` (rows the bulk path may take).
    """

    FAST_RE: ClassVar[re.Pattern]
    MARKER: ClassVar[str]
    COUNTER: ClassVar[str]
    DENSE_MARKER: ClassVar[str | None] = None
    STRIP_ANSI: ClassVar[bool] = False

    def __init__(self, state: ParseState) -> None:
        self.state = state

    def feed_steps(self, text: str, first_lineno: int) -> bool:
        """Parse the step lines of a chunk of whole lines starting at line ``first_lineno``;
        True when it found any (taken in bulk, or lines holding ``MARKER``)."""
        strip = strip_ansi if self.STRIP_ANSI else None
        rows = dense_rows(text, self.FAST_RE, self.DENSE_MARKER or self.MARKER, strip)
        if rows is not None and self._clean(rows) and self._bulk(
                rows, np.arange(first_lineno, first_lineno + len(rows))):
            return True
        linenos, lines = candidate_lines(text, self.MARKER, first_lineno, self.state.counts)
        if not lines:
            return False
        block = "\n".join(lines)
        if strip is not None and "\x1b" in block:
            block = strip(block)
            lines = block.split("\n")
        found = self.FAST_RE.findall(block) if len(lines) > 1 else ()
        if not (len(found) == len(lines) and found and self._clean(found)
                and self._bulk(found, linenos)):
            for lineno, line in zip(linenos, lines):
                self._step(line, lineno)
        return True

    def _clean(self, rows: list[tuple[str, ...]]) -> bool:
        """Whether the bulk path may take ``rows``: not where a second counter in the rest of
        a line shows two lines run together (the line path counts those as garbled)."""
        return self.COUNTER not in "\n".join(map(itemgetter(-1), rows))

    def _bulk(self, rows: list[tuple[str, ...]], linenos: Sequence[int]) -> bool:
        """Append ``FAST_RE.findall`` rows, the lines ``linenos``, to the state; False leaves
        the chunk to the line path."""
        raise NotImplementedError

    def _step(self, line: str, lineno: int) -> None:
        """Parse one step line (any layout), or count why it is skipped."""
        raise NotImplementedError


def no_commas(texts: Sequence[str]) -> Sequence[str]:
    """``t.replace(",", "")`` of each text (thousands separators), as two C-level passes."""
    joined = "\n".join(texts)
    return joined.replace(",", "").split("\n") if "," in joined else texts
