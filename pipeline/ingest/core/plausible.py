"""Plausibility rules: values that parse, but cannot describe one real training run.

Each rule is a reject whose reason quotes the values. They run in ``normalize``,
so the ingest and ``scalewall validate`` apply the same rules.

* ``n_accelerators`` at most ``max_accelerators`` (``ingest.max_accelerators``, default 10^7:
  the largest published jobs use ~10^5 chips);
* the parallel layout fits the job: ``tp x pp x cp x dp`` (the degrees given) divides
  ``n_accelerators`` (equal when all four are given and there is no further replication),
  and ``ep`` divides it. EP does not multiply: Megatron-LM, torchtitan and DeepSpeed-MoE carve
  the expert-parallel group out of the data-parallel ranks;
* a stated MFU agrees with the stated throughput: the MFU implied by tokens/s (or achieved
  TFLOP/s) against the chip's peak is within a factor ``MFU_CONSISTENCY_FACTOR`` of the stated
  one. Three covers the conventions that legitimately differ (attention FLOPs counted or not,
  up to ~1.3x; recompute counted, 4/3; an fp8 run against a bf16 peak, 2x) but not a wrong
  unit or a typo by an order of magnitude. The stated MFU's own rounding widens the band
  (``0.001`` is 0.0005-0.0015). On the shipped tables the ratio stated/implied spans
  0.85-2.79 (1,780 runs; the Ultra-Scale Playbook's MFU runs ~1.5x above its tokens/s).
"""

from __future__ import annotations

import math

from pipeline.ingest.core.derive import Reject

MAX_ACCELERATORS = 10_000_000
MFU_CONSISTENCY_FACTOR = 3.0


def check_scale(n: int, max_accelerators: int = MAX_ACCELERATORS) -> None:
    if n > max_accelerators:
        raise Reject("out_of_range", f"n_accelerators={n} above the plausible maximum "
                                     f"{max_accelerators} (ingest.max_accelerators)")


def check_layout(n: int, degrees: dict[str, int | None]) -> None:
    """``degrees``: tp, pp, cp, dp, ep as given (None: not given)."""
    given = [(k, degrees[k]) for k in ("tp", "pp", "cp", "dp") if degrees.get(k) is not None]
    product = math.prod(v for _, v in given)
    if given and n % product:
        names = " x ".join(k for k, _ in given)
        values = " x ".join(str(v) for _, v in given)
        raise Reject("out_of_range", f"layout {names} = {values} = {product} does not divide "
                                     f"n_accelerators={n}")
    ep = degrees.get("ep")
    if ep is not None and n % ep:
        raise Reject("out_of_range", f"ep={ep} does not divide n_accelerators={n}")


def rounding(text: object) -> float:
    """Half a unit of the last digit a value was written with (``"0.001"`` -> 0.0005); 0 for
    a number that was not text (a log's float)."""
    if not isinstance(text, str):
        return 0.0
    mantissa = text.strip().lower().split("e")[0]
    exponent = int(text.strip().lower().split("e")[1]) if "e" in text.lower() else 0
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return 0.5 * 10.0 ** (exponent - decimals)


def check_mfu(mfu: float, model_flops_per_s: float, n: int, peak: float, basis: str,
              half_unit: float = 0.0) -> None:
    """A stated ``mfu`` (written to ``+-half_unit``) against the one its throughput implies
    (``basis`` names the measure)."""
    implied = model_flops_per_s / (n * peak)
    low, high = max(mfu - half_unit, 0.0), mfu + half_unit
    if not low / MFU_CONSISTENCY_FACTOR <= implied <= high * MFU_CONSISTENCY_FACTOR:
        raise Reject("conflict", f"mfu={mfu:.6g} but {basis} implies mfu {implied:.6g} against "
                                 f"the chip's peak {peak:.4g} FLOP/s (more than "
                                 f"{MFU_CONSISTENCY_FACTOR:g}x apart)")
