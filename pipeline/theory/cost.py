"""Time per optimizer step, by component, and the utilization ceiling of a configuration.

Vectorised: every input may be a numpy array; the arrays broadcast and every output has their
common shape. No Python loop runs over configurations. Equations, symbols and sources are in
``docs/theory.md``; the tags below follow ``docs/theory.md``: [C] as in
ml_par_sim (run_optimizer2.ipynb), [R] a reconstruction of the paper's model, not its printed
equation.

Overlap rule (documented in docs/theory.md §3): within a phase, compute, HBM traffic, scale-up
link traffic and scale-out link traffic overlap, so a phase lasts as long as its slowest
resource [C: ``model_batch_secs`` takes the max per phase]; the two link classes are separate
resources, and the axes that share one link class add. The step has two phases: the *main*
phase (all forward and backward work) and the *tail* (the part of the backward that the data-
parallel gradient reduction overlaps: the last microbatch's backward, or the whole backward
with ``dp_overlap = "step"``). The pipeline bubble and the per-layer latency chain add on top.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.measures import FLOP_PER_PARAM_PER_TOKEN
from pipeline.theory.inputs import Constants, Hardware, Layout, Shape, validate
from pipeline.vocab import COMPONENTS

BACKWARD_SHARE = 2.0 / 3.0  # backward = 2x forward FLOP [C]
# ZeRO-3/FSDP bytes per gather round relative to one gradient all-reduce (see step_cost) [R]
FSDP_PER_ALLREDUCE = 1.5


@dataclass(frozen=True)
class StepCost:
    """Per-step times (s) per accelerator on the critical stage, and the resulting ceiling.

    ``t_*`` are each component's time on its own (a link class's axes share it); ``t_step_s`` is
    the combined step time under the overlap rule; ``utilization`` = model FLOP per step /
    (G F t_step); ``binding`` indexes ``COMPONENTS`` (largest exposed component).
    """

    t_compute_s: np.ndarray
    t_hbm_s: np.ndarray
    t_net_tp_s: np.ndarray
    t_net_dp_s: np.ndarray
    t_net_pp_s: np.ndarray
    t_net_ep_s: np.ndarray
    t_bubble_s: np.ndarray
    t_latency_s: np.ndarray
    t_step_s: np.ndarray
    utilization: np.ndarray
    binding: np.ndarray
    n_accelerators: np.ndarray
    microbatch_tokens: np.ndarray
    tau_layer_s: np.ndarray

    def binding_names(self) -> np.ndarray:
        return np.asarray(COMPONENTS, dtype=object)[self.binding]


def _f(x) -> np.ndarray:
    return np.asarray(x, dtype=float)


def _group_split(size: np.ndarray, stride: np.ndarray, domain: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Members of a collective group inside one scale-up domain (p_in) and domains spanned (p_out).

    Ranks are laid out tp1, tp2, ep, dp, pp from the innermost; a group of ``size`` ranks
    ``stride`` apart has floor(domain / stride) members per domain (at least 1, at most size).
    """
    p_in = np.minimum(np.maximum(np.floor(domain / stride), 1.0), size)
    return p_in, size / p_in


def allreduce_bytes(values: np.ndarray, size: np.ndarray, stride: np.ndarray,
                    domain: np.ndarray, bytes_per_value: float) -> tuple[np.ndarray, np.ndarray]:
    """Bytes each rank sends per direction for a hierarchical ring all-reduce of ``values``.

    Ring all-reduce over p ranks: 2 (p-1)/p n w [R; = ml_par_sim's formula, C]. Hierarchical:
    2 (p_in-1)/p_in n w on the scale-up link, then 2 (p_out-1)/p_out (n / p_in) w on scale-out.
    Returns (scale-up bytes, scale-out bytes).
    """
    p_in, p_out = _group_split(size, stride, domain)
    up = 2.0 * (p_in - 1.0) / p_in * values * bytes_per_value
    out = 2.0 * (p_out - 1.0) / p_out * values / p_in * bytes_per_value
    return up, out


def alltoall_bytes(values: np.ndarray, size: np.ndarray, stride: np.ndarray,
                   domain: np.ndarray, bytes_per_value: float) -> tuple[np.ndarray, np.ndarray]:
    """Bytes each rank sends in an all-to-all of ``values`` spread evenly over ``size`` ranks.

    (p-1)/p of the values leave the rank; the share going to peers in its own scale-up domain,
    (p_in-1)/(p-1), uses the scale-up link, the rest the scale-out link [R].
    """
    p_in, _ = _group_split(size, stride, domain)
    leaving = (size - 1.0) / size * values * bytes_per_value
    inside = np.where(size > 1.0, (p_in - 1.0) / np.maximum(size - 1.0, 1.0), 0.0)
    return leaving * inside, leaving * (1.0 - inside)


def _argmax_first(times: tuple[np.ndarray, ...]) -> np.ndarray:
    """Index of the largest array element-wise, first on ties (faster than stack + argmax)."""
    best = np.asarray(times[0], dtype=float)
    index = np.zeros(np.broadcast(*times).shape, dtype=np.int8)
    for i, t in enumerate(times[1:], start=1):
        larger = t > best
        best = np.where(larger, t, best)
        index = np.where(larger, np.int8(i), index)
    return index


def _link_seconds(up_bytes: np.ndarray, out_bytes: np.ndarray, hw: Hardware) -> np.ndarray:
    """An axis's time on its busier link class (the two link classes run concurrently)."""
    return np.maximum(up_bytes / _f(hw.scaleup_bytes_per_s),
                      out_bytes / _f(hw.scaleout_bytes_per_s))


@dataclass
class _Config:
    """The quantities of one (broadcast) configuration that the components share."""

    w: float
    domain: np.ndarray
    dp: np.ndarray
    tp1: np.ndarray
    tp2: np.ndarray
    tp: np.ndarray
    pp: np.ndarray
    ep: np.ndarray
    m: np.ndarray
    v: np.ndarray
    zero3: np.ndarray
    L: np.ndarray
    d: np.ndarray
    b: np.ndarray
    layers_per_stage: np.ndarray
    hidden: np.ndarray
    blocks: float
    moe: np.ndarray
    replicas: np.ndarray
    gpus: np.ndarray
    dense_local: np.ndarray
    expert_local: np.ndarray
    params_local: np.ndarray


def _config(shape: Shape, layout: Layout, batch: np.ndarray, const: Constants,
            domain: np.ndarray) -> _Config:
    dp, tp1, tp2 = _f(layout.dp), _f(layout.tp1), _f(layout.tp2)
    pp, ep, m = _f(layout.pp), _f(layout.ep), _f(layout.microbatches)
    L, d = _f(shape.n_layers), _f(shape.d_model)
    n_total, n_act, f_exp = _f(shape.params), _f(shape.active_params), _f(shape.expert_fraction)
    tp = tp1 * tp2
    replicas = dp * ep
    # Parameters held per accelerator: dense part split by tp and pp, experts also by ep.
    dense_params = n_act * (1.0 - f_exp)
    expert_params = n_total - dense_params
    dense_local = dense_params / (tp * pp)
    expert_local = expert_params / (tp * pp * ep)
    return _Config(
        w=const.bytes_per_value, domain=domain, dp=dp, tp1=tp1, tp2=tp2, tp=tp, pp=pp, ep=ep,
        m=m, v=_f(layout.interleave), zero3=_f(layout.zero_stage) >= 3, L=L, d=d,
        b=batch / (replicas * m),  # tokens per microbatch per replica, b_mu
        layers_per_stage=L / pp,
        hidden=n_act / (2.0 * L * d),  # h d: hidden width of one layer's linears
        blocks=const.blocks_per_layer, moe=f_exp > 0.0, replicas=replicas,
        gpus=dp * ep * tp * pp, dense_local=dense_local, expert_local=expert_local,
        params_local=dense_local + expert_local)


def _tp_bytes(c: _Config, hw: Hardware) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TP: per block, forward and backward, an all-reduce of the hidden activations over the
    tp2 group and of the residual activations over the tp1 group (2-D TP) [R; C for 1-D].
    The two TP groups are placed either way round (tp1 innermost, or tp2 innermost); the
    cheaper placement is taken, so the larger all-reduce stays inside the scale-up domain.
    Returns scale-up bytes, scale-out bytes and whether tp2 is the inner group."""
    per_block = 2.0 * c.m * c.layers_per_stage * c.blocks
    one = np.ones_like(c.tp1)
    hid_vals, res_vals = c.b * c.hidden / (c.blocks * c.tp1), c.b * c.d / c.tp2
    a_hu, a_ho = allreduce_bytes(hid_vals, c.tp2, c.tp1, c.domain, c.w)   # tp1 inner
    a_ru, a_ro = allreduce_bytes(res_vals, c.tp1, one, c.domain, c.w)
    b_hu, b_ho = allreduce_bytes(hid_vals, c.tp2, one, c.domain, c.w)     # tp2 inner
    b_ru, b_ro = allreduce_bytes(res_vals, c.tp1, c.tp2, c.domain, c.w)
    up_s, out_s = _f(hw.scaleup_bytes_per_s), _f(hw.scaleout_bytes_per_s)
    tp2_inner = ((b_hu + b_ru) / up_s + (b_ho + b_ro) / out_s
                 < (a_hu + a_ru) / up_s + (a_ho + a_ro) / out_s)
    tp_up = per_block * np.where(tp2_inner, b_hu + b_ru, a_hu + a_ru)
    tp_out = per_block * np.where(tp2_inner, b_ho + b_ro, a_ho + a_ro)
    return tp_up, tp_out, tp2_inner


def _pp_bytes(c: _Config) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PP: activations forward and gradients backward at each of v chunk boundaries per
    microbatch, split over the tp ranks (scatter/gather) [R]. Returns scale-up and scale-out
    bytes and whether the pipeline lies inside one scale-up domain."""
    stage_stride = c.tp * c.ep * c.dp
    pp_bytes = np.where(c.pp > 1.0, 2.0 * c.m * c.v * c.b * c.d * c.w / c.tp, 0.0)
    pp_inside = stage_stride * c.pp <= c.domain
    return np.where(pp_inside, pp_bytes, 0.0), np.where(pp_inside, 0.0, pp_bytes), pp_inside


def _dp_bytes(c: _Config) -> tuple[np.ndarray, np.ndarray]:
    """DP: gradient all-reduce of the local shard at the end of the step (ZeRO 0-2), or FSDP's
    two all-gathers and one reduce-scatter per microbatch (ZeRO-3) in the main phase [R]."""
    dd_up, dd_out = allreduce_bytes(c.dense_local, c.replicas, c.tp, c.domain, c.w)
    de_up, de_out = allreduce_bytes(c.expert_local, c.dp, c.tp * c.ep, c.domain, c.w)
    return dd_up + de_up, dd_out + de_out


def _latency(c: _Config, hw: Hardware, const: Constants, tp2_inner: np.ndarray,
             pp_inside: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Latency chain: one forward + backward traversal of all L layers is a dependency chain of
    tau_L per layer that no parallelism shortens [R, theory.md §2.5]; stage crossings add one
    point-to-point latency each way. Other microbatches' latencies hide behind work.
    Returns (t_latency, tau per layer)."""
    l_up, l_out = _f(hw.scaleup_latency_s), _f(hw.scaleout_latency_s)
    tp, tp1, tp2, domain = c.tp, c.tp1, c.tp2, c.domain
    inner_tp1 = np.where(tp2_inner, tp, tp1) <= domain  # is the tp1 group inside one domain?
    inner_tp2 = np.where(tp2_inner, tp2, tp) <= domain
    tp1_lat = np.where(tp1 > 1.0, np.where(inner_tp1, l_up, l_out), 0.0)
    tp2_lat = np.where(tp2 > 1.0, np.where(inner_tp2, l_up, l_out), 0.0)
    ep_lat = np.where(c.moe & (c.ep > 1.0), np.where(tp * c.ep <= domain, l_up, l_out), 0.0)
    tau = (const.kernels_per_layer * _f(hw.kernel_latency_s)
           + 2.0 * c.blocks * (tp1_lat + tp2_lat) + const.alltoall_passes * ep_lat)
    pp_lat = np.where(c.pp > 1.0, 2.0 * (c.pp - 1.0) * np.where(pp_inside, l_up, l_out), 0.0)
    return c.L * tau + pp_lat, tau


def step_cost(hw: Hardware, shape: Shape, layout: Layout, batch_tokens, const: Constants
              ) -> StepCost:
    """Evaluate every configuration (broadcast over all array inputs). No validation here:
    call :func:`pipeline.theory.inputs.validate` first where inputs are untrusted.

    The components follow docs/theory.md §3: compute and HBM, the bytes of each parallel axis
    (``_tp_bytes``, ``_pp_bytes``, EP, ``_dp_bytes``), the phases of a step, the pipeline
    bubble and the latency chain (``_latency``).
    """
    F = _f(hw.peak_flops_per_s)
    c = _config(shape, layout, _f(batch_tokens), const, _f(hw.scaleup_domain_size))
    w, m = c.w, c.m

    # Compute: model FLOP over peak [C: 6 N_act per token].
    flop_per_token = (FLOP_PER_PARAM_PER_TOKEN * _f(shape.active_params)
                      + _f(shape.attention_flop_per_token))
    model_flop = flop_per_token * _f(batch_tokens)
    t_compute = model_flop / (c.gpus * F)

    # HBM: weight passes per microbatch plus activation passes per matmul [C]/[R].
    weight_bytes = m * const.weight_passes * c.params_local * w
    act_per_layer = (2.0 * const.activation_passes * c.b
                     * (c.blocks * c.d / c.tp2 + c.hidden / c.tp1) * w)
    t_hbm = (weight_bytes + m * c.layers_per_stage * act_per_layer) / _f(hw.hbm_bytes_per_s)

    tp_up, tp_out, tp2_inner = _tp_bytes(c, hw)
    pp_up, pp_out, pp_inside = _pp_bytes(c)
    # EP: dispatch and combine all-to-all of k b d values, forward and backward [R].
    ep_values = np.where(c.moe, m * c.layers_per_stage * const.alltoall_passes
                         * _f(shape.top_k) * c.b * c.d / c.tp, 0.0)
    ep_up, ep_out = alltoall_bytes(ep_values, c.ep, c.tp, c.domain, w)
    dp_up, dp_out = _dp_bytes(c)
    # Per microbatch two all-gathers (forward, backward) and one reduce-scatter, each sending
    # (p-1)/p n w per rank and direction: 3 (p-1)/p n w = 1.5 x the all-reduce's 2 (p-1)/p n w.
    # Without resharding (fsdp_gather = "step") one all-gather and one reduce-scatter a step.
    rounds = FSDP_PER_ALLREDUCE * m if const.fsdp_gather == "microbatch" else np.ones_like(m)
    fsdp = np.where(c.zero3, rounds, 0.0)
    end = np.where(c.zero3, 0.0, 1.0)

    main_up = (tp_up + pp_up + ep_up + fsdp * dp_up) / _f(hw.scaleup_bytes_per_s)
    main_out = (tp_out + pp_out + ep_out + fsdp * dp_out) / _f(hw.scaleout_bytes_per_s)
    tail_up = end * dp_up / _f(hw.scaleup_bytes_per_s)
    tail_out = end * dp_out / _f(hw.scaleout_bytes_per_s)

    # Phases: max within, sum across [C].
    tail = BACKWARD_SHARE / m if const.dp_overlap == "microbatch" else BACKWARD_SHARE
    t_work = np.maximum(np.maximum(t_compute, t_hbm), np.maximum(main_up, main_out))
    t_main = (1.0 - tail) * t_work
    t_tail = np.maximum(tail * np.maximum(t_compute, t_hbm),
                        np.maximum(tail * main_up + tail_up, tail * main_out + tail_out))
    dp_exposed = t_tail - tail * t_work

    # Bubble: (pp-1)/v microbatch-stage slots of fill and drain (1F1B; interleaved) [R].
    t_bubble = (c.pp - 1.0) / (c.v * m) * t_work
    t_latency, tau = _latency(c, hw, const, tp2_inner, pp_inside)

    t_step = t_main + t_tail + t_bubble + t_latency
    utilization = model_flop / (c.gpus * F * t_step)

    t_tp = _link_seconds(tp_up, tp_out, hw)
    t_pp = _link_seconds(pp_up, pp_out, hw)
    t_ep = _link_seconds(ep_up, ep_out, hw)
    t_dp = _link_seconds(dp_up, dp_out, hw) * np.where(c.zero3, fsdp, 1.0)
    exposed_dp = np.where(c.zero3, t_dp, dp_exposed)
    binding = _argmax_first((t_compute, t_hbm, t_tp, exposed_dp, t_pp, t_ep, t_bubble,
                             t_latency))
    return StepCost(
        t_compute_s=t_compute, t_hbm_s=t_hbm, t_net_tp_s=t_tp, t_net_dp_s=t_dp, t_net_pp_s=t_pp,
        t_net_ep_s=t_ep, t_bubble_s=t_bubble, t_latency_s=t_latency, t_step_s=t_step,
        utilization=utilization, binding=binding, n_accelerators=c.gpus, microbatch_tokens=c.b,
        tau_layer_s=tau)


def evaluate(hw: Hardware, shape: Shape, layout: Layout, batch_tokens, const: Constants,
             strict_divisibility: bool = True) -> StepCost:
    """Validate the configurations (ValueError naming the field), then cost them."""
    validate(hw, shape, layout, strict_divisibility=strict_divisibility)
    return step_cost(hw, shape, layout, batch_tokens, const)
