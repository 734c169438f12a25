"""Peak memory per accelerator of a parallel layout and schedule (docs/theory.md §11).

Vectorised like :mod:`pipeline.theory.cost`: every field of :class:`MemoryInputs` may be a numpy
array and the result has their common shape. Four parts, each with its source:

* **Model states** (weights, gradients, optimizer) by ZeRO stage: Rajbhandari et al. 2020
  (ZeRO, arXiv:1910.02054) §5.1: stage 1 shards the optimizer states, 2 also the gradients,
  3 (FSDP) also the weights, over the data-parallel group. Bytes per parameter as Megatron-LM's
  distributed optimizer (docs/source/api-guide/dist_optimizer.md: bf16 weights 2, fp32 gradient
  accumulation 4, fp32 master weights + Adam moments 12, i.e. 18 unsharded, 6 + 12/d with the
  optimizer sharded). ZeRO-3 keeps ``fsdp_prefetch_layers`` gathered layers in flight, or with
  a pipeline the whole stage (``fsdp_pipeline_keeps_weights``, torchtitan's default).
* **Activations per layer and microbatch**: Korthikanti et al. 2022 (arXiv:2205.05198) §4,
  Table 2: s b h (34 + 5 a s / h) bytes without parallelism; tensor parallelism t splits 24 of
  the 34 (sequence parallelism the other 10); selective recompute drops the 5 a s / h attention
  core; full recompute keeps the layer input, 2 s b h. Generalised here to grouped-query
  attention (K, V scale with n_kv_heads / n_heads), any MLP width f (gated: 3 s b f values,
  plain: 2 s b f), no dropout (no masks) and flash attention (no s^2 term), and context
  parallelism c (each rank holds s / c of every sequence).
* **Microbatches in flight**: 1F1B keeps min(m, p) microbatches on the first stage (Narayanan
  et al. 2021, arXiv:2104.04473 §2.2), the interleaved schedule L (1 + (p - 1) / (p v)) layers'
  worth (Korthikanti et al. 2022 §4.2.3; Megatron-LM ``theoretical_memory_usage.py``). The first
  stage also holds the input embedding, the last the output layer and the fp32 logits,
  4 s b V / t bytes (Korthikanti §4.3) for Megatron's fused vocab-parallel cross entropy; a
  family's own loss working set where its loss keeps more (``loss_bytes_per_logit``).
* **Selective recompute** is Korthikanti's (the attention core recomputed) unless the family's
  ``selective`` is torchtitan's per-operator policy (``op_selective``, below).
* **Experts** (MoE): routed-expert parameters split over ep (and tp), their ZeRO group is the
  expert data-parallel group dp cp / ep; expert MLP activations scale with top-k.

What frameworks keep beyond this count (unfused kernels' extra activations, the allocator's
fragmentation) and the fixed buffers (NCCL, workspaces) are not modelled from first principles:
``predicted = states + transient + activation_factor activations + fixed_bytes``, with one
activation factor per framework family (Korthikanti's count, 1, for Megatron's fused kernels;
fitted, bounded, where a family's runs measured their peak memory) and one fixed part
(:mod:`pipeline.theory.memory_fit`). A layout fits when the predicted peak plus the runtime's
reserve (CUDA context) is at most the capacity the driver reports (:func:`fits_in`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RECOMPUTE = ("none", "selective", "full")
ArrayLike = object  # float | np.ndarray


@dataclass(frozen=True)
class MemoryConstants:
    """``theory.memory``: bytes per value and what the frameworks keep.

    Attributes:
        weight_bytes_per_param: working weights (bf16: 2).
        gradient_bytes_per_param: gradient buffer (fp32 accumulation: 4; Megatron's default).
        optimizer_bytes_per_param: fp32 master weights + Adam m and v (12).
        activation_bytes_per_value: stored activations (bf16: 2).
        logits_bytes_per_value: the output layer's logits kept for the loss (fp32: 4).
        flash_attention: attention scores are not stored (FlashAttention), no s^2 term.
        dropout: dropout masks are stored (1 byte per value).
        fsdp_prefetch_layers: ZeRO-3: layers whose weights and gradients are unsharded at
            once (the current and the prefetched one).
        fsdp_pipeline_keeps_weights: ZeRO-3 with a pipeline (pp > 1) keeps the whole stage's
            weights gathered from forward to backward, not resharding after each microbatch's
            forward (torchtitan's default, ``reshard_after_forward = not pp_enabled`` in its
            parallelize code: per-microbatch all-gathers would be expensive and unoverlapped).
        loss_bytes_per_logit: per framework family (pipeline/frameworks.py), the bytes per
            logit value its loss holds at its peak, where that differs from
            ``logits_bytes_per_value`` (docs/theory.md §11): PyTorch's eager
            ``F.cross_entropy`` on fp32 logits (torchtitan) holds the saved fp32 log-softmax,
            its incoming gradient and its input gradient at once in the loss's backward, 12;
            Megatron's fused vocab-parallel cross entropy works in place on one fp32 copy, 4.
        op_selective_families: families whose ``selective`` recompute is torchtitan's
            per-operator policy (:func:`op_selective_values_per_token`), not Korthikanti's.
        pipeline_unsharded_grads_sources: sources whose pipeline is PyTorch's
            ``torch.distributed.pipelining`` over FSDP2, so that under ZeRO-3 with a pipeline
            each rank holds its stage's unsharded gradients (MemoryInputs). Per source, not per
            family: the FSDP family also holds Llama 3's own stack, whose pipeline is not
            described.
        bf16_state_sources: sources whose recipe keeps every state in bf16: weights 2,
            gradients 2, Adam moments 2 + 2 bytes per parameter, no fp32 master copy (NeMo
            Automodel's MoE benchmarks: the model is built in its config's bf16 and FSDP2
            shards it as is, ``MixedPrecisionPolicy(param_dtype=bf16)`` in
            NVIDIA-NeMo/Automodel nemo_automodel/components/moe/parallelizer.py
            ``apply_fsdp``; ``torch.optim.Adam`` keeps its moments in the parameter's dtype,
            examples/benchmark/configs/*_te_deepep.yaml).
        bf16_grad_moe_sources: sources whose MoE recipes keep the gradient buffer in bf16 (2
            bytes, not Megatron's fp32 default): ``grad_reduce_in_fp32 = False`` in
            Megatron-Bridge's performance configs (NVIDIA-NeMo/Megatron-Bridge
            scripts/performance/configs/gpt_oss/gpt_oss_llm_pretrain.py
            ``set_gpt_oss_common_configs``, the DeepSeek-V3 configs' common settings) and in NeMo
            2's Llama 4 performance recipe (NVIDIA/NeMo llama4 recipes,
            ``pretrain_performance_optimizations``).
        runtime_reserve_bytes: device memory the runtime holds outside the framework's
            allocator, so outside a measured allocator peak: the CUDA context, about 300 MB
            with lazy module loading (CUDA >= 11.7; more than 1,000 MB before), as NVIDIA's
            ptrblck states in pytorch/pytorch#107667. A layout fits when its predicted peak
            plus this reserve is at most the capacity the driver reports (:func:`fits_in`).
    """

    weight_bytes_per_param: float = 2.0
    gradient_bytes_per_param: float = 4.0
    optimizer_bytes_per_param: float = 12.0
    activation_bytes_per_value: float = 2.0
    logits_bytes_per_value: float = 4.0
    flash_attention: bool = True
    dropout: bool = False
    fsdp_prefetch_layers: float = 2.0
    fsdp_pipeline_keeps_weights: bool = True
    loss_bytes_per_logit: tuple[tuple[str, float], ...] = (("deepspeed", 4.0), ("fsdp", 12.0),
                                                           ("megatron", 4.0),
                                                           ("megatron_deepspeed", 4.0))
    op_selective_families: tuple[str, ...] = ("fsdp",)
    pipeline_unsharded_grads_sources: tuple[str, ...] = ("torchtitan2024",)
    bf16_state_sources: tuple[str, ...] = ("nemo_automodel2025",)
    bf16_grad_moe_sources: tuple[str, ...] = ("megatron_bridge2025", "nemo_framework2025")
    runtime_reserve_bytes: float = 3.0e8


def fits_in(predicted: ArrayLike, capacity_bytes: ArrayLike, const: MemoryConstants
            ) -> np.ndarray:
    """Whether a predicted peak fits in a chip's capacity as the driver reports it (catalog
    ``hbm_usable_bytes``), after the runtime's reserve (``runtime_reserve_bytes``)."""
    return _f(predicted) + float(const.runtime_reserve_bytes) <= _f(capacity_bytes)


@dataclass(frozen=True)
class Overhead:
    """Fitted overhead: predicted = states + transient + activation_factor activations +
    fixed_bytes. ``activation_factor`` (>= 1) is what the framework and its allocator keep per
    stored activation byte beyond the fused-kernel minimum counted here (unfused norms and
    activations, rotary copies, fragmentation of the activation blocks); it is the framework
    family's (pipeline/theory/memory_fit.py: 1 for Megatron's fused kernels, fitted where a
    family's runs measured their peak). ``fixed_bytes`` are communicator buffers and
    workspaces inside the allocator's peak."""

    activation_factor: float = 1.0
    fixed_bytes: float = 0.0

    def apply(self, b: "MemoryBreakdown") -> np.ndarray:
        return b.states + b.transient + self.activation_factor * b.activations + self.fixed_bytes


@dataclass(frozen=True)
class MemoryInputs:
    """One layout per element. ``recompute`` is an index into RECOMPUTE (0 none, 1 selective,
    2 full). ``expert_params`` counts the routed experts' parameters (0 for dense);
    ``n_embeddings`` the vocabulary matrices (2: untied input embedding and output layer, on the
    first and the last stage; 0 where the vocabulary is unknown and all parameters sit in the
    layers). ``op_selective``: the row's ``selective`` is torchtitan's per-operator policy.
    ``pipeline_unsharded_grads``: under ZeRO-3 with a pipeline the rank holds its stage's
    unsharded gradients (``gradient_bytes_per_param`` each) until the last microbatch: PyTorch's
    pipeline stage (``torch/distributed/pipelining/stage.py`` ``backward_maybe_with_nosync``)
    turns FSDP's gradient sync and resharding off for every microbatch's backward, and FSDP2
    (``_fsdp_param.py`` ``to_accumulated_grad_if_needed``) keeps the unsharded gradient in the
    reduce dtype (fp32 in torchtitan)."""

    params: ArrayLike
    n_layers: ArrayLike
    d_model: ArrayLike
    seq_len: ArrayLike
    micro_batch: ArrayLike = 1.0
    n_heads: ArrayLike = np.nan
    n_kv_heads: ArrayLike = np.nan
    ffn_size: ArrayLike = np.nan
    gated_mlp: ArrayLike = False
    vocab_size: ArrayLike = 0.0
    n_embeddings: ArrayLike = 2.0
    expert_params: ArrayLike = 0.0
    top_k: ArrayLike = 1.0
    dp: ArrayLike = 1.0
    tp: ArrayLike = 1.0
    pp: ArrayLike = 1.0
    cp: ArrayLike = 1.0
    ep: ArrayLike = 1.0
    zero_stage: ArrayLike = 0.0
    microbatches: ArrayLike = 1.0
    virtual_pipeline: ArrayLike = 1.0
    recompute: ArrayLike = 0
    sequence_parallel: ArrayLike = False
    op_selective: ArrayLike = False
    pipeline_unsharded_grads: ArrayLike = False


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per accelerator on the stage that needs the most (``stage``: 0 first, 1 last)."""

    weights: np.ndarray
    gradients: np.ndarray
    optimizer: np.ndarray
    activations: np.ndarray
    transient: np.ndarray
    raw: np.ndarray
    stage: np.ndarray

    @property
    def states(self) -> np.ndarray:
        return self.weights + self.gradients + self.optimizer


def _f(x: ArrayLike) -> np.ndarray:
    return np.asarray(x, dtype=float)


def state_bytes(local_params: ArrayLike, shard: ArrayLike, zero_stage: ArrayLike,
                const: MemoryConstants) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weights, gradients, optimizer) bytes for ``local_params`` parameters held by a rank
    whose ZeRO group has ``shard`` ranks (ZeRO §5.1: stage >= 1 shards the optimizer, >= 2 the
    gradients, 3 the weights)."""
    n, d, z = _f(local_params), np.maximum(_f(shard), 1.0), _f(zero_stage)
    w = n * const.weight_bytes_per_param / np.where(z >= 3, d, 1.0)
    g = n * const.gradient_bytes_per_param / np.where(z >= 2, d, 1.0)
    o = n * const.optimizer_bytes_per_param / np.where(z >= 1, d, 1.0)
    return w, g, o


def activation_bytes_per_layer(seq_len: ArrayLike, micro_batch: ArrayLike, d_model: ArrayLike,
                               n_heads: ArrayLike, n_kv_heads: ArrayLike, ffn_size: ArrayLike,
                               gated_mlp: ArrayLike, tp: ArrayLike, cp: ArrayLike,
                               sequence_parallel: ArrayLike, recompute: ArrayLike,
                               const: MemoryConstants, mlp_multiplier: ArrayLike = 1.0,
                               op_selective: ArrayLike | None = None) -> np.ndarray:
    """Bytes one transformer layer keeps for the backward of one microbatch on one rank
    (Korthikanti et al. 2022 §4.1 and Table 2, generalised as in the module docstring).

    ``mlp_multiplier`` scales the MLP part (MoE: top-k experts per token; for the per-operator
    policy it scales the whole kept set, an approximation). ``op_selective`` marks rows whose
    ``selective`` is torchtitan's per-operator policy (:func:`op_selective_values_per_token`).
    """
    s, b, h = _f(seq_len), _f(micro_batch), _f(d_model)
    t, c = np.maximum(_f(tp), 1.0), np.maximum(_f(cp), 1.0)
    a = np.where(np.isfinite(_f(n_heads)), _f(n_heads), h / 128.0)
    kv = np.where(np.isfinite(_f(n_kv_heads)), _f(n_kv_heads), a)
    f = np.where(np.isfinite(_f(ffn_size)), _f(ffn_size), 4.0 * h)
    sp = np.asarray(sequence_parallel, bool)
    rc = np.asarray(recompute)
    w = const.activation_bytes_per_value
    tokens = s / c * b
    mask = 1.0 if const.dropout else 0.0
    # Korthikanti's 10 s b h: layer-norm inputs (2), QKV and MLP inputs (1 + 1) values, and two
    # dropout masks (1 byte each); split over t only with sequence parallelism.
    replicated = tokens * h * (4.0 * w + 2.0 * mask)
    replicated = replicated / np.where(sp, t, 1.0)
    # Korthikanti's 24 s b h: Q, K, V, the attention output and the MLP's inner activations.
    mlp_values = np.where(np.asarray(gated_mlp, bool), 3.0, 2.0) * f * _f(mlp_multiplier)
    split = tokens * (h * (2.0 + 2.0 * kv / a) + mlp_values) * w / t
    # Korthikanti's 5 a s^2 b: softmax output (w bytes), dropout mask and output, per head.
    if const.flash_attention:
        core = np.zeros_like(tokens)
    else:
        core = a * tokens * s * (w + mask * (1.0 + w)) / t
    full_layer = replicated + split + np.where(rc >= 1, 0.0, core)
    layer_input = tokens * h * w / np.where(sp, t, 1.0)
    out = np.where(rc >= 2, layer_input, full_layer)
    if op_selective is None:
        return out
    op = tokens * w * op_selective_values_per_token(h, n_heads, n_kv_heads, ffn_size,
                                                    gated_mlp, t, sp) * _f(mlp_multiplier)
    return np.where((rc == 1) & np.asarray(op_selective, bool), op, out)


def op_selective_values_per_token(d_model: ArrayLike, n_heads: ArrayLike,
                                  n_kv_heads: ArrayLike, ffn_size: ArrayLike,
                                  gated_mlp: ArrayLike, tp: ArrayLike,
                                  sequence_parallel: ArrayLike) -> np.ndarray:
    """Values per token one layer keeps under torchtitan's per-operator selective recompute,
    on one rank.

    torchtitan's ``_apply_ac_to_transformer_block`` (pytorch/torchtitan
    torchtitan/parallelisms/parallelize_llama.py, ``selective_ac_option = "op"``) wraps each
    block in ``checkpoint_wrapper`` with a policy that must-saves the outputs of the ops in its
    ``_save_list`` (``aten.mm``, the SDPA kernels, ``reduce_scatter_tensor``) except every
    second ``mm``, and recomputes everything else. In a Llama block the matmuls run wq, wk,
    wv, wo, then w1, w3, w2 (gated MLP; a plain MLP: w1, w2), so the odd ones are kept: wq
    (h), wv (h kv / a), w1 (f) and, gated, w2 (h; its row-parallel output is a whole partial
    sum per rank before the reduce-scatter). Beside them the SDPA output (h) and the
    checkpoint's input (h; split over t with sequence parallelism). Column-parallel outputs
    are split over t. Flash attention's fp32 log-sum-exp (a per token) is left out: 0.4% of
    the total for Llama 3.1 8B.
    """
    h, t = _f(d_model), np.maximum(_f(tp), 1.0)
    a = np.where(np.isfinite(_f(n_heads)), _f(n_heads), h / 128.0)
    kv = np.where(np.isfinite(_f(n_kv_heads)), _f(n_kv_heads), a)
    f = np.where(np.isfinite(_f(ffn_size)), _f(ffn_size), 4.0 * h)
    sp = np.asarray(sequence_parallel, bool)
    gated = np.asarray(gated_mlp, bool)
    column = h + h * kv / a + f + h  # wq, wv, w1 and the SDPA output, split over t
    row = np.where(gated, h, 0.0)  # w2 (the 7th matmul) when gated; plain: w2 is the 6th
    return column / t + row + h / np.where(sp, t, 1.0)


def layers_in_flight(n_layers: ArrayLike, pp: ArrayLike, microbatches: ArrayLike,
                     virtual_pipeline: ArrayLike) -> np.ndarray:
    """Layer-microbatches whose activations the first pipeline stage holds at its peak.

    1F1B: min(m, p) microbatches of L / p layers (Narayanan et al. 2021 §2.2); interleaved with
    v chunks (m >= p): L (1 + (p - 1) / (p v)) (Korthikanti et al. 2022 §4.2.3). Without a
    pipeline (p = 1) one microbatch of L layers (gradient accumulation runs them in turn).
    """
    layers, p = _f(n_layers), np.maximum(_f(pp), 1.0)
    m, v = np.maximum(_f(microbatches), 1.0), np.maximum(_f(virtual_pipeline), 1.0)
    plain = layers / p * np.minimum(m, p)
    interleaved = layers * (1.0 + (p - 1.0) / (p * v))
    return np.where((v > 1) & (m >= p) & (p > 1), interleaved, plain)


def peak_memory(x: MemoryInputs, const: MemoryConstants = MemoryConstants()) -> MemoryBreakdown:
    """Raw peak bytes per accelerator (before the allocator overhead): the larger of the first
    stage (embedding, most microbatches in flight) and the last (output layer, logits)."""
    t, p, c = (np.maximum(_f(v), 1.0) for v in (x.tp, x.pp, x.cp))
    dp, ep = np.maximum(_f(x.dp), 1.0), np.maximum(_f(x.ep), 1.0)
    layers, h = _f(x.n_layers), _f(x.d_model)
    vocab_matrix = _f(x.vocab_size) * h * (_f(x.n_embeddings) > 0)
    n_emb = np.where(_f(x.vocab_size) > 0, np.minimum(_f(x.n_embeddings), 2.0), 0.0)
    experts = _f(x.expert_params)
    in_layers = np.maximum(_f(x.params) - n_emb * vocab_matrix - experts, 0.0)
    dense_stage = in_layers / p / t
    expert_stage = experts / p / (t * ep)
    shard_dense, shard_expert = dp * c, np.maximum(dp * c / ep, 1.0)
    # the first stage holds the input embedding, the last the output layer (both when p = 1)
    first_emb = np.where(n_emb >= 1, vocab_matrix / t, 0.0)
    last_emb = np.where(n_emb >= 2, vocab_matrix / t, 0.0)
    last_emb = np.where(p > 1, last_emb, first_emb + last_emb)
    z = _f(x.zero_stage)

    def states(extra: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        wd, gd, od = state_bytes(dense_stage + extra, shard_dense, z, const)
        we, ge, oe = state_bytes(expert_stage, shard_expert, z, const)
        return wd + we, gd + ge, od + oe

    moe_share = np.where(experts > 0, _f(x.top_k), 1.0)
    per_layer = activation_bytes_per_layer(
        x.seq_len, x.micro_batch, h, x.n_heads, x.n_kv_heads, x.ffn_size, x.gated_mlp, t, c,
        x.sequence_parallel, x.recompute, const, moe_share, x.op_selective)
    rc = np.asarray(x.recompute)
    # full recompute rebuilds one layer's activations in the backward: that working set is
    # live; the per-operator policy rebuilds what it did not keep
    rebuilt = activation_bytes_per_layer(
        x.seq_len, x.micro_batch, h, x.n_heads, x.n_kv_heads, x.ffn_size, x.gated_mlp, t, c,
        x.sequence_parallel, 1, const, moe_share)
    op = (rc == 1) & np.asarray(x.op_selective, bool)
    working = np.where(rc >= 2, rebuilt, np.where(op, np.maximum(rebuilt - per_layer, 0.0),
                                                  0.0))
    tokens = _f(x.seq_len) / c * _f(x.micro_batch)
    m = np.maximum(_f(x.microbatches), 1.0)
    inflight_first = layers_in_flight(layers, p, m, x.virtual_pipeline)
    micro_first = np.where(p > 1, np.minimum(m, p), 1.0)
    act_first = inflight_first * per_layer + working + micro_first * tokens * h \
        * const.activation_bytes_per_value / np.where(np.asarray(x.sequence_parallel, bool), t, 1)
    logits = tokens * _f(x.vocab_size) * const.logits_bytes_per_value / t
    act_last = np.where(p > 1, layers / p * per_layer + working + logits, act_first + logits)
    # ZeRO-3: the layers gathered at once (at most the stage's own; with a pipeline, if it keeps
    # them, all of them) are whole, less the shard already held; their gradients are
    # reduce-scattered into the sharded buffer at once (the same buckets as ZeRO-1/2, part of
    # the fixed overhead)
    layer_local = (in_layers / np.maximum(layers, 1.0)) / t \
        + experts / np.maximum(layers, 1.0) / (t * ep)
    gathered = np.minimum(const.fsdp_prefetch_layers, layers / p)
    if const.fsdp_pipeline_keeps_weights:
        gathered = np.where(p > 1, layers / p, gathered)
    transient = np.where(z >= 3, gathered * layer_local * const.weight_bytes_per_param
                         * (1.0 - 1.0 / np.maximum(shard_dense, 1.0)), 0.0)
    # PyTorch's pipeline stage runs every microbatch's backward of an FSDP module without
    # gradient sync, so FSDP2 accumulates the stage's unsharded gradients in the reduce dtype
    # until the last microbatch (``pipeline_unsharded_grads``)
    held = np.asarray(x.pipeline_unsharded_grads, bool) & (z >= 3) & (p > 1)
    transient = transient + np.where(held, layers / p * layer_local
                                     * const.gradient_bytes_per_param, 0.0)
    w1, g1, o1 = states(first_emb)
    w2, g2, o2 = states(last_emb)
    first = w1 + g1 + o1 + act_first + transient
    last = w2 + g2 + o2 + act_last + transient
    pick_last = last > first
    sel = lambda a, b: np.where(pick_last, b, a)  # noqa: E731
    return MemoryBreakdown(weights=sel(w1, w2), gradients=sel(g1, g2), optimizer=sel(o1, o2),
                           activations=sel(act_first, act_last), transient=transient,
                           raw=np.maximum(first, last), stage=pick_last.astype(np.int8))


def naive_state_bytes(x: MemoryInputs, const: MemoryConstants = MemoryConstants()) -> np.ndarray:
    """The naive baseline: weights, gradients and optimizer states of params / (tp pp) per
    rank, sharded by ZeRO stage, and nothing else (no activations, no embedding placement, no
    allocator overhead)."""
    t, p = np.maximum(_f(x.tp), 1.0), np.maximum(_f(x.pp), 1.0)
    shard = np.maximum(_f(x.dp), 1.0) * np.maximum(_f(x.cp), 1.0)
    w, g, o = state_bytes(_f(x.params) / (t * p), shard, x.zero_stage, const)
    return w + g + o


def recompute_code(values) -> np.ndarray:
    """RECOMPUTE index of each value (None/NaN: 0, ``none``)."""
    lookup = {name: i for i, name in enumerate(RECOMPUTE)}

    def code(v) -> int:
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return 0
        if str(v) not in lookup:
            raise ValueError(f"recompute: {v!r} is not one of {', '.join(RECOMPUTE)}")
        return lookup[str(v)]

    values = np.atleast_1d(np.asarray(values, dtype=object))
    out = np.zeros(len(values), dtype=np.int64)
    text = np.fromiter((isinstance(v, str) for v in values), dtype=bool, count=len(values))
    for v in values[~text]:
        code(v)  # None/NaN: 0 (as out holds); anything else not a name is refused
    if text.any():
        # each distinct name once (a planner's search: ~1e4 rows, 3 names), then indexed
        names, index = np.unique(values[text].astype(str), return_inverse=True)
        out[text] = np.array([code(v) for v in names.tolist()], dtype=np.int64)[np.ravel(index)]
    return out
