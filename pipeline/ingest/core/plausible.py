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
* ``params_b`` in [``MIN_PARAMS_B``, ``MAX_PARAMS_B``] = [1e-4, 1e5]: 100 thousand parameters
  (below that no model is trained at scale) to 100 trillion (the largest published dense or
  MoE models are ~2 T);
* the shape agrees with the parameter count (``check_shape``): a decoder of ``L`` layers of
  width ``d`` holds ~``12 L d^2`` parameters outside its embeddings (Kaplan et al. 2020,
  arXiv:2001.08361, eq. 2.1). The active (per-token) count over ``12 L d^2`` must lie in
  [1/``SHAPE_FACTOR_LOW``, ``SHAPE_FACTOR_HIGH``] = [1/4, 64]. The catalog's 26 models with a
  shape span 1.00-1.34 and the shipped runs 0.998-1.24; GQA with a narrow FFN goes below 1
  (never below 1/4), and embeddings push small models up (GPT-2 small 1.5, Gemma-2B 2.8, a
  2-layer d=64 debug model with a 50k vocabulary ~33), but an order of magnitude beyond that
  is a unit slip (``params_b`` in parameters, or in millions);
* ``step_time_s`` in (``MIN_STEP_TIME_S``, ``MAX_STEP_TIME_S``] = (1 us, 10^6 s]: a training
  step is at least one kernel launch (~5 us) and no step lasts 11.6 days.
"""

from __future__ import annotations

import math

from pipeline.ingest.core.derive import Reject

MAX_ACCELERATORS = 10_000_000
MFU_CONSISTENCY_FACTOR = 3.0
MIN_PARAMS_B = 1e-4
MAX_PARAMS_B = 1e5
SHAPE_FACTOR_LOW = 4.0
SHAPE_FACTOR_HIGH = 64.0
MIN_STEP_TIME_S = 1e-6
MAX_STEP_TIME_S = 1e6


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


def check_params(params_b: float, name: str = "params_b") -> None:
    if not MIN_PARAMS_B <= params_b <= MAX_PARAMS_B:
        raise Reject("out_of_range", f"{name}={params_b:.6g} outside the plausible "
                                     f"{MIN_PARAMS_B:g}..{MAX_PARAMS_B:g} (billions of "
                                     "parameters: 100 thousand to 100 trillion)")


def check_shape(active_params: float, n_layers: int | None, d_model: int | None) -> None:
    """The (active) parameter count against ``12 L d^2`` (see the module docstring)."""
    if not n_layers or not d_model:
        return
    ratio = active_params / (12.0 * n_layers * float(d_model) ** 2)
    if not 1.0 / SHAPE_FACTOR_LOW <= ratio <= SHAPE_FACTOR_HIGH:
        raise Reject("out_of_range", f"shape n_layers={n_layers}, d_model={d_model} holds "
                                     f"~{12.0 * n_layers * float(d_model) ** 2:.4g} parameters "
                                     f"(12 L d^2) but the run states {active_params:.4g} "
                                     f"(ratio {ratio:.3g}, plausible 1/{SHAPE_FACTOR_LOW:g}.."
                                     f"{SHAPE_FACTOR_HIGH:g})")


def check_step_time(step_time_s: float | None) -> None:
    if step_time_s is not None and not MIN_STEP_TIME_S < step_time_s <= MAX_STEP_TIME_S:
        raise Reject("out_of_range", f"step_time_s={step_time_s:.6g} outside the physical "
                                     f"({MIN_STEP_TIME_S:g}, {MAX_STEP_TIME_S:g}] s")
