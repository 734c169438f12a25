"""Command line: one sub-command per DVC stage, ``python -m pipeline <stage>``.

Paths come from ``dvc.yaml`` (passed as options here); settings come from ``params.yaml``.
A broken configuration stops the stage with a message naming the field (exit status 2).
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from pipeline.config import ConfigError, load_params

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="scalewall: measured diminishing returns against data-movement limits.")

PARAMS = typer.Option(Path("params.yaml"), "--params", help="params.yaml of the project")


def _fail(exc: Exception) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(code=2)


@app.command()
def ingest(
    published: Path = typer.Option(Path("data/raw/published"), help="folder of format-v1 CSVs"),
    logs: Path = typer.Option(Path("data/raw/logs"), help="folder of training step logs"),
    catalog: Path = typer.Option(Path("data/catalog"), help="hardware and model catalogs"),
    out: Path = typer.Option(Path("data/processed"), help="output folder"),
    metrics: Path = typer.Option(Path("reports/metrics/ingest.json")),
    params: Path = PARAMS,
) -> None:
    """Published tables, MLPerf result trees and step logs -> runs, rejects, series, steps."""
    from pipeline.ingest.stage import run
    try:
        run(load_params(params), published_dir=published, logs_dir=logs, catalog_dir=catalog,
            out_dir=out, metrics_path=metrics)
    except ConfigError as exc:
        _fail(exc)


@app.command()
def fit(
    runs: Path = typer.Option(Path("data/processed/runs.parquet")),
    series: Path = typer.Option(Path("data/processed/series.parquet")),
    out: Path = typer.Option(Path("data/processed")),
    metrics: Path = typer.Option(Path("reports/metrics/fit.json")),
    plots: Path = typer.Option(Path("reports/plots")),
    params: Path = PARAMS,
) -> None:
    """Scaling and efficiency laws per series, extrapolation tests, cross-series models."""
    from pipeline.laws.stage import run
    try:
        run(load_params(params), runs_path=runs, series_path=series, out_dir=out,
            metrics_path=metrics, plots_dir=plots)
    except ConfigError as exc:
        _fail(exc)


@app.command()
def theory(
    runs: Path = typer.Option(Path("data/processed/runs.parquet")),
    catalog: Path = typer.Option(Path("data/catalog")),
    out: Path = typer.Option(Path("data/processed")),
    metrics: Path = typer.Option(Path("reports/metrics/theory.json")),
    plots: Path = typer.Option(Path("reports/plots")),
    params: Path = PARAMS,
) -> None:
    """Per-run utilization ceilings and the frontier of feasible training compute."""
    from pipeline.theory.stage import run
    try:
        run(load_params(params), runs_path=runs, catalog_dir=catalog, out_dir=out,
            metrics_path=metrics, plots_dir=plots)
    except ConfigError as exc:
        _fail(exc)


@app.command()
def compare(
    processed: Path = typer.Option(Path("data/processed")),
    metrics_dir: Path = typer.Option(Path("reports/metrics")),
    out: Path = typer.Option(Path("data/processed")),
    metrics: Path = typer.Option(Path("reports/metrics/compare.json")),
    plots: Path = typer.Option(Path("reports/plots")),
    params: Path = PARAMS,
) -> None:
    """Measured scaling against the theory's ceilings, per run and per series."""
    from pipeline.compare import run
    try:
        run(load_params(params), processed_dir=processed, metrics_dir=metrics_dir, out_dir=out,
            metrics_path=metrics, plots_dir=plots)
    except ConfigError as exc:
        _fail(exc)


@app.command()
def report(
    processed: Path = typer.Option(Path("data/processed")),
    metrics_dir: Path = typer.Option(Path("reports/metrics")),
    out: Path = typer.Option(Path("reports")),
    params: Path = PARAMS,
) -> None:
    """Render reports/report.html and reports/report.md with figures from the stage outputs."""
    from pipeline.report.stage import run
    try:
        run(load_params(params), processed_dir=processed, metrics_dir=metrics_dir, out_dir=out)
    except ConfigError as exc:
        _fail(exc)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
