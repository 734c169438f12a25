""""Your runs": what ``scalewall plan`` answers for the largest run of each of your series at 4x
and 16x its N (the best layout that fits, its calibrated MFU), and whether the run's own layout
(tp, pp, cp, ZeRO stage, micro-batch; dp grown with N) would still fit in memory there.

The planner reads the pipeline's outputs (no refit): the calibrated model through
``pipeline.calibrate.step`` and the memory overhead of the theory metrics.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.config import CATALOG_DIR, ConfigError
from pipeline.plan.answer import answer_tokens, load_context, records
from pipeline.plan.request import ModelShape, PlanError, Request, resolve_model
from pipeline.plan.search import PlanContext, fits_in, memory_of
from pipeline.fit.contract import MULTIPLES_OF_N_MAX

LAYOUT_KEPT = ("tp", "pp", "cp", "zero_stage", "micro_batch")


def _model(ctx: PlanContext, run: pd.Series) -> ModelShape | None:
    """The catalog model of the run, else its stated shape (None without depth and width)."""
    if isinstance(run.get("model_id"), str):
        try:
            return resolve_model(ctx.step.catalog, run["model_id"], {})
        except PlanError:
            pass
    if pd.notna(run.get("n_layers")) and pd.notna(run.get("d_model")):
        return ModelShape(model_id=str(run.get("model")), params=float(run["params"]),
                          active_params=float(run.get("active_params") or run["params"]),
                          n_layers=int(run["n_layers"]), d_model=int(run["d_model"]))
    return None


def _current_fits(ctx: PlanContext, model: ModelShape, run: pd.Series, n: int,
                  seq: float, batch: float) -> dict[str, Any]:
    """Memory of the run's own layout at N chips (dp = N / (tp pp cp))."""
    deg = {k: int(run[k]) if pd.notna(run.get(k)) and run[k] >= 1 else 1
           for k in ("tp", "pp", "cp")}
    if n % (deg["tp"] * deg["pp"] * deg["cp"]):
        return {"fits": None, "why": "its tp x pp x cp does not divide N"}
    frame = pd.DataFrame([{
        **deg, "dp": n // (deg["tp"] * deg["pp"] * deg["cp"]), "n_accelerators": n,
        "zero_stage": run.get("zero_stage"), "micro_batch": run.get("micro_batch"),
        "global_batch_tokens": batch, "seq_len": seq, "params": model.params,
        "active_params": model.active_params, "n_layers": model.n_layers,
        "d_model": model.d_model, "model_id": model.model_id,
        "strategy_family": run.get("strategy_family"), "precision": run.get("precision")}])
    need = float(memory_of(frame, ctx)[0])
    hw = ctx.step.catalog.hardware.loc[run["accelerator"]]
    # the capacity the driver reports, less the runtime's reserve (theory.memory.fits_in)
    hbm = float(hw["hbm_usable_bytes"]) if pd.notna(hw.get("hbm_usable_bytes")) \
        else float(hw["hbm_bytes"])
    return {"fits": bool(fits_in(need, hbm, ctx.memory)), "memory_bytes": need, "hbm_bytes": hbm}


def plan_entry(ctx: PlanContext, run: pd.Series) -> dict[str, Any]:
    """The planner's answer for one run at each multiple of its N."""
    model = _model(ctx, run)
    if model is None:
        return {"note": "no plan: the run states no model the catalog knows and no depth and "
                        "width"}
    seq = float(run["seq_len"]) if pd.notna(run.get("seq_len")) else None
    batch0 = float(run["global_batch_tokens"]) if pd.notna(run.get("global_batch_tokens")) \
        else None
    rows = []
    for k in MULTIPLES_OF_N_MAX:
        n = int(run["n_accelerators"]) * k
        # weak scaling grows the batch with N; otherwise the run's batch stays
        batch = batch0 * k if batch0 and run.get("scaling") == "weak" else batch0
        req = Request(model=model, accelerator=str(run["accelerator"]), n_values=(n,))
        try:
            best = records(answer_tokens(req, ctx, batch, seq, 1))[0]
        except PlanError as exc:
            rows.append({"multiple": k, "n": n, "best": None, "note": str(exc)})
            continue
        current = _current_fits(ctx, model, run, n, best["seq_len"], best["global_batch_tokens"])
        rows.append({"multiple": k, "n": n, "best": best, "current": current})
    return {"model": model.model_id, "rows": rows}


def add_plans(mine: dict[str, Any], runs: pd.DataFrame, processed_dir: Path,
              metrics_dir: Path, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """``mine`` (the focus section) with ``plan`` set on each series entry."""
    if not mine.get("series"):
        return mine
    try:
        ctx = load_context(processed_dir, CATALOG_DIR, Path(metrics_dir) / "theory.json", params)
    except (ConfigError, OSError, PlanError) as exc:
        for e in mine["series"]:
            e["plan"] = {"note": f"no plan: {exc}"}
        return mine
    for e in mine["series"]:
        mine_runs = runs[runs["series_id"] == e["series_id"]]
        if mine_runs.empty or mine_runs["accelerator"].isna().all():
            e["plan"] = {"note": "no plan: no run with a catalogued accelerator"}
            continue
        largest = mine_runs.sort_values(["n_accelerators", "run_id"]).iloc[-1]
        e["plan"] = plan_entry(ctx, largest)
    return mine
