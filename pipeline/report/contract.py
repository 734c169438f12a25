"""The report stage's declaration: it writes no contract file (report.html, report.md and the
figures are documents); it reads the stage outputs below and every stage's metrics JSON."""

from __future__ import annotations

from pipeline.contracts import Stage

STAGE = Stage(
    name="report", help="Render reports/report.html and reports/report.md with figures from the "
                        "stage outputs.",
    # theory (laws, bounds.seq_len, memory): the planner's answer for "Your runs" (pipeline/plan)
    params=("report", "fit.default_law_min_success", "theory"),
    reads=("runs.parquet", "rejects.parquet", "series.parquet", "fits.parquet",
           "extrapolation.parquet", "bounds.parquet", "frontier.parquet", "comparison.parquet",
           "comparison_curves.parquet", "comparison_series.parquet", "energy_points.parquet",
           "energy_fits.parquet", "calibration.parquet", "calibrated.parquet",
           "predictions.parquet", "calibrated_frontier.parquet"),
    reads_metrics=("ingest", "fit", "theory", "compare", "calibrate"),
    catalog=True,
    entry="pipeline.report.stage:run",
    # the Vega libraries of `dvc plots` draw the HTML's interactive charts
    raw=(".dvc/plots/page.html",),
    # the series and scenarios the report's figures highlight, for `dvc plots`
    plots=("report_scaling.csv", "report_frontier.csv"),
    outs=("reports/report.html", "reports/report.md", "reports/figures", "reports/tables"))
