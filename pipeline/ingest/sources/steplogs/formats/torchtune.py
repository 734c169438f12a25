"""torchtune recipe logs (the metric logger's step lines).

Source of the format: ``torchtune/training/metric_logging.py`` (meta-pytorch/torchtune,
2024-2025; earlier ``torchtune/utils/metric_logging.py``): ``StdoutLogger.log_dict()`` and
``DiskLogger.log_dict()`` both write ``f"Step {step} | "`` followed by ``f"{name}:{data} "``
for each metric the recipe logs (``recipes/full_finetune_*.py``, ``lora_finetune_*.py``):
``loss``, ``lr``, ``tokens_per_second_per_gpu`` (tokens of the step over its time, per device)
and, with ``log_peak_memory_stats``, ``peak_memory_active`` and friends. The recipe states its
precision at start-up: ``Model is initialized with precision torch.bfloat16.``
(meta-pytorch/torchtune#1358 shows both).

Read: step; ``loss``; ``tokens_per_s_per_accelerator`` = tokens_per_second_per_gpu. No step
time is printed: the run's measure is tokens/s per device (x N for the whole job).
"""

from __future__ import annotations

import math
import re

from pipeline.ingest.sources.steplogs.base import (
    NAN, NUM, ParseState, lines_with, rank_of, regex_lines, sole_match, to_float,
)

NAME = "torchtune"
MARKER = " | loss:"
_STEP_RE = re.compile(r"\bStep (\d+) \| loss:")
_FIELD_RE = re.compile(r"(\w+):(" + NUM + r")(?=\s|$)")
_PRECISION_RE = re.compile(r"Model is initialized with precision torch\.(bfloat16|float16|"
                           r"float32)")
_PRECISIONS = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def detect(sample: str) -> int:
    """Number of torchtune step lines in ``sample``."""
    if MARKER not in sample:
        return 0
    return len(_STEP_RE.findall(sample))


class Parser:
    """Feeds torchtune lines into a ``ParseState``."""

    def __init__(self, state: ParseState) -> None:
        self.state = state

    def feed_chunk(self, text: str, first_lineno: int, header: bool) -> None:
        """Parse a chunk of whole lines starting at line ``first_lineno``."""
        st = self.state
        if header:
            for lineno, m in regex_lines(text, _PRECISION_RE, first_lineno):
                st.fact("precision", _PRECISIONS[m.group(1)], lineno)
        for lineno, line in lines_with(text, MARKER, first_lineno, st.counts):
            if (m := sole_match(_STEP_RE, line, st.counts)) is None:
                continue
            fields = {k: to_float(v) for k, v in _FIELD_RE.findall(line, m.end() - 5)}
            tps = fields.get("tokens_per_second_per_gpu", NAN)
            loss = fields.get("loss", NAN)
            st.add(int(m.group(1)), lineno, rank_of(line),
                   nan_loss="loss" in fields and not math.isfinite(loss), loss=loss,
                   tokens_per_s_per_accelerator=tps)

    def finish(self) -> None:
        """Nothing is pending at the end of a torchtune log."""
