"""Fast, forgiving parser for MLPerf ``:::MLLOG`` logs.

An MLPerf result log is stdout of the whole job: ``:::MLLOG {json}`` event lines mixed with
framework chatter, ``:::SYSJSON`` lines, per-rank prefixes (``0: ``, ``[0] ``,
``[1,0]<stdout>: ``) and, in large NVIDIA logs, thousands of per-rank ``init_start`` lines.
The reference parser (``mlperf_logging.compliance_checker.mlp_parser.parse_file``) json-decodes
every line in Python. This one reads the file as bytes and, in its default (fast) mode, lets one
compiled regex find ``"key": "<requested key>"`` in C; only those lines reach Python and are
json-decoded. Everything else (10k ``init_start`` lines) is counted with ``bytes.count``.
``keys=None`` decodes every event line instead (same semantics as the reference; slower).

Line semantics follow the reference parser, so the two agree on clean logs (tests cross-check
both modes on every fixture and trace):

* an event line contains ``:::MLLOG ``; its JSON is the text after the *last* token on the line
  (two ranks writing into one line: the later event is kept, the line counted interleaved);
* bytes are read as latin-1, so any byte sequence decodes;
* JSON that does not decode, or lacks a string ``key`` / a finite numeric ``time_ms``, is a
  *bad line*: counted, its first few kept for reports, skipped.

Differences, on purpose: lines split on ``\\n`` only (a stray ``\\r`` ends the event text but
starts no line). In fast mode a broken line is seen only if it still names a requested key;
``n_without_metadata`` (tokens minus ``"metadata"`` occurrences, counted in C over all lines)
bounds the broken lines among the rest, since a cut line loses its trailing metadata.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Iterable, NamedTuple

from pipeline.ingest.sources.common import SNIFF_BYTES, is_compressed, looks_binary, open_binary

TOKEN = b":::MLLOG "
SYSJSON_TOKEN = b":::SYSJSON "

# Keys the MLPerf extractor needs; everything else (per-rank init_start, train_loss...) is
# counted but never decoded.
DEFAULT_KEYS = frozenset({
    "run_start", "run_stop", "submission_benchmark", "global_batch_size", "max_sequence_length",
    "gradient_accumulation_steps", "seed", "tracked_stats", "throughput",
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
    "micro_batch_size", "train_samples",
})

# Event text: after the token up to the end of the line. ``\r`` ends it too (tqdm bars).
_EVENT_RE = re.compile(rb":::MLLOG ([^\n\r]*)")
_SYSJSON_RE = re.compile(rb":::SYSJSON ([^\n\r]*)")

# Parallel degrees and micro-batch appear only in framework config dumps (``key: 8`` in YAML,
# ``key=8`` in reprs, ``"key": 8`` in JSON). The name must not be the tail of a longer
# identifier (``virtual_pipeline_model_parallel_size``, ``val_micro_batch_size``).
HINT_NAMES = ("tensor_model_parallel_size", "pipeline_model_parallel_size",
              "context_parallel_size", "micro_batch_size", "max_seq_length")
_HINT_VALUE_RE = re.compile(rb"""["']?\s*[:=]\s*["']?(\d{1,9})(?![\d.])""")
_IDENT = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_MAX_HINTS_PER_NAME = 64
_MAX_BAD_EXAMPLES = 3

DEFAULT_CHUNK_BYTES = 64 << 20
_json_decode = json.JSONDecoder().decode


class Event(NamedTuple):
    """One decoded ``:::MLLOG`` event (a tuple: cheap to build by the thousand)."""

    time_ms: float
    key: str
    value: Any
    metadata: dict
    event_type: str
    lineno: int  # 1-based physical line in the file


@dataclass(slots=True)
class ParsedLog:
    """What a log says, plus counts of what was skipped or broken."""

    events: list[Event] = field(default_factory=list)
    n_bytes: int = 0
    n_event_lines: int = 0      # ``:::MLLOG`` tokens: one per event line, 2+ if interleaved
    n_skipped: int = 0          # events whose key was not requested (never decoded)
    n_bad: int = 0              # undecodable / ill-typed lines among the decoded ones
    n_interleaved: int = 0      # lines with more than one token (among requested keys)
    # Tokens minus '"metadata"' occurrences, over all lines: every well-formed event ends with
    # its metadata, so a cut or interleaved line lacks it. A C-speed count, also covering the
    # skipped lines the fast mode never decodes (a lower bound of their broken lines).
    n_without_metadata: int = 0
    bad_examples: list[tuple[int, str]] = field(default_factory=list)
    sysjson: dict | None = None
    hints: dict[str, set[int]] = field(default_factory=dict)
    is_binary: bool = False
    sha1: str | None = None      # hex digest of the file's bytes, when asked for
    ends_mid_line: bool = False  # the file does not end with a newline
    last_line_bad: bool = False  # ... and its last line is a broken event line

    @property
    def truncated(self) -> bool:
        """The file was cut inside an event line (not a clean end of output)."""
        return self.ends_mid_line and self.last_line_bad

    def first(self, key: str) -> Event | None:
        return next((e for e in self.events if e.key == key), None)

    def all(self, key: str) -> list[Event]:
        return [e for e in self.events if e.key == key]


def _decode_event(text: bytes, lineno: int) -> Event | None:
    """json-decode one event text; None when it is not a well-formed event."""
    try:
        obj = _json_decode(text.decode("latin-1"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    key, t = obj.get("key"), obj.get("time_ms")
    if not isinstance(key, str) or isinstance(t, bool) or not isinstance(t, (int, float)):
        return None
    try:
        t = float(t)
    except OverflowError:  # a json int beyond float range
        return None
    if not math.isfinite(t):
        return None
    meta = obj.get("metadata")
    etype = obj.get("event_type")
    return Event(t, key, obj.get("value"), meta if isinstance(meta, dict) else {},
                 etype if isinstance(etype, str) else "", lineno)


class _Scanner:
    """Accumulates one file's ParsedLog over one or more newline-aligned chunks."""

    def __init__(self, keys: frozenset[str] | None) -> None:
        self.keys = keys
        self.key_re = None if keys is None else re.compile(
            rb'"key"\s*:\s*"(' + b"|".join(re.escape(k.encode("latin-1"))
                                          for k in sorted(keys)) + rb')"')
        self.out = ParsedLog()
        self.line_base = 1  # line number of the chunk's first byte

    def _bad(self, lineno: int, text: bytes) -> None:
        out = self.out
        out.n_bad += 1
        if len(out.bad_examples) < _MAX_BAD_EXAMPLES:
            out.bad_examples.append((lineno, text[:200].decode("latin-1", "replace")))

    def _take(self, text: bytes, lineno: int) -> Event | None:
        cr = text.find(b"\r")
        if cr >= 0:
            text = text[:cr]
        ev = _decode_event(text.strip(), lineno)
        if ev is None:
            self._bad(lineno, text)
        return ev

    def scan(self, chunk: bytes, last: bool = False) -> None:
        n_tokens = chunk.count(TOKEN)
        self.out.n_event_lines += n_tokens
        self.out.n_without_metadata += max(0, n_tokens - chunk.count(b'"metadata"'))
        if n_tokens:
            if self.key_re is None:
                self._scan_all(chunk)
            else:
                self._scan_keys(chunk, n_tokens)
        if self.out.sysjson is None and SYSJSON_TOKEN in chunk:
            self._sysjson(chunk)
        self._hints(chunk)
        if not last:
            self.line_base += chunk.count(b"\n")

    def _scan_all(self, chunk: bytes) -> None:
        """Every event line, as the reference parser reads them."""
        out, line, last_pos, count_nl = self.out, self.line_base, 0, chunk.count
        for m in _EVENT_RE.finditer(chunk):
            text = m.group(1)
            j = text.rfind(TOKEN)
            if j >= 0:
                out.n_interleaved += 1
                text = text[j + len(TOKEN):]
            pos = m.start()
            line += count_nl(b"\n", last_pos, pos)
            last_pos = pos
            ev = self._take(text, line)
            if ev is not None:
                out.events.append(ev)

    def _scan_keys(self, chunk: bytes, n_tokens: int) -> None:
        """Only lines whose ``"key"`` is requested: found in C, decoded in Python.

        Lines of other keys (10k per-rank ``init_start`` lines) never reach Python, so a broken
        line is noticed only when it carries a requested key.
        """
        out, keys = self.out, self.keys
        line, last_pos, done_ls, mixed_ls = self.line_base, 0, -1, -1
        rfind, find, count_nl = chunk.rfind, chunk.find, chunk.count
        n_seen = 0
        for m in self.key_re.finditer(chunk):
            pos = m.start()
            ls = rfind(b"\n", 0, pos) + 1
            if ls == done_ls:  # the key pattern twice on one line
                continue
            tpos = rfind(TOKEN, ls, pos)
            if tpos < 0:  # a key quoted in ordinary output, not an event
                continue
            le = find(b"\n", pos)
            if le < 0:
                le = len(chunk)
            later = find(TOKEN, pos, le) >= 0
            if (later or rfind(TOKEN, ls, tpos) >= 0) and ls != mixed_ls:
                mixed_ls = ls  # two ranks wrote into one line: count the line once
                out.n_interleaved += 1
            if later:
                # Like the reference, keep only the line's last event, which this loop meets
                # on its own if its key is requested.
                continue
            done_ls = ls
            n_seen += 1
            line += count_nl(b"\n", last_pos, pos)
            last_pos = pos
            ev = self._take(chunk[tpos + len(TOKEN):le], line)
            if ev is None:
                continue
            if ev.key not in keys:  # the pattern matched inside another field
                n_seen -= 1
                continue
            out.events.append(ev)
        out.n_skipped += max(0, n_tokens - n_seen)

    def _sysjson(self, chunk: bytes) -> None:
        m = _SYSJSON_RE.search(chunk)
        if m is None:
            return
        try:
            obj = json.loads(m.group(1).decode("latin-1"))
        except (ValueError, RecursionError):
            return
        if isinstance(obj, dict):
            self.out.sysjson = obj

    def _hints(self, chunk: bytes) -> None:
        if (b"parallel_size" not in chunk and b"micro_batch_size" not in chunk
                and b"max_seq_length" not in chunk):
            return
        for name in HINT_NAMES:
            nb = name.encode()
            pos, found = chunk.find(nb), 0
            while pos >= 0 and found < _MAX_HINTS_PER_NAME:
                if pos == 0 or chunk[pos - 1] not in _IDENT:
                    vm = _HINT_VALUE_RE.match(chunk, pos + len(nb))
                    if vm is not None:
                        self.out.hints.setdefault(name, set()).add(int(vm.group(1)))
                        found += 1
                pos = chunk.find(nb, pos + len(nb))


def _finish(scanner: _Scanner, tail: bytes, n_bytes: int) -> ParsedLog:
    out = scanner.out
    out.n_bytes = n_bytes
    out.ends_mid_line = bool(tail) and not tail.endswith(b"\n")
    if out.ends_mid_line:
        last = tail[tail.rfind(b"\n") + 1:]
        j = last.rfind(TOKEN)
        if j >= 0:
            text = last[j + len(TOKEN):].strip()
            out.last_line_bad = _decode_event(text, 0) is None
    return out


def parse_bytes(data: bytes, keys: Iterable[str] | None = DEFAULT_KEYS,
                sha1: bool = False) -> ParsedLog:
    """Parse a whole log held in memory. ``keys=None`` decodes every event; ``sha1`` also
    fingerprints the bytes (re-published logs are byte-identical)."""
    scanner = _Scanner(None if keys is None else frozenset(keys))
    if sha1:
        scanner.out.sha1 = hashlib.sha1(data).hexdigest()
    if looks_binary(data[:SNIFF_BYTES]):
        scanner.out.is_binary = True
        scanner.out.n_bytes = len(data)
        return scanner.out
    scanner.scan(data, last=True)
    return _finish(scanner, data[-4096:], len(data))


def parse_file(path: str | Path, keys: Iterable[str] | None = DEFAULT_KEYS,
               chunk_bytes: int = DEFAULT_CHUNK_BYTES, sha1: bool = False) -> ParsedLog:
    """Parse a log file in newline-aligned chunks (one chunk for any real MLPerf log).

    ``name.gz`` / ``name.zst`` are decompressed as they are read (``common.open_binary``).
    Raises one of ``common.READ_ERRORS`` when the file cannot be read or decompressed;
    everything else about its content is reported in the returned ``ParsedLog``.
    """
    if is_compressed(path):
        with open_binary(path) as fh:
            return _parse_stream(fh, keys, chunk_bytes, sha1)
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size <= chunk_bytes:
            # One read of the right size: read(huge) would allocate `chunk_bytes` first.
            return parse_bytes(fh.read(), keys, sha1)
        return _parse_stream(fh, keys, chunk_bytes, sha1)


def _parse_stream(fh: BinaryIO, keys: Iterable[str] | None, chunk_bytes: int,
                  sha1: bool) -> ParsedLog:
    """Chunked parse for logs larger than one chunk; chunks are cut after a newline."""
    scanner = _Scanner(None if keys is None else frozenset(keys))
    digest = hashlib.sha1() if sha1 else None
    block = fh.read(chunk_bytes)
    n_bytes, carry, tail, binary = len(block), b"", b"", looks_binary(block[:SNIFF_BYTES])
    scanner.out.is_binary = binary
    while block:
        if digest is not None:
            digest.update(block)
        if not binary:
            buf = carry + block if carry else block
            cut = buf.rfind(b"\n") + 1
            if cut == 0:  # no newline yet: one very long line, keep accumulating
                carry = buf
            else:
                scanner.scan(buf[:cut])
                tail, carry = buf[max(0, cut - 4096):cut], buf[cut:]
        block = fh.read(chunk_bytes)
        n_bytes += len(block)
    if digest is not None:
        scanner.out.sha1 = digest.hexdigest()
    if binary:
        scanner.out.n_bytes = n_bytes
        return scanner.out
    if carry:
        scanner.scan(carry, last=True)
        tail = carry[-4096:]
    return _finish(scanner, tail, n_bytes)
