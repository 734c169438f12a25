"""Command line: one sub-command per DVC stage, ``python -m pipeline <stage>``, built from the
stages' declarations (``STAGE`` in ``pipeline/<stage>/contract.py``, gathered in
``pipeline.runner.STAGES``).

Paths come from ``dvc.yaml`` (passed as options here; the defaults are the same paths, for use
by hand); settings come from ``params.yaml``. A broken configuration stops the stage with a
message naming the field and exit status 2; a missing or broken input (a contract) stops it with
exit status 1 naming the file.

The stage commands are registered when first asked for (:class:`Commands`): the runner imports
every stage's contract (pandera, the fit laws), which ``plan``, ``metrics`` and ``preflight``
do not need; that import was most of a one-shot ``plan``'s time.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import click
import typer
from typer.core import TyperCommand, TyperGroup

from pipeline.config import ConfigError, load_params, load_settings
from pipeline.plan.help import DISPATCHER_HELP, LAYOUT_HELP
from pipeline.plan.help import epilog as plan_epilog


class PlainHelp(TyperCommand):
    """A command whose ``--help`` is click's plain text, wrapped between words at any terminal
    width (typer's rich panels cut option names and examples short with an ellipsis below
    about 120 columns: ``--global-batch-…``). typer escapes the brackets of ``[default: ..]``
    and ``[required]`` for rich markup even with markup off; the escape is undone here."""

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help(ctx, formatter)
        formatter.buffer[:] = [part.replace("\\[", "[") for part in formatter.buffer]


class Commands(TyperGroup):
    """The CLI's commands, with the runner's stage commands (:func:`_stage_commands`) added the
    first time a name is not found or the list is asked for (``--help``), in ``dvc repro``'s
    order after ``ingest``."""

    def _add_stages(self) -> None:
        if getattr(self, "_stages_added", False):
            return
        self._stages_added = True
        staged = dict(self.commands)
        stages = typer.main.get_command(_stage_commands())
        assert isinstance(stages, click.Group)
        self.commands.clear()
        for name, command in staged.items():
            self.commands[name] = command
            if name == "ingest":
                self.commands.update(stages.commands)
        self.commands.update({k: v for k, v in stages.commands.items() if k not in self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None:
            self._add_stages()
            command = super().get_command(ctx, cmd_name)
        return command

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._add_stages()
        return super().list_commands(ctx)


# Tracebacks never print local variables: they may hold whole input files (a 280 KB traceback
# for one hostile sidecar), and they are no help to a user.
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_show_locals=False,
                  rich_markup_mode=None,
                  cls=Commands,
                  help="scalewall: measured diminishing returns against data-movement limits.")

PARAMS = typer.Option(Path("params.yaml"), "--params", help="params.yaml of the project")
CATALOG = typer.Option(Path("data/catalog"), help="hardware and model catalogs")
PROCESSED = typer.Option(Path("data/processed"), help="folder of stage outputs")
METRICS_DIR = typer.Option(Path("reports/metrics"))
PLOTS = typer.Option(Path("reports/plots"), help="plot data for `dvc plots`")


HEADLINE = typer.Option(None, help="also write the stage's headline figures here (the file "
                                   "`dvc metrics show` prints; pipeline/headline.py)")


def _run_stage(module: str, params_path: Path, headline: tuple[str, Path | None] = ("", None),
               **paths: Path) -> None:
    """Load params (failing fast on a broken file), then run the declared stage ``module``
    through the runner (or, for a stage with its own entry, import and run ``module.run``); with
    ``headline = (stage, path)``, write the headline of the metrics it wrote
    (``paths["metrics_path"]``) to ``path``."""
    from pipeline.contracts import ContractError
    from pipeline.interrupts import exit_status, handled_signals, write_failure
    from pipeline.processes import stage_executor
    from pipeline.runner import STAGES, run_stage
    from pipeline.snapshot import EXIT_BUSY, SnapshotBusy
    from pipeline.threads import stage_threads
    name = module.rsplit(".", 2)[-2 if module.endswith(".stage") else -1]
    try:
        with handled_signals():
            params = load_params(params_path)
            valid = load_settings(params)  # the whole file: any broken field stops any stage
            with stage_threads(name), stage_executor(name, valid.executor):
                if module in STAGES and STAGES[module].compute:
                    run_stage(module, params, **paths)
                else:
                    importlib.import_module(module).run(params, **paths)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    except ContractError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=1) from exc
    except SnapshotBusy as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=EXIT_BUSY) from exc
    except BaseException as exc:  # Ctrl-C, SIGTERM (interrupts.Terminated), a failed write
        code = exit_status(exc)
        if code is None:
            raise
        why = write_failure(exc) or ("interrupted (Ctrl-C)" if isinstance(exc, KeyboardInterrupt)
                                     else "terminated (SIGTERM)") + (
            ": stopped; every output is its previous version or absent, no partial file left")
        typer.echo(f"{name}: {why}", err=True)
        raise typer.Exit(code=code) from None
    if headline[0]:
        import json

        from pipeline.headline import summary_line, write_headline
        metrics = json.loads(Path(paths["metrics_path"]).read_text(encoding="utf-8"))
        line = summary_line(headline[0], metrics)
        if line:
            typer.echo(line, err=True)
        if headline[1] is not None:
            write_headline(headline[0], paths["metrics_path"], headline[1])


@app.command(cls=PlainHelp)
def ingest(
    published: Path = typer.Option(Path("data/raw/published"), help="folder of format-v1 CSVs"),
    logs: list[str] = typer.Option(["data/raw/logs"], help="root of training step logs: a "
                                   "path or an fsspec URL (file://, memory://, s3:// with "
                                   "s3fs, gs:// with gcsfs); repeat for several roots"),
    catalog: Path = CATALOG,
    out: Path = PROCESSED,
    metrics: Path = typer.Option(Path("reports/metrics/ingest.json")),
    headline: Path | None = HEADLINE,
    params: Path = PARAMS,
) -> None:
    """Published tables, MLPerf result trees and step logs -> runs, rejects, series, steps,
    power."""
    _run_stage("pipeline.ingest.stage", params, headline=("ingest", headline),
               published_dir=published, logs_dir=logs, catalog_dir=catalog, out_dir=out,
               metrics_path=metrics)


def _runner_command(stages: typer.Typer, name: str) -> None:
    """Register ``python -m pipeline <name>`` on ``stages`` for a stage the runner runs (its
    declaration names what it reads and writes; the options say where)."""
    from pipeline.runner import STAGES
    stage = STAGES[name]

    def command(
        processed: Path = typer.Option(Path("data/processed"), help="folder of the inputs: "
                                       + ", ".join(stage.reads)),
        out: Path = typer.Option(Path("data/processed"), help="folder of the outputs: "
                                 + ", ".join(stage.writes)),
        metrics: Path = typer.Option(Path(f"reports/metrics/{name}.json")),
        metrics_dir: Path = typer.Option(Path("reports/metrics"), help="folder of the metrics "
                                         "JSONs read: " + (", ".join(stage.reads_metrics)
                                                          or "none")),
        plots: Path = PLOTS,
        catalog: Path = CATALOG,
        headline: Path | None = HEADLINE,
        params: Path = PARAMS,
    ) -> None:
        _run_stage(name, params, headline=(name, headline), processed_dir=processed,
                   out_dir=out, metrics_path=metrics, metrics_dir=metrics_dir, plots_dir=plots,
                   catalog_dir=catalog)

    command.__doc__ = stage.help
    stages.command(name=name, cls=PlainHelp)(command)


def _stage_commands() -> typer.Typer:
    """The commands of the stages the runner runs (``fit``, ``theory``, ...), from their
    declarations (``pipeline.runner.STAGES``)."""
    from pipeline.runner import STAGES
    stages = typer.Typer(pretty_exceptions_show_locals=False, rich_markup_mode=None)
    stages.callback()(lambda: None)  # a group even with one stage
    for name, stage in STAGES.items():
        if stage.compute:
            _runner_command(stages, name)
    return stages


@app.command(cls=PlainHelp)
def release(
    processed: Path = PROCESSED,
    sources: Path = typer.Option(Path("data/catalog/sources.csv"), help="the sources catalog: "
                                 "citation, URL, licence or terms per source"),
    out: Path = typer.Option(Path("data/release"), help="folder of the bundle"),
    metrics: Path = typer.Option(Path("reports/metrics/release.json")),
    headline: Path | None = HEADLINE,
    params: Path = PARAMS,
) -> None:
    """A versioned dataset bundle: runs (Parquet, CSV), sources with licences, rejects summary,
    coverage, Croissant metadata and a data card (docs/dataset.md)."""
    _run_stage("pipeline.release.stage", params, headline=("release", headline),
               processed_dir=processed, sources_path=sources, out_dir=out,
               metrics_path=metrics)


@app.command(cls=PlainHelp)
def report(
    processed: Path = PROCESSED,
    metrics_dir: Path = METRICS_DIR,
    out: Path = typer.Option(Path("reports"), help="folder of report.html, report.md, figures/"),
    focus: list[str] = typer.Option(None, "--focus", help="a source or series id the report "
                                    "opens with (repeatable); replaces params report.focus"),
    params: Path = PARAMS,
) -> None:
    """Render reports/report.html and reports/report.md with figures from the stage outputs.

    With --focus SOURCE the report opens with that source's series (from the outputs already
    there: no other stage is rerun).
    """
    _run_stage("pipeline.report.stage", params, processed_dir=processed, metrics_dir=metrics_dir,
               out_dir=out, focus=list(focus or []))


def _stop_on_special_files() -> None:
    """The pre-flight check (``pipeline.preflight``): exit 2 naming special files that would
    make DVC hang, before anything reads the inputs."""
    from pipeline.config import PROJ_ROOT
    from pipeline.preflight import problem
    message = problem(PROJ_ROOT)
    if message:
        typer.echo(f"error: {message}", err=True)
        raise typer.Exit(code=2)


@app.command(cls=PlainHelp)
def preflight() -> None:
    """Stop (exit 2) if a FIFO, socket or device lies under a folder DVC hashes (``dvc repro``
    would hang on it); ``make report`` and ``.ci/run`` run this first."""
    _stop_on_special_files()


@app.command(cls=PlainHelp)
def validate(
    target: Path = typer.Argument(..., help="a published table (format v1 CSV), a step log, "
                                            "or a folder of step logs"),
    catalog: Path = CATALOG,
    params: Path = PARAMS,
) -> None:
    """Check one input before adding it: each record (or log) as a run or a reject with its
    reason; for logs also the parser, the sidecar values and the series they form.

    Writes nothing. Exit status 1 when anything would be rejected, 2 on a broken params file.
    """
    from pipeline.ingest import validate as check
    from pipeline.text import escape_invisible
    _stop_on_special_files()
    try:
        loaded = load_params(params)
        load_settings(loaded)
        if check.is_log_target(target):
            found = check.validate_logs(target, loaded, catalog)
            typer.echo(escape_invisible(check.logs_summary(target, *found)))
            failed = bool(found[2])
        else:
            runs, rejects, problems = check.validate_table(target, loaded, catalog)
            typer.echo(escape_invisible(check.summary(target, runs, rejects, problems)))
            failed = bool(rejects or problems)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    raise typer.Exit(code=1 if failed else 0)


@app.command(cls=PlainHelp)
def metrics(headline_dir: Path = typer.Option(Path("reports/headline"), "--headline-dir",
                                              help="the stages' headline files")) -> None:
    """The headline figures of every stage (what ``dvc metrics show`` prints), each key with
    its meaning."""
    from pipeline.headline import legend_lines
    typer.echo("\n".join(legend_lines(headline_dir)))


@app.command(cls=PlainHelp, context_settings={"allow_extra_args": True},
             epilog=plan_epilog())
def plan(
    ctx: typer.Context,
    model: str = typer.Argument(..., help="catalog model id or alias (e.g. llama-3-70b), or a "
                                          "label with --params-b, --layers, --d-model"),
    accelerator: str = typer.Argument(..., help="catalog accelerator id or alias"),
    n: list[int] = typer.Option(..., "--n", help="accelerator counts (repeat or list: --n 512 "
                                                 "2048)"),
    global_batch_tokens: float | None = typer.Option(
        None, help="tokens per step, never changed (default: the theory's critical batch of the "
                   "model, rounded at each N to 2^k x N's odd factor sequences), e.g. 3145728"),
    seq_len: float | None = typer.Option(None, help="tokens per sequence (default: the "
                                                    "model's, else theory.bounds.seq_len)"),
    layout: str | None = typer.Option(None, help=LAYOUT_HELP),
    precision: str | None = typer.Option(
        None, help="bf16 (default), fp16, fp8 or mxfp8 (Blackwell); MFU is against the dense "
                   "peak at this precision, e.g. --precision fp8"),
    cluster: str | None = typer.Option(
        None, help="a cluster of data/catalog/clusters.csv: its accelerators per node and NVLink "
                   "domain and scale-out bandwidth per accelerator (default: the accelerator's "
                   "default cluster), e.g. --cluster gb200-nvl72"),
    fused_attention: bool | None = typer.Option(
        None, "--fused-attention/--no-fused-attention",
        help="fused (flash) attention core (default: fused)"),
    tp_comm_overlap: bool | None = typer.Option(
        None, "--tp-comm-overlap/--no-tp-comm-overlap",
        help="TP/CP/EP collectives overlapped with compute (default: overlapped)"),
    dp_comm_overlap: bool | None = typer.Option(
        None, "--dp-comm-overlap/--no-dp-comm-overlap",
        help="DP gradient traffic overlapped with the backward (default: overlapped)"),
    moe_dispatcher: str | None = typer.Option(None, help=DISPATCHER_HELP),
    top: int = typer.Option(5, min=1, help="layouts shown per N"),
    train_tokens: float | None = typer.Option(None, help="also the time and energy (MWh, at "
                                                         "TDP) to train this many tokens"),
    json_out: bool = typer.Option(False, "--json", help="print a JSON array, one object per "
                                                        "(N, layout)"),
    framework: str | None = typer.Option(
        None, help="framework family (megatron, fsdp, deepspeed, megatron_deepspeed, playbook; "
                   "default megatron): its activation factor sizes memory, its calibrated "
                   "parameters time steps"),
    params_b: float | None = typer.Option(None, help="model shape: parameters, 1e9"),
    layers: int | None = typer.Option(None, help="model shape: layers"),
    d_model: int | None = typer.Option(None, help="model shape: hidden size"),
    heads: int | None = typer.Option(None, help="model shape: attention heads"),
    # MoE shape (override the catalog's; pipeline/plan/request.py MOE_FLAGS)
    experts: int | None = typer.Option(None, help="MoE: routed experts"),
    top_k: int | None = typer.Option(None, help="MoE: routed experts per token"),
    expert_ffn: int | None = typer.Option(None, help="MoE: one expert's FFN width"),
    shared_experts: int | None = typer.Option(None, help="MoE: shared experts (expert widths)"),
    active_params_b: float | None = typer.Option(None, help="MoE: parameters active per token, "
                                                            "1e9 (FLOP count these)"),
    processed: Path = PROCESSED,
    catalog: Path = CATALOG,
    theory_metrics: Path = typer.Option(Path("reports/metrics/theory.json"),
                                        help="the theory stage's metrics (memory overhead)"),
    params: Path = PARAMS,
) -> None:
    """Best parallel layouts for MODEL on ACCELERATOR at each N: predicted MFU with its 95%
    interval, step time, tokens/s, memory per chip against HBM, and the binding limit.

    Reads the catalogs and the pipeline's outputs (no refit). Exit status 2 on a bad request.
    """
    from pipeline.plan.cli import more_n, run_plan
    code = run_plan(model=model, accelerator=accelerator, n=more_n(n, ctx.args),
                    global_batch_tokens=global_batch_tokens, seq_len=seq_len, layout=layout,
                    top=top, train_tokens=train_tokens, json_out=json_out,
                    shape={"params_b": params_b, "layers": layers, "d_model": d_model,
                           "heads": heads},
                    processed=processed, catalog=catalog, theory_metrics=theory_metrics,
                    params_path=params, framework=framework, precision=precision,
                    cluster=cluster, dispatcher=moe_dispatcher,
                    kernels={"fused_attention": fused_attention,
                             "tp_comm_overlap": tp_comm_overlap,
                             "dp_comm_overlap": dp_comm_overlap},
                    moe={"experts": experts, "top_k": top_k, "expert_ffn": expert_ffn,
                         "shared_experts": shared_experts, "active_params_b": active_params_b})
    raise typer.Exit(code=code)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
