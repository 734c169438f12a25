"""Measures a run did not publish but that follow from those it did, and the strategy family.

Every value computed here is named in the run's ``derived`` column, so a reader can always tell
a published number from a computed one. A source's own value is never overwritten, with one
exception: a source's model FLOP/s and MFU on its own FLOP count are recounted on the project's
where tokens/s is known (``flop_count``), and its MFU is kept in ``mfu_source_count``.

FLOP accounting (``pipeline.measures.flop_per_token``) follows PaLM (Chowdhery et al. 2022, arXiv:2204.02311,
Appendix B): a training token costs ``6 N`` FLOPs for the dense matmuls (forward 2N, backward
4N, Kaplan et al. 2020) plus ``12 L H Q T = 12 L d T`` for self-attention, with ``L`` layers,
``d = H Q`` the hidden size and ``T`` the sequence length. Recompute FLOPs are not counted, so
``model_flops_per_s / (n * peak)`` is MFU, not HFU.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pipeline.ingest.core.flop_count import model_flops_and_mfu

TFLOP = 1e12
# Two published figures that must agree (whole-job and per-chip tokens/s) may differ by rounding.
CONSISTENCY_RTOL = 0.02


class Reject(Exception):
    """A record that cannot become a run: ``code`` is one of ``REJECT_CODES``."""

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code = code
        self.detail = detail


def derive_measures(row: dict[str, Any], peak: float | None, tflops_per_accelerator: float | None,
                    attention: bool, hardware_tflops_per_accelerator: float | None = None
                    ) -> tuple[list[str], bool]:
    """Fill missing measures of ``row`` in place.

    ``peak`` is the dense peak FLOP/s per chip that MFU, and FLOP/s from MFU or HFU, may use
    (``None``: derive nothing from a peak). Returns the names of the columns filled and whether
    any of them rests on ``peak``. Needs ``n_accelerators`` and, for FLOP-based measures,
    ``active_params``. Raises ``Reject('out_of_range')`` when a derived MFU exceeds 1 (a wrong
    peak, a wrong unit, a lower precision than assumed, or a FLOP count that is not model FLOPs)
    or when a result overflows, and ``Reject('conflict')`` when the whole-job and per-chip
    tokens/s given both disagree by more than ``CONSISTENCY_RTOL``.
    """
    derived: list[str] = []
    from_peak = False
    n = row["n_accelerators"]

    def fill(name: str, value: float, uses_peak: bool = False) -> None:
        nonlocal from_peak
        row[name] = value
        derived.append(name)
        from_peak = from_peak or uses_peak

    gbt = row["global_batch_tokens"]
    tps, tpa = row["tokens_per_s"], row["tokens_per_s_per_accelerator"]
    if tps is not None and tpa is not None and abs(tpa * n - tps) > CONSISTENCY_RTOL * tps:
        raise Reject("conflict", f"tokens_per_s={tps:g} but tokens_per_s_per_accelerator x "
                                 f"n_accelerators={tpa * n:g}")
    # Throughput: whole job <-> per chip <-> step time (tokens per step / seconds per step).
    if row["tokens_per_s"] is None and row["tokens_per_s_per_accelerator"] is not None:
        fill("tokens_per_s", row["tokens_per_s_per_accelerator"] * n)
    if row["tokens_per_s"] is None and row["step_time_s"] is not None and gbt is not None:
        fill("tokens_per_s", gbt / row["step_time_s"])
    tps = row["tokens_per_s"]
    if row["tokens_per_s_per_accelerator"] is None and tps is not None:
        fill("tokens_per_s_per_accelerator", tps / n)
    if row["step_time_s"] is None and tps is not None and gbt is not None:
        fill("step_time_s", gbt / tps)

    # Model FLOP/s and MFU: the project's count where tokens/s and the peak are known, the
    # source's own figure otherwise (``flop_count``).
    names, uses_peak = model_flops_and_mfu(row, peak, tflops_per_accelerator, attention)
    derived += names
    from_peak = from_peak or uses_peak
    for name in ("mfu", "mfu_source_count"):  # ours, then the source's FLOP figure's
        if name in names and not row[name] <= 1.0:
            raise Reject("out_of_range", f"derived mfu {_shown(row[name])} > 1" + (
                " (the source's FLOP count)" if name != "mfu" else ""))

    # Hardware FLOP/s (recompute counted): the source's TFLOP/s per chip, else HFU times peak.
    if row["hardware_flops_per_s"] is None:
        if hardware_tflops_per_accelerator is not None:
            fill("hardware_flops_per_s", hardware_tflops_per_accelerator * TFLOP * n)
        elif row["hfu"] is not None and peak is not None:
            fill("hardware_flops_per_s", row["hfu"] * n * peak, uses_peak=True)

    if row["inverse_time_to_train_per_s"] is None and row["time_to_train_s"] is not None:
        fill("inverse_time_to_train_per_s", 1.0 / row["time_to_train_s"])
    if (row["energy_j_per_token"] is None and row["power_w_per_accelerator"] is not None
            and tps is not None):
        fill("energy_j_per_token", row["power_w_per_accelerator"] * n / tps)

    for name in derived:
        value = row[name]
        if not (math.isfinite(value) and value > 0):
            raise Reject("out_of_range", f"derived {name} = {_shown(value)}")
    return derived, from_peak


def _shown(value: float) -> str:
    """A derived value for a reject: its digits, or why it has none (the inputs' product or
    quotient left the doubles), never a bare 'inf' or 'nan'."""
    if math.isfinite(value):
        return f"{value:.6g}"
    if math.isnan(value):
        return "not a number (its inputs are 0/0 or inf - inf)"
    side = "below -1.8e308" if value < 0 else "past 1.8e308"
    return f"{side} (the product of its inputs overflows)"


def append_note(notes: str | None, note: str) -> str:
    return f"{notes} [{note}]" if notes else f"[{note}]"


# Strategy families ----------------------------------------------------------------------------
_SHARDED = re.compile(r"fsdp|hsdp|zero[-_ ]?(?:stage[-_ ]?)?3|zero-?infinity")
_HYBRID_SHARDED = re.compile(r"hsdp|hybrid[-_ ]?shard")
_DEGREE = re.compile(r"\b(dp|tp|pp|cp|ep)[-_ =]?(\d+)\b")
_ZERO = re.compile(r"zero[-_ ]?(?:stage[-_ ]?)?(\d)")
_PTDP = re.compile(r"ptd-?p|\b[34]d\b")
_TP_WORD = re.compile(r"\btp\b|tensor[-_ ]?paral|megatron[-_ ]?tp")
_PP_WORD = re.compile(r"\bpp\b|pipeline[-_ ]?paral|1f1b|gpipe")
_DP_WORD = re.compile(r"\bddp\b|\bdp\b|data[-_ ]?paral")


def strategy_family(n: int, dp: int | None, tp: int | None, pp: int | None,
                    zero_stage: int | None, strategy: str | None) -> str:
    """Coarse strategy family (``vocab.STRATEGY_FAMILIES``) from parallel degrees and text.

    Degrees given as numbers win over degrees read from the text (``DP8 TP2 PP1 ZeRO-1``).
    Rules, in order, with ``dp`` defaulting to ``n / (tp * pp)`` when the degrees are known:

    * ``tp > 1`` and ``pp > 1``: ``3d`` when ``dp > 1`` too (PTD-P, Llama 3's 4D), else ``tp_pp``;
    * parameters sharded (ZeRO-3 / FSDP / HSDP) with ``tp > 1`` or ``pp > 1``, or HSDP:
      ``hybrid_fsdp``; sharded alone: ``fsdp``;
    * ``tp > 1`` alone: ``tp``; ``pp > 1`` alone: ``pp`` (plain DP may be added to either);
    * replicated data parallelism (ZeRO-0/1/2, DDP): ``ddp``; nothing known: ``unknown``.
    """
    text = (strategy or "").lower()
    degrees = {k: int(v) for k, v in _DEGREE.findall(text)}
    zero_match = _ZERO.search(text)
    tp = tp if tp is not None else degrees.get("tp")
    pp = pp if pp is not None else degrees.get("pp")
    dp = dp if dp is not None else degrees.get("dp")
    if zero_stage is None and zero_match:
        zero_stage = int(zero_match.group(1))
    if _PTDP.search(text) and tp is None and pp is None:
        return "3d"
    if tp is None and _TP_WORD.search(text):
        tp = 2  # named but degree not given: some TP > 1
    if pp is None and _PP_WORD.search(text):
        pp = 2
    sharded = zero_stage == 3 or bool(_SHARDED.search(text))
    known = (tp, pp, dp, zero_stage) != (None, None, None, None) or sharded
    if not known and not _DP_WORD.search(text):
        return "unknown"
    tp_, pp_ = tp or 1, pp or 1
    if dp is None:
        dp = max(n // (tp_ * pp_), 1)
    if tp_ > 1 and pp_ > 1:
        return "3d" if dp > 1 else "tp_pp"
    if sharded and (tp_ > 1 or pp_ > 1 or _HYBRID_SHARDED.search(text)):
        return "hybrid_fsdp"
    if sharded:
        return "fsdp"
    if tp_ > 1:
        return "tp"
    if pp_ > 1:
        return "pp"
    return "ddp"
