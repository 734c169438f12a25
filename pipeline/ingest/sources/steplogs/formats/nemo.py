"""NeMo (and PyTorch Lightning) step timing.

Two shapes of output carry NeMo's ``train_step_timing in s`` (logged by ``TimingCallback`` in
``nemo/utils/exp_manager.py``, which appends `` in s`` to the timer name):
- NeMo 2.x (``nemo/lightning/pytorch/callbacks/progress_printer.py``, ``ProgressPrinter``, 2024-25):
  ``Training epoch 0, iteration 1/249 | lr: 3.922e-06 | global_batch_size: 8 | global_step: 1 |
  reduced_train_loss: 1.653 | train_step_timing in s: 2.505 | consumed_samples: 16``.
- NeMo 1.x with Lightning's ``TQDMProgressBar`` (``lightning/pytorch/callbacks/progress/
  tqdm_progress.py``): one progress bar redrawn with carriage returns, ``Epoch 0: : 2%| | 20/1000
  [00:45<36:45, reduced_train_loss=8.100, global_step=19.00, consumed_samples=2560.0,
  train_step_timing in s=2.140]``. Each ``\\r`` segment is one redraw; redraws of the same
  global step are collapsed to the last.
- The same progress bar without the timing callback (``exp_manager.log_step_timing: False``, or
  launcher configs that drop it; NVIDIA/NeMo-Framework-Launcher#55 shows one): ``Epoch 0:   1%|
  | 795/77225 [9:07:58<878:01:48, 41.36s/it, loss=3.1, v_num=, reduced_train_loss=3.090,
  global_step=794.0, consumed_samples=1.63e+6]``. The step time is then tqdm's rate (``41.36s/it``,
  or ``1/x`` of ``x it/s``), a moving average over recent redraws rather than the step's own
  time; the run's notes say so.
Start-up facts from the Hydra config NeMo 1.x prints (``trainer.devices``, ``trainer.num_nodes``,
``model.tensor_model_parallel_size``, ``pipeline_model_parallel_size``,
``context_parallel_size``, ``expert_model_parallel_size``, ``global_batch_size``,
``micro_batch_size``, ``encoder_seq_length``, ``num_layers``, ``hidden_size``, ``precision``):
read from indented ``key: value`` lines before the first step only.

Read: step = ``global_step``; ``step_time_s`` = train_step_timing (the step's own time, not
averaged); ``loss`` = reduced_train_loss; ``batch_samples`` = global_batch_size;
``tflops_per_accelerator`` = ``TFLOPS_per_GPU`` where NeMo 2's ``FLOPsMeasurementCallback``
prints it (its own model-FLOP count per GPU, e.g. ``| TFLOPS_per_GPU: 85.8 |``).
"""

from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np

from pipeline.ingest.sources.steplogs.base import (
    NAN, NUM, ParseState, int_or_none, lines_with, rank_of, regex_lines, sole_match,
    to_float,
)
from pipeline.ingest.sources.steplogs.bulk import StepParser, float_col, int_col, rank_col, transpose

NAME = "nemo"
_V2_RE = re.compile(r"Training epoch \d+, iteration (\d+)/\d+ \|")
# NeMo 2's progress-printer line in one pattern, for the bulk path; other lines one by one.
_FAST_RE = re.compile(
    r"^(?:\[(?:rank|default)(\d+)\]:|(\d+): )?(?:\[NeMo [^\]\n]*\] )?Training epoch \d+, "
    r"iteration \d+/\d+ \| lr: [^ |\n]+ \| global_batch_size: ([^ |\n]+) \| global_step: (\d+)"
    r"(?:\.0+)? \| reduced_train_loss: ([^ |\n]+) \| train_step_timing in s: ([^ |\n]+)([^\n]*)$",
    re.MULTILINE)
# tqdm's rate inside the bar's brackets: ``[9:07:58<878:01:48, 41.36s/it,`` or ``, 2.10it/s,``.
_TFLOPS_RE = re.compile(r"\| TFLOPS_per_GPU: (" + NUM + r")")
_RATE_RE = re.compile(r"<[^,\]]*, *(" + NUM + r") ?(s/it|it/s)")
_KV_EQ_RE = re.compile(r"([A-Za-z_][\w ]*?)=(" + NUM + r")")
_CFG_RE = re.compile(r"^[ \t]{2,}(tensor_model_parallel_size|pipeline_model_parallel_size|"
                     r"context_parallel_size|expert_model_parallel_size|encoder_seq_length|"
                     r"num_layers|hidden_size|micro_batch_size|global_batch_size|devices|"
                     r"num_nodes|precision):[ \t]+(\S+)[ \t]*$", re.MULTILINE)
_CFG_KEYS = {
    "tensor_model_parallel_size": "tp", "pipeline_model_parallel_size": "pp",
    "context_parallel_size": "cp", "expert_model_parallel_size": "ep",
    "encoder_seq_length": "seq_len", "num_layers": "n_layers", "hidden_size": "d_model",
    "micro_batch_size": "micro_batch", "global_batch_size": "batch_samples",
}
_PRECISIONS = {"bf16": "bf16", "bf16-mixed": "bf16", "16": "fp16", "16-mixed": "fp16",
               "32": "fp32", "fp8": "fp8"}


def detect(sample: str) -> int:
    """Number of NeMo step records in ``sample`` (progress-bar redraws without the timing
    callback count when they carry a rate and NeMo's ``reduced_train_loss``)."""
    timed = sample.count("train_step_timing in s")
    if timed or "reduced_train_loss=" not in sample:
        return timed
    return len(re.findall(r"(?:s/it|it/s), [^\n\]]*reduced_train_loss=", sample))


class Parser(StepParser):
    """Feeds NeMo lines into a ``ParseState``."""

    FAST_RE, MARKER, COUNTER = _FAST_RE, "train_step_timing in s", "Training epoch"

    def __init__(self, state: ParseState) -> None:
        super().__init__(state)
        self.header = True
        self.devices: int | None = None
        self.nodes: int | None = None
        self.last_step: int | None = None

    def feed_chunk(self, text: str, first_lineno: int, header: bool) -> None:
        """Parse a chunk of whole lines starting at line ``first_lineno``."""
        if header and self.header:
            for lineno, m in regex_lines(text, _CFG_RE, first_lineno):
                self._cfg(m.group(1), m.group(2), lineno)
        if self.feed_steps(text, first_lineno):
            self.header = False
        # Bars without the timing callback: only where some bar redraw lacks the timing field
        # (a chunk of timed redraws is not scanned twice).
        if text.count("reduced_train_loss=") > text.count("train_step_timing in s="):
            for lineno, line in lines_with(text, "reduced_train_loss=", first_lineno):
                if "train_step_timing in s" in line:
                    continue  # read above, with its own timing
                for segment in line.split("\r"):
                    if "reduced_train_loss=" in segment and _RATE_RE.search(segment):
                        self._bar(segment, lineno)
                        self.header = False

    def _bulk(self, rows: list[tuple[str, ...]], linenos: Sequence[int]) -> bool:
        r1, r2, gbs, step, loss, timing, tails = transpose(rows)
        steps = int_col(step)
        if steps[0] == self.last_step or bool((steps[1:] == steps[:-1]).any()):
            return False  # redraws of one step: the line path keeps the last of each
        loss_f = float_col(loss)
        tflops = [m.group(1) if (m := _TFLOPS_RE.search(t)) else "nan" for t in tails]
        self.state.extend(steps, linenos, rank_col(r1, r2), ~np.isfinite(loss_f),
                          step_time_s=float_col(timing), loss=loss_f,
                          batch_samples=float_col(gbs), tflops_per_accelerator=float_col(tflops))
        self.last_step = int(steps[-1])
        return True

    def _cfg(self, key: str, value: str, lineno: int) -> None:
        if key in _CFG_KEYS:
            self.state.fact(_CFG_KEYS[key], int_or_none(value), lineno)
        elif key == "devices":
            self.devices = int_or_none(value)
        elif key == "num_nodes":
            self.nodes = int_or_none(value)
        elif key == "precision" and value.strip("'\"") in _PRECISIONS:
            self.state.fact("precision", _PRECISIONS[value.strip("'\"")], lineno)

    def _step(self, line: str, lineno: int) -> None:
        if "Training epoch" in line:
            self._v2(line, lineno)
        else:
            for segment in line.split("\r"):
                if "train_step_timing in s=" in segment:
                    self._bar(segment, lineno)

    def _v2(self, text: str, lineno: int) -> None:
        if (m := sole_match(_V2_RE, text, self.state.counts)) is None:
            return
        fields = {}
        for part in text[m.end():].split("|"):
            key, sep, value = part.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        step = int_or_none(fields.get("global_step", "").split(".")[0])
        self._add(step if step is not None else int(m.group(1)), fields, text, lineno)

    def _bar(self, segment: str, lineno: int) -> None:
        fields = {k.strip(): v for k, v in _KV_EQ_RE.findall(segment)}
        step = fields.get("global_step")
        if step is None:
            self.state.counts["unparsed_step_lines"] += 1
            return
        self._add(int(to_float(step)), fields, segment, lineno)

    def _add(self, step: int, fields: dict[str, str], text: str, lineno: int) -> None:
        st = self.state
        timing = to_float(fields.get("train_step_timing in s", "nan"))
        if timing != timing and (rate := _RATE_RE.search(text)):
            value = to_float(rate.group(1))
            timing = value if rate.group(2) == "s/it" else 1.0 / value if value > 0 else NAN
            st.counts["progress_bar_rate_steps"] += 1
        if timing != timing:
            st.counts["unparsed_step_lines"] += 1
            return
        if step == self.last_step and len(st):
            st.drop_last()  # a redraw of the same step: keep the latest figures
            st.counts["progress_bar_redraws"] += 1
        self.last_step = step
        loss_text = fields.get("reduced_train_loss")
        loss = to_float(loss_text) if loss_text is not None else NAN
        st.add(step, lineno, rank_of(text),
               nan_loss=loss_text is not None and not math.isfinite(loss),
               step_time_s=timing, loss=loss,
               batch_samples=to_float(fields.get("global_batch_size", "nan")),
               tflops_per_accelerator=to_float(fields.get("TFLOPS_per_GPU", "nan")))

    def finish(self) -> None:
        if self.devices and self.nodes:
            self.state.fact("n_accelerators", self.devices * self.nodes, 0)
            self.state.derivations["n_accelerators"] = (f"from trainer.devices {self.devices} x "
                                                        f"trainer.num_nodes {self.nodes}")
