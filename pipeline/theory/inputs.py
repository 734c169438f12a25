"""The inputs of the cost model: hardware, model shape, layout and modelling constants.

Every field is a float or a numpy array; arrays broadcast against each other, so one call of
:func:`pipeline.theory.cost.step_cost` evaluates any number of configurations at once.
:func:`validate` turns a bad configuration into a ValueError that names the field.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

import numpy as np

ArrayLike = Any  # float | np.ndarray

HARDWARE_FIELDS = ("peak_flops_per_s", "hbm_bytes_per_s", "scaleup_bytes_per_s",
                   "scaleup_domain_size", "scaleout_bytes_per_s")


@dataclass(frozen=True)
class Hardware:
    """One accelerator type, per chip (catalog row plus latency constants).

    Attributes:
        peak_flops_per_s: dense peak at the training precision, F (FLOP/s).
        hbm_bytes_per_s: HBM bandwidth, M (B/s).
        scaleup_bytes_per_s: scale-up (NVLink/ICI) bandwidth per chip PER DIRECTION (B/s).
            The H100 datasheet's "900 GB/s" is both directions together: 450e9 here.
        scaleup_domain_size: chips in one scale-up domain, n_NV (8 for HGX H100, 72 for GB200).
        scaleout_bytes_per_s: scale-out (IB/RoCE/DCN) bandwidth per chip per direction (B/s).
        hbm_bytes: HBM capacity as the driver reports it (B; catalog ``hbm_usable_bytes``);
            only the memory check uses it.
        kernel_latency_s: minimum time of one kernel on the layer critical path, l_k (s) [R].
        scaleup_latency_s: latency of one collective inside the scale-up domain, l_NV (s) [R].
        scaleout_latency_s: latency of one collective that leaves the domain, l_IB (s) [R].
    """

    peak_flops_per_s: ArrayLike
    hbm_bytes_per_s: ArrayLike
    scaleup_bytes_per_s: ArrayLike
    scaleup_domain_size: ArrayLike
    scaleout_bytes_per_s: ArrayLike
    hbm_bytes: ArrayLike = np.inf
    kernel_latency_s: ArrayLike = 0.0
    scaleup_latency_s: ArrayLike = 0.0
    scaleout_latency_s: ArrayLike = 0.0

    def scaled(self, **factors: float) -> "Hardware":
        """A copy with named fields multiplied by factors (for limit tests and scenarios)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, factor in factors.items():
            values[name] = np.asarray(values[name], dtype=float) * factor
        return Hardware(**values)


@dataclass(frozen=True)
class Shape:
    """A transformer, abstracted as in ml_par_sim: each layer is ``blocks_per_layer`` blocks of
    two linears (d -> h d -> d), h = N_act / (2 L d^2), plus optional MoE experts.

    Attributes:
        params: total parameters N (count).
        active_params: parameters active per token N_act (= params for dense).
        n_layers: L.
        d_model: d.
        seq_len: tokens per sequence (attention FLOP only).
        expert_fraction: share of N_act that sits in routed experts (0 for dense).
        top_k: experts per token, k (all-to-all volume).
        n_experts: routed experts E (caps ep).
        attention_flop_per_token: extra FLOP per token outside 6 N_act (e.g. 12 L d s, PaLM
            App. B); 0 follows the paper and ml_par_sim.
    """

    params: ArrayLike
    active_params: ArrayLike
    n_layers: ArrayLike
    d_model: ArrayLike
    seq_len: ArrayLike = 2048.0
    expert_fraction: ArrayLike = 0.0
    top_k: ArrayLike = 1.0
    n_experts: ArrayLike = 1.0
    attention_flop_per_token: ArrayLike = 0.0


@dataclass(frozen=True)
class Layout:
    """A parallel layout. G = dp * ep * tp1 * tp2 * pp.

    Attributes:
        dp: data-parallel degree (token replicas besides ep).
        tp1: tensor-parallel degree splitting the hidden width h d (1-D TP: tp1 = tp).
        tp2: tensor-parallel degree splitting the residual width d (2-D TP; 1 for 1-D).
        pp: pipeline stages.
        ep: expert-parallel degree; tokens are split over dp * ep replicas as well.
        microbatches: m, microbatches per step per replica.
        zero_stage: 0-2 (gradient all-reduce at step end) or 3 (FSDP: per-microbatch
            all-gathers and reduce-scatter).
        interleave: v, virtual pipeline chunks per stage (1 = plain 1F1B).
    """

    dp: ArrayLike
    tp1: ArrayLike = 1.0
    tp2: ArrayLike = 1.0
    pp: ArrayLike = 1.0
    ep: ArrayLike = 1.0
    microbatches: ArrayLike = 1.0
    zero_stage: ArrayLike = 0.0
    interleave: ArrayLike = 1.0

    @property
    def n_accelerators(self) -> np.ndarray:
        degrees = (self.dp, self.ep, self.tp1, self.tp2, self.pp)
        return np.prod(np.broadcast_arrays(*(np.asarray(x, float) for x in degrees)), axis=0)


@dataclass(frozen=True)
class Constants:
    """Modelling constants (``params.yaml: theory.model``).

    Attributes:
        bytes_per_value: w, bytes per weight, gradient and activation value.
        weight_passes: HBM passes over the local weights per microbatch (4 [C]).
        activation_passes: HBM passes over each matmul's input and output per microbatch
            (3: forward, input gradient, weight gradient) [R].
        blocks_per_layer: TP blocks per layer (1 = ml_par_sim's d -> 5d -> d; 2 = attention +
            MLP, as in Megatron) [R].
        kernels_per_layer: kernels on the critical path per layer, forward + backward [R].
        dp_overlap: "microbatch" (gradient reduction overlaps the last microbatch's backward
            only) or "step" (it overlaps the whole backward of the step) [R].
        alltoall_passes: MoE all-to-alls per layer: dispatch + combine, forward + backward [R].
        fsdp_gather: ZeRO-3 traffic. "microbatch": parameters all-gathered forward and
            backward and gradients reduce-scattered every microbatch (PyTorch FSDP's default
            reshard-after-forward), 1.5 m gradient all-reduces' worth; "step": parameters
            gathered once and gradients reduce-scattered once per step (Llama 3's FSDP without
            resharding), one all-reduce's worth [R].
    """

    bytes_per_value: float = 2.0
    weight_passes: float = 4.0
    activation_passes: float = 3.0
    blocks_per_layer: float = 1.0
    kernels_per_layer: float = 4.0
    dp_overlap: str = "step"
    alltoall_passes: float = 4.0
    fsdp_gather: str = "microbatch"


def hardware_from_spec(spec: Mapping[str, Any], peak_flops_per_s: float | None,
                       latency: Mapping[str, float], overrides: Mapping[str, Any] | None = None,
                       where: str = "hardware") -> Hardware:
    """Build a Hardware from a catalog ``spec`` dict, a peak and latency constants.

    ``overrides`` (scenario fields) replace catalog values. A field still missing (None/NaN)
    raises ValueError naming ``where.field``.
    """
    values: dict[str, Any] = {k: spec.get(k) for k in HARDWARE_FIELDS}
    # the capacity a layout must fit in is the driver's (catalog hbm_usable_bytes), not the
    # marketed figure; a catalog without the column falls back to the marketed one
    usable = spec.get("hbm_usable_bytes")
    values["hbm_bytes"] = usable if usable is not None and np.isfinite(float(usable)) \
        else spec.get("hbm_bytes")
    values["peak_flops_per_s"] = peak_flops_per_s
    values.update({k: latency.get(k, 0.0) for k in
                   ("kernel_latency_s", "scaleup_latency_s", "scaleout_latency_s")})
    for key, value in (overrides or {}).items():
        if key not in values:
            raise ValueError(f"{where}.{key}: not a hardware field "
                             f"(known: {', '.join(sorted(values))})")
        values[key] = value
    for key, value in values.items():
        if key == "hbm_bytes" and (value is None or not np.isfinite(float(value))):
            values[key] = np.inf  # capacity is only used by the optional memory check
            continue
        if value is None or not np.isfinite(float(value)):
            raise ValueError(f"{where}.{key}: missing for accelerator "
                             f"{spec.get('accelerator', '?')!s} (catalog field is empty; give it "
                             f"in the scenario's hardware overrides)")
        if float(value) < 0 or (key in HARDWARE_FIELDS and float(value) <= 0):
            raise ValueError(f"{where}.{key}: must be positive, got {value!r}")
        values[key] = float(value)
    return Hardware(**values)


def _arr(x: ArrayLike) -> np.ndarray:
    return np.asarray(x, dtype=float)


def validate(hw: Hardware, shape: Shape, layout: Layout, strict_divisibility: bool = True) -> None:
    """Raise ValueError naming the first bad field of a configuration (any element bad).

    Checks: positive, finite hardware fields; positive integer-valued degrees; at least one
    accelerator; tp1 <= h d and tp2 <= d (a tensor shard must keep at least one column);
    pp <= L and, when ``strict_divisibility``, L divisible by pp; ep <= n_experts.
    """
    for name in HARDWARE_FIELDS:
        value = _arr(getattr(hw, name))
        if np.any(~(value > 0)):
            raise ValueError(f"hardware.{name}: must be a positive number, got {value.min()!r}")
    for name in ("kernel_latency_s", "scaleup_latency_s", "scaleout_latency_s"):
        value = _arr(getattr(hw, name))
        if np.any(~(value >= 0)) or np.any(~np.isfinite(value)):
            raise ValueError(f"hardware.{name}: must be a finite number >= 0")
    for name in ("params", "active_params", "n_layers", "d_model", "seq_len"):
        value = _arr(getattr(shape, name))
        if np.any(~(value > 0)) or np.any(~np.isfinite(value)):
            raise ValueError(f"shape.{name}: must be a positive finite number")
    if np.any(_arr(shape.active_params) > _arr(shape.params) * (1 + 1e-9)):
        raise ValueError("shape.active_params: exceeds shape.params")
    if np.any(~((_arr(shape.expert_fraction) >= 0) & (_arr(shape.expert_fraction) < 1))):
        raise ValueError("shape.expert_fraction: must lie in [0, 1)")
    if np.any(_arr(layout.n_accelerators) < 1):
        raise ValueError("layout.n_accelerators: zero accelerators (dp*ep*tp*pp must be >= 1)")
    for name in ("dp", "tp1", "tp2", "pp", "ep", "microbatches", "interleave"):
        value = _arr(getattr(layout, name))
        if np.any(~(value >= 1)) or np.any(value != np.round(value)):
            raise ValueError(f"layout.{name}: must be a positive integer, got {value.min()!r}")
    if np.any(~np.isin(_arr(layout.zero_stage), (0, 1, 2, 3))):
        raise ValueError("layout.zero_stage: must be 0, 1, 2 or 3")
    layers, d = _arr(shape.n_layers), _arr(shape.d_model)
    hidden = _arr(shape.active_params) / (2.0 * layers * d)  # h d, the hidden width
    if np.any(_arr(layout.tp1) * _arr(layout.tp2) > d) or np.any(_arr(layout.tp1) > hidden):
        raise ValueError("layout.tp: tensor parallelism larger than d_model allows "
                         "(tp1 * tp2 must be <= d_model and tp1 <= the hidden width)")
    if np.any(_arr(layout.tp2) > d):
        raise ValueError("layout.tp2: larger than d_model")
    pp = _arr(layout.pp)
    if np.any(pp > layers):
        raise ValueError("layout.pp: more pipeline stages than layers")
    if strict_divisibility and np.any(np.mod(layers, pp) != 0):
        raise ValueError("layout.pp: n_layers is not divisible by pp")
    if np.any(_arr(layout.ep) > _arr(shape.n_experts)):
        raise ValueError("layout.ep: larger than shape.n_experts")
