"""Command line: one sub-command per DVC stage, ``python -m pipeline <stage>``.

Paths come from ``dvc.yaml`` (passed as options here; the defaults are the same paths, for use
by hand); settings come from ``params.yaml``. A broken configuration stops the stage with a
message naming the field and exit status 2.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import typer

from pipeline.config import ConfigError, load_params, load_settings

# Tracebacks never print local variables: they may hold whole input files (a 280 KB traceback
# for one hostile sidecar), and they are no help to a user.
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_show_locals=False,
                  help="scalewall: measured diminishing returns against data-movement limits.")

PARAMS = typer.Option(Path("params.yaml"), "--params", help="params.yaml of the project")
CATALOG = typer.Option(Path("data/catalog"), help="hardware and model catalogs")
PROCESSED = typer.Option(Path("data/processed"), help="folder of stage outputs")
RUNS = typer.Option(Path("data/processed/runs.parquet"))
METRICS_DIR = typer.Option(Path("reports/metrics"))
PLOTS = typer.Option(Path("reports/plots"), help="plot data for `dvc plots`")


def _run_stage(module: str, params_path: Path, **paths: Path) -> None:
    """Load params (failing fast on a broken file), then import and run ``module.run``."""
    try:
        params = load_params(params_path)
        load_settings(params)  # the whole file, so any broken field stops any stage
        stage = importlib.import_module(module)
        stage.run(params, **paths)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc


@app.command()
def ingest(
    published: Path = typer.Option(Path("data/raw/published"), help="folder of format-v1 CSVs"),
    logs: Path = typer.Option(Path("data/raw/logs"), help="folder of training step logs"),
    catalog: Path = CATALOG,
    out: Path = PROCESSED,
    metrics: Path = typer.Option(Path("reports/metrics/ingest.json")),
    params: Path = PARAMS,
) -> None:
    """Published tables, MLPerf result trees and step logs -> runs, rejects, series, steps."""
    _run_stage("pipeline.ingest.stage", params, published_dir=published, logs_dir=logs,
               catalog_dir=catalog, out_dir=out, metrics_path=metrics)


@app.command()
def fit(
    runs: Path = RUNS,
    series: Path = typer.Option(Path("data/processed/series.parquet")),
    out: Path = PROCESSED,
    metrics: Path = typer.Option(Path("reports/metrics/fit.json")),
    plots: Path = PLOTS,
    params: Path = PARAMS,
    power: Path = typer.Option(Path("data/processed/power.parquet"),
                               help="MLPerf power measurements (energy laws)"),
) -> None:
    """Scaling and efficiency laws per series, extrapolation tests, cross-series models."""
    _run_stage("pipeline.laws.stage", params, runs_path=runs, series_path=series,
               out_dir=out, metrics_path=metrics, plots_dir=plots, power_path=power)


@app.command()
def theory(
    runs: Path = RUNS,
    series: Path = typer.Option(Path("data/processed/series.parquet")),
    catalog: Path = CATALOG,
    out: Path = PROCESSED,
    metrics: Path = typer.Option(Path("reports/metrics/theory.json")),
    plots: Path = PLOTS,
    params: Path = PARAMS,
) -> None:
    """Per-run utilization ceilings and the frontier of feasible training compute."""
    _run_stage("pipeline.theory.stage", params, runs_path=runs, series_path=series,
               catalog_dir=catalog, out_dir=out, metrics_path=metrics, plots_dir=plots)


@app.command()
def compare(
    processed: Path = PROCESSED,
    metrics_dir: Path = METRICS_DIR,
    out: Path = PROCESSED,
    metrics: Path = typer.Option(Path("reports/metrics/compare.json")),
    plots: Path = PLOTS,
    params: Path = PARAMS,
) -> None:
    """Measured scaling against the theory's ceilings, per run and per series."""
    _run_stage("pipeline.compare", params, processed_dir=processed, metrics_dir=metrics_dir,
               out_dir=out, metrics_path=metrics, plots_dir=plots)


@app.command()
def report(
    processed: Path = PROCESSED,
    metrics_dir: Path = METRICS_DIR,
    out: Path = typer.Option(Path("reports"), help="folder of report.html, report.md, figures/"),
    params: Path = PARAMS,
) -> None:
    """Render reports/report.html and reports/report.md with figures from the stage outputs."""
    _run_stage("pipeline.report.stage", params, processed_dir=processed, metrics_dir=metrics_dir,
               out_dir=out)


@app.command()
def validate(
    table: Path = typer.Argument(..., help="a published table (format v1 CSV)"),
    catalog: Path = CATALOG,
    params: Path = PARAMS,
) -> None:
    """Check one published table: each record as a run or a reject with its reason.

    Writes nothing. Exit status 1 when any record would be rejected.
    """
    from pipeline.ingest.validate import summary, validate_table
    try:
        loaded = load_params(params)
        load_settings(loaded)
        runs, rejects = validate_table(table, loaded, catalog)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    typer.echo(summary(table, runs, rejects))
    raise typer.Exit(code=1 if rejects else 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
