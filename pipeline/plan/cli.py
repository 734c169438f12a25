"""The ``plan`` command's body: parse, answer, print; a bad request is exit status 2."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import typer

from pipeline.calibrate.families import (DEEPSPEED_ZERO3_BYTES_PER_S,
                                         DEEPSPEED_ZERO3_GATHERS_PER_LAYER, KERNEL_DEFAULTS)
from pipeline.calibrate.step import DEDUP_DISPATCHERS
from pipeline.config import ConfigError, load_params, load_settings, settings
from pipeline.frameworks import DEFAULT_FAMILY, FAMILIES, PRODUCTION_FAMILIES
from pipeline.plan import coverage
from pipeline.plan.answer import (answer, default_batch_tokens, load_context, records, table,
                                  uneven_stages)
from pipeline.plan.batch import Batch, resolve_batch, resolve_seq_len
from pipeline.plan.checks import check_finite, check_hardware, check_precision
from pipeline.plan.request import (MAX_BATCH_TOKENS, PlanError, Request, check_layout_fits_model,
                                   check_n, finite, parse_layout, resolve_accelerator,
                                   resolve_model)
from pipeline.plan.search import PlanContext


def more_n(first: list[int], extra: list[str]) -> list[int] | str:
    """``--n 512 2048 8192``: click reads the values after the first as extra arguments."""
    values = list(first)
    for text in extra:
        try:
            values.append(int(text))
        except ValueError:
            return f"--n: {text!r} is not an accelerator count"
    return values


@dataclass(frozen=True)
class Paths:
    processed: Path
    catalog: Path
    theory_metrics: Path
    params: Path


def run_plan(*, model: str, accelerator: str, n: list[int] | str, global_batch_tokens: float | None,
             seq_len: float | None, layout: str | None, top: int, train_tokens: float | None,
             json_out: bool, shape: dict[str, Any], processed: Path, catalog: Path,
             theory_metrics: Path, params_path: Path, framework: str | None = None,
             precision: str | None = None, kernels: dict[str, bool | None] | None = None,
             moe: dict[str, float | None] | None = None, cluster: str | None = None,
             dispatcher: str | None = None) -> int:
    paths = Paths(processed, catalog, theory_metrics, params_path)
    try:
        rows, req, batch, assumed = plan_rows(
            model=model, accelerator=accelerator, n=n, global_batch_tokens=global_batch_tokens,
            seq_len=seq_len, layout=layout, top=top, train_tokens=train_tokens, shape=shape,
            paths=paths, framework=framework, precision=precision, kernels=kernels or {},
            moe=moe, cluster=cluster, dispatcher=dispatcher)
    except (PlanError, ConfigError) as exc:
        typer.echo(f"error: {exc}", err=True)
        return 2
    if json_out:  # each row carries the defaults it took, as the text's `assumed:` lines
        typer.echo(json.dumps(records(rows.assign(assumed=[tuple(assumed)] * len(rows))),
                              indent=1))
    else:
        typer.echo(header(req, rows, batch, assumed))
        typer.echo(table(rows))
        typer.echo(footnotes(rows))
    return 0


def plan_rows(*, model: str, accelerator: str, n: list[int] | str,
              global_batch_tokens: float | None, seq_len: float | None, layout: str | None,
              top: int, train_tokens: float | None, shape: dict[str, Any], paths: Paths,
              framework: str | None, precision: str | None, kernels: dict[str, bool | None],
              moe: dict[str, float | None] | None = None, cluster: str | None = None,
              dispatcher: str | None = None
              ) -> tuple[pd.DataFrame, Request, Batch, list[str]]:
    """The checked request, answered: rows, the request, the batch and the defaults assumed.
    Names of a precision, a framework family or a cluster are read in any case (FP8, Megatron,
    GB200-NVL72), as accelerator names are."""
    precision, framework, cluster, dispatcher = (
        v.strip().lower() if isinstance(v, str) else v
        for v in (precision, framework, cluster, dispatcher))
    params = _params(paths.params, _stamp(paths.params))
    load_settings(params)
    finite("--train-tokens", train_tokens, 0, 1e16, low_open=True)
    finite("--global-batch-tokens", global_batch_tokens, 0, MAX_BATCH_TOKENS, low_open=True)
    if isinstance(n, str):
        raise PlanError(*n.split(": ", 1))
    ns = check_n(n)
    fixed = parse_layout(layout)
    if framework is not None and framework not in FAMILIES:
        raise PlanError("--framework", f"{framework!r} is not one of {', '.join(FAMILIES)}")
    ctx = _context(paths, framework)
    cat = ctx.step.catalog
    req = Request(model=resolve_model(cat, model, shape, moe),
                  accelerator=resolve_accelerator(cat, accelerator), n_values=ns, layout=fixed)
    check_layout_fits_model(fixed, req.model)
    check_precision(cat, req.accelerator, precision or "bf16",
                    "--precision" if precision else "ACCELERATOR")
    topology = ctx.step.topology
    # the named cluster's domain, unless the layout states one: a column of every row, not a
    # fixed axis (a refusal then names the flag the user gave, not --layout)
    node = {"accelerators_per_node": int(topology.table.loc[cluster, "scaleup_domain_size"])} \
        if cluster in topology.table.index and "accelerators_per_node" not in fixed else {}
    priced = check_hardware(cat, topology, req.accelerator, cluster, max(ns),
                            float({**node, **fixed}.get("accelerators_per_node", np.nan)))
    assumed = _assumed(framework, precision, fixed, kernels, cat, req.accelerator)
    routing, routing_assumed = _dispatcher(dispatcher, req.model)
    assumed += routing_assumed
    if cluster is None and priced is not None:
        assumed.append(f"cluster {priced}: {topology.table.loc[priced, 'accelerators_per_node']:g}"
                       f" per node, {topology.table.loc[priced, 'scaleup_domain_size']:g} per "
                       f"scale-up domain, {topology.table.loc[priced, 'scaleout_bytes_per_s'] / 1e9:g}"
                       " GB/s scale-out per accelerator (the accelerator's default in "
                       "data/catalog/clusters.csv; give --cluster)")
    seq, seq_assumed = resolve_seq_len(seq_len, req.model.seq_len,
                                       settings(params, "theory").bounds.seq_len)
    default = (default_batch_tokens(params, req.model.active_params)
               if global_batch_tokens is None and "global_batch_sequences" not in fixed else None)
    batch = resolve_batch(global_batch_tokens, fixed.pop("global_batch_sequences", None), seq,
                          default, ns)
    columns = {"precision": precision or "bf16", **({"cluster": cluster} if cluster else {}),
               **node, **routing,
               **{k: v for k, v in kernels.items() if v is not None}}
    measured = _measured(paths.processed, _stamp(paths.processed))
    ctx = replace(ctx, columns=columns,
                  family_for=None if framework else _default_family(ctx, measured,
                                                                    req.accelerator))
    rows = answer(req, ctx, batch, top, train_tokens)
    assumed += _family_facts(rows) + _flushes_assumed(rows, fixed)
    rows = _flag(rows, ctx, measured, req.accelerator,
                 moe=req.model.is_moe)
    rows = _envelope(rows, measured, req.model.model_id, ctx.step.catalog.family(req.accelerator),
                     str(columns["precision"]))
    rows = _at_layout(rows, measured, req.model.model_id, req.accelerator,
                      str(columns["precision"]))
    check_finite(rows, req.accelerator)
    return rows, req, batch, [*seq_assumed, *batch.assumed, *assumed]


def _stamp(*paths: Path) -> tuple:
    """The files' modification times: a cached read is reused only while they are unchanged."""
    out = []
    for p in paths:
        for f in (sorted(Path(p).glob("*.csv")) if Path(p).is_dir() else [Path(p)]):
            out.append((str(f), f.stat().st_mtime_ns if f.exists() else None))
    return tuple(out)


@functools.lru_cache(maxsize=2)
def _params(path: Path, stamp: tuple) -> dict[str, Any]:
    """params.yaml, read once per process while the file stays as it was (the request and
    the loaded outputs share it; nothing the planner does changes it)."""
    return load_params(path)


@functools.lru_cache(maxsize=4)
def _cached_context(paths: Paths, framework: str | None, stamp: tuple) -> PlanContext:
    return load_context(paths.processed, paths.catalog, paths.theory_metrics,
                        _params(paths.params, _stamp(paths.params)), framework)


def _context(paths: Paths, framework: str | None) -> PlanContext:
    """The loaded outputs, read once per process while the files stay as they were (a script
    that plans many layouts, as the replan test does, reads them once)."""
    stamp = _stamp(Path(paths.processed) / "calibration.parquet", paths.theory_metrics,
                   paths.params, paths.catalog)
    return _cached_context(paths, framework, stamp)


@functools.lru_cache(maxsize=2)
def _measured(processed: Path, stamp: tuple) -> coverage.Measured:
    return coverage.load_measured(processed, None)


def _assumed(framework: str | None, precision: str | None, fixed: dict[str, Any],
             kernels: dict[str, bool | None], cat, accelerator: str) -> list[str]:
    """The defaults the answer takes where the request states nothing."""
    out = []
    if framework is None:
        out.append(f"framework family per layout: the production family whose fitted runs "
                   f"measured most of its features (ZeRO-3, pp, cp, precision, accelerator), "
                   f"{DEFAULT_FAMILY} on ties (the most measured stack); give --framework")
    if precision is None:
        out.append("precision bf16 (give --precision; MFU is against the dense peak at the "
                   "stated precision)")
    if "sequence_parallel" not in fixed:
        out.append("sequence parallelism on for the megatron family where tp > 1, off for the "
                   "others (calibrate's default for a run that states none; give --layout sp=)")
    for name, default in KERNEL_DEFAULTS.items():
        if kernels.get(name) is None:
            flag = name.replace("_", "-")
            out.append(f"{name}={str(default).lower()} (give --{flag} or --no-{flag})")
    return out


# MoE token dispatchers ``--moe-dispatcher`` names: Megatron's all-to-all (one copy of a token
# per routed expert) and the deduplicating ones (one copy per destination rank and node:
# pipeline/calibrate/moe.py ``dispatch_shares``)
DISPATCHERS = ("alltoall", *DEDUP_DISPATCHERS)


def _dispatcher(dispatcher: str | None, model) -> tuple[dict[str, str], list[str]]:
    """(the ``moe_dispatcher`` column of every row, the default assumed): the named dispatcher
    of an MoE model; an unknown name, or one for a dense model, is refused."""
    moe = model.is_moe
    if dispatcher is not None and dispatcher not in DISPATCHERS:
        raise PlanError("--moe-dispatcher", f"{dispatcher!r} is not one of "
                        f"{', '.join(DISPATCHERS)}")
    if dispatcher is not None and not moe:
        raise PlanError("--moe-dispatcher", f"{model.model_id} is dense (no n_experts in "
                        "data/catalog/models.csv): it dispatches no tokens to experts")
    if dispatcher is not None:
        return {"moe_dispatcher": dispatcher}, []
    if not moe:
        return {}, []
    return {}, ["MoE dispatcher alltoall: one copy of a token per routed expert (Megatron's "
                "all-to-all; give --moe-dispatcher deepep for DeepEP's one copy per rank and "
                "node)"]


def _family_facts(rows: pd.DataFrame) -> list[str]:
    """What a row's family brings that no flag states: DeepSpeed's ZeRO-3 transfer rate."""
    if not len(rows) or not ((rows["framework_family"] == "deepspeed")
                             & (rows["zero_stage"] >= 3)).any():
        return []
    return [f"deepspeed ZeRO-3 moves parameters and gradients at no more than "
            f"{DEEPSPEED_ZERO3_BYTES_PER_S / 1e9:g} GB/s per accelerator, "
            f"{DEEPSPEED_ZERO3_GATHERS_PER_LAYER:g} gathers per layer (the DeepSpeed of the "
            f"family's measured runs: DeepSpeed#1174, #1188, #5047; give --framework fsdp for "
            f"FSDP's link-bound ZeRO-3)"]


def _flushes_assumed(rows: pd.DataFrame, fixed: dict[str, Any]) -> list[str]:
    """The pipeline schedules per step a pipelined answer took where the request fixed none."""
    if "pipeline_flushes" in fixed or not len(rows) or not (rows["pp"] > 1).any():
        return []
    return ["one pipeline schedule per step for all of its microbatches (torchtitan and NeMo "
            "Automodel run one per gradient-accumulation step, each filling and draining the "
            "pipeline: give --layout flushes=)"]


def _default_family(ctx: PlanContext, measured: coverage.Measured, accelerator: str):
    families = tuple(f for f in PRODUCTION_FAMILIES if f in ctx.step.theta)
    acc_family = ctx.step.catalog.family(accelerator)
    return lambda rows: coverage.covering_family(rows, measured, acc_family, families,
                                                 DEFAULT_FAMILY)


def _flag(rows: pd.DataFrame, ctx: PlanContext, measured: coverage.Measured, accelerator: str,
          moe: bool = False) -> pd.DataFrame:
    """Outside-the-measured flags with the widened interval, and the MFU-ceiling flag (for an
    MoE model, ``moe``, the highest MFU measured on MoE runs there, where the data hold one)."""
    acc_family = ctx.step.catalog.family(accelerator)
    reasons = coverage.outside_reasons_of(rows, measured, acc_family, ctx.step)
    outside = np.array([bool(r) for r in reasons])
    rows = coverage.widen(rows, ctx.step, outside)
    rows["outside_measured"] = outside
    rows["outside_reasons"] = [tuple(r) for r in reasons]
    prec = str(ctx.columns.get("precision", "bf16"))
    ceiling, citation = coverage.mfu_ceiling(ctx.step.catalog.directory or Path(
        "data/catalog"), accelerator, prec)
    if moe:
        moe_ceiling, moe_citation = coverage.moe_mfu_record(
            measured.runs, ctx.step.catalog.hardware, accelerator, prec)
        if np.isfinite(moe_ceiling):
            ceiling, citation = moe_ceiling, moe_citation
    rows["above_measured_mfu"] = rows["mfu"] > ceiling if np.isfinite(ceiling) else False
    rows["measured_mfu_ceiling"] = ceiling
    rows["measured_mfu_citation"] = citation
    return rows


def _at_layout(rows: pd.DataFrame, measured: coverage.Measured, model_id: str,
               accelerator: str, precision: str) -> pd.DataFrame:
    """The MFU measured for this model on this chip at the row's own N, tp, pp, cp, batch and
    ZeRO stage (:func:`coverage.measured_at_layout`), and whether the row's interval holds it:
    an answer that disagrees with a run measured at its layout says so."""
    records = coverage.layout_mfu_records(measured.runs, model_id, accelerator, precision)
    mfu, cited = coverage.measured_at_layout(rows, records)
    rows = rows.copy()
    rows["measured_layout_mfu"] = mfu
    rows["measured_layout_citation"] = cited
    inside = (mfu >= rows["mfu_low"].to_numpy(float)) & (mfu <= rows["mfu_high"].to_numpy(float))
    rows["measured_layout_inside"] = np.where(np.isfinite(mfu), inside, None)
    return rows


def _envelope(rows: pd.DataFrame, measured: coverage.Measured, model_id: str, acc_family: str,
              precision: str) -> pd.DataFrame:
    """The measured-envelope flag: a row above the highest MFU measured for this model at its N
    on this accelerator family and precision (:func:`coverage.model_mfu_records`)."""
    records = coverage.model_mfu_records(measured.runs, model_id, acc_family, precision)
    top = [records.get(int(n), (np.nan, "")) for n in rows["n_accelerators"]]
    rows["measured_model_mfu"] = np.array([t[0] for t in top], dtype=float)
    rows["measured_model_citation"] = [t[1] for t in top]
    rows["above_measured_envelope"] = rows["mfu"].to_numpy() > rows["measured_model_mfu"].to_numpy()
    return rows


def _batches(rows: pd.DataFrame, seq_len: int) -> str:
    """The batch of the answer's rows: one, or one per N where a default batch differs."""
    per_n = rows.groupby("n_accelerators", sort=True)["global_batch_sequences"].first()
    said = {int(s): [int(n) for n in g.index] for s, g in per_n.groupby(per_n, sort=False)}
    return "; ".join(f"{s:,} sequences x {seq_len:,} tokens = {s * seq_len:,} tokens"
                     + (f" at N = {', '.join(f'{n:,}' for n in ns)}" if len(said) > 1 else "")
                     for s, ns in said.items())


def header(req: Request, rows: pd.DataFrame, batch: Batch, assumed: list[str]) -> str:
    fams = ", ".join(dict.fromkeys(rows["framework_family"]))
    lines = [f"{req.model.model_id} on {req.accelerator}, family {fams}"
             f", {rows['precision'].iat[0]}: best layouts that fit in memory (calibrated MFU, "
             "95% interval; memory per chip against HBM)",
             f"global batch per step: {_batches(rows, batch.seq_len)} (m = microbatches per "
             "step per pipeline)"]
    lines += [f"assumed: {a}" for a in assumed]
    return "\n".join(lines)


def footnotes(rows: pd.DataFrame) -> str:
    lines = []
    seen: list[str] = []
    for r in rows.itertuples():
        for why in r.outside_reasons:
            if why not in seen:
                seen.append(why)
    if seen:
        lines.append("* outside the measured configurations (interval widened by the spread "
                     "between the fitted families on the row): " + "; ".join(seen))
    if rows["above_measured_mfu"].any():
        lines.append(f"! above the highest MFU measured on this accelerator family at this "
                     f"precision{' on MoE runs' if ', MoE, ' in rows['measured_mfu_citation'].iat[0] else ''}: {rows['measured_mfu_ceiling'].iat[0]:.1%} "
                     f"({rows['measured_mfu_citation'].iat[0]})")
    above = rows[rows["above_measured_envelope"]] if "above_measured_envelope" in rows \
        else rows.iloc[:0]
    for n, group in above.groupby("n_accelerators", sort=True):
        first = group.iloc[0]
        lines.append(f"^ above every MFU measured for this model at N = {int(n):,} on this "
                     f"accelerator family and precision: at most "
                     f"{first['measured_model_mfu']:.1%} ({first['measured_model_citation']})")
    if "measured_layout_mfu" in rows:
        for r in rows[np.isfinite(rows["measured_layout_mfu"].to_numpy(float))].itertuples():
            where = "inside" if r.measured_layout_inside else "OUTSIDE"
            said = (f"= measured at N = {int(r.n_accelerators):,}, tp{r.tp} pp{r.pp} cp{r.cp}, "
                    f"this batch{'' if pd.isna(r.zero_stage) else f' and ZeRO-{int(r.zero_stage)}'}"
                    f": {r.measured_layout_mfu:.1%}, {where} the row's interval "
                    f"({r.measured_layout_citation})")
            if said not in lines:
                lines.append(said)
    shape = rows if {"pp", "n_layers"} <= set(rows.columns) else rows.iloc[:0]
    for pp in sorted(set(int(p) for p in shape.get("pp", []))):
        said = uneven_stages(float(shape["n_layers"].iat[0]), pp)
        if said:
            lines.append(f"~ {said}")
    return "\n".join(lines)
