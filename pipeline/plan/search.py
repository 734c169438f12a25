"""The planner's search: every layout of (tp, pp, v, cp, dp, ep, micro-batch, ZeRO stage,
recompute) for N chips, those that fit in memory, ranked by the calibrated model's MFU.

Searched (axes the request does not fix): powers of two for tp (up to the scale-up domain and
dividing the heads) and cp (while each rank keeps >= ``MIN_CP_TOKENS`` tokens of a sequence),
every divisor of N for pp (up to the layers and ``MAX_PP``: at N = 72 pp 3 or 9 takes the odd
factor that dp would otherwise carry), ep (MoE: dividing dp cp, up to the experts);
micro-batches of 1, 2, 4, 8 sequences; interleaving v in 1, 2, 4, 8 and L / pp where pp > 1, m
is a multiple of pp and the chunks divide the layers (or the layers and the embedding and
output layers); ZeRO 0-3; recompute none, selective,
full. A fixed axis takes any integer the request allows
(``pipeline.plan.request.check_layout_fits_model``): pp that does not divide the layers (the
stage with ceil(L / pp) layers sets the pace; the embedding sits on the first stage and the
output layer on the last, not priced), any micro-batch. dp = N / (tp pp cp), and the batch is
never changed: a layout is kept only where dp x mb divides its sequences (m = B / (dp mb s)
microbatches). Sequence parallelism as the layout's ``sp=`` says, else calibrate's default for a
run that states none (on for the megatron family with tp > 1). Memory:
:mod:`pipeline.theory.memory` with the theory stage's fitted overhead; step time:
:func:`pipeline.calibrate.step.predict`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from pipeline.calibrate.step import StepModel, predict
from pipeline.frameworks import DEFAULT_FAMILY, MEGATRON_DEEPSPEED
from pipeline.plan.batch import Batch
from pipeline.plan.request import ModelShape, PlanError
from pipeline.theory.memory import RECOMPUTE, MemoryConstants, Overhead, fits_in, peak_memory
from pipeline.theory.memory_inputs import memory_inputs

MIN_CP_TOKENS = 2048
MICRO_BATCHES = (1, 2, 4, 8)
INTERLEAVE = (1, 2, 4, 8)
ZERO_STAGES = (0, 1, 2, 3)
MAX_PP = 128
# recompute policies, least work first (the ranking's tie-break and the search's bound)
RECOMPUTE_ORDER = {name: i for i, name in enumerate(RECOMPUTE)}
# the columns that make one layout apart from its recompute policy (the rest of a candidate
# row is the same for every row of one N)
LAYOUT_AXES = ("tp", "pp", "cp", "dp", "ep", "micro_batch", "microbatches", "virtual_pipeline",
               "pipeline_flushes", "zero_stage", "sequence_parallel", "shard_group",
               "framework_family")


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
    #: columns every planned row carries (precision, cluster, kernel facts, ...): the flags
    columns: Mapping[str, Any] = field(default_factory=dict)
    #: where no family is asked for: the family per candidate row (the planner's stated rule,
    #: pipeline.plan.coverage.covering_family); None: ``framework`` for every row
    family_for: Callable[[pd.DataFrame], np.ndarray] | None = None
    #: price only the recompute policies that can reach the answer (:func:`_priced_bounded`);
    #: False prices every candidate (the test of the bound)
    prune_recompute: bool = True


def _powers(limit: float) -> list[int]:
    return [int(x) for x in 2 ** np.arange(int(np.floor(np.log2(max(limit, 1.0)))) + 1)]


def _divisors(n: int, limit: float) -> list[int]:
    """The divisors of n up to ``limit``, ascending (the powers of two where n is one)."""
    top = int(min(max(limit, 1.0), n))
    return [d for d in range(1, top + 1) if n % d == 0]


def _axis(fixed: dict[str, Any], col: str, searched: list[int]) -> list[int]:
    return [int(fixed[col])] if col in fixed else searched


def _grid(model: ModelShape, n: int, seq_len: float, domain: float, fixed: dict[str, Any]
          ) -> pd.DataFrame:
    """(tp, pp, cp, dp, ep) with tp pp cp dp = N: tp and cp powers of two and pp the divisors
    of N searched, fixed axes as given (any integer)."""
    heads = model.n_heads if np.isfinite(model.n_heads) else model.d_model / 128.0
    tp = _axis(fixed, "tp", [t for t in _powers(min(domain, n)) if heads % t == 0])
    pp = _axis(fixed, "pp", _divisors(n, min(model.n_layers, MAX_PP)))
    cp = _axis(fixed, "cp", _powers(min(seq_len / MIN_CP_TOKENS, n)))
    grid = [(t, p, c, n // (t * p * c)) for t in tp for p in pp for c in cp
            if n % (t * p * c) == 0]
    g = pd.DataFrame(grid, columns=["tp", "pp", "cp", "dp"], dtype=int)
    if "dp" in fixed:
        g = g[g["dp"] == int(fixed["dp"])]
    eps = _axis(fixed, "ep", _powers(model.n_experts) if model.is_moe else [1])
    g = g.merge(pd.DataFrame({"ep": eps}), how="cross")
    return g[(g["dp"] * g["cp"]) % g["ep"] == 0]


def candidates(model: ModelShape, accelerator: str, n: int, batch: Batch, domain: float,
               fixed: dict[str, Any]) -> pd.DataFrame:
    """Every layout for N chips whose axes multiply to N and whose micro-batches split the
    batch (before the memory check), runs.parquet-style columns. Raises PlanError naming the
    divisibility that fails when none does."""
    seq_len = batch.seq_len
    g = _grid(model, n, seq_len, domain, fixed)
    if g.empty:
        raise PlanError("--layout" if fixed else "--n", f"no layout of {model.model_id} has "
                        f"tp x pp x cp x dp = N = {n}" + (f" with {_show(fixed)}" if fixed
                                                          else ""))
    g = g.merge(pd.DataFrame({"micro_batch": _axis(fixed, "micro_batch", list(MICRO_BATCHES))}),
                how="cross")
    per_step = g["dp"] * g["micro_batch"]
    splits = batch.sequences % per_step == 0
    if not splits.any():
        raise PlanError("--layout" if fixed else "--global-batch-tokens", _no_split(g, batch))
    g = g[splits].assign(microbatches=(batch.sequences // per_step[splits]).astype(int))
    g = _flushes(g, fixed)
    g = _interleave(g, model, fixed)
    g = g.merge(pd.DataFrame({"zero_stage": _axis(fixed, "zero_stage", list(ZERO_STAGES))}),
                how="cross")
    rec = [fixed["recompute"]] if "recompute" in fixed else list(RECOMPUTE)
    g = g.merge(pd.DataFrame({"recompute": rec}), how="cross").reset_index(drop=True)
    g["global_batch_tokens"] = float(batch.tokens)
    if "sequence_parallel" in fixed:
        g["sequence_parallel"] = bool(fixed["sequence_parallel"])
    if "shard_group" in fixed:
        g["shard_group"] = int(fixed["shard_group"])
    g["n_accelerators"] = n
    g["accelerators_per_node"] = domain
    g["accelerator"] = accelerator
    g["params"], g["active_params"] = model.params, model.active_params
    g["n_layers"], g["d_model"], g["seq_len"] = model.n_layers, model.d_model, float(seq_len)
    g["model_id"] = model.model_id
    for col in ("n_experts", "top_k", "expert_ffn_size", "moe_dense_layers"):
        g[col] = getattr(model, col)
    return g


def _interleave(g: pd.DataFrame, model: ModelShape, fixed: dict[str, Any]) -> pd.DataFrame:
    """v: the fixed one (any v with a layer per chunk, checked by the request), else 1, 2, 4,
    8 and one layer per chunk (L / pp) where pp > 1, m is a multiple of pp (Megatron-LM's
    interleaved schedule) and the chunks divide the layers evenly: L a multiple of pp v, or L + 2
    where the first and last chunk hold the embedding and the output layer (Llama 3's 126 layers
    in 16 x 8 chunks, arXiv:2407.21783 §3.3.2); a searched v is one an interleaved schedule runs
    as stated."""
    if "virtual_pipeline" in fixed:
        return g.assign(virtual_pipeline=int(fixed["virtual_pipeline"]))
    g = g.merge(pd.DataFrame({"virtual_pipeline": (*INTERLEAVE, 0)}), how="cross")
    most = np.maximum(np.floor(model.n_layers / g["pp"]), 1)
    g["virtual_pipeline"] = np.where(g["virtual_pipeline"] == 0, most,
                                     g["virtual_pipeline"]).astype(int)
    v = g["virtual_pipeline"]
    chunks = g["pp"] * v
    keep = (v == 1) | ((g["pp"] > 1) & (g["microbatches"] % g["pp"] == 0)
                       & (((model.n_layers >= chunks)
                           & np.isclose(np.mod(model.n_layers, chunks), 0.0))
                          | ((model.n_layers + 2 >= chunks)
                             & np.isclose(np.mod(model.n_layers + 2, chunks), 0.0))))
    return g[keep].drop_duplicates()


def _flushes(g: pd.DataFrame, fixed: dict[str, Any]) -> pd.DataFrame:
    """The pipeline schedules per step the request fixed (``flushes=``; 1, one schedule for
    the step's microbatches, where it fixes none): only layouts whose microbatches split into
    them, else the error names the divisibility that fails."""
    f = int(fixed.get("pipeline_flushes", 1))
    g = g.assign(pipeline_flushes=f)
    if f == 1:
        return g
    ok = g["microbatches"] % f == 0
    if not ok.any():
        shown = ", ".join(f"m = {m:,}" for m in sorted({int(m) for m in g["microbatches"]})[:4])
        raise PlanError("--layout", f"flushes={f} does not divide the microbatches per step "
                        f"({shown}): each flush runs m / flushes of them")
    return g[ok]


def _no_split(g: pd.DataFrame, batch: Batch) -> str:
    """Why no (dp, micro-batch) splits the batch: the divisibility that fails (the smallest
    products first), with the batch that would split at the smallest."""
    pairs = sorted({(int(d) * int(b), int(d), int(b))
                    for d, b in g[["dp", "micro_batch"]].itertuples(index=False)})
    shown = ", ".join(f"dp {d:,} x mb {b} = {p:,}" for p, d, b in pairs[:4])
    more = f" (and {len(pairs) - 4} more)" if len(pairs) > 4 else ""
    least = pairs[0][0]
    return (f"the global batch of {batch.sequences:,} sequences ({batch.tokens:,} tokens) does "
            f"not split into dp x micro-batch: {shown}{more} do not divide "
            f"{batch.sequences:,}; give a batch that is a multiple of {least:,} sequences "
            f"({least * batch.seq_len:,} tokens), or change mb or the layout")


def memory_of(layouts: pd.DataFrame, ctx: PlanContext) -> np.ndarray:
    """Predicted peak bytes per accelerator of each layout (fitted overhead included)."""
    defaults = {"seq_len": 2048.0, "micro_batch": 1.0, "zero_stage": 1.0}
    inputs, const = memory_inputs(layouts, ctx.step.catalog, ctx.memory, defaults)
    return ctx.overhead.apply(peak_memory(inputs, const))


def runnable(cand: pd.DataFrame, fixed: dict[str, Any]) -> np.ndarray:
    """Per candidate, whether its family's software runs it, on the axes the request left
    free (a layout the user fixed is priced as asked). Megatron-DeepSpeed pipelines on
    DeepSpeed's engine, whose schedule is plain 1F1B (deepspeed/runtime/pipe/schedule.py
    TrainSchedule) and which takes no ZeRO-2/3 with a pipeline (its PipelineEngine asserts
    ZeRO stage < 2): with pp > 1, v = 1 and ZeRO 0-1."""
    mds = (cand["framework_family"].to_numpy(object) == MEGATRON_DEEPSPEED) & \
        (cand["pp"].to_numpy(float) > 1)
    ok = np.ones(len(cand), dtype=bool)
    if "virtual_pipeline" not in fixed:
        ok &= ~mds | (cand["virtual_pipeline"].to_numpy(float) <= 1)
    if "zero_stage" not in fixed:
        ok &= ~mds | (cand["zero_stage"].to_numpy(float) <= 1)
    return ok


def plan_for_n(model: ModelShape, accelerator: str, n: int, batch: Batch,
               fixed: dict[str, Any], ctx: PlanContext, top: int) -> pd.DataFrame:
    """The best ``top`` layouts for N that fit, by predicted MFU (highest first; on ties the
    one that needs less memory)."""
    hw = ctx.step.catalog.hardware.loc[accelerator]
    # the capacity the driver reports (catalog hbm_usable_bytes), less the runtime's reserve
    hbm = float(hw["hbm_usable_bytes"]) if pd.notna(hw.get("hbm_usable_bytes")) \
        else float(hw["hbm_bytes"])
    reserve = float(ctx.memory.runtime_reserve_bytes)
    domain = float(fixed.get("accelerators_per_node", ctx.columns.get("accelerators_per_node",
                                                                       np.nan)))
    if not domain >= 1:
        domain = float(hw["scaleup_domain_size"])
    cand = candidates(model, accelerator, n, batch, domain, fixed)
    for col, value in ctx.columns.items():
        cand[col] = value
    cand["accelerators_per_node"] = domain
    cand["framework_family"] = (ctx.framework if ctx.family_for is None
                                else ctx.family_for(cand))
    cand = cand[runnable(cand, fixed)].reset_index(drop=True)
    if "sequence_parallel" not in cand:
        # calibrate's default where a run states none (pipeline/calibrate/families.py
        # schedule): on for the megatron family with tp > 1, off elsewhere
        cand["sequence_parallel"] = (cand["framework_family"] == "megatron") & (cand["tp"] > 1)
    cand["memory_bytes_per_accelerator"] = memory_of(cand, ctx)
    cand["hbm_bytes"] = hbm
    fits = fits_in(cand["memory_bytes_per_accelerator"].to_numpy(float), hbm, ctx.memory)
    if not fits.any() and fixed:
        # a layout the request fixed is answered whatever the memory model says (it ran, or
        # the user will try it); the answer says it does not fit
        return _ranked(cand.assign(_fits=False), ctx, top)
    if not fits.any():
        least = cand.loc[cand["memory_bytes_per_accelerator"].idxmin()]
        need = float(least["memory_bytes_per_accelerator"])
        what = f"{_show(fixed)} does not fit" if fixed else "no layout fits"
        raise PlanError("--layout" if fixed else "--n",
                        f"{what} in memory at N = {n}: the lightest needs {need / 1e9:.1f} GB "
                        f"per accelerator, {(need + reserve - hbm) / 1e9:.1f} GB "
                        f"({(need + reserve) / hbm - 1:.0%}) more than the {hbm / 1e9:.1f} GB "
                        f"{accelerator} reports, less the runtime's {reserve / 1e9:.1f} GB")
    return _ranked(cand[fits].assign(_fits=True), ctx, top)


def _ranked(cand: pd.DataFrame, ctx: PlanContext, top: int) -> pd.DataFrame:
    """Priced and ranked: highest MFU first; on equal MFU (to 1e-4) the simpler layout (less
    recompute, lower ZeRO stage, less memory)."""
    ok = cand.rename(columns={"_fits": "fits_memory"}).reset_index(drop=True)
    ok = _priced_bounded(ok, ctx, top) if ctx.prune_recompute else _priced(ok, ctx)
    ok["_rank_mfu"] = ok["mfu"].round(4)
    ok["_rc"] = ok["recompute"].map(RECOMPUTE_ORDER)
    ok = ok.sort_values(["_rank_mfu", "_rc", "zero_stage", "memory_bytes_per_accelerator"],
                        ascending=[False, True, True, True], kind="mergesort")
    ok = ok.drop(columns=["_rank_mfu", "_rc"])
    return ok.head(top).reset_index(drop=True)


def _priced(rows: pd.DataFrame, ctx: PlanContext) -> pd.DataFrame:
    """``rows`` with the step model's columns (row-aligned on the index), tokens/s and the
    exposed all-to-all share."""
    out = pd.concat([rows, predict(rows, ctx.step)], axis=1)
    out["tokens_per_s"] = out["global_batch_tokens"] / out["step_time_s"]
    out["a2a_share"] = out["ep_comm_s"] / out["step_time_s"]   # MoE dispatch/combine exposed
    return out


def _priced_bounded(ok: pd.DataFrame, ctx: PlanContext, top: int) -> pd.DataFrame:
    """The rows that can reach the top ``top``, priced; the others dropped unpriced.

    Recompute only adds work: at one layout (every other axis equal), the step function's
    time is at least that of the least recompute that fits (recomputation reruns forward
    kernels, :func:`pipeline.calibrate.critical_path.step_components`), and MFU counts the
    model FLOP alone, so a layout's MFU is at most its least-recompute variant's. Those
    variants are priced first; T is the ``top``-th best of their MFU (to the ranking's 1e-4).
    A layout whose best variant is below T has ``top`` rows above each of its variants, so
    its other recompute settings cannot enter the answer and are not priced. The search's
    answer is the full search's (``tests/test_plan_search_prune.py``)."""
    rc = ok["recompute"].map(RECOMPUTE_ORDER)
    key = [c for c in LAYOUT_AXES if c in ok.columns]
    group = ok.groupby(key, dropna=False, sort=False).ngroup()
    lead = rc == rc.groupby(group).transform("min")
    priced = _priced(ok[lead], ctx)
    rest = ok[~lead]
    if lead.sum() > top:
        mfu = priced["mfu"].round(4)
        best = mfu.groupby(group[lead]).max()
        threshold = mfu.nlargest(top)
        open_groups = best.index[(best >= threshold.min()).to_numpy()]
        rest = rest[group[~lead].isin(open_groups)]
        if len(threshold) == top:
            # a priced row below T has ``top`` rows above it: it cannot enter the answer
            # either, and the ranking need not sort it
            priced = priced[(mfu >= threshold.min()).to_numpy()]
    # in the candidates' order, so that exact ties rank as in the full search
    return (pd.concat([priced, _priced(rest, ctx)]).sort_index() if len(rest) else priced)


def _show(fixed: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in fixed.items())
