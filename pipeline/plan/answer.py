"""One planner answer: load what the pipeline wrote, search each N, and shape the rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from pipeline.calibrate.step import load_model
from pipeline.config import load_params, settings
from pipeline.frameworks import DEFAULT_FAMILY
from pipeline.measures import FLOP_PER_PARAM_PER_TOKEN
from pipeline.plan.batch import Batch, resolve_batch, resolve_seq_len
from pipeline.plan.request import PlanError, Request, check_layout_divides
from pipeline.plan.search import PlanContext, plan_for_n
from pipeline.theory import laws as lw
from pipeline.theory.memory_fit import memory_constants, overhead_of

# JSON keys, in order (the contract first, then the extras); the training time and
# energy only where --train-tokens asks for them
KEYS = ("n_accelerators", "tp", "pp", "dp", "cp", "ep", "virtual_pipeline", "micro_batch",
        "zero_stage", "recompute", "mfu", "mfu_low", "mfu_high", "step_time_s", "tokens_per_s",
        "memory_bytes_per_accelerator", "hbm_bytes", "binding", "ceiling_mfu",
        "sequence_parallel", "microbatches", "pipeline_flushes", "global_batch_tokens",
        "global_batch_sequences",
        "seq_len", "step_time_low_s", "step_time_high_s", "fits_memory", "framework_family",
        "precision", "accelerators_per_node", "outside_measured", "outside_reasons",
        "above_measured_mfu", "above_measured_envelope", "measured_layout_mfu",
        "measured_layout_inside", "assumed", "a2a_share", "train_time_s", "energy_mwh")
OPTIONAL_KEYS = ("train_time_s", "energy_mwh")
JOULES_PER_MWH = 3.6e9
MAKE_FIRST = "run `make report` first (or `dvc repro`): the planner reads the pipeline's outputs"


def load_context(processed: Path, catalog: Path, theory_metrics: Path,
                 params: Mapping[str, Any] | None = None,
                 framework: str | None = None) -> PlanContext:
    """The step model, the settings (``params`` defaults to the project's params.yaml), memory
    constants and the theory stage's fitted memory overhead of ``framework``'s family (default:
    Megatron's). A missing output is a PlanError saying to run the pipeline; a damaged one names
    the file."""
    for path in (Path(processed) / "calibration.parquet", Path(theory_metrics)):
        if not path.exists():
            raise PlanError(str(path), f"absent: {MAKE_FIRST}")
    try:
        step = load_model(processed, catalog)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PlanError(str(Path(processed) / "calibration.parquet"),
                        f"cannot be read ({type(exc).__name__}: {str(exc)[:120]}): the file is "
                        f"damaged; {MAKE_FIRST}") from None
    params = load_params() if params is None else params
    try:
        node = json.loads(Path(theory_metrics).read_text(encoding="utf-8")).get("_memory", {})
    except (OSError, ValueError, AttributeError) as exc:
        raise PlanError(str(theory_metrics), f"cannot be read ({type(exc).__name__}): the file "
                        f"is damaged; {MAKE_FIRST}") from None
    family = framework or DEFAULT_FAMILY
    return PlanContext(step=step, params=params, memory=memory_constants(params),
                       overhead=overhead_of(node, family), framework=family)


def default_batch_tokens(params: Mapping[str, Any], active_params: float) -> float:
    """The critical batch of the theory's laws at the compute a compute-optimal run of the
    model spends (C = 6 N_act D, D = tokens_per_param N_act): docs/theory.md §2."""
    laws = lw.Laws(**settings(params, "theory").laws.model_dump())
    flop = FLOP_PER_PARAM_PER_TOKEN * active_params * laws.tokens_per_param * active_params
    return float(lw.critical_batch_tokens(np.array([flop]), laws)[0])


def answer(req: Request, ctx: PlanContext, batch: Batch, top: int,
           train_tokens: float | None = None) -> pd.DataFrame:
    """Rows (N, layout) of the best ``top`` layouts per N."""
    for n in req.n_values:
        check_layout_divides(req.layout, n)
    frames = [plan_for_n(req.model, req.accelerator, n, batch.at(n), req.layout, ctx, top)
              .assign(global_batch_sequences=batch.at(n).sequences) for n in req.n_values]
    out = pd.concat(frames, ignore_index=True)
    if train_tokens:
        tdp = ctx.step.catalog.hardware.loc[req.accelerator, "tdp_w"]
        if not pd.notna(tdp):
            raise PlanError("--train-tokens", f"the catalog has no tdp_w for {req.accelerator} "
                            "(data/catalog/hardware.csv): the energy cannot be computed; leave "
                            "out --train-tokens or add the value with its source")
        out["train_time_s"] = train_tokens / out["tokens_per_s"]
        out["energy_mwh"] = (out["n_accelerators"] * float(tdp) * out["train_time_s"]
                             / JOULES_PER_MWH)
    return out


def answer_tokens(req: Request, ctx: PlanContext, batch_tokens: float | None,
                  seq_len: float | None, top: int) -> pd.DataFrame:
    """:func:`answer` for a batch in tokens (None: the default batch, stated) and a sequence
    length (None: the model's, else the theory's): the report's "Your runs" asks this way."""
    seq, _ = resolve_seq_len(seq_len, req.model.seq_len,
                             settings(ctx.params, "theory").bounds.seq_len)
    default = (default_batch_tokens(ctx.params, req.model.active_params)
               if batch_tokens is None else None)
    return answer(req, ctx, resolve_batch(batch_tokens, None, seq, default, req.n_values), top)


def records(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """JSON-ready dicts with KEYS (integers as int); a key with no value is left out (the
    answer never carries NaN, inf or null: pipeline.plan.checks refuses such rows first)."""
    out = []
    for r in rows.to_dict(orient="records"):
        rec: dict[str, Any] = {}
        for k in KEYS:
            v = r.get(k)
            if isinstance(v, (np.bool_, bool)):
                v = bool(v)
            elif isinstance(v, np.integer):
                v = int(v)
            elif isinstance(v, (float, np.floating)):
                if not np.isfinite(v):
                    continue
                v = int(v) if k in _INTS else float(v)
            elif isinstance(v, (list, tuple, np.ndarray)):
                v = [str(x) for x in v]
            if v is None:
                continue
            rec[k] = v
        out.append(rec)
    return out


_INTS = {"n_accelerators", "tp", "pp", "dp", "cp", "ep", "virtual_pipeline", "micro_batch",
         "zero_stage", "microbatches", "pipeline_flushes", "global_batch_tokens",
         "global_batch_sequences",
         "seq_len", "hbm_bytes", "accelerators_per_node"}


def uneven_stages(n_layers: float, pp: int) -> str:
    """Where ``pp`` does not divide the layers, how they split and what is priced (the slowest
    stage: ``pipeline.calibrate.critical_path.stage_layers``); "" where it does."""
    if not (np.isfinite(n_layers) and float(n_layers).is_integer() and pp > 1):
        return ""
    layers, pp = int(n_layers), int(pp)
    small, extra = divmod(layers, pp)
    if extra == 0:
        return ""
    return (f"{layers} layers over pp {pp}: {extra} stage{'s' if extra > 1 else ''} of "
            f"{small + 1} and {pp - extra} of {small}; the stage of {small + 1} sets the pace "
            "and is what the row prices; the embedding sits on the first stage and the output "
            "layer on the last (not priced)")


def _layout_text(r: Any) -> str:
    """One row's layout as the table prints it: ``m128/2`` where its m microbatches run as 2
    pipeline schedules."""
    flushes = getattr(r, "pipeline_flushes", 1)
    return (f"tp{r.tp} pp{r.pp} v{r.virtual_pipeline} cp{r.cp} dp{r.dp}"
            + (f" ep{r.ep}" if r.ep > 1 else "")
            + f" mb{r.micro_batch} m{r.microbatches}" + (f"/{flushes}" if flushes > 1 else "")
            + f" z{r.zero_stage} {r.recompute}")


def table(rows: pd.DataFrame) -> str:
    """A plain-text table, one line per (N, layout), and its batch under each N."""
    # the family and layout columns as wide as their longest entry, at least 9 and 38
    fw = max([9] + [len(str(f)) for f in rows["framework_family"]]) if len(rows) else 9
    layouts = [_layout_text(r) for r in rows.itertuples()]
    lw = max([38] + [len(t) for t in layouts])
    head = (f"{'N':>7} {'family':<{fw}} {'layout':<{lw}} {'MFU (95% interval)':<21} "
            f"{'step s':>8} {'tokens/s':>10} {'GB/chip':>13} {'ceiling':>7}  binding")
    lines = [head, "-" * len(head)]
    for r, layout in zip(rows.itertuples(), layouts):
        mem = f"{r.memory_bytes_per_accelerator / 1e9:5.1f}/{r.hbm_bytes / 1e9:.1f}"
        flag = ((" *" if r.outside_measured else "") + (" !" if r.above_measured_mfu else "")
                + (" ^" if getattr(r, "above_measured_envelope", False) else "")
                + (" =" if np.isfinite(getattr(r, "measured_layout_mfu", np.nan)) else "")
                + (" ~" if uneven_stages(r.n_layers, r.pp) else ""))
        lines.append(f"{r.n_accelerators:>7} {r.framework_family:<{fw}} {layout:<{lw}} "
                     f"{r.mfu:6.1%} [{r.mfu_low:5.1%}, "
                     f"{r.mfu_high:5.1%}] {r.step_time_s:8.2f} {r.tokens_per_s:10.3g} "
                     f"{mem:>13} {r.ceiling_mfu:7.1%}  {r.binding}{flag}"
                     + (f" (all-to-all {r.a2a_share:.0%})" if r.ep > 1 else ""))
        if not r.fits_memory:
            lines.append(f"{'':>7}   does not fit in memory by the theory's model: answered "
                         "because the layout was fixed")
        if "train_time_s" in rows and np.isfinite(r.train_time_s):
            lines.append(f"{'':>7}   to train: {r.train_time_s / 86400:.1f} days, "
                         f"{r.energy_mwh:.3g} MWh at TDP")
    return "\n".join(lines)
