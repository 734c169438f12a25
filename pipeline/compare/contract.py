"""The compare stage's contracts: comparison, comparison_curves and comparison_series (Parquet),
reports/metrics/compare.json and reports/headline/compare.json.

Columns are ``(name, pyarrow type, meaning, rule)`` (pipeline/contracts.py); ``OUTPUTS`` maps
each file name to them.
"""

from __future__ import annotations

import pandera.pandas as pda
from pydantic import Field

from pipeline.contracts import ID, POS, SHARE, UNIT, B, F, Headline, I, Metrics, S, Stage, col
from pipeline.vocab import LAW_NAMES, SHARE_SLOTS

_SHARES = tuple(col(f"share_{k}", F, f"share of the measured step time: {k}", **SHARE)
                for k in SHARE_SLOTS)
_SERIES_KEYS = (
    col("series_id", S, "scaling series", **ID), col("source", S, "source id"),
    col("model", S, "model"), col("scaling", S, "strong | weak | ..."),
    col("strategy_family", S, "coarse strategy"), col("accelerator", S, "catalog id"),
    col("accelerator_family", S, "catalog family"), col("y_metric", S, "fitted throughput"),
    col("law", S, "law of the curve (null: none fitted)",
        checks=[pda.Check.isin(list(LAW_NAMES))], nullable=True),
    col("law_is_default", B, "the law is the fit stage's default"),
)

OUTPUTS: dict[str, tuple] = {
    "comparison.parquet": (
        col("run_id", S, "run", **ID), col("source", S, "source id"),
        col("n_accelerators", I, "chips", **POS), col("series_id", S, "series"),
        col("mfu", F, "measured MFU", **UNIT), col("bound_mfu", F, "ceiling", **UNIT),
        col("fraction_of_ceiling", F, "measured / ceiling", **POS),
        *_SHARES,
        col("training_flop", F, "compute placed on the frontier", **POS),
        col("training_flop_basis", S, "how training_flop was obtained"),
    ),
    "comparison_curves.parquet": (
        *_SERIES_KEYS,
        col("kind", S, "curve | measured | target",
           checks=[pda.Check.isin(["curve", "measured", "target"])], nullable=False),
        col("n_accelerators", F, "N", checks=[pda.Check.gt(0)], nullable=False),
        col("y", F, "measured throughput"), col("efficiency", F, "measured efficiency", **POS),
        col("efficiency_theory", F, "the ceiling's efficiency", **POS),
        col("predicted", F, "law's throughput"), col("pi_low", F, "interval, low"),
        col("pi_high", F, "interval, high"), col("efficiency_law", F, "law's efficiency"),
        col("predictor", S, "what predicted the row: the law, or selected:<rule> on target rows "
                            "(calibrate's selected_targets.parquet)"),
    ),
    "comparison_series.parquet": (
        *_SERIES_KEYS,
        col("n_min", F, "smallest N", **POS), col("n_max", F, "largest N", **POS),
        col("n_distinct", I, "distinct N", **POS),
        col("efficiency_at_n_max", F, "measured efficiency at the largest N", **POS),
        col("theory_efficiency_at_n_max", F, "the ceiling's efficiency there", **POS),
        col("n_at_threshold_law", F, "N at the threshold efficiency, by the law", **POS),
        col("n_at_threshold_theory", F, "N at the threshold efficiency, by the ceiling", **POS),
        col("n_at_threshold_measured", F, "N at the threshold efficiency, measured", **POS),
        col("note", S, "why a series lacks a curve"),
    ),
}


# -- reports/metrics/compare.json and reports/headline/compare.json -----------------------------
class CompareMetrics(Metrics):
    default_law: str | None
    efficiency_threshold: float
    extrapolate_n: list[int]
    interval: float
    frontier_duration_days: float
    n_runs: int
    n_runs_with_bound: int
    n_series: int
    strong_median_efficiency_at_n_max: float | None
    strong_median_n_at_threshold_law: float | None
    weak_median_efficiency_at_n_max: float | None
    weak_median_n_at_threshold_law: float | None



class CompareHeadline(Headline):
    eff_at_n_max: float | None = Field(gt=0)
    n_at_threshold: float | None = Field(gt=0)


METRICS = CompareMetrics.model_validate
HEADLINE = CompareHeadline

STAGE = Stage(
    name="compare", help="Measured scaling against the theory's ceilings, per run and per series.",
    params=("compare", "fit.interval", "theory.duration_days"),
    reads=("runs.parquet", "series.parquet", "fits.parquet", "fit_curves.parquet",
           "bounds.parquet", "theory_curves.parquet", "selected_targets.parquet"),
    reads_metrics=("fit",), writes=tuple(OUTPUTS),
    plots=("compare_efficiency.csv", "compare_frontier_runs.csv"), plot_significant=6,
    compute="pipeline.compare.stage:compute")
