"""Training step logs -> one run per log (``read_logs``), plus per-step rows for notebooks.

Files read under the logs folder (recursively): ``*.log``, ``*.txt``, ``*.out``, ``*.jsonl``,
each also gzipped (``.gz``) or zstd-compressed (``.zst``), decompressed as it is streamed
(``pipeline.ingest.sources.common.open_binary``; a corrupt or cut stream is an ``unreadable``
reject), and rotated ones (``train.log.1``, ``train.log.2.gz``: each part is a log of its own;
parts that agree are one measurement, ``ingest.core.conflicts``). ``README*`` files, hidden
files and YAML sidecars are not logs; every other file is a ``not_a_run`` reject stating the
naming rule, so nothing under the logs folder goes unsaid. Each log is streamed once in binary, in
4 MiB blocks cut at line ends and decoded with ``errors="replace"``; the format module finds
its lines in a block with C-level searches, so lines of other output cost almost nothing; a
block of nothing but step lines is matched whole by one pattern and turned into numpy columns
(``pipeline.ingest.sources.steplogs.bulk``); only per-step numbers are kept, 8 bytes each. The format
is chosen from the content (the first part of the file that shows step lines of any known
format decides; ties go to the order of ``FORMATS``); a sidecar's ``format:`` overrides.
Sidecars: ``pipeline.ingest.sources.steplogs.sidecar``; steps -> run: ``pipeline.ingest.sources.steplogs.reduce``;
per-step rows out: ``pipeline.ingest.sources.steplogs.store``. Each log's ``source`` is its
campaign, the first folder below the logs folder (``logs/<campaign>``, see ``campaign_source``),
so the ingest's series rule (``pipeline.ingest.core.series``) makes the logs of one campaign that
differ only in N one scaling series, whatever the job folders below it.

Every log file gives exactly one ``Record``: a run, or a reject whose reason says why
(``binary_file``, ``truncated_log``, ``too_few_steps``, ``conflict``, ``missing_required``,
``not_a_run``, ``bad_value``, ``unreadable``). Lines skipped inside an accepted log (binary
garbage, cut or garbled lines, other ranks, NaN losses, restarts, clock jumps) are counted in
the run's ``notes``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from dataclasses import replace
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import pandas as pd

from pipeline.bounded import cap, short
from pipeline.config import LogsSettings, settings as load_group
from pipeline.processes import stream_in_order
from pipeline.vocab import KERNEL_COLUMNS
from pipeline.ingest.sources.steplogs.formats import deepspeed
from pipeline.ingest.sources.steplogs.formats import hf_trainer
from pipeline.ingest.sources.steplogs.formats import jsonl
from pipeline.ingest.sources.steplogs.formats import composer
from pipeline.ingest.sources.steplogs.formats import maxtext
from pipeline.ingest.sources.steplogs.formats import torchtune
from pipeline.ingest.sources.steplogs.formats import megatron
from pipeline.ingest.sources.steplogs.formats import nanotron
from pipeline.ingest.sources.steplogs.formats import nemo
from pipeline.ingest.sources.steplogs.formats import torchtitan
from pipeline.ingest.records import Record
from pipeline.ingest.sources.common import (READ_ERRORS, SNIFF_BYTES, bom_encoding, line_cut,
                                            logical_name, logical_suffix, looks_binary,
                                            open_text_bytes, read_error, shown_path,
                                            unify_line_ends, utf16_without_bom)
from pipeline.ingest.sources.links import candidates, entry_problem  # noqa: F401
from pipeline.ingest.sources.steplogs.sidecar import SidecarError, load_sidecar, same_value
from pipeline.ingest.sources.steplogs.base import ANSI_RE, ParseState
from pipeline.ingest.sources.steplogs.phases import phase_change
from pipeline.ingest.sources.steplogs.reduce import reduce_steps
from pipeline.ingest.sources.steplogs.remote import RemoteRoot, mirrored
from pipeline.ingest.sources.steplogs.store import STEP_COLUMNS, gather, steps_rows, write_steps

__all__ = ["FORMATS", "STEP_COLUMNS", "read_logs", "stream_logs", "read_one", "find_logs", "detect_format"]

FORMATS = {m.NAME: m for m in (megatron, torchtitan, nanotron, nemo, deepspeed, hf_trainer,
                               maxtext, torchtune, composer, jsonl)}
LOG_SUFFIXES = (".log", ".txt", ".out", ".jsonl")
# A rotated log's number (logrotate, Python's RotatingFileHandler): ``train.log.1``.
ROTATED_RE = re.compile(r"\.\d{1,6}$")
SIDECAR_SUFFIXES = (".yaml", ".yml")
DETECT_BYTES = 1 << 18
CHUNK_BYTES = 1 << 22
BUFFER_BYTES = 1 << 20
MAX_LINE_BYTES = 1 << 26
# Logs read as one task: a batch of small logs is one round trip to a worker and one steps
# file, not one each.
BATCH_FILES, BATCH_BYTES = 64, 1 << 22
# In parallel, logs of at least this size are handed out first, largest first; smaller ones
# follow in path order, so that a batch holds neighbouring folders and a worker's memo of
# folders and sidecars serves its logs.
BIG_LOG_BYTES = BATCH_BYTES // BATCH_FILES
# A reading process's memo (folder listings, sidecars, shown folders) is emptied between
# batches once it holds this many entries (~6 a folder): memory stays flat over 10^5 folders.
MEMO_ENTRIES = 60_000
# Start-up facts (argument and config dumps) are looked for in the first chunks only.
HEADER_CHUNKS = 4
# Facts a log and a sidecar must agree on (a differing pair rejects the log).
CHECKED = ("n_accelerators", "tp", "pp", "cp", "ep", "dp", "zero_stage", "seq_len", "n_layers",
           "d_model", "micro_batch", "params_b", "precision", "accelerator", "recompute",
           "virtual_pipeline", "sequence_parallel")
RUN_KEYS = ("accelerator", "n_accelerators", "model", "params_b", "active_params_b", "n_layers",
            "d_model", "seq_len", "global_batch_tokens", "micro_batch", "dp", "tp", "pp", "cp",
            "ep", "zero_stage", "strategy", "precision", "scaling", "series", "status",
            "accelerators_per_node", "system", "recompute", "virtual_pipeline", "pipeline_flushes",
            "sequence_parallel", "framework", *KERNEL_COLUMNS, "cluster", "n_experts", "top_k",
            "capacity_factor")
# The software a log format is printed by (its format module's docstring cites the source); a
# sidecar's ``framework:`` overrides it. The generic JSON Lines format names none. Megatron's
# format is printed by its forks too: an argument dump with ``zero_stage`` is Megatron-DeepSpeed's
# (Megatron-LM has no such argument); other forks (gpt-neox, ...) need the sidecar's word.
FORMAT_FRAMEWORK = {"megatron": "Megatron-LM", "nemo": "NeMo", "deepspeed": "DeepSpeed",
                    "nanotron": "nanotron", "torchtitan": "torchtitan",
                    "hf_trainer": "Hugging Face Trainer", "maxtext": "MaxText", "torchtune": "torchtune",
                    "composer": "Composer"}


def find_logs(logs_dir: Path) -> list[Path]:
    """Log files under ``logs_dir``, sorted: every entry named like a log, links, special files
    and folders so named included (``read_one`` rejects those, saying why), and every other
    file but sidecars, READMEs and hidden ones (``is_listed``: a ``not_a_run`` reject each). Listed as
    ``Path.rglob`` lists (links to folders not followed, unreadable folders skipped), but by
    ``os.scandir``, whose entries know their type: no ``stat`` per file, and the name is
    checked before anything else (a fleet's archive holds more sidecars than logs)."""
    return [Path(p) for p in _log_texts(logs_dir)]


def _log_texts(logs_dir: Path) -> list[str]:
    """``find_logs``'s paths as texts: ~110 bytes a log where a ``Path`` (its parts parsed)
    costs ~500, and the stream holds every log's path until the last is read."""
    if not logs_dir.is_dir():
        return []
    found, folders = [], [str(logs_dir)]
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    is_dir = False
                    with contextlib.suppress(OSError):
                        is_dir = entry.is_dir(follow_symlinks=False)
                    if is_dir:
                        folders.append(entry.path)
                    if is_log_name(entry.name) or (not is_dir and is_listed(entry.name)):
                        found.append(entry.path)
        except PermissionError:
            continue
    # Path order (component by component, as ``sorted`` of Paths), from the texts: comparing
    # 10^5 Path objects cost more than listing them
    return sorted(found, key=lambda p: p.split(os.sep))


def is_log_name(name: str) -> bool:
    """Whether a file of this name is read as a step log (``LOG_SUFFIXES``, maybe compressed,
    maybe rotated: ``train.log.1``, ``train.log.2.gz``; not hidden, not a README)."""
    if name.startswith((".", "README")):
        return False
    if logical_suffix(name) in LOG_SUFFIXES:
        return True
    base = logical_name(name)
    rotated = ROTATED_RE.search(base)
    return rotated is not None and logical_suffix(base[:rotated.start()]) in LOG_SUFFIXES


def is_listed(name: str) -> bool:
    """Whether ``find_logs`` lists a file of this name: every file but hidden ones, READMEs
    and YAML sidecars. Those not named like a log (``is_log_name``) become ``not_a_run``
    rejects that state the naming rule, so that no file under the logs folder goes unsaid."""
    return not name.startswith((".", "README")) and not name.lower().endswith(SIDECAR_SUFFIXES)


NAMING_RULE = ("step logs are files named *.log, *.txt, *.out or *.jsonl, maybe compressed "
               "(.gz, .zst) and maybe rotated (train.log.1, train.log.2.gz); YAML files are "
               "sidecars; hidden files and README* are not read")


def campaign_source(path: Path, logs_dir: Path, cache: dict | None = None) -> str:
    """A log's default source: its campaign, the first folder below the logs folder
    (``logs/<campaign>``; ``logs`` for a file directly in it). Job folders below the campaign
    (``logs/sweep/n8/``, ``logs/sweep/n16/``) share it, so logs that differ only in N form one
    series whatever the depth. With ``cache``: once per folder (the name plays no part)."""
    path = Path(path)
    key = ("campaign", os.path.dirname(str(path)), logs_dir)
    if cache is not None and key in cache:
        return cache[key]
    parts = path.relative_to(logs_dir).parts
    source = "logs" if len(parts) < 2 else f"logs/{parts[0]}"
    if cache is not None:
        cache[key] = source
    return source






def detect_format(text: str) -> str | None:
    """The format whose step lines ``text`` shows most (None: none)."""
    best, best_score = None, 0
    for name, module in FORMATS.items():
        score = module.detect(text)
        if score > best_score:
            best, best_score = name, score
    return best


def _small_plain(path: Path) -> bytes | None:
    """The whole file, when it is uncompressed, has no byte-order mark and is shorter than
    ``DETECT_BYTES`` (most of a fleet's logs): read in one call, without the decoding stream
    and the two 1 MiB buffers that ``open_text_bytes`` sets up; None otherwise (read that way)."""
    if logical_name(path.name) != path.name:
        return None
    with open(path, "rb") as raw:  # buffered: its read() loops until EOF or the size
        data = raw.read(DETECT_BYTES)
    return data if len(data) < DETECT_BYTES and bom_encoding(data[:4]) is None else None


def sniff(path: Path) -> tuple[str, str | None, bytes | None, str | None]:
    """("binary" | "empty" | "text", detected format, the whole file when the first read held
    it all, the encoding it was decoded from by its byte-order mark) reading only as far as
    needed ("binary": the format slot holds what to say when it is UTF-16 without a BOM). A
    small log (most of a fleet's) is thus read once: ``parse_file`` takes those bytes (UTF-8,
    line ends not yet unified) instead of opening the file again."""
    small = _small_plain(path)
    with io.BytesIO(small) if small is not None else open_text_bytes(
            path, buffering=BUFFER_BYTES) as fh:
        encoding = None if small is not None else fh.raw.source_encoding
        head = fh.read(SNIFF_BYTES)
        if not head:
            return "empty", None, None, encoding
        if looks_binary(head):
            return "binary", utf16_without_bom(head, path), None, encoding
        chunk, carry = head + fh.read(DETECT_BYTES - len(head)), b""
        whole = chunk if len(chunk) < DETECT_BYTES else None
        while chunk:
            cut = line_cut(chunk) or len(chunk)
            fmt = detect_format(unify_line_ends(carry + chunk[:cut]).decode("utf-8",
                                                                            errors="replace"))
            if fmt:
                return "text", fmt, whole, encoding
            carry = chunk[cut:][-DETECT_BYTES:]
            chunk = fh.read(CHUNK_BYTES)
        return "text", None, whole, encoding


def _feed(parser: Any, data: bytes, lineno: int, header: bool, counts: Any) -> None:
    text = data.decode("utf-8", errors="replace")
    if "\ufffd" in text:
        counts["replaced_bytes"] += text.count("\ufffd")
    if "\x00" in text:
        pos = text.find("\x00")
        while pos >= 0:  # count each line holding NUL bytes once
            counts["binary_garbage_lines"] += 1
            end = text.find("\n", pos)
            pos = text.find("\x00", end) if end >= 0 else -1
    parser.feed_chunk(text, lineno, header)


def parse_file(path: Path, fmt: str, whole: bytes | None = None) -> tuple[ParseState, int, bool]:
    """Stream ``path`` through the ``fmt`` parser: (state, lines read, last line was cut);
    ``whole``: the file's bytes, already read (``sniff``), parsed instead of reopening it.

    The file is read in ``CHUNK_BYTES`` blocks cut at the last line end (the rest is carried
    into the next block), so memory stays flat whatever the file size; ``\r\n`` and a lone
    ``\r`` are line ends like ``\n`` (``common.unify_line_ends``), and a UTF-16/32 file with
    a BOM arrives as UTF-8 (``common.open_text_bytes``). A "line" longer than
    ``MAX_LINE_BYTES`` (binary garbage without newlines) is dropped and counted.
    """
    state = ParseState(fmt=fmt)
    parser = FORMATS[fmt].Parser(state)
    counts = state.counts
    lineno, n_chunks, carry = 1, 0, b""
    with io.BytesIO(whole) if whole is not None else open_text_bytes(path, BUFFER_BYTES) as fh:
        while block := fh.read(CHUNK_BYTES):
            data = carry + block if carry else block
            cut = line_cut(data)
            if not cut:
                carry = data
                if len(carry) > MAX_LINE_BYTES:
                    counts["overlong_lines"] += 1
                    carry = b""
                continue
            carry = data[cut:]
            lines = unify_line_ends(data[:cut])
            _feed(parser, lines, lineno, n_chunks < HEADER_CHUNKS, counts)
            lineno += lines.count(b"\n")
            n_chunks += 1
    if carry.endswith(b"\r"):  # a final lone CR ends the last line
        lines = unify_line_ends(carry)
        _feed(parser, lines, lineno, n_chunks < HEADER_CHUNKS, counts)
        lineno += lines.count(b"\n") - 1
        carry = b""
    elif carry:  # the last line has no line end: the file was cut (or never finished)
        _feed(parser, carry, lineno, n_chunks < HEADER_CHUNKS, counts)
    else:
        lineno -= 1
    parser.finish()
    if carry and len(state) and state.line[-1] == lineno:
        if _complete(fmt, carry):  # ends as the format's lines end: every number terminated
            counts["unterminated_step_line"] += 1
        else:
            state.drop_last()  # its last number may be cut short (12936.1 -> 129)
            counts["cut_step_line"] += 1
    return state, lineno, bool(carry)


def _bad_values(state: ParseState) -> str:
    """The reject detail of a log whose per-step values are not numbers: each key's first such
    value with its line and how many lines hold one."""
    return "; ".join(
        f"{key} = {short(json.dumps(value, default=str), 60)} at line {line} is not a number "
        f"({state.counts[f'non_number:{key}']} line(s))" for key, value, line in state.bad_values
    ) + (" (per-step values are JSON numbers in the unit of their key's name: "
         "\"step_time_s\": 1.0, not \"1.0s\")")


def _complete(fmt: str, last: bytes) -> bool:
    """Whether a last line without a newline ends the way every step line of ``fmt`` ends
    (the format module's ``LINE_END_RE``, e.g. DeepSpeed's ``MaxMemAllocated=0.97GB``): the
    numbers read from it were all followed by more text, so none was cut short. A log pasted
    into an issue thread loses its final newline, not its last line."""
    end = getattr(FORMATS[fmt], "LINE_END_RE", None)
    return end is not None and end.search(ANSI_RE.sub("", last.decode("utf-8", "replace")))



def _count_notes(state: ParseState, cut: bool) -> list[str]:
    labels = {"binary_garbage_lines": "line(s) of binary garbage (NUL bytes) skipped",
              "garbage_step_lines": "step line(s) holding binary garbage skipped",
              "overlong_lines": "run(s) of over 64 MiB without a newline skipped",
              "replaced_bytes": "byte sequence(s) that are not UTF-8 replaced",
              "non_json_lines": "line(s) that are not JSON objects ignored",
              "garbled_step_lines": "step line(s) garbled by interleaved output skipped",
              "unparsed_step_lines": "step-like line(s) that did not parse skipped",
              "cut_step_line": "last step line cut mid-line (no newline) skipped",
              "unterminated_step_line": "last step line has no newline but ends as the "
                                        "format's lines end: kept",
              "progress_bar_redraws": "progress-bar redraw(s) of the same step collapsed",
              "validation_lines": "validation line(s) ignored",
              "progress_bar_rate_steps": "step(s) timed by the progress bar's rate (s/it, a "
                                         "moving average over recent steps, not the step's own "
                                         "time)"}
    notes = [f"{state.counts[k]} {label}" for k, label in labels.items() if state.counts.get(k)]
    notes += [f"log states {k.split(':', 1)[1]} more than once with different values; first "
              "kept" for k in sorted(state.counts) if k.startswith("fact_changed:")]
    if cut and not state.counts.get("cut_step_line") and not state.counts.get(
            "unterminated_step_line"):
        notes.append("log ends without a final newline")
    return notes


def _encoding_note(encoding: str | None) -> list[str]:
    """A note when the log was decoded from UTF-16/32 (by its byte-order mark)."""
    return [f"decoded from {encoding.upper()} (byte-order mark)"] if encoding not in (
        None, "utf-8") else []


def conflicts(state: ParseState, side: Any) -> list[str]:
    """Every fact on which the log and its sidecars disagree, each naming both values."""
    found = []
    for key, value in state.facts.items():
        if key in CHECKED and key in side.values and not same_value(key, value,
                                                                    side.values[key]):
            found.append(f"{key}: log says {short(value)} (line "
                         f"{state.fact_lines.get(key, 0)}), sidecar {side.origin[key]} says "
                         f"{short(side.values[key])}")
    batch, seq = state.facts.get("batch_samples"), state.facts.get("seq_len",
                                                                   side.values.get("seq_len"))
    if "global_batch_tokens" in side.values and batch and seq:
        log_gbt = batch * seq
        if not same_value("global_batch_tokens", log_gbt, side.values["global_batch_tokens"]):
            found.append(f"global_batch_tokens: log says {log_gbt:g} (batch {batch} x seq "
                         f"{seq}), sidecar {side.origin['global_batch_tokens']} says "
                         f"{side.values['global_batch_tokens']:g}")
    return found


def merged_facts(state: ParseState, side: Any) -> dict[str, Any]:
    """Log facts over sidecar defaults (the sidecar's model name is kept: the catalog knows
    it); conflicts are not checked here."""
    facts = dict(side.values)
    for key, value in state.facts.items():
        if key == "model" and key in facts:
            continue
        facts[key] = value
    return facts


def _merge(state: ParseState, side: Any) -> dict[str, Any]:
    """``merged_facts``; raises SidecarError('conflict') naming every disagreement."""
    found = conflicts(state, side)
    if found:
        raise SidecarError("conflict", "; ".join(found))
    return merged_facts(state, side)


def _open(path: Path, logs_dir: Path, cache: dict, display: Any
          ) -> tuple[str, str] | tuple[Any, str, bool, Any]:
    """A log's sidecar and format: (sidecar, format, whole, encoding), or the reject (code,
    detail) of an entry that is no readable text log of a known format."""
    problem = entry_problem(path, logs_dir)
    if problem:
        return problem
    if not is_log_name(path.name):
        return "not_a_run", (f"not read as a step log: {NAMING_RULE} (rename it, or move it "
                             "out of the logs folder)")
    try:
        side = load_sidecar(path, logs_dir, cache, display=display)
        kind, fmt, whole, encoding = sniff(path)
    except SidecarError as exc:
        return exc.code, exc.detail
    except READ_ERRORS as exc:
        return "unreadable", f"{display(path)}: {read_error(exc)}"
    if kind == "empty":
        return "truncated_log", "empty file (0 bytes)"
    if kind == "binary":
        return "binary_file", fmt or ("NUL, control or non-UTF-8 bytes in the first 64 KiB: not "
                                      "a text log")
    if "format" in side.values:
        fmt = side.values["format"]
        if fmt not in FORMATS:
            return "bad_value", (f"sidecar {side.origin['format']}: format '{fmt}' is not one "
                                 f"of {', '.join(FORMATS)}")
    if fmt is None:
        return "not_a_run", ("no step lines of a known format (" + ", ".join(FORMATS)
                             + "); set 'format:' in a sidecar to force one")
    return side, fmt, whole, encoding


def read_one(path: Path, logs_dir: Path, s: LogsSettings,
             cache: dict) -> tuple[dict[str, Any] | tuple[str, str], dict[str, Any] | None]:
    """One log -> (run fields or (code, detail), its step rows (``steplog_store``))."""
    def display(p: Path) -> str:
        return shown_path(p, folders=cache)

    shown = display(path)
    opened = _open(path, logs_dir, cache, display)
    if isinstance(opened, tuple) and len(opened) == 2:
        return opened, None
    side, fmt, whole, encoding = opened
    try:
        state, _, cut = parse_file(path, fmt, whole)
    except READ_ERRORS as exc:
        return ("unreadable", f"{shown}: {read_error(exc)}"), None
    changed = phase_change(state.changes, shown)
    if changed:
        return ("phase_change", changed), None
    if state.bad_values:
        return ("bad_value", _bad_values(state)), None
    try:
        facts = _merge(state, side)
    except SidecarError as exc:
        return (exc.code, exc.detail), None
    red = reduce_steps(state, facts, s)
    steps = steps_rows(shown, fmt, red.columns) if len(state) else None
    notes = [f"format {fmt}"] + red.notes + _count_notes(state, cut) + _encoding_note(encoding)
    if red.phase_reject:
        return ("phase_change", "; ".join(notes)), steps
    measures, derived = red.measures, list(red.derived)
    for key, value in red.implied.items():
        facts.setdefault(key, value)
    if facts.get("framework") in (None, "") and fmt in FORMAT_FRAMEWORK:
        facts["framework"] = ("Megatron-DeepSpeed" if fmt == megatron.NAME
                              and "zero_stage" in state.facts else FORMAT_FRAMEWORK[fmt])
    for key, how in {**state.derivations, **red.implied_how}.items():
        if key in side.values and key not in state.facts and key not in red.implied:
            continue  # the sidecar's value was used
        derived.append(key)
        notes.append(f"{key} {how}")
    try:
        if fmt == hf_trainer.NAME and not red.n_steady:
            measures, extra, note = hf_trainer.summary_measures(state, facts, s)
            red.first_line = red.last_line = state.fact_lines.get("train_steps_per_second", 0)
            derived += extra
            notes.append(note)
        elif red.n_steady < s.min_steady_steps:
            code = "truncated_log" if cut and red.n_steady == 0 else "too_few_steps"
            raise SidecarError(code, f"{red.n_steady} steady-state steps < min_steady_steps "
                                     f"{s.min_steady_steps}; " + "; ".join(notes))
    except SidecarError as exc:
        return (exc.code, exc.detail), steps
    # n_accelerators: 0 is a value, and normalize rejects it as out of range (not "not given").
    missing = [k for k in ("accelerator", "n_accelerators") if facts.get(k) in (None, "")]
    if missing:
        return ("missing_required", f"{', '.join(missing)}: neither the log nor a sidecar "
                                    "(run.yaml) gives them"), steps
    if "tflops_per_accelerator" not in measures and facts.get("profile_tflops_per_accelerator"):
        measures["tflops_per_accelerator"] = facts["profile_tflops_per_accelerator"]
        notes.append(f"TFLOP/s from the DeepSpeed flops profiler at step "
                     f"{facts.get('profile_step')} (counts recompute)")
    fields = {k: facts[k] for k in RUN_KEYS if facts.get(k) is not None}
    fields.update(measures)
    if "global_batch_tokens" in side.values:
        fields["global_batch_tokens"] = side.values["global_batch_tokens"]
        derived = [d for d in derived if d != "global_batch_tokens"]
    citation = shown + (f" ({side.values['citation']})" if side.values.get("citation") else "")
    fields.update(source=side.values.get("source") or campaign_source(path, logs_dir, cache),
                  citation=citation, source_kind="log", derived=";".join(dict.fromkeys(derived)),
                  provenance=f"{shown}:{red.first_line}-{red.last_line}" + (
                      f" (sidecar {', '.join(side.files)})" if side.files else ""))
    if side.values.get("notes"):
        notes.append(side.values["notes"])
    fields["notes"] = "; ".join(notes)
    fields["_line"] = red.first_line
    fields["_format"] = fmt
    return fields, steps


def _read_guarded(path: Path, logs_dir: Path, s: LogsSettings,
                  cache: dict) -> tuple[Any, dict[str, Any] | None]:
    """``read_one``, with a parser failure turned into a reject that says so: one odd log must
    not stop the stage (the fuzz tests look for such failures; none is known)."""
    try:
        return read_one(path, logs_dir, s, cache)
    except (RecursionError, MemoryError) as exc:
        # Input nested or sized beyond what a parser can hold: this file alone is lost.
        what = "stack" if isinstance(exc, RecursionError) else "memory"
        return ("malformed_row", f"step-log parser ran out of {what} on this file "
                                 f"({type(exc).__name__}): nested too deeply or too large"), None
    except (ValueError, TypeError, IndexError, KeyError, OverflowError) as exc:
        return ("malformed_row", f"step-log parser failed on this file ({type(exc).__name__}: "
                                 f"{cap(str(exc), 200)}); please report it with the log"), None


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


# A worker process's memo of folder listings, sidecars and resolved folders (``read_one``'s
# ``cache``), emptied when the worker starts (``_fresh_worker``).
_WORKER_CACHE: dict = {}


def _fresh_worker() -> None:
    _WORKER_CACHE.clear()


def _batches(order: list[int], sizes: list[int]) -> list[list[int]]:
    """``order`` cut into batches of at most ``BATCH_FILES`` logs and ``BATCH_BYTES`` bytes (a
    large log goes alone)."""
    batches: list[list[int]] = []
    size = 0
    for i in order:
        if not batches or len(batches[-1]) >= BATCH_FILES or size + sizes[i] > BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(i)
        size += sizes[i]
    return batches


def _read_batch(batch: tuple[list[str], Path, LogsSettings, Path | None],
                cache: dict | None = None
                ) -> list[tuple[Any, dict[str, Any] | str | None, str]]:
    """Some logs, in a worker or not: (outcome, step rows, the path as outputs show it) each;
    with ``out`` their rows go to that one file (its name returned in place of each log's
    rows) instead of travelling back. The shown path comes from the reading process's memo of
    folders, so the main process does not work it out again."""
    paths, logs_dir, s, out = batch
    paths = [Path(p) for p in paths]  # texts in the main process (``_log_texts``)
    cache = _WORKER_CACHE if cache is None else cache
    if len(cache) > MEMO_ENTRIES:
        cache.clear()
    outcomes = [_read_guarded(path, logs_dir, s, cache) for path in paths]
    shown = [shown_path(path, folders=cache) for path in paths]
    if out is None:
        return [(result, steps, name) for (result, steps), name in zip(outcomes, shown)]
    rows = [steps for _, steps in outcomes if steps is not None]
    if rows:
        write_steps(rows, out)
    return [(result, None if steps is None else out.name, name)
            for (result, steps), name in zip(outcomes, shown)]


def _read_remote_batch(task: tuple[list[str], RemoteRoot, LogsSettings, Path | None, list[str]]
                       ) -> list[tuple[Any, dict[str, Any] | str | None, str]]:
    """``_read_batch`` for logs under an fsspec URL (``remote``): (logs' paths in the store,
    the root, settings, steps file or None, the sidecars they need) -> the same outcomes, each
    log fetched by the process running the task and shown as its URL."""
    paths, root, s, out, sidecars = task
    with mirrored(root, paths, sidecars) as (local, copies, urls):
        outcomes = urls(_read_batch((copies, local, s, None), {}))
    if out is None:
        return outcomes
    rows = [steps for _, steps, _ in outcomes if isinstance(steps, dict)]
    if rows:
        write_steps(rows, out)
    return [(result, None if steps is None else out.name, shown)
            for result, steps, shown in outcomes]


def read_logs(logs_dir: Path | RemoteRoot, params: dict, steps_dir: Path | None = None,
              paths: list[Path] | None = None) -> tuple[list[Record], pd.DataFrame]:
    """Every log under ``logs_dir`` -> one Record each, and the per-step rows of all logs.

    ``ingest.logs.workers`` (default 1) processes read logs in parallel, one file each at a
    time; the result does not depend on it. Without ``steps_dir`` the rows of all logs come
    back in one DataFrame (``STEP_COLUMNS``; memory grows with the steps). With it, each log's
    rows are written to ``steps_dir/<n>.arrow`` by the process that parsed it, one file per
    batch of logs (see
    ``pipeline.ingest.sources.steplogs.store``), each Record's ``meta["steps_file"]`` names its file
    (rejects' too; absent: the log has no step rows), and the DataFrame returned is empty:
    memory then stays that of the largest log or batch, whatever their number. ``paths`` reads
    those logs only (``scalewall validate``), with sidecars and sources as under ``logs_dir``.
    ``stream_logs`` gives the same Records one by one, as the reading goes.
    """
    records, tables = [], []
    for record, steps in _stream(logs_dir, params, steps_dir, paths, started=False):
        records.append(record)
        if isinstance(steps, dict):
            tables.append((record.path, steps))
    tables.sort(key=lambda pair: pair[0])
    tables = [t for _, t in tables]  # gather frees each as it copies it
    return records, gather(tables)


def stream_logs(logs_dir: Path | RemoteRoot, params: dict, steps_dir: Path) -> Iterator[Record]:
    """``read_logs(logs_dir, params, steps_dir)``'s Records, the same in the same order, yielded
    as the workers finish their batches: the caller's work on each record (the ingest core's)
    overlaps the reading of the logs after it, instead of waiting for the last. The logs are
    found and every batch handed out when this is called, before the first record is asked
    for; a worker's batch that arrives before the logs ahead of it waits (in path order).
    Closing the iterator early stops the workers."""
    stream: Any = _stream(logs_dir, params, steps_dir, None, started=True)
    next(stream)  # runs up to the pool's start: the reading begins now
    return _records_of(stream)


def _records_of(stream: Iterator[Any]) -> Iterator[Record]:
    with contextlib.closing(stream):  # closed with this iterator: the pool stops with it
        for record, _ in stream:
            yield record


def _stream(logs_dir: Path | RemoteRoot, params: dict, steps_dir: Path | None,
            paths: list[Path] | None, started: bool) -> Iterator[Any]:
    """(Record, its step rows, a steps file's name or None) for every log, in path order; with
    ``started``, first one ``None`` once the batches are handed out. ``logs_dir``: a local
    folder, or a root under an fsspec URL (``remote``: listed once per folder, each batch
    fetched by the process that reads it)."""
    s = load_group(params, "ingest.logs")
    workers = s.workers
    remote = logs_dir if isinstance(logs_dir, RemoteRoot) else None
    yamls: dict = {}
    if remote is not None:
        paths, sizes, yamls = remote.list(lambda name: is_log_name(name) or is_listed(name))
        logs_dir = Path(remote.path)
    else:
        logs_dir = Path(logs_dir)
        paths = _log_texts(logs_dir) if paths is None else [str(Path(p)) for p in paths]
        sizes = [_size(p) for p in paths]
    if steps_dir is not None:
        steps_dir = Path(steps_dir)
        steps_dir.mkdir(parents=True, exist_ok=True)
        for old in steps_dir.glob("*.arrow"):
            old.unlink()  # files of an earlier run must not mix with this one's
    parallel = workers > 1 and len(paths) > 1
    # In parallel, large files first, largest first, so no worker is left with a big one while
    # the others idle; small ones follow in path order (``BIG_LOG_BYTES``), in batches (one
    # round trip to a worker and one steps file per batch).
    order = sorted(range(len(paths)), key=lambda i: (
        -sizes[i] if sizes[i] >= BIG_LOG_BYTES else 0, i)) if parallel else range(len(paths))
    batches = _batches(list(order), sizes)
    del order, sizes  # ~70 bytes a log, held while the stream lasts otherwise
    tasks: list[Any] = [([paths[i] for i in b], remote or logs_dir, s,
                         None if steps_dir is None else steps_dir / f"{b[0]:06d}.arrow")
                        for b in batches]
    if remote is not None:  # each batch names the sidecars its logs may read
        tasks = [(*task, remote.sidecars(task[0], yamls)) for task in tasks]
        del yamls
    # Over the stage's executor (pipeline.processes: this machine's pool or a Dask cluster),
    # results in order; an early exit (an error downstream, the iterator closed) cancels the
    # batches nobody will read.
    with stream_in_order(_read_batch if remote is None else _read_remote_batch, tasks,
                         workers if parallel else 1,
                         initializer=_fresh_worker) as done:
        if started:
            yield None
        # Outcomes that came before the logs ahead of them in path order wait here.
        waiting: dict[int, Any] = {}
        folders: dict = {}
        upto = 0
        for batch, results in zip(batches, done):
            waiting.update(zip(batch, results))
            while upto in waiting:
                path, outcome = paths[upto], waiting.pop(upto)
                upto += 1
                yield _record(path, logs_dir, outcome, folders), outcome[1]


def _record(path: str, logs_dir: Path, outcome: tuple[Any, Any, str], folders: dict) -> Record:
    """A worker's outcome for one log -> its Record (a run's fields, or a reject)."""
    result, steps, shown = outcome
    if isinstance(result, dict):
        line, fmt = result.pop("_line"), result.pop("_format")
        meta = {"format": fmt}
        if isinstance(steps, str):
            meta["steps_file"] = steps
        return Record(source=result["source"], path=shown, line=line, fields=result, meta=meta)
    reject = Record.reject(campaign_source(path, logs_dir, folders), shown, 0, shown, *result)
    if isinstance(steps, str):  # a rejected log's rows are kept too, as in memory
        reject = replace(reject, meta={"steps_file": steps})
    return reject
