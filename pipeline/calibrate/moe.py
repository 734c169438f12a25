"""Mixture-of-experts terms of the step time: token dispatch and combine over the EP group, the
expert GEMMs at their per-expert token count, load imbalance and overlap.

Called by :func:`pipeline.calibrate.critical_path.step_components` (``ep_comm`` and the routed
share of ``compute``); vectorised over configurations like it. Every input is a stated column
of the layout row with a default (``pipeline/calibrate/step.py`` fills them from the row, else
the model catalog):

- n_experts E, top_k k, expert_ffn_size f (one routed expert's SwiGLU width), moe_layers
  L_moe (layers with routed experts), etp (expert tensor parallel, default 1).
- Routed parameters a token uses: P_r = L_moe k 3 d f (SwiGLU: up, gate and down, d x f
  each; Shazeer 2020, arXiv:2002.05202; Mixtral's experts, arXiv:2401.04088 Sec 2.1). Where f
  is not given, from the counts: total - active = L_moe (E - k) 3 d f, so
  P_r = (params - active) k / (E - k).
- Dispatch and combine (Lepikhin et al. 2020, GShard, arXiv:2006.16668 Sec 2.2; Fedus et al.
  2021, arXiv:2101.03961 Sec 2): per MoE layer and microbatch, each rank sends its t tokens to
  k experts and receives them back: 2 all-to-alls forward (dispatch, combine), 2 backward (their
  gradients), 2 more forward under full recomputation; each moves n = t k d w / tp bytes per
  rank. Of them (p_in - 1) / ep stay inside the scale-up domain and (ep - p_in) / ep leave it
  (p_in: EP ranks per domain, the group's ranks etp apart: Megatron-Core lays the expert
  layers out as expert-tp x ep x expert-dp over the same ranks, whatever the attention's tp
  and cp (``--expert-tensor-parallel-size``, NVIDIA/Megatron-LM
  megatron/core/transformer/moe/README.md), so EP 64 with TP 2 on 64 GPUs is one 64-rank
  group). An all-to-all drives both tiers at once, so
  ``t = alpha + max(n (p_in - 1) / ep / (e_up B_up), n (ep - p_in) / ep / (e_out B_out))``.
  e_up: the network's measured one-node efficiency (collectives.csv; all_gather stands in where
  no all_to_all is measured); e_out = ``SCALEOUT_A2A_EFFICIENCY``: across nodes an all-to-all
  gets one NIC's rate per GPU, 46-49 of 50 GB/s at 400 Gb/s NDR (NCCL maintainers in
  NVIDIA/nccl-tests#267 and #290: "Alltoall cannot aggregate the bandwidth of multiple NICs";
  "CX-7 NICs at NDR rate (400Gbps) should achieve up to 48-49GB/s per NIC"), and DeepEP's
  measured internode dispatch/combine on H800 with CX7 (deepseek-ai/DeepEP docs/legacy.md:
  43-58 GB/s "bottleneck bandwidth (RDMA)" of ~50 GB/s at EP 16-64) agrees.
- Deduplicating dispatchers (``moe_dispatcher`` deepep or hybridep): DeepEP sends a token once
  to each GPU that holds one of its experts and, across nodes, once to each node over RDMA,
  forwarding it inside the node over NVLink (deepseek-ai/DeepEP csrc/kernels/legacy/layout.cu:
  ``is_token_in_rank`` per (token, rank), ``num_tokens_per_rdma_rank`` counts a token once per
  node; docs/legacy.md: "forwarding data from NVLink domain to RDMA domain"), where Megatron's
  all-to-all dispatcher sends one copy per routed expert (k per token). With balanced routing
  over ep ranks in ep / p_in domains, a token's k experts reach on average
  (p_in - 1) (1 - (1 - 1/ep)^k) other ranks of its domain and (ep/p_in - 1)
  (1 - (1 - p_in/ep)^k) other domains, against k (p_in - 1) / ep and k (ep - p_in) / ep copies
  (``dispatch_shares``): for DeepSeek-V3 (k 8) on EP 64 over 8 nodes, 4.6 node copies against
  7. The NVLink forwarding of the received tokens is not priced (the scale-out tier binds).
  NeMo Automodel's MoE benchmark rows all run DeepEP (its table's kernels column, 'TE +
  DeepEP'; ``estimate.DEDUP_DISPATCH_SOURCES``). Source left out, this took NeMo Automodel's
  median APE from 25 % to 10 % (MoE 15.0 % to 13.9 %).
- Expert GEMMs: with balanced routing a local expert sees m_e = t ep k / E tokens per
  microbatch (the ep ranks' t tokens, k copies each, over E experts); its up and down GEMMs
  (m_e x d x f / etp and back) run at the measured GEMM rate of that shape
  (:func:`pipeline.calibrate.hardware.gemm_efficiency`, wave quantization included), against
  the dense rate of the layer's other GEMMs: small m_e is what makes fine-grained experts slow.
- Routed tokens' HBM traffic: before the expert GEMMs each routed copy is permuted into
  expert order and after them unpermuted and weighted back (Megatron-Core's
  ``moe_utils.permute`` / ``unpermute``; DeepEP's dispatch hands the experts tokens in arrival
  order, the same copy): a read and a write of d values each, ``PERMUTE_BYTES_PER_VALUE`` x d
  bytes per routed token against its 6 d f / etp FLOP forward (backward: twice both). At the
  chip's HBM bandwidth this adds peak x bytes / (hbm x FLOP) to the expert time per FLOP,
  (4 w / 6 (f / etp)) x peak / hbm per FLOP in units of 1 / peak: on H100 (989 TFLOP/s,
  3.35 TB/s) 0.51 for Qwen3-30B-A3B (f 768; a third of its GEMM time at 60% efficiency),
  0.19 for DeepSeek-V3 (f 2048), 0.02 for Mixtral 8x22B (f 16384). The experts' SwiGLU reads
  2 f and writes f values per token, 1 / d bytes per FLOP like a dense MLP's: already in the
  dense rate, not added. The FP8 quantisation of the routed copies is not separated (the step
  rows carry no precision beside the peak).
- FP8 casts of the routed copies: under FP8 every linear layer's input is cast (and
  transposed) before its GEMM and every output gradient before the backward's
  (``critical_path.FP8_CAST_BYTES`` per value). The experts' GEMMs take the permuted copies,
  so Transformer Engine's ``GroupedLinear`` casts each routed copy, k per token
  (NVIDIA/TransformerEngine transformer_engine/pytorch/module/grouped_linear.py: the permuted
  input split by expert, ``_split_quantize`` with one input quantizer per expert): per token of an MoE layer the attention's QKV input d and
  projection input d / tp, the experts' FC1 inputs k d and FC2 inputs k f / etp; backward the
  QKV output gradient 3 d / tp, the projection's d, the experts' FC1 output gradients
  k 2 f / etp (gate and up) and FC2 output gradients k d (``fp8_cast_values_per_token``). The
  dense-MLP count it replaces casts one copy of a d-to-f MLP at the catalog's ``ffn_size``
  (for DeepSeek-V3 its dense layers' 18,432); dense layers of an MoE model keep it, weighted
  by their share of the layers. Shared experts are left out (DeepSeek-V3's one shared expert
  of 2,048 would add about an eighth of the routed casts). Source left out, this took the MoE
  median APE from 16.1 % to 15.0 %.
- Load imbalance u: the busiest expert's tokens over the mean. Token-dropping runs cap it at the
  capacity factor (GShard Sec 2.2: "expert capacity"); a stated ``moe_imbalance`` is used as
  given; otherwise 1.0 (forced-balanced routing, as the NVIDIA benchmark tables state). The
  routed share x = P_r / active of the linear FLOP then takes u x (dense rate / expert rate)
  times the dense time.
- Host issue of the expert GEMMs: Megatron-Core's all-to-all dispatcher copies the token
  counts to the host and waits for them in every MoE layer's forward whenever ep > 1 (or
  tp > 1), dropless or dropping without padding to capacity (``MoEAlltoAllTokenDispatcher``:
  ``d2h_event.synchronize()`` at ``cuda_sync_point`` "before_ep_alltoall",
  NVIDIA/Megatron-LM megatron/core/transformer/moe/token_dispatcher.py; only
  ``moe_pad_expert_input_to_capacity`` skips it), so the GPU's queue is empty and it waits
  while the host issues the layer's expert GEMMs. Transformer Engine's grouped GEMM
  (``GroupedLinear``, the experts' default) issues one cuBLASLt GEMM per local expert over 4
  streams, each with its own descriptors and ``cublasLtMatmulAlgoGetHeuristic`` query
  (NVIDIA/TransformerEngine transformer_engine/common/gemm/cublaslt_gemm.cu,
  ``multi_stream_cublas_gemm``). Measured on SM100 (NVIDIA/TransformerEngine#3134, TN fprop,
  8 experts x 128 tokens, N = K = 2048, operands prepared): 0.267 ms through that path against
  0.069 ms for one grouped kernel doing the same math, ``GEMM_HOST_S`` = (0.267 - 0.069) / 8
  = 24.75 us of host issue per expert GEMM. Per local expert, MoE layer and microbatch: 6 GEMMs
  (forward FC1 and FC2, backward their dgrad and wgrad), 2 more under full recomputation,
  charged in full beside the GPU's time (``host_issue_time``). That is an upper bound where a
  GEMM's GPU time exceeds its issue (coarse experts: Mixtral's one local expert pays 0.15 ms
  a layer against several ms of GEMMs); the lower bound, max(host, GPU) per layer, was tried
  and left the held-out Megatron-Bridge error at 29 % (this form: 15 %). A run padded to
  capacity skips the sync, but the skip is not priced: tried on Megatron-Bridge 25.09's eight
  padded token-dropping rows (capacity 1.0), it made the MoE scores worse (docs/theory.md
  §10.7).
- Overlap: ``moe_a2a_overlap`` true (DeepEP's or Megatron's
  ``--overlap-moe-expert-parallel-comm`` schedules) hides the family's overlap share of the
  all-to-alls like the TP collectives; false or not stated: exposed (Megatron's default
  all-to-all dispatcher runs it on the compute stream).
"""

from __future__ import annotations

import numpy as np

from pipeline.calibrate.hardware import gemm_efficiency, wave_efficiency

# Scale-out all-to-all efficiency per GPU NIC (module docstring): 48.5 of 50 GB/s (the NCCL
# maintainers' 48-49 GB/s per 400 Gb/s NDR NIC, NVIDIA/nccl-tests#267).
SCALEOUT_A2A_EFFICIENCY = 0.97
# All-to-alls per MoE layer and microbatch: dispatch + combine forward and backward; full
# recomputation replays the forward pair.
A2A_PER_LAYER = 4.0
A2A_RECOMPUTED = 2.0
# Host issue of one expert's cuBLASLt GEMM through Transformer Engine's multi-stream grouped
# GEMM (module docstring): (0.267 - 0.069) ms / 8 experts, NVIDIA/TransformerEngine#3134 (SM100).
GEMM_HOST_S = (0.267e-3 - 0.069e-3) / 8.0
# Expert GEMMs per local expert, MoE layer and microbatch: FC1 and FC2 forward, their dgrad and
# wgrad backward; full recomputation replays the forward pair.
GEMMS_PER_EXPERT = 6.0
GEMMS_RECOMPUTED = 2.0
# Routed-token permutation traffic (module docstring): permute and unpermute each read and write
# the token's d values: 4 values of w bytes per routed token and d.
PERMUTE_VALUES = 4.0


def _f(x) -> np.ndarray:
    return np.asarray(x, dtype=float)


def routed_params(n_experts, top_k, expert_ffn_size, moe_layers, d_model, params,
                  active_params) -> np.ndarray:
    """P_r, the routed-expert parameters one token uses (module docstring): L_moe k 3 d f,
    else (params - active) k / (E - k); 0 for dense rows (E <= 1 or no routed share)."""
    e, k, f = _f(n_experts), _f(top_k), _f(expert_ffn_size)
    from_shape = _f(moe_layers) * k * 3.0 * _f(d_model) * f
    with np.errstate(invalid="ignore", divide="ignore"):
        from_counts = (_f(params) - _f(active_params)) * k / (e - k)
    out = np.where(np.isfinite(from_shape) & (from_shape > 0), from_shape, from_counts)
    moe = (e > 1) & np.isfinite(out) & (out > 0)
    return np.where(moe, np.minimum(out, _f(active_params)), 0.0)


def routed_total(n_experts, top_k, expert_ffn_size, moe_layers, d_model, params,
                 active_params) -> np.ndarray:
    """Parameters of all routed experts: P_r E / k (:func:`routed_params` holds k of the E
    experts of every MoE layer); 0 for dense rows."""
    e, k = _f(n_experts), np.maximum(_f(top_k), 1.0)
    per_token = routed_params(n_experts, top_k, expert_ffn_size, moe_layers, d_model, params,
                              active_params)
    return np.where(e > 1, per_token * e / k, 0.0)


def imbalance(capacity_factor, moe_imbalance) -> np.ndarray:
    """u: a stated imbalance, else the capacity factor of a token-dropping run, else 1.0."""
    u, cf = _f(moe_imbalance), _f(capacity_factor)
    out = np.where(np.isfinite(u) & (u >= 1.0), u, np.where(np.isfinite(cf) & (cf > 0), cf, 1.0))
    return np.maximum(out, 1.0)


def dispatch_shares(top_k, ep, p_in, dedup) -> tuple[np.ndarray, np.ndarray]:
    """Shares of a dispatch's n = t k d w / tp bytes that go to other ranks of the domain and to
    other domains (module docstring): (p_in - 1) / ep and (ep - p_in) / ep per routed copy;
    where ``dedup`` (DeepEP-style), (p_in - 1) (1 - (1 - 1/ep)^k) / k and
    (ep/p_in - 1) (1 - (1 - p_in/ep)^k) / k."""
    ep, p_in = _f(ep), _f(p_in)
    f_in, f_out = (p_in - 1.0) / ep, (ep - p_in) / ep
    if dedup is None:
        return f_in, f_out
    k = np.maximum(_f(top_k), 1.0)
    d_in = (p_in - 1.0) * (1.0 - (1.0 - 1.0 / ep) ** k) / k
    d_out = (ep / p_in - 1.0) * (1.0 - (1.0 - p_in / ep) ** k) / k
    on = np.asarray(dedup, dtype=bool)
    return np.where(on, d_in, f_in), np.where(on, d_out, f_out)


def a2a_time(nbytes, ep, stride, domain, up_bytes_per_s, out_bytes_per_s, e_up, latency_s,
             e_out=SCALEOUT_A2A_EFFICIENCY, top_k=None, dedup=None) -> np.ndarray:
    """Seconds of one all-to-all of ``nbytes`` per rank over ``ep`` ranks ``stride`` apart: both
    tiers at once, each tier's share per ``dispatch_shares`` (module docstring); 0 where
    ep = 1."""
    ep = np.maximum(_f(ep), 1.0)
    p_in = np.clip(np.floor(_f(domain) / np.maximum(_f(stride), 1.0)), 1.0, ep)
    n = _f(nbytes)
    f_in, f_out = dispatch_shares(top_k, ep, p_in, dedup)
    t_in = n * f_in / (_f(e_up) * _f(up_bytes_per_s))
    with np.errstate(invalid="ignore"):
        t_out = np.where(ep > p_in, n * f_out / (_f(e_out) * _f(out_bytes_per_s)), 0.0)
    return np.where(ep > 1.0, _f(latency_s) + np.maximum(t_in, t_out), 0.0)


def expert_rate_ratio(microbatch_tokens, ep, n_experts, top_k, expert_ffn_size, etp, d_model,
                      dense_rate, eta_max, peak_flops_per_s, hbm_bytes_per_s, sm_count,
                      bytes_per_value, launch_s) -> np.ndarray:
    """Dense GEMM rate over the routed experts' (module docstring); 1 where the expert width is
    unknown (the routed FLOP then run at the dense rate)."""
    d = _f(d_model)
    width = _f(expert_ffn_size) / np.maximum(_f(etp), 1.0)
    m_e = np.maximum(_f(microbatch_tokens) * np.maximum(_f(ep), 1.0) * _f(top_k)
                     / np.maximum(_f(n_experts), 1.0), 1.0)
    args = (_f(peak_flops_per_s), _f(hbm_bytes_per_s), bytes_per_value, launch_s)
    with np.errstate(invalid="ignore", divide="ignore"):
        up = gemm_efficiency(m_e, d, width, _f(eta_max) * wave_efficiency(m_e, width, sm_count),
                             *args)
        down = gemm_efficiency(m_e, width, d, _f(eta_max) * wave_efficiency(m_e, d, sm_count),
                               *args)
        gemm = (1.0 / up + 1.0 / down) / 2.0
        ratio = _f(dense_rate) * (gemm + permute_time_per_flop(d, width, bytes_per_value,
                                                                 *args[:2]))
    return np.where(np.isfinite(ratio) & (ratio > 0), ratio, 1.0)


def permute_time_per_flop(d_model, expert_width, bytes_per_value, peak_flops_per_s,
                          hbm_bytes_per_s) -> np.ndarray:
    """The routed tokens' permute and unpermute HBM time per expert GEMM FLOP, in units of
    1 / peak (module docstring): ``PERMUTE_VALUES d w / hbm`` over ``6 d f / etp`` FLOP."""
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (PERMUTE_VALUES * _f(d_model) * bytes_per_value / _f(hbm_bytes_per_s)
               / (6.0 * _f(d_model) * _f(expert_width))) * _f(peak_flops_per_s)
    return np.where(np.isfinite(out) & (out > 0), out, 0.0)


def linear_time_scale(routed_share, imbalance_factor, rate_ratio) -> np.ndarray:
    """Factor on the linear layers' time: (1 - x) + x u (dense rate / expert rate)."""
    x = np.clip(_f(routed_share), 0.0, 1.0)
    return (1.0 - x) + x * _f(imbalance_factor) * _f(rate_ratio)


def dispatch_bytes(microbatch_tokens, top_k, d_model, tp, bytes_per_value) -> np.ndarray:
    """n = t k d w / tp: one dispatch's bytes per rank (module docstring)."""
    return _f(microbatch_tokens) * _f(top_k) * _f(d_model) * bytes_per_value / np.maximum(
        _f(tp), 1.0)


def a2a_count(recompute) -> np.ndarray:
    """All-to-alls per MoE layer and microbatch (4, 6 under full recomputation)."""
    return A2A_PER_LAYER + np.where(_f(recompute) >= 2, A2A_RECOMPUTED, 0.0)


def host_issue_time(n_experts, ep, moe_layers_stage, recompute,
                    gemm_host_s=GEMM_HOST_S) -> np.ndarray:
    """Seconds per microbatch on a stage the GPU waits for the host to issue the expert GEMMs
    (module docstring): local experts E / ep x MoE layers on the stage x (6, 8 under full
    recomputation) GEMMs x ``gemm_host_s``; 0 for dense rows (E <= 1)."""
    e = _f(n_experts)
    local = np.where(e > 1, e / np.maximum(_f(ep), 1.0), 0.0)
    gemms = GEMMS_PER_EXPERT + np.where(_f(recompute) >= 2, GEMMS_RECOMPUTED, 0.0)
    return np.nan_to_num(local * _f(moe_layers_stage) * gemms * gemm_host_s)


def fp8_cast_values_per_token(d_model, tp, top_k, expert_ffn_size, etp) -> np.ndarray:
    """Values cast to FP8 per token in one MoE layer on a rank, forward and backward (module
    docstring): d + d / tp + k d + k f / etp, then 3 d / tp + d + 2 k f / etp + k d; NaN where
    the expert width is unknown (the caller keeps the dense count)."""
    d, k = _f(d_model), _f(top_k)
    tp = np.maximum(_f(tp), 1.0)
    etp = np.ones(np.shape(d)) if etp is None else np.maximum(_f(etp), 1.0)
    f = np.where(_f(expert_ffn_size) > 0, _f(expert_ffn_size), np.nan) / etp
    inputs = d + d / tp + k * d + k * f
    grads = 3.0 * d / tp + d + 2.0 * k * f + k * d
    return inputs + grads
