"""MosaicML Composer console logs (llm-foundry's ``train.py`` runs through Composer).

Source of the format: ``composer/loggers/console_logger.py`` (mosaicml/composer, 2023-2025),
``ConsoleLogger.log_to_console()``: a progress header, ``[batch={b}/{total}]:`` (or
``[epoch={e}][batch={b}/{total}]:``, ``[token={t}/{total}]:`` when the duration is in tokens),
then one ``\\n\\t Train {name}: {value}`` line per metric logged since the last print
(``format_log_data_value``: floats with four decimals). The metrics read here come from the
``SpeedMonitor`` callback (``composer/callbacks/speed_monitor.py``): ``throughput/
batches_per_sec``, ``throughput/tokens_per_sec`` (whole job), ``throughput/device/
tokens_per_sec`` and ``throughput/device/mfu``, each an average over its window of recent
batches (100 by default, so the first blocks print none); ``time/batch`` numbers the batch and
``loss/train/total`` is the loss. The start-up ``Config:`` dump (``yaml.dump`` of the
hyper-parameters) gives ``num_nodes`` x ``num_gpus_per_node``, ``max_seq_len`` and
``global_train_batch_size`` where llm-foundry logs them.

Read: step = time/batch (else the header's batch); ``step_time_s`` = 1 / batches_per_sec;
``tokens_per_s``; ``tokens_per_s_per_accelerator``; ``mfu``; ``loss``.
"""

from __future__ import annotations

import math
import re

from pipeline.ingest.sources.steplogs.base import NAN, NUM, ParseState, regex_lines, to_float

NAME = "composer"
_HEADER_RE = re.compile(r"^(?:\[epoch=\d+\])?\[(batch|token|sample)=(\d+)(?:/\d+)?\]:",
                        re.MULTILINE)
_METRIC_RE = re.compile(r"^\s+Train ([\w./-]+): (" + NUM + r")\s*$", re.MULTILINE)
_CONFIG_RE = re.compile(r"^(num_nodes|num_gpus_per_node|max_seq_len|global_train_batch_size): "
                        r"(\d+)\s*$", re.MULTILINE)
_WANTED = {"time/batch": "step", "throughput/batches_per_sec": "batches_per_sec",
           "throughput/tokens_per_sec": "tokens_per_s",
           "throughput/device/tokens_per_sec": "tokens_per_s_per_accelerator",
           "throughput/device/mfu": "mfu", "loss/train/total": "loss"}


def detect(sample: str) -> int:
    """Number of Composer training blocks (a header followed by ``Train`` lines)."""
    if "\t Train " not in sample and "  Train " not in sample:
        return 0
    return sum(1 for m in _HEADER_RE.finditer(sample)
               if "Train " in sample[m.end():m.end() + 200])


class Parser:
    """Feeds Composer blocks into a ``ParseState``; a block cut by a chunk boundary goes on in
    the next chunk (the open block is kept until the next header or the end)."""

    def __init__(self, state: ParseState) -> None:
        self.state = state
        self.block: dict[str, float] | None = None
        self.block_line = 0
        self.config: dict[str, int] = {}

    def feed_chunk(self, text: str, first_lineno: int, header: bool) -> None:
        """Parse a chunk of whole lines starting at line ``first_lineno``."""
        if header:
            for lineno, m in regex_lines(text, _CONFIG_RE, first_lineno):
                self.config.setdefault(m.group(1), int(m.group(2)))
        events = [(m.start(), "h", m, ln) for ln, m in regex_lines(text, _HEADER_RE,
                                                                   first_lineno)]
        events += [(m.start(), "m", m, ln) for ln, m in regex_lines(text, _METRIC_RE,
                                                                    first_lineno)]
        for _, kind, m, lineno in sorted(events, key=lambda e: e[0]):
            if kind == "h":
                self._close()
                self.block = {"header_step": float(m.group(2))} if m.group(1) == "batch" \
                    else {}
                self.block_line = lineno
            elif self.block is not None and m.group(1) in _WANTED:
                self.block[_WANTED[m.group(1)]] = to_float(m.group(2))

    def _close(self) -> None:
        block, self.block = self.block, None
        if not block:
            return
        step = block.get("step", block.get("header_step", NAN))
        if not math.isfinite(step):
            self.state.counts["unparsed_step_lines"] += 1
            return
        per_s = block.get("batches_per_sec", NAN)
        loss = block.get("loss", NAN)
        self.state.add(int(step), self.block_line, -1,
                       nan_loss="loss" in block and not math.isfinite(loss), loss=loss,
                       step_time_s=1.0 / per_s if per_s > 0 else NAN,
                       tokens_per_s=block.get("tokens_per_s", NAN),
                       tokens_per_s_per_accelerator=block.get("tokens_per_s_per_accelerator",
                                                              NAN),
                       mfu=block.get("mfu", NAN))

    def finish(self) -> None:
        """Close the last block; the job's size and batch from the config dump."""
        self._close()
        c, st = self.config, self.state
        if c.get("num_nodes") and c.get("num_gpus_per_node"):
            st.fact("n_accelerators", c["num_nodes"] * c["num_gpus_per_node"], 0)
        if c.get("max_seq_len"):
            st.fact("seq_len", c["max_seq_len"], 0)
            if c.get("global_train_batch_size"):
                st.fact("global_batch_tokens", c["max_seq_len"] * c["global_train_batch_size"],
                        0)
