"""Megatron-LM step lines and argument dump (also Megatron-DeepSpeed, NeMo's Megatron core,
MindSpeed and FlagScale, which print the same line).

Source of the format: ``megatron/training/training.py``, ``training_log()`` (NVIDIA/Megatron-LM
main as of 2025, and the forks that keep it), which builds the line from `` [%Y-%m-%d %H:%M:%S]``,
`` iteration {:8d}/{:8d} |``, `` consumed samples: {:12d} |``, `` elapsed time per iteration
(ms): {:.1f} |``, the optional `` throughput per GPU (TFLOP/s/GPU): {:.1f} |``
(``--log-throughput``),
`` learning rate: {:.6E} |``, `` global batch size: {:5d} |``, one `` {key}: {:.6E} |`` per loss
(``lm loss``), `` loss scale``, `` grad norm``, `` number of skipped iterations: {:3d} |`` and
`` number of nan iterations: {:3d} |``. Older trees (``megatron/training.py``, 2021-2023) print
the same fields without the throughput. Megatron-DeepSpeed (microsoft/Megatron-DeepSpeed
``megatron/training.py``) prints no time stamp, adds `` consumed tokens``, `` actual seqlen`` (read
as ``seq_len``), `` samples per second``, `` tokens per gpu per second (tgs)`` and
`` TFLOPs: {:.2f}``, read here as the per-GPU TFLOP/s it is.
EleutherAI gpt-neox (``megatron/training.py``, ``training_log``) prints the same line after
`` samples/sec: {:.3f} |`` with `` approx flops per GPU: {x}TFLOPS`` and ``lm_loss`` (read as
TFLOP/s per GPU and the loss; deepspeedai/DeepSpeed#3742 shows one, 2023).
The argument dump is ``_print_args`` in ``megatron/training/arguments.py``: between
``---- arguments ----`` and ``---- end of arguments ----``, lines ``  {name} {dots} {value}``.

Read: step = iteration; ``step_time_s`` = elapsed ms / 1000 (Megatron averages it over the
``--log-interval`` iterations since the previous line); ``tflops_per_accelerator``; ``loss`` =
``lm loss`` (else the first ``* loss`` key); ``batch_samples`` = global batch size; NaN loss
when the loss prints as ``NAN`` or ``number of nan iterations`` > 0; wall clock from the stamp.
Facts: ``tp, pp, cp, ep, dp, n_accelerators`` (``world_size``), ``seq_len, n_layers, d_model,
micro_batch, zero_stage``, ``batch_samples`` and ``precision`` (``bf16``/``fp16``/``fp8`` flags,
else ``params_dtype``: named in ``derived``). The schedule: ``recompute`` from
``recompute_granularity`` (``selective``/``full``; ``None``: ``none``; older trees'
``recompute_activations True`` is selective and ``checkpoint_activations True`` full),
``virtual_pipeline`` (model chunks per pipeline stage) from
``virtual_pipeline_model_parallel_size``, else ``num_layers / pp /
num_layers_per_virtual_pipeline_stage``, 1 when both print ``None``, and ``sequence_parallel``.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np

from pipeline.ingest.sources.steplogs.base import (
    NAN, NUM, ParseState, int_or_none, iso_seconds, iso_seconds_many, precision_from_flags, rank_of,
    regex_lines, sole_match, to_float,
)
from pipeline.ingest.sources.steplogs.bulk import StepParser, float_col, int_col, rank_col, transpose

NAME = "megatron"
# How a complete step line ends (the ``number of nan iterations: N |`` field, which every
# Megatron variant prints after the figures read here, then only ``|``-closed fields): a last
# line without a newline that ends so is kept (reader._complete).
LINE_END_RE = re.compile(r"nan iterations:\s*\d+\s*\|(?:[^|\n]*\|)*\s*$")
# ``\biteration...`` written literal first (the same matches): a pattern that starts with
# ``\b`` is tried at every character, one with a literal jumps between the literal's places
# (~15x quicker on a log; most of telling the formats apart).
_STEP_RE = re.compile(r"iteration(?<=\biteration)\s+(\d+)\s*/\s*(\d+)\s*\|")
_STAMP_RE = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\]")
_FIELDS_RE = re.compile(r"\| (elapsed time per iteration \(ms\)|throughput per GPU \(TFLOP/s/GPU\)|"
                        r"TFLOPs|tokens per gpu per second \(tgs\)|global batch size|lm loss|"
                        r"lm_loss|approx flops per GPU|number of nan iterations|actual seqlen): "
                        r"*([^|]*)")
_TFLOPS_UNIT_RE = re.compile(r"^\s*(" + NUM + r")\s*TFLOPS\s*$")
_ANY_LOSS_RE = re.compile(r"\| ([\w ]+? loss): *([^|]*)")
_ARG_RE = re.compile(r"^[^\S\n]*(?:\S+[^\S\n]+)?([a-z_][a-z0-9_]*) \.{3,} ([^\n]*?)[^\S\n]*$",
                     re.MULTILINE)
# Argument name -> format-v1 column.
_ARGS = {
    "tensor_model_parallel_size": "tp", "pipeline_model_parallel_size": "pp",
    "context_parallel_size": "cp", "expert_model_parallel_size": "ep",
    "data_parallel_size": "dp", "world_size": "n_accelerators", "seq_length": "seq_len",
    "num_layers": "n_layers", "hidden_size": "d_model", "micro_batch_size": "micro_batch",
    "zero_stage": "zero_stage", "global_batch_size": "batch_samples",
}
_PRECISION_ARGS = ("bf16", "fp16", "fp8", "params_dtype")
_SCHEDULE_ARGS = ("recompute_granularity", "recompute_activations", "checkpoint_activations",
                  "virtual_pipeline_model_parallel_size", "num_layers_per_virtual_pipeline_stage",
                  "sequence_parallel")
_DTYPES = {"torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float32": "fp32"}
# The common layout of Megatron-LM (2024-25) in one pattern, for the bulk path; lines in any
# other layout go through ``Parser._step`` one by one.
_FAST_RE = re.compile(
    r"^(?:\[(?:rank|default)(\d+)\]:|(\d+): )? ?\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] "
    r"iteration +(\d+)/ *\d+ \| consumed samples: +\d+ \|(?: skipped samples: +\d+ \|)? "
    r"elapsed time per iteration \(ms\): ([^ |\n]+) \|"
    r"(?: throughput per GPU \(TFLOP/s/GPU\): ([^ |\n]+) \|)? learning rate: [^ |\n]+ \| "
    r"global batch size: +(\d+) \| lm loss: ([^ |\n]+) \|([^\n]*)$",
    re.MULTILINE)
MARKER = "elapsed time per iteration"
_NAN_ITERS_RE = re.compile(r"number of nan iterations: *(\d+)")


def _nan_iterations(text: str) -> int:
    m = _NAN_ITERS_RE.search(text)
    return int(m.group(1)) if m else 0


def detect(sample: str) -> int:
    """Number of Megatron step lines in ``sample``."""
    if MARKER not in sample:  # a counted line holds it: no scan of another format's log
        return 0
    return sum(1 for m in _STEP_RE.finditer(sample)
               if MARKER in sample[m.end():m.end() + 200])


class Parser(StepParser):
    """Feeds Megatron lines into a ``ParseState``."""

    FAST_RE, MARKER, COUNTER = _FAST_RE, MARKER, "iteration "

    def __init__(self, state: ParseState) -> None:
        super().__init__(state)
        self.precision: dict[str, str] = {}
        self.schedule: dict[str, tuple[str, int]] = {}
        self.precision_line = 0

    def feed_chunk(self, text: str, first_lineno: int, header: bool) -> None:
        """Parse a chunk of whole lines starting at line ``first_lineno``."""
        self.feed_steps(text, first_lineno)
        if header and " ..." in text:
            for lineno, m in regex_lines(text, _ARG_RE, first_lineno):
                self._arg(m.group(1), m.group(2), lineno)

    def _arg(self, name: str, value: str, lineno: int) -> None:
        key = _ARGS.get(name)
        if key is not None:
            self.state.fact(key, int_or_none(value), lineno)
        elif name in _PRECISION_ARGS:
            self.precision[name] = value
            self.precision_line = lineno
        elif name in _SCHEDULE_ARGS:
            self.schedule[name] = (value.strip(), lineno)

    def _bulk(self, rows: list[tuple[str, ...]], linenos: Sequence[int]) -> bool:
        r1, r2, stamp, step, ms, tflops, gbs, loss, rest = transpose(rows)
        loss_f = float_col(loss)
        nan_loss = ~np.isfinite(loss_f)
        tail = "\n".join(rest)
        # Each row's own test only when some "nan iterations:" is not followed by "  0 ".
        if tail.count("nan iterations:") != tail.count("nan iterations:   0 "):
            nan_loss |= np.array([("nan iterations:" in r and "nan iterations:   0 " not in r
                                   and _nan_iterations(r) > 0) for r in rest], dtype=bool)
        self.state.extend(int_col(step), linenos, rank_col(r1, r2), nan_loss,
                          step_time_s=float_col(ms) / 1000.0, loss=loss_f,
                          tflops_per_accelerator=float_col(tflops), batch_samples=float_col(gbs),
                          wall_s=iso_seconds_many(stamp))
        return True

    def _step(self, text: str, lineno: int) -> None:
        st = self.state
        if (m := sole_match(_STEP_RE, text, st.counts)) is None:
            return
        fields = dict(_FIELDS_RE.findall(text, m.end() - 1))
        step_time_s = to_float(fields.get("elapsed time per iteration (ms)", "nan")) / 1000.0
        if not step_time_s >= 0:
            st.counts["unparsed_step_lines"] += 1
            return
        tflops = fields.get("throughput per GPU (TFLOP/s/GPU)") or fields.get("TFLOPs")
        if tflops is None and (neox := _TFLOPS_UNIT_RE.match(
                fields.get("approx flops per GPU", ""))):
            tflops = neox.group(1)
        loss_text = fields.get("lm loss") or fields.get("lm_loss")
        if loss_text is None:
            other = _ANY_LOSS_RE.search(text, m.end() - 1)
            loss_text = other.group(2) if other else None
        loss = to_float(loss_text) if loss_text is not None else NAN
        nan_iters = int_or_none(fields.get("number of nan iterations", "0")) or 0
        stamp = _STAMP_RE.search(text, 0, m.start())
        if "actual seqlen" in fields:  # Megatron-DeepSpeed prints the sequence length per step
            st.fact("seq_len", int_or_none(fields["actual seqlen"]), lineno)
        st.add(int(m.group(1)), lineno, rank_of(text),
               nan_loss=nan_iters > 0 or (loss_text is not None and not math.isfinite(loss)),
               step_time_s=step_time_s, loss=loss,
               tflops_per_accelerator=to_float(tflops) if tflops else NAN,
               tokens_per_s_per_accelerator=to_float(
                   fields.get("tokens per gpu per second (tgs)", "nan")),
               batch_samples=to_float(fields.get("global batch size", "nan")),
               wall_s=iso_seconds(stamp.group(1)) if stamp else NAN)

    def finish(self) -> None:
        p, st = self.precision, self.state
        line = self.precision_line
        precision = precision_from_flags(p.get("bf16"), p.get("fp16"), p.get("fp8"))
        if precision:
            st.fact("precision", precision, line)
            st.derivations["precision"] = "from the argument dump's bf16/fp16/fp8 flags"
        elif p.get("params_dtype") in _DTYPES:
            st.fact("precision", _DTYPES[p["params_dtype"]], line)
            st.derivations["precision"] = f"from the argument dump's params_dtype " \
                                          f"{p['params_dtype']}"
        self._schedule()

    def _schedule(self) -> None:
        """``recompute``, ``virtual_pipeline`` and ``sequence_parallel`` from the argument dump."""
        st, a = self.state, self.schedule

        def on(name: str) -> bool:
            return a.get(name, ("", 0))[0] == "True"
        if "recompute_granularity" in a:
            value, line = a["recompute_granularity"]
            mode = value.strip("'\"").lower()
            if mode in ("selective", "full"):
                st.fact("recompute", mode, line)
            elif mode in ("none", "null", ""):
                st.fact("recompute", "full" if on("checkpoint_activations") else
                        "selective" if on("recompute_activations") else "none", line)
        elif "checkpoint_activations" in a:
            st.fact("recompute", "full" if on("checkpoint_activations") else "none",
                    a["checkpoint_activations"][1])
        vpp = a.get("virtual_pipeline_model_parallel_size")
        per_stage = a.get("num_layers_per_virtual_pipeline_stage")
        if vpp and int_or_none(vpp[0]):
            st.fact("virtual_pipeline", int_or_none(vpp[0]), vpp[1])
        elif per_stage and int_or_none(per_stage[0]):
            layers, pp = st.facts.get("n_layers"), st.facts.get("pp") or 1
            if layers and layers % (pp * int_or_none(per_stage[0])) == 0:
                st.fact("virtual_pipeline", layers // (pp * int_or_none(per_stage[0])),
                        per_stage[1])
                st.derivations["virtual_pipeline"] = (
                    "from num_layers / pipeline_model_parallel_size / "
                    "num_layers_per_virtual_pipeline_stage")
        elif vpp or per_stage:
            st.fact("virtual_pipeline", 1, (vpp or per_stage)[1])
        if "sequence_parallel" in a and a["sequence_parallel"][0] in ("True", "False"):
            st.fact("sequence_parallel", a["sequence_parallel"][0] == "True",
                    a["sequence_parallel"][1])
