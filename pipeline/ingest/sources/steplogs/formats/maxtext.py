"""MaxText (JAX, TPU and GPU) step lines and start-up facts.

Source of the format: ``MaxText/metric_logger.py``, ``MetricLogger.log_metrics()``
(AI-Hypercomputer/maxtext, 2024-2025): ``completed step: {step}, seconds: {step_time:.3f},
TFLOP/s/device: {tflops:.3f}, Tokens/s/device: {tokens:.3f}, total_weights: {w}, loss:
{loss:.3f}`` (later releases append ``lm_loss``, ``perplexity``, MoE losses); releases before
maxtext#761 (2024-07) print no ``Tokens/s/device``, and the first ones (2023) ``TFLOP/s:``
without ``/device`` (maxtext#8). The line goes through ``max_logging.log``: a bare ``print`` in
older releases, absl's ``I0811 21:54:55.531340 138304841739136 metric_logger.py:226] `` prefix
in newer ones (maxtext#4847), on TPU and GPU alike. ``TFLOP/s/device`` is MaxText's own model
FLOP count (``calculate_tflops_training_per_device``: every matmul, attention included) over
the measured step time; ``Tokens/s/device`` is ``per_device_batch_size x max_target_length``
over it (docs/guides/Understanding_Logs_and_Metrics.md).
Start-up facts: ``Num_devices: 4, shape (...)`` (``max_utils.create_device_mesh``),
``Config param <name>: <value>`` lines of ``pyconfig`` (``max_target_length`` -> seq_len,
``per_device_batch_size``, ``model_name`` -> model, ``dtype`` -> precision, unless
``quantization`` names fp8), and
``number parameters: 15.933 billion``.

Read: step; ``step_time_s`` = seconds; ``tflops_per_accelerator`` = TFLOP/s/device;
``tokens_per_s_per_accelerator`` = Tokens/s/device; ``loss``. The global batch in tokens is
``per_device_batch_size x max_target_length x Num_devices`` when the log states all three.
"""

from __future__ import annotations

import math
import re

from pipeline.ingest.sources.steplogs.base import (
    NAN, NUM, ParseState, lines_with, rank_of, regex_lines, sole_match, to_float,
)

NAME = "maxtext"
MARKER = "completed step: "
# How a complete step line ends (the loss, or a later loss term, with three decimals, is the
# last field): a last line without a newline that ends so is kept (reader._complete).
LINE_END_RE = re.compile(r"loss: [-+]?(?:\d+\.\d{3}|nan|inf)\s*$")
_STEP_RE = re.compile(r"completed step: (\d+), seconds: (" + NUM + r")")
_FIELD_RE = re.compile(r"(TFLOP/s(?:/device)?|Tokens/s/device|loss): (" + NUM + r")")
_DEVICES_RE = re.compile(r"\bNum_devices: (\d+)")
_PARAMS_RE = re.compile(r"\bnumber parameters: (" + NUM + r") billion")
_CONFIG_RE = re.compile(r"Config param (max_target_length|per_device_batch_size|model_name|"
                        r"dtype|quantization): (\S+)")
_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def detect(sample: str) -> int:
    """Number of MaxText step lines in ``sample``."""
    if MARKER not in sample:
        return 0
    return len(_STEP_RE.findall(sample))


class Parser:
    """Feeds MaxText lines into a ``ParseState``."""

    def __init__(self, state: ParseState) -> None:
        self.state = state
        self.config: dict[str, str] = {}

    def feed_chunk(self, text: str, first_lineno: int, header: bool) -> None:
        """Parse a chunk of whole lines starting at line ``first_lineno``."""
        st = self.state
        if header:
            for lineno, m in regex_lines(text, _DEVICES_RE, first_lineno):
                st.fact("n_accelerators", int(m.group(1)), lineno)
            for lineno, m in regex_lines(text, _PARAMS_RE, first_lineno):
                st.fact("params_b", to_float(m.group(1)), lineno)
            for lineno, m in regex_lines(text, _CONFIG_RE, first_lineno):
                self._config(m.group(1), m.group(2), lineno)
        for lineno, line in lines_with(text, MARKER, first_lineno, st.counts):
            self._step(line, lineno)

    def _config(self, key: str, value: str, lineno: int) -> None:
        self.config[key] = value
        if key == "max_target_length" and value.isdigit():
            self.state.fact("seq_len", int(value), lineno)
        elif key == "model_name" and value not in ("default", "None"):
            self.state.fact("model", value, lineno)
        elif key == "dtype" and value in _DTYPES and "fp8" not in self.config.get(
                "quantization", ""):
            self.state.fact("precision", _DTYPES[value], lineno)
        elif key == "quantization" and "fp8" in value:  # fp8, nanoo_fp8: matmuls in fp8
            self.state.fact("precision", "fp8", lineno)

    def _step(self, text: str, lineno: int) -> None:
        st = self.state
        if (m := sole_match(_STEP_RE, text, st.counts)) is None:
            return
        seconds = to_float(m.group(2))
        if not math.isfinite(seconds):
            st.counts["unparsed_step_lines"] += 1
            return
        fields = {k: to_float(v) for k, v in _FIELD_RE.findall(text, m.end())}
        loss = fields.get("loss", NAN)
        st.add(int(m.group(1)), lineno, rank_of(text),
               nan_loss="loss" in fields and not math.isfinite(loss), step_time_s=seconds,
               loss=loss, tokens_per_s_per_accelerator=fields.get("Tokens/s/device", NAN),
               tflops_per_accelerator=fields.get("TFLOP/s/device", fields.get("TFLOP/s", NAN)))

    def finish(self) -> None:
        """The global batch in tokens, when the log states its three factors."""
        st = self.state
        batch, seq = to_float(self.config.get("per_device_batch_size", "")), st.facts.get(
            "seq_len")
        n = st.facts.get("n_accelerators")
        if seq and n and math.isfinite(batch) and batch > 0:
            tokens = batch * seq * n
            if tokens == int(tokens):
                st.fact("global_batch_tokens", int(tokens), st.fact_lines.get("seq_len", 0))
