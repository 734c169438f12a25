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


def summary_measures(state: ParseState, facts: dict[str, Any],
                     s: LogsSettings) -> tuple[dict[str, float], list[str], str]:
    """The run measures of a Trainer log from its end-of-training summary: (measures,
    derived columns, note)."""
    f = state.facts
    steps_per_s, runtime = f.get("train_steps_per_second"), f.get("train_runtime")
    if not steps_per_s or not runtime:
        raise SidecarError("truncated_log", "no training summary: neither the end-of-training "
                           "dict ({'train_runtime': ...}) nor the '***** train metrics *****' "
                           "block with train_runtime and train_steps_per_second was found")
    n_steps = steps_per_s * runtime
    if n_steps < s.min_steady_steps:
        raise SidecarError("too_few_steps", f"{n_steps:.0f} steps < min_steady_steps "
                                            f"{s.min_steady_steps}")
    out = {"step_time_s": 1.0 / steps_per_s}
    derived = ["step_time_s"]
    seq, n = facts.get("seq_len"), facts.get("n_accelerators")
    if seq and f.get("train_samples_per_second"):
        out["tokens_per_s"] = f["train_samples_per_second"] * seq
        derived.append("tokens_per_s")
    elif n and f.get("train_tokens_per_second"):
        out["tokens_per_s"] = f["train_tokens_per_second"] * n
        derived.append("tokens_per_s")
    if seq and facts.get("batch_samples"):
        out["global_batch_tokens"] = facts["batch_samples"] * seq
        derived.append("global_batch_tokens")
    return out, derived, (f"whole-run average from the Trainer summary, warm-up included "
                          f"({n_steps:.0f} steps, {runtime:g} s)")


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

    def finish(self) -> None:
        """The block's values fill what no summary dict gave (the dict is unrounded)."""
        for key, (value, lineno) in self.block.items():
            if key not in self.state.facts:
                self.state.fact(key, value, lineno)
