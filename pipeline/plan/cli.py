"""The ``plan`` command's body: parse, answer, print; a bad request is exit status 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from pipeline.config import ConfigError, load_params, load_settings
from pipeline.frameworks import FAMILIES
from pipeline.plan.answer import answer, load_context, records, table
from pipeline.plan.request import (PlanError, Request, check_n, parse_layout, resolve_accelerator,
                                   resolve_model)


def more_n(first: list[int], extra: list[str]) -> list[int] | str:
    """``--n 512 2048 8192``: click reads the values after the first as extra arguments."""
    values = list(first)
    for text in extra:
        try:
            values.append(int(text))
        except ValueError:
            return f"--n: {text!r} is not an accelerator count"
    return values


def run_plan(*, model: str, accelerator: str, n: list[int] | str, global_batch_tokens: float | None,
             seq_len: float | None, layout: str | None, top: int, train_tokens: float | None,
             json_out: bool, shape: dict[str, Any], processed: Path, catalog: Path,
             theory_metrics: Path, params_path: Path, framework: str | None = None,
             moe: dict[str, float | None] | None = None) -> int:
    try:
        params = load_params(params_path)
        load_settings(params)
        if global_batch_tokens is not None and not global_batch_tokens > 0:
            raise PlanError("--global-batch-tokens", f"must be positive, got {global_batch_tokens}")
        if train_tokens is not None and not train_tokens > 0:
            raise PlanError("--train-tokens", f"must be positive, got {train_tokens}")
        if isinstance(n, str):
            raise PlanError(*n.split(": ", 1))
        ns = check_n(n)
        fixed = parse_layout(layout)
        if framework is not None and framework not in FAMILIES:
            raise PlanError("--framework", f"{framework!r} is not one of {', '.join(FAMILIES)}")
        ctx = load_context(processed, catalog, theory_metrics, params, framework)
        cat = ctx.step.catalog
        req = Request(model=resolve_model(cat, model, shape, moe),
                      accelerator=resolve_accelerator(cat, accelerator), n_values=ns,
                      layout=fixed)
        rows = answer(req, ctx, global_batch_tokens, seq_len, top, train_tokens)
    except (PlanError, ConfigError) as exc:
        typer.echo(f"error: {exc}", err=True)
        return 2
    if json_out:
        typer.echo(json.dumps(records(rows), indent=1))
    else:
        typer.echo(f"{req.model.model_id} on {req.accelerator}: best layouts that fit in memory "
                   f"(calibrated MFU, 95% interval; memory per chip against HBM)")
        typer.echo(table(rows))
    return 0
