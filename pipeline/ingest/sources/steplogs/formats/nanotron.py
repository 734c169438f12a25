"""nanotron step lines and config dump.

Source of the format: ``src/nanotron/trainer.py``, ``DistributedTrainer.train_step_logs()``
(huggingface/nanotron, 2024-2025), which hands ``LogItem``s to ``LoggerWriter.
add_scalars_from_list`` in ``src/nanotron/logging/base.py`` (earlier ``src/nanotron/logging.py``):
``iteration: {step} / {total} | consumed_tokens: 1.31M | elapsed_time_per_iteration_ms: 1.23K |
tokens_per_sec: 106K | tokens_per_sec_per_gpu: 13.3K | global_batch_size: 64 | lm_loss: 10.4 |
lr: 0.0003 | model_tflops_per_gpu: 123 | hardware_tflops_per_gpu: 125 | grad_norm: 5.12``.
The current trainer formats every value with ``human_format`` (3 significant digits and a
K/M/B/T suffix, so ``1234.5`` ms prints ``1.23K``: the figures read here carry that rounding);
older trainers (and forks) print ``.1f`` / ``1.6E`` / ``.2f`` numbers, read the same way. The
logger prefix is ``%m/%d %H:%M:%S [INFO|DP=0|PP=0|TP=0]: ``, dimmed with ANSI codes (older:
``[%m%d %H:%M:%S|DP=0|...]: ``); it has no year, so the wall clock only serves differences.
Config facts from the ``Config(...)`` dump logged at start-up: ``dp=, tp=, pp=,
expert_parallel_size=, context_parallel_size=`` (``ParallelismArgs``), ``hidden_size=``,
``num_hidden_layers=`` (model config), ``sequence_length=`` (``TokensArgs``).

Read: step = iteration; ``step_time_s`` = elapsed ms / 1000; ``tokens_per_s`` (whole job:
``global_batch_size * sequence_length / step time``); ``tflops_per_accelerator`` =
model_tflops_per_gpu; ``loss`` = lm_loss; ``batch_samples`` = global_batch_size.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np

from pipeline.ingest.sources.steplogs.base import (
    NAN, ParseState, human_float, rank_of, regex_lines, sole_match,
)
from pipeline.ingest.sources.steplogs.bulk import StepParser, human_col, int_col, transpose

NAME = "nanotron"
# ``\biteration: ...`` written literal first (the same matches; see megatron._STEP_RE).
_STEP_RE = re.compile(r"iteration(?<=\biteration): (\d+) / (\d+)")
_STAMP_RE = re.compile(r"(\d\d)/?(\d\d) (\d\d):(\d\d):(\d\d)")
_CFG_RE = re.compile(r"\b(dp|tp|pp|expert_parallel_size|context_parallel_size|hidden_size|"
                     r"num_hidden_layers|sequence_length)=(\d+)")
MARKER = "elapsed_time_per_iteration_ms"
# The current layout in one pattern, for the bulk path; other lines go one by one.
_FAST_RE = re.compile(
    r"^(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d) \[[A-Z]+[^\]\n]*\]: iteration: (\d+) / \d+ \| "
    r"consumed_tokens: [^ |\n]+ \| elapsed_time_per_iteration_ms: ([^ |\n]+) \| tokens_per_sec: "
    r"([^ |\n]+) \| tokens_per_sec_per_gpu: ([^ |\n]+) \| global_batch_size: ([^ |\n]+) \| "
    r"lm_loss: ([^ |\n]+) \| lr: [^ |\n]+ \| model_tflops_per_gpu: ([^ |\n]+) \|([^\n]*)$",
    re.MULTILINE)
_CFG_KEYS = {"dp": "dp", "tp": "tp", "pp": "pp", "expert_parallel_size": "ep",
             "context_parallel_size": "cp", "hidden_size": "d_model",
             "num_hidden_layers": "n_layers", "sequence_length": "seq_len"}


def detect(sample: str) -> int:
    """Number of nanotron step lines in ``sample``."""
    if MARKER not in sample:  # a counted line holds it: no scan of another format's log
        return 0
    return sum(1 for m in _STEP_RE.finditer(sample)
               if MARKER in sample[m.end():m.end() + 200])


def _stamp_s(text: str, end: int) -> float:
    m = _STAMP_RE.search(text, 0, end)
    if not m:
        return NAN
    mo, d, h, mi, s = (int(g) for g in m.groups())
    # Month lengths are irrelevant to step differences within a month; across a month end
    # the difference is flagged as a clock jump and ignored, never trusted.
    return (((mo * 31 + d) * 24 + h) * 60 + mi) * 60.0 + s


class Parser(StepParser):
    """Feeds nanotron lines into a ``ParseState``."""

    # Current releases dim the logger prefix with ANSI codes.
    FAST_RE, MARKER, COUNTER, STRIP_ANSI = _FAST_RE, MARKER, "iteration:", True

    def __init__(self, state: ParseState) -> None:
        super().__init__(state)
        self.header = True

    def feed_chunk(self, text: str, first_lineno: int, header: bool) -> None:
        """Parse a chunk of whole lines starting at line ``first_lineno``."""
        if header and self.header:
            end = text.find(MARKER)
            for lineno, m in regex_lines(text, _CFG_RE, first_lineno, 0,
                                         end if end >= 0 else None):
                self.state.fact(_CFG_KEYS[m.group(1)], int(m.group(2)), lineno)
        if self.feed_steps(text, first_lineno):
            self.header = False

    def _bulk(self, rows: list[tuple[str, ...]], linenos: Sequence[int]) -> bool:
        mo, d, h, mi, sec, step, ms, tps, tps_gpu, gbs, loss, tflops, _ = transpose(rows)
        loss_f = human_col(loss)
        # Whole minutes are exact in int64; one float step after, as the per-line path does.
        minutes = ((int_col(mo) * 31 + int_col(d)) * 24 + int_col(h)) * 60 + int_col(mi)
        wall = minutes * 60.0 + int_col(sec)
        self.state.extend(int_col(step), linenos, np.full(len(rows), -1, dtype=np.int32),
                          ~np.isfinite(loss_f), step_time_s=human_col(ms) / 1000.0,
                          loss=loss_f, tokens_per_s=human_col(tps),
                          tokens_per_s_per_accelerator=human_col(tps_gpu),
                          tflops_per_accelerator=human_col(tflops),
                          batch_samples=human_col(gbs), wall_s=wall)
        return True

    def _step(self, text: str, lineno: int) -> None:
        st = self.state
        if (m := sole_match(_STEP_RE, text, st.counts)) is None:
            return
        fields: dict[str, float] = {}
        for part in text[m.end():].split("|"):
            key, sep, value = part.partition(":")
            if sep:
                fields[key.strip()] = human_float(value)
        ms = fields.get("elapsed_time_per_iteration_ms", NAN)
        if not ms > 0:
            st.counts["unparsed_step_lines"] += 1
            return
        loss = fields.get("lm_loss", NAN)
        st.add(int(m.group(1)), lineno, rank_of(text),
               nan_loss="lm_loss" in fields and not math.isfinite(loss),
               step_time_s=ms / 1000.0, loss=loss,
               tokens_per_s=fields.get("tokens_per_sec", NAN),
               tokens_per_s_per_accelerator=fields.get("tokens_per_sec_per_gpu", NAN),
               tflops_per_accelerator=fields.get("model_tflops_per_gpu", NAN),
               batch_samples=fields.get("global_batch_size", NAN),
               wall_s=_stamp_s(text, m.start()))

    def finish(self) -> None:
        """Nothing is pending at the end of a nanotron log."""
