"""Memory-model inputs from a runs.parquet-style frame (runs, or the layouts ``plan`` searches).

Columns read: params, active_params, n_layers, d_model, seq_len, micro_batch, n_accelerators,
dp, tp, pp, cp, ep, zero_stage, global_batch_tokens, precision, model_id, strategy_family, the
framework family's columns (``framework_family``, source, strategy: pipeline/frameworks.py,
which set the loss's bytes per logit and the selective policy) and
the schedule columns ``recompute`` (none | selective | full; absent or null: ``none``),
``virtual_pipeline`` (absent or null: 1) and ``sequence_parallel`` (absent or null: true where
tp > 1, as current tensor-parallel implementations run by default: nanotron's REDUCE_SCATTER
mode, the mode of Hugging Face's bench_cluster sweep configs, torchtitan's TP plan, and
Megatron-Core's recommended ``--sequence-parallel``).
The attention and MLP widths and the vocabulary come from the model catalog (``model_id``);
where the catalog has none the MLP is 4 d wide, attention has d / 128 heads (only used without
flash attention) and the vocabulary is unknown (every parameter then sits in the layers).
Depth and width must already be complete (pipeline/shapes.py fills them); an unstated batch is
the one of pipeline/shapes.py (m = 4 pp microbatches under pipelining).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from pipeline.frameworks import family_of
from pipeline.shapes import batch_tokens, microbatches
from pipeline.theory.memory import MemoryConstants, MemoryInputs, recompute_code

# Precisions trained without a low-precision weight copy: fp32 weights and gradients, Adam
# moments only (no separate master weights).
FULL_PRECISION = ("fp32", "tf32")


def _num(frame: pd.DataFrame, name: str, default: float = np.nan) -> np.ndarray:
    if name not in frame.columns:
        return np.full(len(frame), default, dtype=float)
    out = pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return np.where(np.isfinite(out), out, default)


def _flag(frame: pd.DataFrame, name: str, default: np.ndarray) -> np.ndarray:
    if name not in frame.columns:
        return default
    given = frame[name].astype("boolean")
    return np.where(given.isna().to_numpy(), default, given.fillna(False).to_numpy(dtype=bool))


def _catalog_shape(model_ids: np.ndarray, catalog: Any) -> dict[str, np.ndarray]:
    """Per row: heads, KV heads, MLP width, gated MLP, vocabulary, embedding matrices, experts'
    top-k, from the model catalog (NaN/defaults where the model or the field is unknown)."""
    n = len(model_ids)
    out = {k: np.full(n, np.nan) for k in ("n_heads", "n_kv_heads", "ffn_size", "vocab_size",
                                            "top_k", "n_experts")}
    out["gated_mlp"] = np.zeros(n, bool)
    out["n_embeddings"] = np.zeros(n)
    models = catalog.models if catalog is not None else None
    # one shape per distinct model, written to its rows (a planner's search: ~1e4 rows, 1 model)
    codes, distinct = pd.factorize(np.asarray(model_ids, dtype=object))
    for j, mid in enumerate(distinct):
        if models is None or not isinstance(mid, str) or mid not in models.index:
            continue
        at = codes == j
        for k, v in _shape_of(catalog.model_spec(mid)).items():
            out[k][at] = v
    return out


def _shape_of(spec: dict) -> dict:
    """The catalog row's widths; whether its MLP is gated and its embeddings tied is decided by
    which of the four parameter counts (gated or not, tied or not) its shape reproduces best."""
    get = lambda k: float(spec[k]) if spec.get(k) is not None else np.nan  # noqa: E731
    h, layers, a = get("d_model"), get("n_layers"), get("n_heads")
    kv = get("n_kv_heads") if np.isfinite(get("n_kv_heads")) else a
    f, vocab, params = get("ffn_size"), get("vocab_size"), get("params")
    out = {"n_heads": a, "n_kv_heads": kv, "ffn_size": f, "vocab_size": vocab,
           "top_k": get("top_k"), "n_experts": get("n_experts"), "gated_mlp": False,
           "n_embeddings": 0.0}
    if np.isfinite(out["n_experts"]) and out["n_experts"] > 1:
        return _moe_shape(out, get)
    if not all(np.isfinite(v) for v in (h, layers, a, f, vocab, params)):
        if np.isfinite(vocab):
            out["n_embeddings"] = 2.0
        return out
    attention = 2.0 * h * h + 2.0 * h * kv * h / a
    best = None
    for gated in (True, False):
        for n_emb in (1.0, 2.0):
            total = layers * (attention + (3.0 if gated else 2.0) * h * f) + n_emb * vocab * h
            err = abs(total / params - 1.0)
            if best is None or err < best[0]:
                best = (err, gated, n_emb)
    out["gated_mlp"], out["n_embeddings"] = best[1], best[2]
    return out


def _moe_shape(out: dict, get) -> dict:
    """An MoE catalog row: its MLP activations are the routed tokens' (top-k copies at the
    expert width) plus the shared experts', so ``ffn_size`` (multiplied by top-k in
    :func:`pipeline.theory.memory.activation_bytes_per_layer`) is expert_ffn_size x (top_k +
    shared) / top_k; every catalogued MoE model has gated (SwiGLU/GLU) experts and untied
    embeddings (their configs: ``tie_word_embeddings`` false), which the dense four-way match
    cannot tell when experts hold most parameters."""
    f_e, k = get("expert_ffn_size"), out["top_k"]
    shared = get("shared_experts") if np.isfinite(get("shared_experts")) else 0.0
    if np.isfinite(f_e) and np.isfinite(k) and k >= 1:
        out["ffn_size"] = f_e * (k + shared) / k
    out["gated_mlp"] = True
    out["n_embeddings"] = 2.0 if np.isfinite(out["vocab_size"]) else 0.0
    return out


def _state_bytes(const: MemoryConstants, full: np.ndarray, bf16_states: np.ndarray,
                 bf16_grads: np.ndarray) -> dict[str, np.ndarray]:
    """Bytes per parameter of weights, gradients and optimizer states per row: fp32 training
    (4, 4, 8: Adam moments, no master copy); a recipe that keeps every state in bf16 (2, 2, 4:
    ``MemoryConstants.bf16_state_sources``); one whose gradient buffer is bf16 (2:
    ``bf16_grad_moe_sources``); else the constants' (2, 4, 12)."""
    weight = np.where(full, 4.0, np.where(bf16_states, 2.0, const.weight_bytes_per_param))
    grad = np.where(full, 4.0, np.where(bf16_states | bf16_grads, 2.0,
                                        const.gradient_bytes_per_param))
    optimizer = np.where(full, 8.0, np.where(bf16_states, 4.0, const.optimizer_bytes_per_param))
    return {"weight_bytes_per_param": weight, "gradient_bytes_per_param": grad,
            "optimizer_bytes_per_param": optimizer}


def memory_inputs(frame: pd.DataFrame, catalog: Any, const: MemoryConstants,
                  defaults: dict[str, float]) -> tuple[MemoryInputs, MemoryConstants]:
    """(inputs, constants per row) for every row of ``frame``.

    ``defaults``: ``seq_len``, ``micro_batch`` (sequences) and ``zero_stage`` stand-ins where
    a row gives none (the theory's ``theory.bounds`` values; zero_stage 3 for FSDP families).
    """
    n_acc = _num(frame, "n_accelerators")
    tp, pp, cp = (np.maximum(_num(frame, k, 1.0), 1.0) for k in ("tp", "pp", "cp"))
    ep = np.maximum(_num(frame, "ep", 1.0), 1.0)
    dp = _num(frame, "dp")
    dp = np.where(dp >= 1, dp, np.maximum(n_acc / (tp * pp * cp), 1.0))
    seq = _num(frame, "seq_len", defaults["seq_len"])
    micro = _num(frame, "micro_batch", defaults["micro_batch"])
    batch, _ = batch_tokens(_num(frame, "global_batch_tokens"), dp, micro, seq, pp)
    m = microbatches(batch, dp, micro, seq)
    family = (frame["strategy_family"].astype(object).to_numpy() if "strategy_family" in frame
              else np.full(len(frame), None, dtype=object))
    fsdp = np.array([f in ("fsdp", "hybrid_fsdp") for f in family], bool)
    zero = _num(frame, "zero_stage")
    zero = np.where(zero >= 0, zero, np.where(fsdp, 3.0, defaults["zero_stage"]))
    model_ids = (frame["model_id"].astype(object).to_numpy() if "model_id" in frame
                 else np.full(len(frame), None, dtype=object))
    shape = _catalog_shape(model_ids, catalog)
    params = _num(frame, "params")
    active = _num(frame, "active_params")
    active = np.where(active > 0, active, params)
    # routed experts: what the active count leaves out, plus the top-k experts it includes
    # (a row's stated n_experts / top_k, else the catalog's)
    top_k = np.where(_num(frame, "top_k") >= 1, _num(frame, "top_k"), shape["top_k"])
    top_k = np.where(np.isfinite(top_k), top_k, 1.0)
    n_exp = np.where(_num(frame, "n_experts") >= 1, _num(frame, "n_experts"), shape["n_experts"])
    expert = np.where((active < params) & np.isfinite(n_exp) & (n_exp > top_k),
                      (params - active) * n_exp / (n_exp - top_k), 0.0)
    expert = np.minimum(expert, params)
    precision = (frame["precision"].astype(object).to_numpy() if "precision" in frame
                 else np.full(len(frame), None, dtype=object))
    full = np.array([p in FULL_PRECISION for p in precision], bool)
    # the framework family's loss working set and selective policy (pipeline/frameworks.py)
    family = family_of(frame)
    loss_bytes = dict(const.loss_bytes_per_logit)
    logits_bytes = np.array([loss_bytes.get(f, const.logits_bytes_per_value) for f in family],
                            dtype=float)
    op_selective = np.isin(family, list(const.op_selective_families))
    source = (frame["source"].astype(object).to_numpy() if "source" in frame
              else np.full(len(frame), None, dtype=object))
    unsharded_grads = np.isin(source, list(const.pipeline_unsharded_grads_sources))
    row_const = replace(
        const,
        logits_bytes_per_value=logits_bytes,
        **_state_bytes(const, full, np.isin(source, list(const.bf16_state_sources)),
                       np.isin(source, list(const.bf16_grad_moe_sources)) & (expert > 0)),
        activation_bytes_per_value=np.where(full, 4.0, const.activation_bytes_per_value))
    recompute = (recompute_code(frame["recompute"].to_numpy(dtype=object))
                 if "recompute" in frame else np.zeros(len(frame), np.int64))
    inputs = MemoryInputs(
        params=params, n_layers=_num(frame, "n_layers"), d_model=_num(frame, "d_model"),
        seq_len=seq, micro_batch=micro, n_heads=shape["n_heads"],
        n_kv_heads=shape["n_kv_heads"], ffn_size=shape["ffn_size"],
        gated_mlp=shape["gated_mlp"], vocab_size=np.nan_to_num(shape["vocab_size"]),
        n_embeddings=shape["n_embeddings"], expert_params=expert, top_k=top_k, dp=dp, tp=tp,
        pp=pp, cp=cp, ep=ep, zero_stage=zero, microbatches=m,
        virtual_pipeline=np.maximum(_num(frame, "virtual_pipeline", 1.0), 1.0),
        recompute=recompute, sequence_parallel=_flag(frame, "sequence_parallel", tp > 1),
        op_selective=op_selective, pipeline_unsharded_grads=unsharded_grads)
    return inputs, row_const
