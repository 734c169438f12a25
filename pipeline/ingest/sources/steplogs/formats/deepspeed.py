"""DeepSpeed throughput-timer lines, flops-profiler summary and config dump.

Sources of the format (deepspeedai/DeepSpeed master as of 2025; the profiler summary and the
timer message read the same in the older copies and forks checked):
- ``deepspeed/utils/timer.py``, ``ThroughputTimer.stop()``: every ``steps_per_print`` optimizer
  steps, ``epoch={}/micro_step={}/global_step={}, RunningAvgSamplesPerSec={}, CurrSamplesPerSec={},
  MemAllocated={}GB, MaxMemAllocated={}GB`` through the ``[%(asctime)s] [%(levelname)s]
  [%(filename)s:%(lineno)d:%(funcName)s]`` formatter of ``deepspeed/utils/logging.py``. The
  engine builds the timer with ``batch_size=train_batch_size()``, the global batch, so
  ``CurrSamplesPerSec`` is whole-job samples per second over that optimizer step. Releases
  0.7-0.8 (2022) print ``{epoch}/{step}, RunningAvgSamplesPerSec={}, CurrSamplesPerSec={}, ...``
  (deepspeedai/DeepSpeed#2629 shows 0.7.7's); before 0.6 (2021-22), ``{epoch}/{step},
  SamplesPerSec={}`` alone, the running average since the start (deepspeedai/DeepSpeed#1825).
- ``deepspeed/profiling/flops_profiler/profiler.py``, ``print_model_profile()``: a block headed
  ``DeepSpeed Flops Profiler`` / ``Profile Summary at step {k}:`` with ``world size:``,
  ``FLOPS per GPU = 3 * fwd flops per GPU / iter latency:  {x} TFLOPS``, ``iter latency:`` and
  ``samples/second:``. It counts the FLOPs that ran (recompute included), so its TFLOPS is
  passed on as printed, with a note; it is one profiled step, not a series.
- ``deepspeed/runtime/config.py``, ``DeepSpeedConfig.print()``: ``  {name} {dots} {value}``
  lines (``train_batch_size``, ``train_micro_batch_size_per_gpu``, ``world_size``,
  ``zero_optimization_stage``, ``bfloat16_enabled``, ``fp16_enabled``).

Read: step = global_step; ``samples_per_s`` = CurrSamplesPerSec; wall clock from the stamp.
The reduction turns samples/s into step time with the global batch and into tokens/s with
the sequence length (from the sidecar: DeepSpeed does not know it).
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from pipeline.ingest.sources.steplogs.base import (
    NAN, NUM, ParseState, int_or_none, iso_seconds, iso_seconds_many, lines_with, rank_of,
    regex_lines, to_float,
)
from pipeline.ingest.sources.steplogs.bulk import StepParser, float_col, int_col, rank_col, transpose

NAME = "deepspeed"
# How a complete step line ends (the throughput-timer line ends with the memory high-water mark): a last line without a newline that
# ends so is kept (reader._complete).
LINE_END_RE = re.compile(r"MaxMemAllocated=[\d.]+GB\s*$")
_TPUT_RE = re.compile(r"global_step=(\d+),.*?\bCurrSamplesPerSec=(" + NUM + r")")
# The throughput-timer line in one pattern, for the bulk path; other lines go one by one.
_FAST_RE = re.compile(
    r"^(?:\[(?:rank|default)(\d+)\]:|(\d+): )?\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] "
    r"\[INFO\] \[[^\]\n]*\] epoch=\d+/micro_step=\d+/global_step=(\d+), "
    r"RunningAvgSamplesPerSec=[^,\n]*, CurrSamplesPerSec=([^,\s]+),([^\n]*)$", re.MULTILINE)
_OLD_TPUT_RE = re.compile(r"\b(\d+)/(\d+), (?:RunningAvgSamplesPerSec=" + NUM
                          + r", Curr)?SamplesPerSec=(" + NUM + r")")
_STAMP_RE = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")
_CFG_RE = re.compile(r"\]\s+([a-z_][a-z0-9_]*) \.*\s*(\S.*?)\s*$")
_PROFILE_RE = re.compile(r"^(world size|iter latency|samples/second|"
                         r"FLOPS per GPU = 3 \* fwd flops per GPU / iter latency):[ \t]+(\S+)"
                         r"(?:[ \t]+([A-Za-z]+))?", re.IGNORECASE | re.MULTILINE)
_PROFILE_STEP_RE = re.compile(r"Profile Summary at step (\d+)")
_FLOPS_UNIT = {"PFLOPS": 1e3, "TFLOPS": 1.0, "GFLOPS": 1e-3, "MFLOPS": 1e-6}
_CFG_KEYS = {"train_batch_size": "batch_samples", "train_micro_batch_size_per_gpu": "micro_batch",
             "world_size": "n_accelerators", "zero_optimization_stage": "zero_stage"}


def detect(sample: str) -> int:
    """Number of DeepSpeed throughput lines and profiler summaries in ``sample``."""
    if "SamplesPerSec=" not in sample:  # both throughput patterns hold it: skip their scans
        return sample.count("DeepSpeed Flops Profiler")
    return (len(_TPUT_RE.findall(sample)) + len(_OLD_TPUT_RE.findall(sample))
            + sample.count("DeepSpeed Flops Profiler"))


class Parser(StepParser):
    """Feeds DeepSpeed lines into a ``ParseState``."""

    FAST_RE, MARKER, COUNTER = _FAST_RE, "SamplesPerSec=", "global_step="
    # A timer line also prints RunningAvgSamplesPerSec=: the dense check counts the field
    # each line holds once (older releases print SamplesPerSec= alone).
    DENSE_MARKER = "CurrSamplesPerSec="

    def __init__(self, state: ParseState) -> None:
        super().__init__(state)
        self.profile_step: int | None = None

    def feed_chunk(self, text: str, first_lineno: int, header: bool) -> None:
        """Parse a chunk of whole lines starting at line ``first_lineno``."""
        self.feed_steps(text, first_lineno)
        if header:
            for lineno, line in lines_with(text, "....", first_lineno):
                if m := _CFG_RE.search(line):
                    self._cfg(m.group(1), m.group(2), lineno)
        start = text.find("Profile Summary at step")
        while start >= 0:
            first = first_lineno + text.count("\n", 0, start)
            end = text.find("\n\n", start)
            block = text[start:end if end >= 0 else start + 16384]
            self.profile_step = int(_PROFILE_STEP_RE.match(block).group(1)) \
                if _PROFILE_STEP_RE.match(block) else None
            for lineno, m in regex_lines(block, _PROFILE_RE, first):
                self._profile(m.group(1).lower(), m.group(2), m.group(3), lineno)
            start = text.find("Profile Summary at step", start + 1)

    def _bulk(self, rows: list[tuple[str, ...]], linenos: Sequence[int]) -> bool:
        r1, r2, stamp, step, sps, _ = transpose(rows)
        self.state.extend(int_col(step), linenos, rank_col(r1, r2),
                          np.zeros(len(rows), dtype=bool), samples_per_s=float_col(sps),
                          wall_s=iso_seconds_many(stamp))
        return True

    def _cfg(self, key: str, value: str, lineno: int) -> None:
        if key in _CFG_KEYS:
            self.state.fact(_CFG_KEYS[key], int_or_none(value), lineno)
        elif key == "bfloat16_enabled" and value == "True":
            self.state.fact("precision", "bf16", lineno)
        elif key == "fp16_enabled" and value == "True":
            self.state.fact("precision", "fp16", lineno)

    def _profile(self, key: str, value: str, unit: str | None, lineno: int) -> None:
        st = self.state
        if key == "world size":
            st.fact("n_accelerators", int_or_none(value), lineno)
        elif key.startswith("flops per gpu"):
            scale = _FLOPS_UNIT.get((unit or "").upper())
            if scale is not None:
                st.fact("profile_tflops_per_accelerator", to_float(value) * scale, lineno)
                st.fact("profile_step", self.profile_step, lineno)

    def _step(self, text: str, lineno: int) -> None:
        st = self.state
        m = _TPUT_RE.search(text)
        if m:
            if text.count("global_step=") != 1:
                st.counts["garbled_step_lines"] += 1
                return
            step, sps = int(m.group(1)), to_float(m.group(2))
        elif m := _OLD_TPUT_RE.search(text):
            step, sps = int(m.group(2)), to_float(m.group(3))
        else:
            st.counts["unparsed_step_lines"] += 1
            return
        stamp = _STAMP_RE.search(text)
        st.add(step, lineno, rank_of(text), samples_per_s=sps,
               wall_s=iso_seconds(stamp.group(1)) if stamp else NAN)

    def finish(self) -> None:
        """Nothing is pending at the end of a DeepSpeed log."""
