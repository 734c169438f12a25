"""The calibrate stage's contracts: calibration, calibrated_forms, calibrated, predictions,
calibrated_frontier and selected_targets (Parquet), reports/metrics/calibrate.json and
reports/headline/calibrate.json (the model: docs/theory.md §10).

Columns are ``(name, pyarrow type, meaning, rule)`` (pipeline/contracts.py); ``OUTPUTS`` maps
each file name to them, ``FRAME_CHECKS`` adds the checks across columns.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pandera.pandas as pda
from pydantic import Field

from pipeline.contracts import ID, NONNEG, POS, UNIT, B, F, Headline, I, Metrics, S, Stage, col
from pipeline.vocab import LAW_NAMES
from pipeline.theory.contract import OUTPUTS as THEORY_OUTPUTS
from pipeline.vocab import SHARE_SLOTS

# Slots of calibrated.parquet's shares of the step time (share_<slot>, summing to 1).
CALIBRATED_SHARES = SHARE_SLOTS
CALIBRATION_GROUPS = ("efficiency", "efficiency_fixed", "source_effect", "residual_sd",
                      "between_source_sd", "interval", "constant")
# predictors of predictions.parquet: the naive rules, the calibrated model, the recommended
# rule, the hardware family's median MFU (source holdout) and the fit stage's laws
PREDICTORS = ("naive_linear", "naive_loglinear", "calibrated", "selected", "family_median",
              *LAW_NAMES)
_HOLDOUT = r"^(largest_k[0-9]+|source)$"
OUTPUTS: dict[str, tuple] = {}
OUTPUTS["calibration.parquet"] = (
    col("parameter", S, "<family>.<parameter> (efficiency, efficiency_fixed; family "
                        "'production' = the population), source (source_effect, residual_sd), "
                        "family (interval: conformal log half-width) or constant name", **ID),
    col("group", S, "efficiency | efficiency_fixed | source_effect | residual_sd | "
                    "between_source_sd | interval | constant",
        checks=[pda.Check.isin(list(CALIBRATION_GROUPS))], nullable=False),
    col("form", S, "model form chosen (calibrate.forms)", **ID),
    col("estimate", F, "estimate"), col("stderr", F, "standard error", **NONNEG),
    col("ci_low", F, "confidence interval (fit.interval), low"),
    col("ci_high", F, "confidence interval, high"),
    col("n_runs", I, "runs of the family or source", **NONNEG),
)
OUTPUTS["calibrated_forms.parquet"] = (
    col("form", S, "candidate form (calibrate.forms)", **ID),
    col("terms", S, "','-separated terms fitted"), col("dropped", S, "terms no run exercises"),
    col("n_params", I, "estimated parameters", **POS), col("loglik", F, "log-likelihood"),
    col("aicc", F, "corrected Akaike criterion"), col("bic", F, "Bayesian criterion"),
    col("median_ape", F, "in-sample median APE of MFU", **NONNEG),
)
OUTPUTS["calibrated.parquet"] = (
    col("run_id", S, "run", **ID), col("source", S, "source id", **ID),
    col("series_id", S, "series"), col("n_accelerators", F, "N", **POS),
    col("measured_mfu", F, "measured MFU (null: none measured)", **UNIT),
    col("predicted_mfu", F, "calibrated in-sample MFU", **POS),
    col("pi_low", F, "95% prediction interval, low", **NONNEG),
    col("pi_high", F, "95% prediction interval, high", **POS),
    col("ceiling_mfu", F, "ideal ceiling of the run's layout and schedule", **UNIT),
    # the arithmetic's share can exceed 1 and the residual be negative where the model predicts
    # a longer step than measured; the shares still sum to 1 (frame check)
    *(col(f"share_{k}", F, f"calibrated share of the step time: {k}", **NONNEG)
      for k in CALIBRATED_SHARES[:-1]),
    col("share_residual", F, "share the calibrated model leaves unexplained"),
    col("ape", F, "|predicted - measured| / measured", **NONNEG),
    col("covered", B, "measured inside the interval"),
)
OUTPUTS["predictions.parquet"] = (
    col("run_id", S, "held-out run"), col("series_id", S, "series (null: source holdout)"),
    col("source", S, "source id", **ID),
    col("holdout", S, "largest_k<k> | source", checks=[pda.Check.str_matches(_HOLDOUT)],
       nullable=False),
    col("predictor", S, "predictor", checks=[pda.Check.isin(list(PREDICTORS))], nullable=False),
    col("metric", S, "predicted quantity: the series' y metric, or mfu", **ID),
    col("n_train_max", F, "largest N trained on", **POS),
    col("n_target", F, "N predicted", **POS), col("actual", F, "measured value", **POS),
    col("predicted", F, "prediction"), col("pi_low", F, "95% interval, low"),
    col("pi_high", F, "95% interval, high"),
    col("ape", F, "|predicted - actual| / actual", **NONNEG),
    col("covered", B, "actual inside the interval"),
    col("interval_method", S, "conformal | analytic | law | '' (no interval: family_median)",
       checks=[pda.Check.isin(["conformal", "analytic", "law", ""])], nullable=True),
    col("assumed_layout", B, "the theory assumed the run's layout (MLPerf)"),
)
OUTPUTS["calibrated_frontier.parquet"] = THEORY_OUTPUTS["frontier.parquet"]
OUTPUTS["selected_targets.parquet"] = (
    col("series_id", S, "series", **ID), col("source", S, "source id"),
    col("n_accelerators", F, "target N (compare.extrapolate_n)", checks=[pda.Check.gt(0)],
       nullable=False),
    col("y_metric", S, "throughput column"),
    col("predictor", S, "selected:<rule>",
       checks=[pda.Check.str_matches(r"^selected:(calibrated|naive_linear|naive_loglinear)$")],
       nullable=False),
    col("predicted", F, "predicted throughput", **POS),
    col("pi_low", F, "95% interval, low", **NONNEG), col("pi_high", F, "95% interval, high",
                                                          **POS),
    col("assumed_layout", B, "no stated layout: naive_linear"),
)


def _shares_sum_to_one(df: pd.DataFrame) -> pd.Series:
    total = df[[f"share_{k}" for k in CALIBRATED_SHARES]].sum(axis=1)
    return (total - 1.0).abs() <= 1e-6


def _interval_brackets(df: pd.DataFrame) -> pd.Series:
    ok = (df["pi_low"] <= df["predicted"]) & (df["predicted"] <= df["pi_high"])
    return ok | df[["pi_low", "predicted", "pi_high"]].isna().any(axis=1)


# Checks across columns (pandera frame-level checks), by output.
FRAME_CHECKS: dict[str, list[pda.Check]] = {
    "calibrated.parquet": [pda.Check(_shares_sum_to_one, error="shares do not sum to 1")],
    "selected_targets.parquet": [pda.Check(_interval_brackets,
                                           error="pi_low <= predicted <= pi_high fails")],
}


# -- reports/metrics/calibrate.json and reports/headline/calibrate.json -------------------------
class CalibratedScenarioMetrics(Metrics):
    knee_flop_calibrated: float | None
    knee_flop_calibrated_ci: list[float | None]
    wall_flop_calibrated: float | None
    wall_flop_calibrated_ci: list[float | None]
    knee_flop: float | None
    wall_flop: float | None
    plateau_at_grid_start: bool
    wall_beyond_grid_calibrated: bool


class CalibrateInSample(Metrics):
    n: int
    median_ape: float | None
    coverage: float | None
    by_source: dict[str, dict[str, float | int | None]]


class CalibrateMetrics(Metrics):
    form: str
    forms: list[dict[str, Any]]
    fit_runs: int
    fit_runs_by_source: dict[str, int]
    stderr_kind: str
    sigma_u: float | None
    parameters: dict[str, dict[str, float | None]]
    in_sample: CalibrateInSample
    predictors: list[dict[str, Any]]
    against_naive: dict[str, Any]
    frontier: dict[str, CalibratedScenarioMetrics]
    selected_rule: dict[str, str]
    interval_method: dict[str, str]



class CalibrateHeadline(Headline):
    # the `selected` predictor in the largest_k1 holdout: median APE and 95% coverage
    sel_ape: float | None = Field(ge=0)
    sel_cov: float | None = Field(ge=0, le=1)


METRICS = CalibrateMetrics.model_validate
HEADLINE = CalibrateHeadline

STAGE = Stage(
    name="calibrate", help="The step-time model (critical path, measured hardware efficiencies, "
                           "family parameters) fitted to the runs; held-out predictions against "
                           "naive rules.",
    params=("calibrate", "theory", "fit.interval", "fit.holdout_k",
            "fit.extrapolation_min_distinct_n", "ingest.attention_flops",
            "ingest.default_precision", "compare.extrapolate_n"),
    reads=("runs.parquet", "series.parquet", "extrapolation.parquet"),
    reads_metrics=("theory",), catalog=True, writes=tuple(OUTPUTS),
    plots=("calibrate_predictions.csv",), plot_significant=6,
    compute="pipeline.calibrate.stage:compute")
