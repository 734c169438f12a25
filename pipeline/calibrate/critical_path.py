"""The step time of one configuration along its critical path, component by component.

One function, :func:`step_components`, used by the fit, the per-run decomposition, the
frontier search and the planner (``pipeline/calibrate/step.py`` wraps it for tables of
layouts). Vectorised: every field is an array over configurations. Derivation and sources:
docs/theory.md §11.

    t_stage  = t_comp / m + L_s k + ((1 - omega) (t_TP + t_CP + t_EP) + t_TP,out) / m + t_p2p
                                                                             (a microbatch)
    t_pipe   = (m + (pp - 1) / v) t_stage                       (1F1B, v interleaved chunks)
    t_DP,exp = max(0, t_DP - phi W)          (W: the backward the gradient traffic can hide in)
    t_step   = t_pipe + t_DP,exp + t_opt + c0

- t_comp: the hardware FLOP of the step on this rank (model FLOP plus the recomputed forward:
  all of it with full recomputation, the attention core with selective) at the GEMM rate the
  microbenchmarks give for this rank's microbatch GEMMs, times the family's compute efficiency
  eta (non-GEMM kernels, stalls); eta <= 1, so no rank runs above its measured GEMM rate. Under
  fp8 only the linear layers run at the fp8 peak; attention stays at the 16-bit peak.
- k: the family's seconds per layer and microbatch outside the GEMMs' rate: the launches
  and memory-bound kernels (norms, activations, softmax, optimizer-free glue) that a layer
  runs whatever its size; L_s = L / pp layers per stage. It is what makes small microbatches
  slow beyond the GEMM roofline.
- t_scores: where the attention core is not fused (no FlashAttention: Megatron-LM before
  2022), the s x s score tensors of every head go through HBM: ``SCORE_BYTES_FORWARD`` per
  score element forward (again when the forward is recomputed), ``SCORE_BYTES_BACKWARD``
  backward, at the chip's HBM bandwidth. Priced per microbatch on the stage, beside k.
- t_TP: per layer and microbatch two collectives forward and two backward over the TP group
  (all-reduce, or all-gather + reduce-scatter with sequence parallelism), two more forward with
  full recomputation; message = tokens x d x w. t_CP: the ring exchange of K and V (d_kv = d, an
  upper bound where the shape gives no KV width) once forward, twice backward. t_EP: dispatch +
  combine all-to-all forward and backward of top_k tokens x d x w. omega: the share of these
  that the family's kernels overlap with compute; 0 where the framework has no such overlap
  (``Config.tp_comm_overlap`` False: Megatron-LM's synchronous TP all-reduce before
  Transformer Engine's userbuffers). t_TP,out: the TP traffic on the scale-out links, where
  the TP group is larger than the scale-up domain (``ring_parts``); no family hides it, since
  comm+GEMM overlap runs only inside one NVLink domain (Transformer Engine's userbuffers:
  NVIDIA/TransformerEngine#1071, 2024, single-node TP only; #1470, 2025, multi-node NVLink).
  The ideal machine hides it as it hides the rest.
- t_p2p: one activation send forward and one gradient send backward per chunk boundary
  (v per stage), tokens x d x w / tp (scatter/gather over the TP ranks).
- t_DP: ZeRO-0 an all-reduce of the local gradients, ZeRO-1/2 a reduce-scatter plus the
  parameter all-gather, ZeRO-3 two all-gathers and a reduce-scatter, in the framework's
  buckets (``pipeline/calibrate/families.py``; each pays the ring's latency); phi = 0 where
  the framework reduces the gradients only after the backward (``Config.dp_comm_overlap``
  False: Megatron-LM's ``local`` DDP before 2023). W is the last
  microbatch's backward for the gradient reduction (ZeRO 0-2: earlier microbatches' gradients
  wait for accumulation to finish), the first microbatch's forward for ZeRO-1/2's parameter
  all-gather. ZeRO-3 / FSDP gathers each layer's parameters forward and backward and
  reduce-scatters its gradients in every microbatch over the sharding group (HSDP: a smaller
  group, plus an all-reduce across replicas); a layer's traffic hides at most behind its
  neighbour's compute (prefetch), forward and backward separately (``_dp_exposed``). The ideal
  machine prices the same traffic, so the ceiling of a ZeRO-3 layout is bound by it.
- L_s: the slowest stage's layers, ceil(L / pp) when pp does not divide L evenly.
- t_opt: Adam's pass over the rank's optimizer shard at HBM bandwidth, ``OPTIMIZER_BYTES``
  per parameter. c0: the family's fixed seconds per step (data loading, logging, launch gaps).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from pipeline.calibrate import moe
from pipeline.calibrate.hardware import Network, gemm_efficiency, wave_efficiency

COMPONENTS = ("compute", "kernel_overhead", "tp_comm", "cp_comm", "ep_comm", "pp_p2p", "bubble",
              "dp_comm", "optimizer", "fixed")
PARAMETERS = ("compute_efficiency", "tp_overlap", "dp_overlap", "fixed_s", "layer_overhead_s",
              "attention_efficiency", "expert_overhead_s")
# Adam with fp32 master weights: read weight, gradient, m and v (4 x 4 B), write weight, m, v
# (3 x 4 B) and the bf16 copy (2 B) = 30 B per parameter of the shard.
OPTIMIZER_BYTES = 30.0
# Recomputed share of a microbatch's forward FLOP: full 1/3 of the step (one more forward);
# selective the attention core only (Korthikanti et al. 2022, arXiv:2205.05198 §4.2).
BACKWARD_SHARE = 2.0 / 3.0
# HBM bytes per attention-score element (b x heads x s x s) of an unfused attention core at
# 2 B per value (Megatron-LM's CoreAttention: baddbmm, fused scale-mask-softmax, dropout,
# bmm; the tensors are Korthikanti et al. 2022's 5 a s^2 b activation terms, arXiv:2205.05198
# §4.1). Forward: QK^T writes the scores (2), softmax reads and writes them (2 + 2), dropout
# reads the probabilities and writes its output and 1-byte mask (2 + 2 + 1), the PV bmm reads
# the output (2) = 13. Backward: the PV bmm reads the dropout output and writes its gradient
# (2 + 2), dropout's backward reads mask and gradient and writes (1 + 2 + 2), softmax's
# backward reads probabilities and gradient and writes (2 + 2 + 2), the two QK^T-gradient
# bmms each read the score gradient (2 + 2) = 19.
SCORE_BYTES_FORWARD = 13.0
SCORE_BYTES_BACKWARD = 19.0
# HBM bytes per hidden element (token x d) per layer of the elementwise work outside the TP-split
# GEMM blocks at 2 B per value: the two norms and the two residual adds of a pre-norm block.
# Without sequence parallelism every TP rank does this work on the whole microbatch
# (Korthikanti et al. 2022, arXiv:2205.05198 §4.2.2: the norms and dropouts "are not
# parallelized" by TP, the 10 s b h of their activation memory); with it, a 1/tp share.
# Forward: each norm reads and writes (2 + 2), each residual add reads two and writes one
# (2 + 2 + 2) = 20. Backward: each norm's backward reads input and gradient and writes the
# gradient (2 + 2 + 2), each residual's gradient add reads two and writes one (2 + 2 + 2) = 24.
ELEMENTWISE_BYTES_FORWARD = 20.0
ELEMENTWISE_BYTES_BACKWARD = 24.0
# HBM bytes per FFN element (token x f, split over TP) of the MLP activation at 2 B per value.
# GeLU (GPT, Radford et al.; Megatron's fused bias-GeLU): forward reads the FC1 output and
# writes the activation (2 + 2); backward reads input and gradient, writes the gradient
# (2 + 2 + 2). SwiGLU (Shazeer 2020, arXiv:2002.05202; Llama): forward reads gate and up (2 f
# values) and writes f: 3 x 2; backward reads gate, up and the gradient (3 f), writes the two
# gradients (2 f): 5 x 2. Per FFN element f: GeLU 4 / 6, SwiGLU 6 / 10.
MLP_BYTES = {False: (4.0, 6.0), True: (6.0, 10.0)}
# HBM bytes per element of a linear layer's input (forward) or output gradient (backward) cast
# to FP8 with its transpose (Transformer Engine's fused cast-transpose: read 2 B, write the
# 1 B FP8 tensor and its 1 B transpose for the other GEMM's layout; Micikevicius et al. 2022,
# FP8 Formats for Deep Learning, arXiv:2209.05433, for the per-tensor scaled casts).
FP8_CAST_BYTES = 4.0


@dataclass(frozen=True)
class Config:
    """Arrays over configurations: model, batch, layout and schedule (docs/theory.md §11.1)."""

    params: np.ndarray
    active_params: np.ndarray
    expert_fraction: np.ndarray
    top_k: np.ndarray
    n_layers: np.ndarray
    d_model: np.ndarray
    batch_tokens: np.ndarray          # tokens per optimizer step (whole job)
    microbatch_tokens: np.ndarray     # tokens per microbatch on one rank (after cp split)
    microbatches: np.ndarray          # m per step per pipeline
    flop_per_token: np.ndarray        # model FLOP per token (6 N_act + attention as counted)
    counted_attention_flop_per_token: np.ndarray   # the attention part of flop_per_token
    attention_flop_per_token: np.ndarray           # 12 L d s, counted or not (recompute)
    dp: np.ndarray
    tp: np.ndarray
    pp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    zero_stage: np.ndarray
    recompute: np.ndarray             # 0 none, 1 selective, 2 full
    virtual_pipeline: np.ndarray
    sequence_parallel: np.ndarray
    reduce_bucket_bytes: np.ndarray   # gradient bucket of the framework (NaN: one per layer)
    gather_bucket_bytes: np.ndarray   # parameter all-gather unit (NaN: per layer, below)
    bytes_per_value: float = 2.0
    # the framework overlaps TP/CP/EP collectives with compute (None: every row does)
    tp_comm_overlap: np.ndarray | None = None
    # the framework overlaps its DP gradient traffic with the backward (None: every row does)
    dp_comm_overlap: np.ndarray | None = None
    # the attention core is fused, no s x s tensors in HBM (None: every row's is)
    fused_attention: np.ndarray | None = None
    head_dim: np.ndarray | None = None          # d / heads (needed where not fused)
    # HSDP: ranks of the ZeRO-3 sharding group (None or NaN: the whole dp group)
    shard_group: np.ndarray | None = None
    # ZeRO-3 gathers per layer where gather_bucket_bytes is NaN (None: 1) and the software's
    # transfer rate of its gathers and reduce-scatters, bytes/s per rank (None or NaN: links)
    gathers_per_layer: np.ndarray | None = None
    zero3_bytes_per_s: np.ndarray | None = None
    # pipeline schedules per optimizer step, each paying the fill-and-drain bubble (None or
    # NaN: 1, one schedule runs the step's microbatches; torchtitan and NeMo Automodel run one
    # per gradient-accumulation step)
    pipeline_flushes: np.ndarray | None = None
    # MoE (pipeline/calibrate/moe.py; None: the expert_fraction / top_k estimate alone)
    n_experts: np.ndarray | None = None
    expert_ffn_size: np.ndarray | None = None   # one routed expert's width (NaN: from counts)
    moe_layers: np.ndarray | None = None        # layers with routed experts
    etp: np.ndarray | None = None               # expert tensor parallel
    capacity_factor: np.ndarray | None = None   # NaN: dropless
    moe_imbalance: np.ndarray | None = None     # stated busiest/mean expert load (NaN: none)
    moe_a2a_overlap: np.ndarray | None = None   # dispatch overlapped with compute
    moe_dispatch_dedup: np.ndarray | None = None   # DeepEP-style: once per rank and node
    # dense FFN width and gated (SwiGLU) or not (None: 4 d, GeLU); the activation's HBM traffic
    ffn_size: np.ndarray | None = None
    gated_mlp: np.ndarray | None = None
    # the linear layers run in FP8 (fp8 / mxfp8): their casts' HBM traffic (None: none do)
    fp8_linear: np.ndarray | None = None

    @cached_property
    def score_bytes_per_token(self) -> np.ndarray | None:
        """HBM bytes of the unfused attention scores per token on a rank (None where every
        row is fused): (tokens x tp x pp) x (L / pp) x (heads / tp) x s score elements per
        rank = tokens x L x heads x s, times ``SCORE_BYTES_*`` (forward twice when it is
        recomputed); 0 on fused rows. Computed once per table (the fit asks often)."""
        if self.fused_attention is None or np.all(self.fused_attention):
            return None
        seq = _f(self.attention_flop_per_token) / (12.0 * _f(self.n_layers) * _f(self.d_model))
        heads = _f(self.d_model) / _f(self.head_dim)
        per = (SCORE_BYTES_FORWARD * np.where(_f(self.recompute) >= 1, 2.0, 1.0)
               + SCORE_BYTES_BACKWARD)
        out = _f(self.n_layers) * heads * seq * per
        return np.where(np.asarray(self.fused_attention, bool), 0.0, np.nan_to_num(out))


    @cached_property
    def elementwise_bytes_per_microbatch(self) -> np.ndarray:
        """HBM bytes per microbatch on a stage of the norms' and residual adds
        (``ELEMENTWISE_BYTES_*``; forward twice under full recomputation): L / pp x tokens x d
        on every TP rank without sequence parallelism, 1/tp of it with; plus the MLP
        activation's (``mlp_activation_bytes_per_token``). Once per table."""
        tp = np.maximum(_f(self.tp), 1.0)
        share = np.where(np.asarray(self.sequence_parallel, bool), 1.0 / tp, 1.0)
        per = (ELEMENTWISE_BYTES_FORWARD * np.where(_f(self.recompute) >= 2, 2.0, 1.0)
               + ELEMENTWISE_BYTES_BACKWARD)
        layers_stage = _f(self.n_layers) / np.maximum(_f(self.pp), 1.0)
        norms = _f(self.microbatch_tokens) * _f(self.d_model) * per * share
        mlp = (self.mlp_activation_bytes_per_token + self.fp8_cast_bytes_per_token) \
            * _f(self.microbatch_tokens)
        return layers_stage * (norms + mlp)

    @cached_property
    def fp8_cast_bytes_per_token(self) -> np.ndarray:
        """HBM bytes per token and layer on a rank of the FP8 casts (``FP8_CAST_BYTES`` per
        element; 0 unless ``fp8_linear``). Forward, the four linear layers' inputs: QKV and FC1
        read the whole hidden vector d, the attention projection d / tp, FC2 f / tp; backward,
        their output gradients: QKV 3 d / tp (the MHA width, an upper bound under GQA), FC1
        (2 if gated else 1) f / tp, the projection and FC2 d each. Weights are cast once per
        step (not per microbatch) and left out."""
        d = _f(self.d_model)
        if self.fp8_linear is None:
            return np.zeros(d.shape)
        tp = np.maximum(_f(self.tp), 1.0)
        f = d * 4.0 if self.ffn_size is None else np.where(_f(self.ffn_size) > 0,
                                                          _f(self.ffn_size), 4.0 * d)
        g = (np.ones(d.shape) if self.gated_mlp is None
             else np.where(np.asarray(self.gated_mlp, bool), 2.0, 1.0))
        inputs = 2.0 * d + d / tp + f / tp
        grads = 3.0 * d / tp + g * f / tp + 2.0 * d
        values = inputs + grads
        if self.n_experts is not None:   # MoE layers cast every routed copy (moe.py)
            routed = moe.fp8_cast_values_per_token(d, tp, self.top_k, self.expert_ffn_size,
                                                   self.etp)
            share = np.clip(_f(self.moe_layers) / np.maximum(_f(self.n_layers), 1.0), 0.0, 1.0)
            mixed = share * routed + (1.0 - share) * values
            values = np.where((_f(self.n_experts) > 1) & np.isfinite(routed), mixed, values)
        return np.where(np.asarray(self.fp8_linear, bool), FP8_CAST_BYTES * values, 0.0)

    @cached_property
    def param_split(self) -> tuple[np.ndarray, np.ndarray]:
        """(non-routed parameters, routed-expert parameters) of the model: the routed experts
        from the MoE columns (``moe.routed_total``), else from the counts as active^2 / params
        dense (the estimate where a row states no experts); (params, 0) for dense rows. A
        property of the configuration: worked out once, not on every step evaluation."""
        params, active = _f(self.params), _f(self.active_params)
        estimate = params - active * (1.0 - _f(self.expert_fraction))
        if self.n_experts is None:
            routed = estimate
        else:
            total = moe.routed_total(self.n_experts, self.top_k, self.expert_ffn_size,
                                     self.moe_layers, self.d_model, self.params,
                                     self.active_params)
            routed = np.where(total > 0, total, estimate)
        routed = np.clip(np.where(np.isfinite(routed), routed, 0.0), 0.0, params)
        return params - routed, routed

    @cached_property
    def mlp_activation_bytes_per_token(self) -> np.ndarray:
        """HBM bytes per token and layer on a rank of the dense MLP's activation
        (``MLP_BYTES``; forward twice under full recomputation) on its f / tp FFN elements;
        0 on MoE rows (their experts' activations: pipeline/calibrate/moe.py)."""
        d = _f(self.d_model)
        f = d * 4.0 if self.ffn_size is None else np.where(_f(self.ffn_size) > 0,
                                                          _f(self.ffn_size), 4.0 * d)
        gated = (np.zeros(d.shape, bool) if self.gated_mlp is None
                 else np.asarray(self.gated_mlp, bool))
        fwd = np.where(gated, MLP_BYTES[True][0], MLP_BYTES[False][0])
        bwd = np.where(gated, MLP_BYTES[True][1], MLP_BYTES[False][1])
        per = fwd * np.where(_f(self.recompute) >= 2, 2.0, 1.0) + bwd
        dense = _f(self.expert_fraction) <= 0
        return np.where(dense, f / np.maximum(_f(self.tp), 1.0) * per, 0.0)


@dataclass(frozen=True)
class Machine:
    """Arrays over configurations: the chip, its links and their measured efficiencies."""

    peak_flops_per_s: np.ndarray
    attention_peak_flops_per_s: np.ndarray   # 16-bit peak: attention runs there under fp8
    hbm_bytes_per_s: np.ndarray
    domain: np.ndarray
    scaleup_bytes_per_s: np.ndarray
    scaleout_bytes_per_s: np.ndarray
    gemm_max_efficiency: np.ndarray
    cluster: np.ndarray               # object: network of data/catalog/collectives.csv
    network: Network
    scaleup_latency_s: float
    launch_s: float
    ideal: bool = False               # links at spec, no latency, GEMMs at peak
    sm_count: np.ndarray | None = None   # SMs per chip (wave quantization; None/NaN: none)
    # catalog chip per configuration (None: the default network's figures for every chip)
    accelerator: np.ndarray | None = None

    @cached_property
    def cluster_masks(self) -> dict[str, np.ndarray]:
        """Rows of each network (computed once per machine: the step function asks often)."""
        names, codes = np.unique(self.cluster.astype(str), return_inverse=True)
        return {str(n): codes == i for i, n in enumerate(names)}

    def per_cluster(self, value) -> np.ndarray:
        """An array with ``value(cluster)`` on each cluster's rows."""
        out = np.empty(self.cluster.size)
        for name, mask in self.cluster_masks.items():
            out[mask] = value(name)
        return out

    @cached_property
    def cluster_chip_masks(self) -> dict[tuple[str, str | None], np.ndarray]:
        """Rows of each (network, chip) pair (once per machine)."""
        chips = (np.full(self.cluster.size, "", dtype=object) if self.accelerator is None
                 else self.accelerator)
        pairs = np.char.add(np.char.add(self.cluster.astype(str), "\x1f"), chips.astype(str))
        names, codes = np.unique(pairs, return_inverse=True)
        out = {}
        for i, n in enumerate(names):
            cluster, chip = str(n).split("\x1f")
            out[(cluster, chip or None)] = codes == i
        return out

    def per_cluster_chip(self, value) -> np.ndarray:
        """An array with ``value(cluster, chip)`` on each pair's rows."""
        out = np.empty(self.cluster.size)
        for (cluster, chip), mask in self.cluster_chip_masks.items():
            out[mask] = value(cluster, chip)
        return out


@dataclass(frozen=True)
class Theta:
    """The family parameters, per configuration (arrays broadcast)."""

    compute_efficiency: np.ndarray
    tp_overlap: np.ndarray
    dp_overlap: np.ndarray
    fixed_s: np.ndarray
    layer_overhead_s: np.ndarray
    attention_efficiency: np.ndarray
    # seconds per local expert, MoE layer and microbatch outside the GEMM rate and the
    # all-to-all (routing, token permutation, per-expert launches, host syncs of token counts)
    expert_overhead_s: np.ndarray | float = 0.0

    @staticmethod
    def ideal(n: int) -> "Theta":
        one, zero = np.ones(n), np.zeros(n)
        return Theta(one, one, one, zero, zero, one, zero)


def _f(x) -> np.ndarray:
    return np.asarray(x, dtype=float)


def _inside(size: np.ndarray, stride: np.ndarray, domain: np.ndarray) -> np.ndarray:
    """Members of a group of ``size`` ranks ``stride`` apart inside one domain (1..size)."""
    return np.clip(np.floor(domain / stride), 1.0, np.maximum(size, 1.0))


def _eff_up(mach: Machine, collective: str) -> np.ndarray:
    if mach.ideal:
        return np.ones(mach.cluster.size)
    return mach.per_cluster_chip(lambda c, a: mach.network.up_efficiency(c, collective, a))


def _eff_out(mach: Machine, collective: str, nodes: np.ndarray) -> np.ndarray:
    if mach.ideal:
        return np.ones(mach.cluster.size)
    return mach.per_cluster(
        lambda c: float(mach.network.out_efficiency(c, collective, np.ones(1))[0]))


def ring_parts(mach: Machine, collective: str, nbytes: np.ndarray, size: np.ndarray,
               stride: np.ndarray, count: np.ndarray | float = 1.0
               ) -> tuple[np.ndarray, np.ndarray]:
    """(seconds inside the scale-up domain, seconds on the scale-out links) of ``count``
    collectives of ``nbytes`` each over a group, per rank: the alpha-beta ring (Thakur,
    Rabenseifner & Gropp 2005) on the hierarchical byte split,
    count (f(p_in) n / (e_up B_up)) and count (k (p-1) alpha + f(p_out) n / p_in / (e_out B_out)),
    k = 2 and f = 2 (p-1)/p for all-reduce, k = 1 and f = (p-1)/p otherwise; alpha is the
    scale-out step latency once the group leaves the domain (then counted outside), the
    scale-up one inside it. p2p: one send of n, one step, on the link it crosses."""
    size = np.maximum(_f(size), 1.0)
    p_in = _inside(size, _f(stride), _f(mach.domain))
    p_out = size / p_in
    up_bw, out_bw = _f(mach.scaleup_bytes_per_s), _f(mach.scaleout_bytes_per_s)
    alpha_up = 0.0 if mach.ideal else mach.scaleup_latency_s
    alpha_out = (np.zeros(size.size) if mach.ideal
                 else mach.per_cluster(mach.network.hop_latency))
    group, out = size > 1.0, p_out > 1.0
    if collective == "p2p":
        e = np.where(out, _eff_out(mach, collective, np.full(size.size, 2.0)),
                     _eff_up(mach, collective))
        t = np.where(out, alpha_out + nbytes / (e * out_bw), alpha_up + nbytes / (e * up_bw))
        return (np.where(group & ~out, count * t, 0.0), np.where(group & out, count * t, 0.0))
    k = 2.0 if collective == "all_reduce" else 1.0
    t_up = k * (p_in - 1.0) / p_in * nbytes / (_eff_up(mach, collective) * up_bw)
    t_out = np.where(out, k * (p_out - 1.0) / p_out * nbytes / p_in
                     / (_eff_out(mach, collective, p_out) * out_bw), 0.0)
    steps = k * (size - 1.0)  # ring steps, each paying the latency of the link it crosses
    inside = np.where(group, count * (t_up + np.where(out, 0.0, steps * alpha_up)), 0.0)
    outside = np.where(group & out, count * (t_out + steps * alpha_out), 0.0)
    return inside, outside


def ring_time(mach: Machine, collective: str, nbytes: np.ndarray, size: np.ndarray,
              stride: np.ndarray, count: np.ndarray | float = 1.0) -> np.ndarray:
    """Seconds per rank of ``count`` collectives over a group: the sum of
    :func:`ring_parts` (inside the domain and on the scale-out links)."""
    inside, outside = ring_parts(mach, collective, nbytes, size, stride, count)
    return inside + outside


def _gemm_rate(c: Config, mach: Machine) -> np.ndarray:
    """Flop-weighted GEMM efficiency of a layer's MLP pair (d -> 4d/tp -> d) on this rank's
    microbatch: the representative shapes of a transformer layer's weight GEMMs, each at the
    measured rate times its wave quantization (``pipeline/calibrate/hardware.py``)."""
    m, d, tp = _f(c.microbatch_tokens), _f(c.d_model), _f(c.tp)
    eta_max = np.ones(m.size) if mach.ideal else _f(mach.gemm_max_efficiency)
    launch = 0.0 if mach.ideal else mach.launch_s
    sms = (np.full(m.size, np.nan) if mach.ideal or mach.sm_count is None
           else _f(mach.sm_count))
    args = (_f(mach.peak_flops_per_s), _f(mach.hbm_bytes_per_s), c.bytes_per_value, launch)
    up = gemm_efficiency(m, d, 4.0 * d / tp, eta_max * wave_efficiency(m, 4.0 * d / tp, sms),
                         *args)
    down = gemm_efficiency(m, 4.0 * d / tp, d, eta_max * wave_efficiency(m, d, sms), *args)
    return 2.0 / (1.0 / up + 1.0 / down)  # equal FLOP: harmonic mean of the rates


def _score_time(c: Config, mach: Machine, tokens: np.ndarray) -> np.ndarray:
    """Seconds per step of an unfused attention core's score traffic on this rank (0 where
    fused or on the ideal machine)."""
    per_token = c.score_bytes_per_token
    if per_token is None or mach.ideal:
        return np.zeros(tokens.shape)
    return tokens * per_token / _f(mach.hbm_bytes_per_s)


def _elementwise_time(c: Config, mach: Machine) -> np.ndarray:
    """Seconds per microbatch on a stage of the norms' and residual adds' HBM traffic
    (``Config.elementwise_bytes_per_microbatch``; 0 on the ideal machine)."""
    if mach.ideal:
        return np.zeros(np.shape(c.tp))
    return c.elementwise_bytes_per_microbatch / _f(mach.hbm_bytes_per_s)


def stage_layers(c: Config) -> np.ndarray:
    """Layers on the slowest pipeline stage: ceil(L / pp) where pp does not divide L (the
    layers spread as evenly as they go, interleaved chunks included; the slowest stage sets the
    pace of the 1F1B schedule, Narayanan et al. 2021, arXiv:2104.04473 §2.2); L / pp where it
    does, or where the ingest completed the shape from the parameter count (fractional L)."""
    layers = _f(c.n_layers)
    pp = np.maximum(_f(c.pp), 1.0)
    whole = np.isclose(layers, np.round(layers))
    slowest = np.ceil(np.round(layers) / pp - 1e-9)
    return np.where(whole & (pp > 1.0), np.maximum(slowest, layers / pp), layers / pp)


def _compute_time(c: Config, mach: Machine, th: Theta, tokens: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(seconds of the step's compute on this rank, model FLOP on the rank, GEMM rate): the
    linear layers at the GEMM rate and the attention core at the 16-bit rate times the
    family's attention efficiency, with the forward recomputed per policy."""
    rec = _f(c.recompute)
    model_flop = _f(c.flop_per_token) * tokens
    # the work done, counted in the MFU or not: linear layers and the attention core
    linear = model_flop - _f(c.counted_attention_flop_per_token) * tokens
    attn = _f(c.attention_flop_per_token) * tokens
    # recomputed forward: everything (full) or the attention core (selective)
    linear_hw = linear * np.where(rec >= 2, 4.0 / 3.0, 1.0)
    attn_hw = attn * np.where(rec >= 1, 4.0 / 3.0, 1.0)
    rate = _gemm_rate(c, mach) * _f(th.compute_efficiency)
    t_linear = linear_hw / (_f(mach.peak_flops_per_s) * rate) * _moe_linear_scale(c, mach)
    t_attn = attn_hw / (_f(mach.attention_peak_flops_per_s) * rate
                        * _f(th.attention_efficiency))
    return t_linear + t_attn, model_flop, rate


def ep_time(c: Config, mach: Machine, layers_stage: np.ndarray, msg: np.ndarray,
            tp: np.ndarray, cp: np.ndarray, ep: np.ndarray) -> np.ndarray:
    """Seconds per microbatch on a stage of the expert-parallel all-to-alls: dispatch and
    combine, forward and backward, of top_k tokens x d x w / tp over the EP group (stride tp
    cp). The one place the MoE expert terms enter: with the MoE columns, :func:`_moe_ep_time`
    (pipeline/calibrate/moe.py)."""
    if c.n_experts is not None:
        return _moe_ep_time(c, mach, tp, ep)
    sparse = _f(c.expert_fraction) > 0
    a2a = ring_time(mach, "all_to_all", _f(c.top_k) * msg / tp, ep, tp * cp, 4.0)
    return np.where(sparse, layers_stage * a2a, 0.0)


def _moe_ep_time(c: Config, mach: Machine, tp: np.ndarray, ep: np.ndarray) -> np.ndarray:
    """All-to-all seconds per microbatch on a stage from ``moe.a2a_time`` per tier on the
    stage's MoE layers; the EP group's ranks sit etp apart (Megatron-Core's expert layers
    regroup the ranks as expert-tp x ep x expert-dp, independent of the attention's tp, cp)."""
    nbytes = moe.dispatch_bytes(c.microbatch_tokens, c.top_k, c.d_model, tp, c.bytes_per_value)
    e_up = _eff_up(mach, "all_to_all")
    lat = 0.0 if mach.ideal else mach.scaleup_latency_s
    e_out = 1.0 if mach.ideal else moe.SCALEOUT_A2A_EFFICIENCY
    etp = np.ones(np.shape(tp)) if c.etp is None else np.maximum(_f(c.etp), 1.0)
    one = moe.a2a_time(nbytes, ep, etp, mach.domain, mach.scaleup_bytes_per_s,
                       mach.scaleout_bytes_per_s, e_up, lat, e_out, top_k=c.top_k,
                       dedup=c.moe_dispatch_dedup)
    moe_stage = _f(c.moe_layers) / np.maximum(_f(c.pp), 1.0)
    moe_rows = (_f(c.n_experts) > 1) & (ep > 1)
    return np.nan_to_num(np.where(moe_rows, moe_stage * moe.a2a_count(c.recompute) * one, 0.0))


def _ep_exposed(c: Config, hide: np.ndarray) -> np.ndarray:
    """Exposed share of the all-to-alls: the family's (like TP) where ``moe_a2a_overlap`` is
    stated true, all of it where false or not stated (Megatron's default dispatcher runs on the
    compute stream); the TP share without the MoE columns (the estimate's)."""
    if c.n_experts is None:
        return hide
    overlap = (np.zeros(np.shape(c.tp), bool) if c.moe_a2a_overlap is None
               else np.asarray(c.moe_a2a_overlap, dtype=bool))
    return np.where(overlap, hide, 1.0)


def _moe_linear_scale(c: Config, mach: Machine) -> np.ndarray | float:
    """Factor on the linear layers' time for the routed experts' GEMMs at their token count and
    the load imbalance (``moe.linear_time_scale``); 1 without the MoE columns."""
    if c.n_experts is None:
        return 1.0
    n = np.shape(c.tp)
    routed = moe.routed_params(c.n_experts, c.top_k, c.expert_ffn_size, c.moe_layers,
                               c.d_model, c.params, c.active_params)
    share = routed / np.maximum(_f(c.active_params), 1.0)
    if mach.ideal:
        return moe.linear_time_scale(share, np.ones(n), np.ones(n))
    sms = (np.full(n, np.nan) if mach.sm_count is None else _f(mach.sm_count))
    ratio = moe.expert_rate_ratio(
        c.microbatch_tokens, c.ep, c.n_experts, c.top_k, c.expert_ffn_size,
        np.ones(n) if c.etp is None else c.etp, c.d_model, _gemm_rate(c, mach),
        mach.gemm_max_efficiency, mach.peak_flops_per_s, mach.hbm_bytes_per_s, sms,
        c.bytes_per_value, mach.launch_s)
    u = moe.imbalance(np.full(n, np.nan) if c.capacity_factor is None else c.capacity_factor,
                      np.full(n, np.nan) if c.moe_imbalance is None else c.moe_imbalance)
    return moe.linear_time_scale(share, u, ratio)


def _expert_overhead(c: Config, th: Theta, mach: Machine) -> np.ndarray | float:
    """Seconds per microbatch on a stage outside the experts' GEMM rate: the host's issue of the
    expert GEMMs (``moe.host_issue_time``; none on the ideal machine) plus the family's
    ``expert_overhead_s`` x local experts (E / ep) x MoE layers on the stage; 0 for dense rows
    or without the MoE columns."""
    if c.n_experts is None:
        return 0.0
    e = _f(c.n_experts)
    local = np.where(e > 1, e / np.maximum(_f(c.ep), 1.0), 0.0)
    stage = _f(c.moe_layers) / np.maximum(_f(c.pp), 1.0)
    host = 0.0 if mach.ideal else moe.host_issue_time(c.n_experts, c.ep, stage, c.recompute)
    return host + np.nan_to_num(np.nan_to_num(local * stage) * _f(th.expert_overhead_s))


def _model_parallel_times(c: Config, mach: Machine, layers_stage: np.ndarray
                          ) -> dict[str, np.ndarray]:
    """Seconds per microbatch on a stage of TP traffic inside the scale-up domain
    (``tp``) and on the scale-out links (``tp_out``: a TP group larger than the domain), of CP
    and EP traffic, and of the pipeline's point-to-point sends (``p2p``; module docstring)."""
    w = c.bytes_per_value
    dp, tp, pp, cp, ep = (np.maximum(_f(x), 1.0) for x in (c.dp, c.tp, c.pp, c.cp, c.ep))
    v = np.maximum(_f(c.virtual_pipeline), 1.0)
    t_mb, d = _f(c.microbatch_tokens), _f(c.d_model)
    # Tensor parallel: per layer and microbatch, 2 forward + 2 backward (+2 recomputed) ops.
    n_tp = 4.0 + np.where(_f(c.recompute) >= 2, 2.0, 0.0)
    msg = t_mb * d * w
    sp = np.asarray(c.sequence_parallel, bool)
    one = np.ones_like(tp)
    ar = ring_parts(mach, "all_reduce", msg, tp, one, n_tp)
    ag = ring_parts(mach, "all_gather", msg, tp, one, n_tp)
    rs = ring_parts(mach, "reduce_scatter", msg, tp, one, n_tp)
    t_tp_in, t_tp_out = (layers_stage * np.where(sp, ag[i] + rs[i], ar[i]) for i in (0, 1))
    # Context parallel: K and V chunks around the ring, forward once and backward twice.
    kv = 2.0 * t_mb * d * w / tp
    t_cp = layers_stage * ring_time(mach, "all_gather", kv * cp, cp, tp, 3.0)
    t_ep = ep_time(c, mach, layers_stage, msg, tp, cp, ep)
    # Pipeline: activation forward and gradient backward at each of v chunk boundaries.
    pair = np.full(pp.shape, 2.0)
    t_p2p = np.where(pp > 1.0, ring_time(mach, "p2p", msg / tp, pair, tp * cp * dp, 2.0 * v),
                     0.0)
    return dict(tp=t_tp_in, tp_out=t_tp_out, cp=t_cp, ep=t_ep, p2p=t_p2p)


def _at_rate(c: Config, mach: Machine, t: np.ndarray, nbytes: np.ndarray, size: np.ndarray
             ) -> np.ndarray:
    """``t``, the seconds of a ZeRO-3 pass (all-gather or reduce-scatter of ``nbytes`` over
    ``size`` ranks), or the (size - 1) / size nbytes each rank moves at the software's
    ``zero3_bytes_per_s`` where that is slower (``families.zero3_transfer``; not on the ideal
    machine)."""
    if c.zero3_bytes_per_s is None or mach.ideal:
        return t
    rate = _f(c.zero3_bytes_per_s)
    slow = (size - 1.0) / size * nbytes / np.where(np.isfinite(rate), rate, np.inf)
    return np.maximum(t, slow)


def _dp_collectives(c: Config, mach: Machine, grad: np.ndarray, layers_stage: np.ndarray,
                    dp: np.ndarray, shard: np.ndarray, stride: np.ndarray
                    ) -> tuple[np.ndarray, ...]:
    """(all-reduce, reduce-scatter, all-gather, replica all-reduce) seconds per rank of
    ``grad`` bytes over a data-parallel group of ``dp`` ranks ``stride`` apart, sharded over
    ``shard`` of them, in the framework's buckets (one per layer where none is stated); 0 where
    there are no bytes (NaN bytes stay NaN)."""
    per_layer = grad / np.maximum(layers_stage, 1.0)
    units = 1.0 if c.gathers_per_layer is None else np.maximum(_f(c.gathers_per_layer), 1.0)
    reduce_unit = np.where(np.isfinite(_f(c.reduce_bucket_bytes)), _f(c.reduce_bucket_bytes),
                           per_layer)
    gather_unit = np.where(np.isfinite(_f(c.gather_bucket_bytes)), _f(c.gather_bucket_bytes),
                           per_layer / units)
    with np.errstate(invalid="ignore", divide="ignore"):
        n_reduce = np.maximum(np.nan_to_num(np.ceil(grad / reduce_unit)), 1.0)
        n_gather = np.maximum(np.nan_to_num(np.ceil(grad / gather_unit)), 1.0)
    t_ar = ring_time(mach, "all_reduce", grad / n_reduce, dp, stride, n_reduce)
    t_rs = _at_rate(c, mach, ring_time(mach, "reduce_scatter", grad / n_reduce, shard, stride,
                                       n_reduce), grad, shard)
    t_ag = _at_rate(c, mach, ring_time(mach, "all_gather", grad / n_gather, shard, stride,
                                       n_gather), grad, shard)
    t_rep = ring_time(mach, "all_reduce", grad / shard, dp / shard, stride * shard)
    none = grad == 0.0  # no parameters in the group (a dense model's experts): no collective
    return tuple(np.where(none, 0.0, t) for t in (t_ar, t_rs, t_ag, t_rep))


def _dp_exposed(c: Config, mach: Machine, th: Theta, t_comp: np.ndarray, m: np.ndarray,
                layers_stage: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(exposed seconds of data-parallel traffic per step, parameters on the rank after
    ZeRO's sharding).

    ZeRO 0: an all-reduce of the gradients behind the last microbatch's backward. ZeRO-1/2:
    the reduce-scatter behind the last backward and the parameter all-gather behind the next
    step's first forward. ZeRO-3 / FSDP (Rajbhandari et al. 2020, arXiv:1910.02054 §5.3; Zhao
    et al. 2023, arXiv:2304.11277 §3.3): every microbatch gathers each layer's parameters
    forward and again backward, and reduce-scatters its gradients backward, over the sharding
    group; a layer's traffic hides at most behind the neighbouring layer's compute (prefetch),
    so per microbatch max(0, AG - phi F) + max(0, AG + RS - phi B) with F, B the forward and
    backward compute. Under pipeline parallelism the parameters stay gathered through the
    step's microbatches: one gather behind the step's forwards and one reduce-scatter behind its
    backwards. HSDP (``shard_group`` < dp): the same over the shard group, and an
    all-reduce of the gradient shard across the replicas behind the last backward.
    MoE: the routed experts' gradients go over the expert data-parallel group, the
    dp tp cp / (ep etp) ranks that hold the same experts (Megatron-Core's expert layers regroup
    the ranks as expert-tp x ep x expert-dp, ``--expert-tensor-parallel-size``,
    NVIDIA/Megatron-LM megatron/core/transformer/moe/README.md; FSDP2 with EP shards them over
    dp / ep), ep etp ranks apart; the other parameters over dp. The two run one after the
    other on the same stream: their seconds add."""
    dp, tp, pp, cp, ep = (np.maximum(_f(x), 1.0) for x in (c.dp, c.tp, c.pp, c.cp, c.ep))
    etp = np.ones(np.shape(dp)) if c.etp is None else np.maximum(_f(c.etp), 1.0)
    dense, routed = c.param_split
    dense_local, expert_local = dense / (tp * pp), routed / (pp * ep * etp)
    stride = tp * cp
    shard = (dp if c.shard_group is None
             else np.clip(np.where(_f(c.shard_group) >= 1, _f(c.shard_group), dp), 1.0, dp))
    edp = np.maximum(dp * tp * cp / (ep * etp), 1.0)
    e_shard = np.clip(shard * tp * cp / (ep * etp), 1.0, edp)
    t_ar, t_rs, t_ag, t_rep = _dp_collectives(c, mach, dense_local * c.bytes_per_value,
                                              layers_stage, dp, shard, stride)
    if np.any(expert_local > 0.0):
        experts = _dp_collectives(c, mach, expert_local * c.bytes_per_value, layers_stage, edp,
                                  e_shard, ep * etp)
        t_ar, t_rs, t_ag, t_rep = (a + b for a, b in zip((t_ar, t_rs, t_ag, t_rep), experts))
    phi = _f(th.dp_overlap)
    if c.dp_comm_overlap is not None and not np.all(c.dp_comm_overlap):
        phi = np.where(np.asarray(c.dp_comm_overlap, bool), phi, 0.0)
    bwd = BACKWARD_SHARE * t_comp / m
    fwd = (1.0 - BACKWARD_SHARE) * t_comp / m
    # with pipeline parallelism the gathered parameters stay through the step's microbatches
    # (torchtitan: reshard_after_forward is off when PP is on; Llama 3, arXiv:2407.21783
    # §3.3.2: no reshard after forward under PP): one gather and one reduce-scatter per step
    per_mb = m * (np.maximum(0.0, t_ag - phi * fwd) + np.maximum(0.0, t_ag + t_rs - phi * bwd))
    per_step = (np.maximum(0.0, t_ag - phi * m * fwd) + np.maximum(0.0, t_rs - phi * m * bwd))
    zero3 = np.where((pp > 1.0) & (m > 1.0), per_step, per_mb) + np.maximum(0.0, t_rep - phi * bwd)
    zero = _f(c.zero_stage)
    exposed = np.select(
        [zero >= 3, zero >= 1],
        [zero3, np.maximum(0.0, t_rs - phi * bwd) + np.maximum(0.0, t_ag - phi * fwd)],
        np.maximum(0.0, t_ar - phi * bwd))
    on_rank = np.where(zero >= 1, dense_local / dp + expert_local / edp,
                       dense_local + expert_local)
    return exposed, on_rank


def _flushes(c: Config, m: np.ndarray) -> np.ndarray | float:
    """Pipeline schedules per optimizer step (``Config.pipeline_flushes``; 1 where not
    stated), at most the step's microbatches: each schedule fills and drains the pipeline
    (Narayanan et al. 2021 §2.2), so the bubble is paid once per schedule."""
    if c.pipeline_flushes is None:
        return 1.0
    f = _f(c.pipeline_flushes)
    return np.clip(np.where(np.isfinite(f), f, 1.0), 1.0, np.maximum(m, 1.0))


def step_components(c: Config, mach: Machine, th: Theta) -> dict[str, np.ndarray]:
    """Seconds per optimizer step by component (``COMPONENTS``, summing to ``step_time_s``),
    plus ``step_time_s``, ``model_flop_per_rank`` and ``gemm_efficiency``."""
    dp, tp, pp, cp = (np.maximum(_f(x), 1.0) for x in (c.dp, c.tp, c.pp, c.cp))
    m, v = np.maximum(_f(c.microbatches), 1.0), np.maximum(_f(c.virtual_pipeline), 1.0)
    layers_stage = stage_layers(c)
    tokens = _f(c.batch_tokens) / (dp * tp * pp * cp)
    t_comp, model_flop, rate = _compute_time(c, mach, th, tokens)
    # the slowest stage's share of the compute (uneven layer split)
    t_comp = t_comp * layers_stage / (_f(c.n_layers) / pp)
    mp = _model_parallel_times(c, mach, layers_stage)
    hide = 1.0 - _f(th.tp_overlap)
    if c.tp_comm_overlap is not None and not np.all(c.tp_comm_overlap):
        hide = np.where(np.asarray(c.tp_comm_overlap, bool), hide, 1.0)
    ep_hide = _ep_exposed(c, hide)
    # TP traffic that leaves the scale-up domain is not overlapped (module docstring)
    out_hide = hide if mach.ideal else 1.0
    t_tp_mb = hide * mp["tp"] + out_hide * mp["tp_out"]
    overhead = (layers_stage * _f(th.layer_overhead_s) + _score_time(c, mach, tokens) / m
                + _elementwise_time(c, mach) + _expert_overhead(c, th, mach))
    t_stage = (t_comp / m + overhead + t_tp_mb + hide * mp["cp"] + ep_hide * mp["ep"]
               + mp["p2p"])
    bubble = _flushes(c, m) * (pp - 1.0) / v * t_stage
    dp_exposed, on_rank = _dp_exposed(c, mach, th, t_comp, m, layers_stage)
    t_opt = on_rank * OPTIMIZER_BYTES / _f(mach.hbm_bytes_per_s)
    fixed = np.broadcast_to(_f(th.fixed_s), t_comp.shape).astype(float)

    parts = {
        "compute": t_comp, "kernel_overhead": m * overhead, "tp_comm": m * t_tp_mb,
        "cp_comm": m * hide * mp["cp"], "ep_comm": m * ep_hide * mp["ep"],
        "pp_p2p": m * mp["p2p"],
        "bubble": bubble, "dp_comm": dp_exposed, "optimizer": t_opt, "fixed": fixed,
    }
    total = sum(parts.values())
    return dict(parts, step_time_s=total, model_flop_per_rank=model_flop,
                gemm_efficiency=rate / _f(th.compute_efficiency))


def binding_of(parts: dict[str, np.ndarray]) -> np.ndarray:
    """Name of the largest component per configuration."""
    stacked = np.stack([parts[k] for k in COMPONENTS])
    return np.asarray(COMPONENTS, dtype=object)[np.argmax(stacked, axis=0)]
