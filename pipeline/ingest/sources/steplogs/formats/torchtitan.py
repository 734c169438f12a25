"""torchtitan step lines and start-up facts.

Source of the format: ``torchtitan/components/metrics.py``, ``MetricsProcessor.log()``
(pytorch/torchtitan, 2025; earlier the same f-string sat in ``torchtitan/train.py`` /
``train.py``, 2024), which logs through the ``[titan] %(asctime)s - %(name)s - %(levelname)s -``
formatter of ``torchtitan/tools/logging.py``: ``{red}step: {step:2}  {green}loss: {loss:7.4f}
{orange}grad_norm: {grad_norm:7.4f}  {yellow}memory: {gib:5.2f}GiB({pct:.2f}%)  {blue}tps:
{round(tps):,}  {cyan}tflops: {tflops:,.2f}  {magenta}mfu: {mfu:.2f}%{reset}``, with ANSI colour
codes unless ``--metrics.disable_color_printing``; torchrun ``--tee`` prefixes ``[rank0]:``.
Its ``tps`` is tokens per second *per device*: ``ntokens_since_last_log / (time_delta *
non_data_parallel_size)`` counts the tokens of one data-parallel rank. Older versions print
``wps`` (same meaning) and no ``grad_norm``; some forks add ``step_time:``.
Start-up facts (``torchtitan/train.py``): ``Building {N}-D device mesh with [names], [sizes]``
(parallel degrees; their product is the world size), ``Model {name} size: {n:,} total
parameters``, ``Building {name} {flavor} with ...ModelArgs(... dim=..., n_layers=...)`` (the
model name is used when no sidecar names the model), and ``... global batch size {B},
... sequence length {T}`` from the "Training starts at step" / "Trainer is initialized with" line.

Read: step; ``loss``; ``tokens_per_s_per_accelerator`` = tps; ``tflops_per_accelerator``;
``mfu`` = mfu% / 100; wall clock from the logger stamp. No step time is printed, so the
reduction takes it from stamp differences between logged steps (``step_time_from_wall``).
"""

from __future__ import annotations

import re
from operator import itemgetter
from typing import Sequence

import numpy as np

from pipeline.ingest.sources.steplogs.base import (
    ANSI_RE, NAN, NUM, ParseState, iso_seconds, iso_seconds_many, lines_with, rank_of,
    sole_match, to_float,
)
from pipeline.ingest.sources.steplogs.bulk import (
    StepParser, float_col, int_col, no_commas, rank_col, transpose,
)

NAME = "torchtitan"
# How a complete step line ends (the step line ends with the MFU in percent): a last line without a newline that
# ends so is kept (reader._complete).
LINE_END_RE = re.compile(r"%\s*$")
# ``(?<![\w.])step:...`` and ``\b(?:tps|wps):`` written literal first (the same matches; see
# megatron._STEP_RE).
_STEP_RE = re.compile(r"step(?<![\w.]step):\s*(\d+)\s+loss:\s*(" + NUM + r")")
_RATE_RE = re.compile(r"[tw]ps(?<=\b[tw]ps):")
_FIELD_RE = re.compile(r"\b(grad_norm|tps|wps|tflops|mfu|step_time):\s*(" + NUM + r")")
_STAMP_RE = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})")
_MESH_RE = re.compile(r"device mesh with \[([^\]]*)\],\s*\[([\d,\s]*)\]")
_SIZE_RE = re.compile(r"size:\s*([\d,]+) total parameters")
_DIM_RE = re.compile(r"ModelArgs\(.*?\bdim=(\d+)")
_LAYERS_RE = re.compile(r"ModelArgs\(.*?\bn_layers=(\d+)")
_BATCH_RE = re.compile(r"global batch size (\d+)")
_MODEL_RE = re.compile(r"Building (\w+) (\S+) with \w*ModelArgs\(")
_SEQ_RE = re.compile(r"sequence length (\d+)")
# The common layout (2024-25) in one pattern, for the bulk path; other lines go one by one.
_FAST_RE = re.compile(
    r"^(?:\[(?:rank|default)(\d+)\]:|(\d+): )?\[titan\] "
    r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - \S+ - INFO - step: *(\d+) +loss: *([^ \n]+) +"
    r"(?:grad_norm: *[^ \n]+ +)?memory: *[^ \n]+ +tps: *([\d,]+) +tflops: *([\d,.]+) +"
    r"mfu: *([\d.]+)%([^\n]*)$", re.MULTILINE)
_FACT_MARKERS = ("device mesh", "total parameters", "ModelArgs(", "global batch size")
_MESH_DIMS = {"dp_replicate": "dp", "dp_shard": "dp", "dp": "dp", "tp": "tp", "pp": "pp",
              "cp": "cp", "ep": "ep"}


def detect(sample: str) -> int:
    """Number of torchtitan step lines in ``sample``."""
    if "\x1b" in sample:
        sample = ANSI_RE.sub("", sample)
    if "step:" not in sample or "ps:" not in sample:  # a counted line holds both
        return 0
    return sum(1 for m in _STEP_RE.finditer(sample)
               if _RATE_RE.search(sample[m.end():m.end() + 200]))


class Parser(StepParser):
    """Feeds torchtitan lines into a ``ParseState``."""

    FAST_RE, MARKER, COUNTER, STRIP_ANSI = _FAST_RE, "step:", "step:", True

    def __init__(self, state: ParseState) -> None:
        super().__init__(state)
        state.step_time_from_wall = True

    def feed_chunk(self, text: str, first_lineno: int, header: bool) -> None:
        """Parse a chunk of whole lines starting at line ``first_lineno``."""
        self.feed_steps(text, first_lineno)
        if header:
            for marker in _FACT_MARKERS:
                for lineno, line in lines_with(text, marker, first_lineno):
                    self._fact(ANSI_RE.sub("", line), lineno)

    def _clean(self, rows: list[tuple[str, ...]]) -> bool:
        # The rows come from stripped text, yet a code spliced from the pieces around a
        # removed one (``\x1b\x1b[0m[31m``) can still hide a second "step:": strip again.
        tail = "\n".join(map(itemgetter(-1), rows))
        return "step:" not in (ANSI_RE.sub("", tail) if "\x1b" in tail else tail)

    def _bulk(self, rows: list[tuple[str, ...]], linenos: Sequence[int]) -> bool:
        r1, r2, stamp, step, loss, tps, tflops, mfu, _ = transpose(rows)
        loss_f = float_col(loss)
        self.state.extend(int_col(step), linenos, rank_col(r1, r2), ~np.isfinite(loss_f),
                          loss=loss_f, tokens_per_s_per_accelerator=float_col(no_commas(tps)),
                          tflops_per_accelerator=float_col(no_commas(tflops)),
                          mfu=float_col(mfu) / 100.0, wall_s=iso_seconds_many(stamp))
        return True

    def _step(self, text: str, lineno: int) -> None:
        st = self.state
        if "loss:" not in text:
            return
        if "evaluation" in text or "validat" in text:
            st.counts["validation_lines"] += 1
            return
        if (m := sole_match(_STEP_RE, text, st.counts)) is None:
            return
        fields = dict(_FIELD_RE.findall(text, m.end()))
        tps = fields.get("tps", fields.get("wps"))
        if tps is None:
            st.counts["unparsed_step_lines"] += 1
            return
        loss_text = m.group(2)
        stamp = _STAMP_RE.search(text, 0, m.start())
        mfu = fields.get("mfu")
        st.add(int(m.group(1)), lineno, rank_of(text),
               nan_loss=loss_text.lower().lstrip("+-") in ("nan", "inf"),
               loss=to_float(loss_text), tokens_per_s_per_accelerator=to_float(tps),
               tflops_per_accelerator=to_float(fields.get("tflops", "nan")),
               mfu=to_float(mfu) / 100.0 if mfu is not None else NAN,
               step_time_s=to_float(fields.get("step_time", "nan")),
               wall_s=iso_seconds(stamp.group(1)) if stamp else NAN)

    def _fact(self, text: str, lineno: int) -> None:
        st = self.state
        if m := _MESH_RE.search(text):
            names = [n.strip(" '\"") for n in m.group(1).split(",") if n.strip()]
            parts = [s.strip() for s in m.group(2).split(",") if s.strip()]
            # A garbled line ("[4, 4 2]") states no mesh: ignore it rather than guess.
            sizes = [int(s) for s in parts] if all(s.isdigit() for s in parts) else []
            if len(names) == len(sizes) and sizes:
                degrees: dict[str, int] = {}
                for name, size in zip(names, sizes):
                    key = _MESH_DIMS.get(name)
                    if key:
                        degrees[key] = degrees.get(key, 1) * size
                for key, value in degrees.items():
                    st.fact(key, value, lineno)
                world = 1
                for size in sizes:
                    world *= size
                st.fact("n_accelerators", world, lineno)
        if m := _SIZE_RE.search(text):
            st.fact("params_b", int(m.group(1).replace(",", "")) / 1e9, lineno)
        if m := _MODEL_RE.search(text):
            st.fact("model", f"{m.group(1)} {m.group(2)}", lineno)
        if m := _DIM_RE.search(text):
            st.fact("d_model", int(m.group(1)), lineno)
        if m := _LAYERS_RE.search(text):
            st.fact("n_layers", int(m.group(1)), lineno)
        if m := _BATCH_RE.search(text):
            st.fact("batch_samples", int(m.group(1)), lineno)
        if m := _SEQ_RE.search(text):
            st.fact("seq_len", int(m.group(1)), lineno)

    def finish(self) -> None:
        """Nothing is pending at the end of a torchtitan log."""
