"""The planner's search: every layout of (tp, pp, v, cp, dp, ep, micro-batch, ZeRO stage,
recompute) for N chips, those that fit in memory, ranked by the calibrated model's MFU.

Layouts: powers of two for tp (up to the scale-up domain and dividing the heads), pp (up to the
layers; uneven stages allowed, as Llama 3's), cp (while each rank keeps >= ``MIN_CP_TOKENS``
tokens of a sequence) and ep (MoE: dividing dp cp, up to the experts); dp = N / (tp pp cp);
micro-batches of 1-8 sequences with m = B / (dp mb s) microbatches, at least 1; interleaving
v in 1, 2, 4, 8 and L / pp (one layer per chunk) where pp > 1, m is a multiple of pp and each chunk keeps a layer; ZeRO 0-3;
recompute none, selective, full. Sequence parallelism is on wherever tp > 1 (it moves no more
bytes than TP's all-reduces). Memory: :mod:`pipeline.theory.memory` with the theory stage's
fitted overhead; step time: :func:`pipeline.calibrate.step.predict`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd

from pipeline.calibrate.step import StepModel, predict
from pipeline.frameworks import DEFAULT_FAMILY
from pipeline.plan.request import ModelShape, PlanError
from pipeline.theory.memory import RECOMPUTE, MemoryConstants, Overhead, fits_in, peak_memory
from pipeline.theory.memory_inputs import memory_inputs

MIN_CP_TOKENS = 2048
MICRO_BATCHES = (1, 2, 4, 8)
INTERLEAVE = (1, 2, 4, 8)
ZERO_STAGES = (0, 1, 2, 3)
MAX_PP = 128


@dataclass(frozen=True)
class PlanContext:
    """What a search needs: the step model, the settings, the memory constants and fitted
    overhead."""

    step: StepModel
    params: Mapping[str, Any]
    memory: MemoryConstants
    overhead: Overhead
    #: the framework family planned for (pipeline/frameworks.py): its activation factor sizes
    #: memory and its calibrated parameters time the step
    framework: str = DEFAULT_FAMILY


def _powers(limit: float) -> np.ndarray:
    return 2 ** np.arange(int(np.floor(np.log2(max(limit, 1.0)))) + 1)


def candidates(model: ModelShape, accelerator: str, n: int, batch_tokens: float, seq_len: float,
               domain: float, fixed: dict[str, Any]) -> pd.DataFrame:
    """Every layout for N chips (before the memory check), runs.parquet-style columns."""
    heads = model.n_heads if np.isfinite(model.n_heads) else model.d_model / 128.0
    tp = [t for t in _powers(min(domain, n)) if heads % t == 0]
    pp = list(_powers(min(model.n_layers, n, MAX_PP)))
    cp = list(_powers(min(seq_len / MIN_CP_TOKENS, n)))
    grid = []
    for t in tp:
        for p in pp:
            for c in cp:
                if n % (t * p * c):
                    continue
                grid.append((t, p, c, n // (t * p * c)))
    if not grid:
        return pd.DataFrame()
    g = pd.DataFrame(grid, columns=["tp", "pp", "cp", "dp"])
    moe = np.isfinite(model.n_experts) and model.n_experts > 1
    eps = list(_powers(model.n_experts)) if moe else [1]
    g = g.merge(pd.DataFrame({"ep": eps}), how="cross")
    g = g[(g["dp"] * g["cp"]) % g["ep"] == 0]
    g = g.merge(pd.DataFrame({"micro_batch": MICRO_BATCHES}), how="cross")
    m = np.round(batch_tokens / (g["dp"] * g["micro_batch"] * seq_len))
    g = g.assign(microbatches=m)[m >= 1]
    # interleaving: 1, 2, 4, 8 and one layer per chunk (L / pp, the most)
    g = g.merge(pd.DataFrame({"virtual_pipeline": (*INTERLEAVE, 0)}), how="cross")
    most = np.maximum(np.floor(model.n_layers / g["pp"]), 1)
    g["virtual_pipeline"] = np.where(g["virtual_pipeline"] == 0, most,
                                     g["virtual_pipeline"]).astype(int)
    v = g["virtual_pipeline"]
    keep = (v == 1) | ((g["pp"] > 1) & (g["microbatches"] % g["pp"] == 0)
                       & (model.n_layers / (g["pp"] * v) >= 1))
    g = g[keep].drop_duplicates()
    g = g.merge(pd.DataFrame({"zero_stage": ZERO_STAGES}), how="cross")
    g = g.merge(pd.DataFrame({"recompute": list(RECOMPUTE)}), how="cross")
    for col, value in fixed.items():
        if col in g:
            g = g[g[col] == value]
    g = g.reset_index(drop=True)
    g["global_batch_tokens"] = g["dp"] * g["micro_batch"] * g["microbatches"] * seq_len
    g["sequence_parallel"] = g["tp"] > 1
    g["n_accelerators"] = n
    g["accelerators_per_node"] = domain
    g["accelerator"] = accelerator
    g["precision"] = "bf16"
    g["params"], g["active_params"] = model.params, model.active_params
    g["n_layers"], g["d_model"], g["seq_len"] = model.n_layers, model.d_model, seq_len
    g["model_id"] = model.model_id
    for col in ("n_experts", "top_k", "expert_ffn_size", "moe_dense_layers"):
        g[col] = getattr(model, col)
    return g


def memory_of(layouts: pd.DataFrame, ctx: PlanContext) -> np.ndarray:
    """Predicted peak bytes per accelerator of each layout (fitted overhead included)."""
    defaults = {"seq_len": 2048.0, "micro_batch": 1.0, "zero_stage": 1.0}
    inputs, const = memory_inputs(layouts, ctx.step.catalog, ctx.memory, defaults)
    return ctx.overhead.apply(peak_memory(inputs, const))


def plan_for_n(model: ModelShape, accelerator: str, n: int, batch_tokens: float,
               seq_len: float, fixed: dict[str, Any], ctx: PlanContext, top: int
               ) -> pd.DataFrame:
    """The best ``top`` layouts for N that fit, by predicted MFU (highest first; on ties the
    one that needs less memory)."""
    hw = ctx.step.catalog.hardware.loc[accelerator]
    # the capacity the driver reports (catalog hbm_usable_bytes), less the runtime's reserve
    hbm = float(hw["hbm_usable_bytes"]) if pd.notna(hw.get("hbm_usable_bytes")) \
        else float(hw["hbm_bytes"])
    reserve = float(ctx.memory.runtime_reserve_bytes)
    domain = float(hw["scaleup_domain_size"]) if pd.notna(hw["scaleup_domain_size"]) else 8.0
    cand = candidates(model, accelerator, n, batch_tokens, seq_len, domain, fixed)
    if cand.empty:
        raise PlanError("--layout" if fixed else "--n", f"no layout of {model.model_id} "
                        f"divides N = {n}" + (f" with {_show(fixed)}" if fixed else "")
                        + (" at this batch (raise --global-batch-tokens)" if n > 1 else ""))
    cand["framework_family"] = ctx.framework
    cand["memory_bytes_per_accelerator"] = memory_of(cand, ctx)
    cand["hbm_bytes"] = hbm
    fits = fits_in(cand["memory_bytes_per_accelerator"].to_numpy(float), hbm, ctx.memory)
    if not fits.any():
        least = cand.loc[cand["memory_bytes_per_accelerator"].idxmin()]
        need = float(least["memory_bytes_per_accelerator"])
        what = f"{_show(fixed)} does not fit" if fixed else "no layout fits"
        raise PlanError("--layout" if fixed else "--n",
                        f"{what} in memory at N = {n}: the lightest needs {need / 1e9:.1f} GB "
                        f"per accelerator, {(need + reserve - hbm) / 1e9:.1f} GB "
                        f"({(need + reserve) / hbm - 1:.0%}) more than the {hbm / 1e9:.1f} GB "
                        f"{accelerator} reports, less the runtime's {reserve / 1e9:.1f} GB")
    ok = cand[fits].reset_index(drop=True)
    pred = predict(ok, ctx.step)
    ok = pd.concat([ok, pred], axis=1)
    ok["fits_memory"] = True
    ok["tokens_per_s"] = ok["global_batch_tokens"] / ok["step_time_s"]
    ok["a2a_share"] = ok["ep_comm_s"] / ok["step_time_s"]   # MoE dispatch/combine exposed
    # equal MFU (to 1e-4): the simpler layout first (less recompute, lower ZeRO stage, less
    # memory)
    ok["_rank_mfu"] = ok["mfu"].round(4)
    ok["_rc"] = ok["recompute"].map({name: i for i, name in enumerate(RECOMPUTE)})
    ok = ok.sort_values(["_rank_mfu", "_rc", "zero_stage", "memory_bytes_per_accelerator"],
                        ascending=[False, True, True, True], kind="mergesort")
    ok = ok.drop(columns=["_rank_mfu", "_rc"])
    return ok.head(top).reset_index(drop=True)


def _show(fixed: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in fixed.items())
