"""Hugging Face ``transformers.Trainer`` logs.

Source of the format (huggingface/transformers 4.x):
``src/transformers/trainer_callback.py``, ``ProgressCallback.on_log()``, writes each logs dict
with ``self.training_bar.write(str(logs))`` (a Python dict repr; some releases format floats as
strings, and ``trainer_state.json``-style JSON dicts are accepted too). Per logging step:
``{'loss': 2.345, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.01}``; at the end the
``speed_metrics("train", ...)`` of ``src/transformers/trainer_utils.py``:
``{'train_runtime': 1234.5, 'train_samples_per_second': 41.47, 'train_steps_per_second': 0.324,
'train_loss': 2.12, 'epoch': 1.0}`` (``train_tokens_per_second``, tokens per second *per device*,
with ``--include_tokens_per_second``). ``Trainer._inner_training_loop`` prints the set-up block
``Total train batch size (w. parallel, distributed & accumulation) = 64``, ``Total optimization
steps = 100`` and ``Number of trainable parameters = 124,439,808``. Example scripts (``run_clm.py``
and most fine-tuning recipes) then call ``Trainer.log_metrics("train", metrics)``
(``src/transformers/trainer_pt_utils.py``), which prints the same summary as a block: a
``***** train metrics *****`` line, then one ``  {key:<w} = {value:>w}`` line per metric, values
through ``metrics_format``: runtimes as ``H:MM:SS.cc`` (``_secs2timedelta``), floats rounded to 4
digits, ``total_flos`` in ``GF``. Logs that keep only the logger's output (``logging.info``) hold
the block and not the dict; either gives the summary, and where both are printed the dict's
unrounded values are kept.

The Trainer prints no per-step time: the run's measure is its end-of-training summary, a
whole-run average that includes warm-up (said in the run's notes). Loss dicts become step rows
numbered in order (or by their ``step`` key when present).
"""

from __future__ import annotations

import ast
import json
import math
import re
from typing import TYPE_CHECKING, Any

from pipeline.ingest.sources.steplogs.sidecar import SidecarError
from pipeline.ingest.sources.steplogs.base import NAN, ParseState, lines_with, rank_of, to_float

if TYPE_CHECKING:
    from pipeline.config import LogsSettings

NAME = "hf_trainer"
# How a complete step line ends (a logged dict ends with its closing brace): a last line without a newline that
# ends so is kept (reader._complete).
LINE_END_RE = re.compile(r"\}\s*$")
_BATCH_RE = re.compile(r"Total train batch size \(.*?\) = ([\d,]+)")
_STEPS_RE = re.compile(r"Total optimization steps = ([\d,]+)")
_PARAMS_RE = re.compile(r"Number of trainable parameters = ([\d,]+)")
_DICT_MARKERS = ("'loss': ", '"loss": ', "train_samples_per_second")
BLOCK_MARKER = "***** train metrics *****"
# One line of the block: ``  train_runtime            = 0:00:27.21`` (after any logger prefix).
# Runtimes of a day or more print as ``1 day, 2:03:04.50``, so a value may hold spaces.
_BLOCK_LINE_RE = re.compile(r"(?:^|\s)([a-z][a-z0-9_]*)\s+=\s+(\S(?:.*\S)?)\s*$")
_RUNTIME_RE = re.compile(r"^(?:(\d+) days?, )?(\d+):(\d\d):(\d\d(?:\.\d+)?)$")
_SETUP_MARKERS = ("Total train batch size", "Total optimization steps",
                  "Number of trainable parameters")
# A tqdm bar as the Trainer's ProgressCallback draws it (tqdm's ``format_meter``):
# ``100%|##########| 950/950 [27:00<00:00,  1.28s/it]`` or ``[2:25:52<00:00,  1.04it/s]``.
_BAR_RE = re.compile(r"\b(\d+)/(\d+) \[(?:(\d+):)?(\d+):(\d\d)<")
SUMMARY_KEYS = ("train_runtime", "train_samples_per_second", "train_steps_per_second",
                "train_tokens_per_second")


def _dict_of(text: str) -> dict | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    body = text[start:end + 1]
    for load in (ast.literal_eval, json.loads):
        try:
            value = load(body)
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            continue
        return value if isinstance(value, dict) else None
    return None


def _num(value: object) -> float:
    if isinstance(value, bool):
        return NAN
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return to_float(value)
    return NAN


def detect(sample: str) -> int:
    """Number of Trainer log dicts and summary blocks in ``sample``."""
    if "train_samples_per_second" not in sample and BLOCK_MARKER not in sample \
            and "loss" not in sample:  # every counted item holds one of them
        return 0
    return (sample.count("'train_samples_per_second'") + sample.count('"train_samples_per_second"')
            + sample.count(BLOCK_MARKER) + len(re.findall(r"\{['\"]loss['\"]: ", sample)))


def runtime_s(text: str) -> float:
    """Seconds of a block value: ``0:00:27.21``, ``1 day, 2:03:04.50`` (``_secs2timedelta``) or a
    plain number; NaN otherwise."""
    m = _RUNTIME_RE.match(text.strip())
    if m is None:
        return to_float(text)
    days, hours, minutes, seconds = m.groups()
    return (int(days or 0) * 86400 + int(hours) * 3600 + int(minutes) * 60 + float(seconds))


def _step_time(f: dict[str, Any]) -> tuple[float | None, float | None, str]:
    """(seconds a step, steps, how) from the summary, in order: ``train_steps_per_second``
    (4.9 and later); ``train_runtime`` over the optimization steps (the set-up block's ``Total
    optimization steps``, else the finished progress bar's total: releases 4.0-4.8 print no
    steps/s); the finished bar's elapsed time over its steps (a log without the summary's
    runtime). None where none of them is in the log."""
    steps_per_s, runtime = f.get("train_steps_per_second"), f.get("train_runtime")
    steps = f.get("total_steps") or f.get("bar_total")
    if steps_per_s and runtime:
        return 1.0 / steps_per_s, steps_per_s * runtime, "train_steps_per_second"
    if runtime and steps:
        return runtime / steps, steps, ("train_runtime / Total optimization steps"
                                        if f.get("total_steps") else
                                        "train_runtime / the progress bar's steps")
    if f.get("bar_elapsed_s") and f.get("bar_total"):
        return (f["bar_elapsed_s"] / f["bar_total"], f["bar_total"],
                "the finished progress bar's elapsed time / its steps")
    return None, None, ""


def summary_measures(state: ParseState, facts: dict[str, Any],
                     s: LogsSettings) -> tuple[dict[str, float], list[str], str]:
    """The run measures of a Trainer log from its end-of-training summary: (measures,
    derived columns, note). The step time as ``_step_time`` finds it; tokens/s from
    ``train_samples_per_second`` x the sequence length (the sidecar's: the Trainer prints
    none), else ``train_tokens_per_second`` x N."""
    f = state.facts
    step_time, n_steps, how = _step_time(f)
    seq, n = facts.get("seq_len"), facts.get("n_accelerators")
    has_tokens = bool((seq and f.get("train_samples_per_second"))
                      or (n and f.get("train_tokens_per_second")))
    if step_time is None and not has_tokens:
        raise SidecarError("truncated_log", "no training summary: neither the end-of-training "
                           "dict ({'train_runtime': ...}) nor the '***** train metrics *****' "
                           "block with train_runtime and train_steps_per_second (or the total "
                           "optimization steps, or a finished progress bar) was found"
                           + ("; train_samples_per_second is printed: give seq_len in the "
                              "sidecar to read tokens/s from it"
                              if f.get("train_samples_per_second") else ""))
    if n_steps is not None and n_steps < s.min_steady_steps:
        raise SidecarError("too_few_steps", f"{n_steps:.0f} steps < min_steady_steps "
                                            f"{s.min_steady_steps}")
    out, derived = {}, []
    if step_time is not None:
        out["step_time_s"] = step_time
        derived.append("step_time_s")
    if seq and f.get("train_samples_per_second"):
        out["tokens_per_s"] = f["train_samples_per_second"] * seq
        derived.append("tokens_per_s")
    elif n and f.get("train_tokens_per_second"):
        out["tokens_per_s"] = f["train_tokens_per_second"] * n
        derived.append("tokens_per_s")
    if seq and facts.get("batch_samples"):
        out["global_batch_tokens"] = facts["batch_samples"] * seq
        derived.append("global_batch_tokens")
    runtime = f.get("train_runtime") or f.get("bar_elapsed_s")
    return out, derived, ("whole-run average from the Trainer summary, warm-up included ("
                          + ", ".join(x for x in (f"{n_steps:.0f} steps" if n_steps else "",
                                                  f"{runtime:g} s" if runtime else "",
                                                  f"step time from {how}" if how else "")
                                      if x) + ")")


class Parser:
    """Feeds Trainer lines into a ``ParseState``; the summary lands in ``state.facts``."""

    def __init__(self, state: ParseState) -> None:
        self.state = state
        self.n_loss = 0
        self.block: dict[str, tuple[float, int]] = {}
        self.in_block = False  # a block cut by a chunk boundary goes on in the next chunk

    def feed_chunk(self, text: str, first_lineno: int, header: bool) -> None:
        """Parse a chunk of whole lines starting at line ``first_lineno``."""
        counts = self.state.counts
        found: dict[int, str] = {}
        for marker in _DICT_MARKERS:
            for lineno, line in lines_with(text, marker, first_lineno, counts):
                if "{" in line:  # the block's ``train_samples_per_second = ...`` is no dict
                    found[lineno] = line
        for lineno in sorted(found):
            self._dict(found[lineno], lineno)
        if self.in_block or BLOCK_MARKER in text:
            self._blocks(text, first_lineno)
        if "/it]" in text or "it/s]" in text:
            self._bars(text, first_lineno)
        if header:
            for marker in _SETUP_MARKERS:
                for lineno, line in lines_with(text, marker, first_lineno):
                    self._setup(line, lineno)

    def _setup(self, text: str, lineno: int) -> None:
        if m := _BATCH_RE.search(text):
            self.state.fact("batch_samples", int(m.group(1).replace(",", "")), lineno)
        elif m := _STEPS_RE.search(text):
            self.state.fact("total_steps", int(m.group(1).replace(",", "")), lineno)
        elif m := _PARAMS_RE.search(text):
            self.state.fact("params_b", int(m.group(1).replace(",", "")) / 1e9, lineno)

    def _dict(self, text: str, lineno: int) -> None:
        st = self.state
        if text.count("{") > 1 and text.count("}") > 1 and text.rfind("{") > text.find("}"):
            st.counts["garbled_step_lines"] += 1
            return
        logs = _dict_of(text)
        if logs is None:
            st.counts["unparsed_step_lines"] += 1
            return
        if "train_samples_per_second" in logs:
            for key in SUMMARY_KEYS:
                value = _num(logs.get(key))
                if math.isfinite(value):
                    st.fact(key, value, lineno)
        elif "loss" in logs:
            self.n_loss += 1
            loss = _num(logs["loss"])
            step = logs.get("step")
            st.add(int(step) if isinstance(step, (int, float)) and not isinstance(step, bool)
                   and math.isfinite(step) else self.n_loss,
                   lineno, rank_of(text), nan_loss=not math.isfinite(loss), loss=loss)

    def _blocks(self, text: str, first_lineno: int) -> None:
        """Read the ``***** train metrics *****`` block(s) of a chunk into ``self.block``."""
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()  # the chunk ends at a line end: an open block goes on in the next one
        for i, line in enumerate(lines):
            if BLOCK_MARKER in line:
                self.in_block = True
                continue
            if not self.in_block:
                continue
            m = _BLOCK_LINE_RE.search(line)
            if m is None:
                self.in_block = False
                continue
            key, value = m.groups()
            if key in SUMMARY_KEYS:
                number = runtime_s(value) if key.endswith("_runtime") else to_float(value)
                if math.isfinite(number):
                    self.block[key] = (number, first_lineno + i)

    def _bars(self, text: str, first_lineno: int) -> None:
        """The last finished training bar (n == total): its steps and elapsed seconds. An
        evaluation bar that finishes later counts too only if it is longer (the training bar
        holds the most steps)."""
        for m in _BAR_RE.finditer(text):
            done, total = int(m.group(1)), int(m.group(2))
            if done != total or total < self.state.facts.get("bar_total", 0):
                continue
            hours, minutes, seconds = (int(g or 0) for g in m.group(3, 4, 5))
            lineno = first_lineno + text.count("\n", 0, m.start())
            self.state.facts["bar_total"] = float(total)
            self.state.facts["bar_elapsed_s"] = float(hours * 3600 + minutes * 60 + seconds)
            self.state.fact_lines["bar_total"] = lineno

    def finish(self) -> None:
        """The block's values fill what no summary dict gave (the dict is unrounded)."""
        for key, (value, lineno) in self.block.items():
            if key not in self.state.facts:
                self.state.fact(key, value, lineno)
