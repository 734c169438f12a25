"""What every step-log parser shares: the per-step accumulator and cheap line helpers.

A format module (``megatron``, ``torchtitan``, ...) turns the lines of one log into numbers on
a ``ParseState``: one row per logged step (kept as ``array('d')`` columns, 8 bytes a number,
never the lines themselves) plus the configuration facts the log states (``facts``, in
published format-v1 column names, with the line that stated them) and counters of what was
skipped and why (``counts``). ``pipeline.ingest.sources.steplogs.reader`` picks the format, drives the lines
and reduces the steps to a run.
"""

from __future__ import annotations

import math
import re
from array import array
from collections import Counter
from dataclasses import dataclass, field
from datetime import date
from functools import lru_cache
from typing import Any, Iterable, Iterator

import numpy as np

NAN = math.nan

# ANSI SGR colour codes (torchtitan colours every field; nanotron dims its prefix).
ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Launcher prefixes naming the rank that printed a line: torchrun ``--tee`` writes
# ``[rank3]:`` or ``[default3]:``, ``srun --label`` writes ``3: ``, mpirun ``--tag-output``
# writes ``[1,3]<stdout>:``.
RANK_PREFIX_RE = re.compile(
    r"^\s*(?:\[(?:rank|default)(\d+)\]:|(\d+): |\[\d+,(\d+)\]<std(?:out|err)>:)")
# A number as the frameworks print it: 12936.1, 1.395349E-07, 6,543, NAN, -inf.
# ASCII digits only, as ``pipeline.numbers`` (``\d`` would take full-width and Arabic-Indic).
NUM = (r"[-+]?(?:[0-9][0-9,]*\.?[0-9]*(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?|"
       r"nan|NAN|NaN|inf|INF|Inf)")

_PREFIX_START = frozenset("[0123456789 \t")
_SUFFIX = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


def to_float(text: str) -> float:
    """Parse a printed number (thousands commas allowed); NaN when it is not one."""
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return NAN


def human_float(text: str) -> float:
    """Parse nanotron's ``human_format`` numbers (``1.23K``, ``33.2M``, ``3.5B``)."""
    text = text.strip()
    scale = _SUFFIX.get(text[-1:]) if text[-1:].isalpha() else None
    if scale is not None:
        try:
            return float(text[:-1]) * scale
        except ValueError:
            return to_float(text)
    try:
        return float(text)
    except ValueError:
        return to_float(text)


_UNIX_DAY0 = date(1970, 1, 1).toordinal()


@lru_cache(maxsize=4096)
def _day_s(y: int, m: int, d: int) -> float:
    return (date(y, m, d).toordinal() - _UNIX_DAY0) * 86400.0


def iso_seconds(stamp: str) -> float:
    """Unix seconds of ``YYYY-MM-DD HH:MM:SS[.,fff]`` (zone unknown); NaN if malformed.

    Hand-parsed: ``datetime.strptime`` costs ~10 us a call, a third of a step line's budget.
    """
    try:
        day = _day_s(int(stamp[0:4]), int(stamp[5:7]), int(stamp[8:10]))
        return (day + int(stamp[11:13]) * 3600 + int(stamp[14:16]) * 60
                + float(stamp[17:].replace(",", ".") or 0.0))
    except (ValueError, IndexError):
        return NAN


def rank_of(text: str) -> int:
    """Rank named by a launcher prefix, or -1 when the line carries none."""
    if not text or text[0] not in _PREFIX_START:
        return -1
    m = RANK_PREFIX_RE.match(text)
    if not m:
        return -1
    return int(m.group(1) or m.group(2) or m.group(3))


def decode(raw: bytes) -> str:
    """Decode one line; bytes that are not UTF-8 become U+FFFD (counted by the caller)."""
    return raw.decode("utf-8", errors="replace")


def floats(texts: Iterable[str]) -> array:
    """Printed numbers to an ``array('d')`` (empty text: NaN; thousands commas allowed)."""
    texts = list(texts)
    try:
        return array("d", map(float, texts))  # all plain numbers: one C-level pass
    except ValueError:
        pass
    out = array("d")
    for t in texts:
        try:
            out.append(float(t))
        except ValueError:
            out.append(to_float(t) if t else NAN)
    return out


def iso_seconds_many(stamps: list[str] | tuple[str, ...]) -> np.ndarray:
    """``iso_seconds`` of many stamps at once (numpy's datetime64 parser)."""
    joined = "\n".join(stamps)
    try:
        ms = np.array(joined.replace(",", ".").split("\n") if "," in joined else stamps,
                      dtype="datetime64[ms]")
    except ValueError:
        return np.array(list(map(iso_seconds, stamps)), dtype=np.float64)
    return ms.astype(np.int64) / 1000.0


def candidate_lines(text: str, marker: str, first_lineno: int,
                    counts: Counter) -> tuple[list[int], list[str]]:
    """``lines_with`` as two lists (line numbers, lines), for the bulk paths.

    Where most lines hold the marker (a log of step lines) splitting the chunk is cheaper
    than searching it marker by marker; both give the same lists.
    """
    hits = text.count(marker)
    if hits * 4 < text.count("\n") or "\x00" in text:
        linenos: list[int] = []
        lines: list[str] = []
        for lineno, line in lines_with(text, marker, first_lineno, counts):
            linenos.append(lineno)
            lines.append(line)
        return linenos, lines
    split = text.split("\n")
    if split and not split[-1]:
        split.pop()
    idx = [i for i, line in enumerate(split) if marker in line]
    return [first_lineno + i for i in idx], [split[i] for i in idx]


def lines_with(text: str, marker: str, first_lineno: int,
               counts: Counter | None = None) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of each line of ``text`` that contains ``marker``, in order.

    ``text`` is a chunk of whole lines whose first line is ``first_lineno``. The search runs
    in C (``str.find``), so lines without the marker cost nothing in Python. Lines holding NUL
    bytes (binary garbage) are skipped and counted in ``counts['garbage_step_lines']``.
    """
    find, rfind, count = text.find, text.rfind, text.count
    pos = find(marker)
    prev, lineno = 0, first_lineno
    while pos >= 0:
        start = rfind("\n", 0, pos) + 1
        end = find("\n", pos)
        if end < 0:
            end = len(text)
        lineno += count("\n", prev, start)
        prev = start
        line = text[start:end]
        if "\x00" in line:
            if counts is not None:
                counts["garbage_step_lines"] += 1
        else:
            yield lineno, line
        pos = find(marker, end)


def sole_match(pattern: re.Pattern, text: str, counts: Counter) -> re.Match | None:
    """The one match of a step line's counter (``iteration N``, ``step: N``), or None after
    counting the line: no counter is ``unparsed_step_lines`` (a line cut before it), two are
    ``garbled_step_lines`` (two ranks' lines run together)."""
    m = pattern.search(text)
    if m is None or pattern.search(text, m.end()) is not None:
        counts["unparsed_step_lines" if m is None else "garbled_step_lines"] += 1
        return None
    return m


def regex_lines(text: str, pattern: re.Pattern, first_lineno: int,
                pos: int = 0, endpos: int | None = None) -> Iterator[tuple[int, re.Match]]:
    """``(line number, match)`` for each match of ``pattern`` in ``text`` (chunk of lines)."""
    prev, lineno = 0, first_lineno
    for m in pattern.finditer(text, pos, len(text) if endpos is None else endpos):
        lineno += text.count("\n", prev, m.start())
        prev = m.start()
        yield lineno, m


# Per-step columns kept for every format; NaN where the format does not print the value.
STEP_FLOAT_COLUMNS = ("step_time_s", "tokens_per_s", "tokens_per_s_per_accelerator", "loss",
                      "tflops_per_accelerator", "mfu", "batch_samples", "samples_per_s",
                      "wall_s")
FLAG_NAN_LOSS = 1
MAX_CHANGES = 100


@dataclass
class ParseState:
    """Numbers extracted from one log, in file order."""

    fmt: str
    step: array = field(default_factory=lambda: array("q"))
    line: array = field(default_factory=lambda: array("q"))
    rank: array = field(default_factory=lambda: array("i"))
    flags: array = field(default_factory=lambda: array("b"))
    cols: dict[str, array] = field(
        default_factory=lambda: {c: array("d") for c in STEP_FLOAT_COLUMNS})
    facts: dict[str, Any] = field(default_factory=dict)
    fact_lines: dict[str, int] = field(default_factory=dict)
    counts: Counter = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)
    # How a fact that the log implies but does not print was worked out (fact -> explanation);
    # such facts are named in the run's ``derived``.
    derivations: dict[str, str] = field(default_factory=dict)
    # Formats that print no step time get it from timestamps (see steplogs.reduce_steps).
    step_time_from_wall: bool = False
    # The latest value of each fact, and each change of one (see ``fact``).
    latest: dict[str, Any] = field(default_factory=dict)
    changes: list[tuple[str, Any, Any, int]] = field(default_factory=list)
    # Per-step values that are not numbers ("1.0s", true, [..]): (key, value, line), the first
    # few; the reader rejects such a log as ``bad_value`` quoting them (never a silent drop).
    bad_values: list[tuple[str, Any, int]] = field(default_factory=list)

    def add(self, step: int, line: int, rank: int = -1, *, nan_loss: bool = False,
            step_time_s: float = NAN, tokens_per_s: float = NAN,
            tokens_per_s_per_accelerator: float = NAN, loss: float = NAN,
            tflops_per_accelerator: float = NAN, mfu: float = NAN, batch_samples: float = NAN,
            samples_per_s: float = NAN, wall_s: float = NAN) -> None:
        """Append one logged step (NaN: not printed)."""
        self.step.append(step)
        self.line.append(line)
        self.rank.append(rank)
        self.flags.append(FLAG_NAN_LOSS if nan_loss else 0)
        c = self.cols
        c["step_time_s"].append(step_time_s)
        c["tokens_per_s"].append(tokens_per_s)
        c["tokens_per_s_per_accelerator"].append(tokens_per_s_per_accelerator)
        c["loss"].append(loss)
        c["tflops_per_accelerator"].append(tflops_per_accelerator)
        c["mfu"].append(mfu)
        c["batch_samples"].append(batch_samples)
        c["samples_per_s"].append(samples_per_s)
        c["wall_s"].append(wall_s)

    def extend(self, step: Iterable[int], line: Iterable[int], rank: Iterable[int],
               nan_loss: Iterable[bool], **values: Any) -> None:
        """Append many steps at once; ``values`` (``STEP_FLOAT_COLUMNS`` names: arrays, numpy
        arrays or sequences) have one number a step, absent columns are NaN. numpy arrays are
        copied in as raw memory, without a Python object per number."""
        before = len(self.step)
        _append(self.step, step)
        n = len(self.step) - before
        _append(self.line, line)
        _append(self.rank, rank)
        if isinstance(nan_loss, np.ndarray):
            _append(self.flags, nan_loss.astype(np.int8) * FLAG_NAN_LOSS)
        else:
            self.flags.extend(FLAG_NAN_LOSS if bad else 0 for bad in nan_loss)
        nans = None
        for name, col in self.cols.items():
            given = values.get(name)
            if given is None:
                if nans is None:
                    nans = array("d", [NAN]) * n
                col.extend(nans)
            else:
                _append(col, given)
        if not (len(self.line) == len(self.rank) == len(self.flags) == len(self.step)) or any(
                len(c) != len(self.step) for c in self.cols.values()):
            raise ValueError("extend: columns of different lengths")

    def drop_last(self) -> None:
        """Forget the last step (a line cut mid-way whose numbers cannot be trusted)."""
        for arr in (self.step, self.line, self.rank, self.flags, *self.cols.values()):
            arr.pop()

    def __len__(self) -> int:
        return len(self.step)

    def fact(self, key: str, value: Any, line: int) -> None:
        """Record a configuration fact the log states; a later, different value is noted, and
        each change (key, value before, value after, line) kept in ``changes`` (the first
        ``MAX_CHANGES``) so that a log whose shape changes mid-run is never read as one run."""
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            return
        old = self.facts.get(key)
        if old is None:
            self.facts[key] = value
            self.fact_lines[key] = line
        elif old != value:
            self.counts[f"fact_changed:{key}"] += 1
        before = self.latest.get(key, value)
        if before != value and len(self.changes) < MAX_CHANGES:
            self.changes.append((key, before, value, line))
        self.latest[key] = value


_NP_TYPES = {"d": np.float64, "q": np.int64, "i": np.int32, "b": np.int8}


def _append(arr: array, values: Any) -> None:
    if isinstance(values, np.ndarray):
        # Same conversions as ``array.extend`` (which would take a Python object per number):
        # integer columns refuse floats and out-of-range values.
        typ = _NP_TYPES[arr.typecode]
        if values.dtype != typ:
            if arr.typecode != "d" and values.dtype.kind not in "iub":
                raise TypeError("integer column given non-integer values")
            if values.dtype.kind in "iu" and len(values) and (
                    values.min() < np.iinfo(typ).min or values.max() > np.iinfo(typ).max):
                raise OverflowError("value out of range for the column")
            values = values.astype(typ)
        arr.frombytes(np.ascontiguousarray(values).tobytes())
    else:
        arr.extend(values)


def int_or_none(text: str) -> int | None:
    """An integer field of a config dump (``None``, ``null`` and garbage give None)."""
    try:
        return int(text.replace(",", "").strip())
    except ValueError:
        return None


def precision_from_flags(bf16: str | None, fp16: str | None, fp8: str | None) -> str | None:
    """Megatron-style precision flags (``bf16 True``, ``fp8 hybrid``) to a v1 precision."""
    if fp8 and fp8.strip() not in ("None", "False", "null", ""):
        return "fp8"
    if bf16 and bf16.strip() == "True":
        return "bf16"
    if fp16 and fp16.strip() == "True":
        return "fp16"
    return None
