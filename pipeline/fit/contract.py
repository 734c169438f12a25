"""The fit stage's contracts: fits, extrapolation, cross_series, fit_curves, energy_fits and
energy_points (Parquet), reports/metrics/fit.json and reports/headline/fit.json.

Columns are ``(name, pyarrow type, meaning, rule)`` (pipeline/contracts.py); ``OUTPUTS`` maps
each file name to them.
"""

from __future__ import annotations

from typing import Any, Literal

import pandera.pandas as pda
from pydantic import Field

from pipeline.contracts import (ID, NONNEG, POS, SHARE, UNIT_CLOSED, B, F, Headline, I, Metrics,
                                S, Stage, col)
from pipeline.vocab import LAW_NAMES, POWER_MEASUREMENTS

# LAW_NAMES (imported above from pipeline.vocab, its home) is the set the `law` columns allow.
#: multiples of a series' largest measured N the fit stage predicts each law at (fits.parquet
#: ``*_at_<m>x_n_max``), read by the report's section on the user's own runs
MULTIPLES_OF_N_MAX = (4, 16)
# Quantities the energy laws are fitted on (energy_fits.parquet ``quantity``).
ENERGY_QUANTITIES = ("energy_j_per_token", "power_w_per_accelerator", "energy_j")
# What one energy series is (pipeline/fit/energy.py builds ``series_id`` from these, in this
# order): the MLPerf power measurements of one model, accelerator, AC/DC, submitter family (the
# submitter less an -ac-power/-dc-power suffix) and round. Readers group by ``series_id``.
ENERGY_SERIES_KEY = ("model", "accelerator", "power_measurement", "family", "mlperf_version")

OUTPUTS: dict[str, tuple] = {
    "fits.parquet": (
        col("series_id", S, "scaling series", **ID), col("source", S, "source id"),
        col("scaling", S, "strong | weak | ..."),
        col("law", S, "law name", checks=[pda.Check.isin(list(LAW_NAMES))], nullable=False),
        col("y_metric", S, "fitted throughput column"),
        col("scale", S, "least-squares scale", checks=[pda.Check.isin(["log", "linear"])],
           nullable=False),
        col("params", S, "JSON name -> value"), col("stderr", S, "JSON name -> standard error"),
        col("ci_low", S, "JSON name -> lower interval bound"),
        col("ci_high", S, "JSON name -> upper interval bound"),
        col("aicc", F, "corrected Akaike criterion"), col("bic", F, "Bayesian criterion"),
        col("r2", F, "R^2 on the fitting scale"), col("delta_aicc", F, "AICc - best AICc"),
        col("n_points", I, "runs fitted", **POS), col("n_distinct", I, "distinct N", **POS),
        col("n_min", I, "smallest N", **POS), col("n_max", I, "largest N", **POS),
        col("converged", B, "the optimiser converged"), col("note", S, "why a fit is doubtful"),
        col("n_peak", F, "N of peak throughput", **NONNEG),
        col("n_at_threshold", F, "N where efficiency falls to the threshold", **POS),
        col("predicted_at_n_min", F, "the law's throughput at the smallest N"),
        *(col(f"{k}_at_{m}x_n_max", F, f"{what} at {m}x the largest N (fit.interval)")
          for m in MULTIPLES_OF_N_MAX for k, what in (("predicted", "the law's throughput"),
                                           ("pi_low", "prediction interval, low"),
                                           ("pi_high", "prediction interval, high"))),
        col("efficiency_at_n_max", F, "measured efficiency at the largest N", **POS),
    ),
    "extrapolation.parquet": (
        col("series_id", S, "scaling series", **ID), col("source", S, "source id"),
        col("law", S, "law name", checks=[pda.Check.isin(list(LAW_NAMES))], nullable=False),
        col("k", I, "largest points held out", checks=[pda.Check.ge(1)], nullable=False),
        col("n_train_max", I, "largest N fitted", **POS),
        col("n_target", I, "N predicted", **POS), col("y_metric", S, "throughput column"),
        col("actual", F, "measured value", **POS), col("predicted", F, "law's prediction"),
        col("pi_low", F, "prediction interval, low"), col("pi_high", F, "prediction interval, high"),
        col("ape", F, "|predicted - actual| / actual", **NONNEG),
        col("covered", B, "actual inside the interval"),
    ),
    "cross_series.parquet": (
        col("model", S, "cross-series regression", **ID), col("term", S, "term", **ID),
        col("estimate", F, "coefficient"), col("stderr", F, "standard error", **NONNEG),
        col("ci_low", F, "interval, low"), col("ci_high", F, "interval, high"),
        col("n_obs", I, "observations", **POS),
    ),
}
OUTPUTS["fit_curves.parquet"] = (
    col("series_id", S, "scaling series", **ID),
    col("law", S, "law name", checks=[pda.Check.isin(list(LAW_NAMES))], nullable=False),
    col("scale", S, "least-squares scale"),
    col("n_accelerators", F, "N of the extrapolation grid (measures.extrapolation_grid)",
       checks=[pda.Check.gt(0)], nullable=False),
    col("predicted", F, "the law's throughput at N"),
    col("pi_low", F, "prediction interval (fit.interval), low"),
    col("pi_high", F, "prediction interval, high"),
)
_ENERGY_SERIES_KEYS = (
    col("series_id", S, "energy series: energy|model|accelerator|AC/DC|submitter|round", **ID),
    col("model", S, "model"), col("accelerator", S, "catalog id"),
    col("power_measurement", S, "AC | DC", checks=[pda.Check.isin(list(POWER_MEASUREMENTS))],
       nullable=False),
)
# Energy laws per series and quantity (``energy_fits.parquet``, fit; pipeline/fit/energy.py).
OUTPUTS["energy_fits.parquet"] = (
    *_ENERGY_SERIES_KEYS,
    col("submitter", S, "submitter family (the -ac-power/-dc-power suffix dropped)"),
    col("mlperf_version", S, "MLPerf round"),
    col("quantity", S, "the fitted quantity", checks=[pda.Check.isin(list(ENERGY_QUANTITIES))],
       nullable=False),
    col("n_runs", I, "measurements fitted", **NONNEG),
    col("n_distinct", I, "distinct N", **NONNEG),
    col("n_min", I, "smallest N", **POS), col("n_max", I, "largest N", **POS),
    col("b", F, "exponent of y = a N^b"), col("b_low", F, "interval of b, low"),
    col("b_high", F, "interval of b, high"),
    col("doubling_factor", F, "2^b: y's factor per doubling of N", **POS),
    col("doubling_low", F, "2^b_low", **POS), col("doubling_high", F, "2^b_high", **POS),
    col("r2", F, "R^2 on log y"),
    col("lack_of_fit_p", F, "p of the lack-of-fit F test", **UNIT_CLOSED),
    col("converged", B, "fitted", nullable=False),
    col("note", S, "why not fitted, or why doubtful"),
)
# Per (energy series, N): the runs' median and range (``energy_points.parquet``, fit).
OUTPUTS["energy_points.parquet"] = (
    *_ENERGY_SERIES_KEYS,
    col("n_accelerators", I, "N", checks=[pda.Check.gt(0)], nullable=False),
    col("n_runs", I, "measurements at N", checks=[pda.Check.gt(0)], nullable=False),
    *(col(f"{q}_{stat}", F, f"{stat} of {q} over the runs", **POS)
      for q in ENERGY_QUANTITIES[:2] for stat in ("median", "min", "max")),
    col("energy_j_median", F, "median energy to train (J)", **POS),
    col("time_to_train_s_median", F, "median time to train (s)", **POS),
    col("interconnect_share", F, "median energy_j_interconnect / energy_j", **SHARE),
)


# -- reports/metrics/fit.json and reports/headline/fit.json -------------------------------------
class EnergyDoubling(Metrics):
    """``fit.json["energy"]["cross_series"][quantity]``: the shared slope across energy series
    as a factor per doubling of N, with intervals from the runs and from the per-N means
    (pipeline/fit/energy.py); without two distinct N only ``note`` says why."""
    quantity: Literal[ENERGY_QUANTITIES]  # type: ignore[valid-type]
    series: list[str]
    n_runs: int
    note: str | None = None
    interval: float | None = None
    doubling_factor: float | None = None
    doubling_low: float | None = None
    doubling_high: float | None = None
    n_level_doubling_factor: float | None = None
    n_level_doubling_low: float | None = None
    n_level_doubling_high: float | None = None


class EnergyFitMetrics(Metrics):
    """``fit.json["energy"]``: the energy laws on power.parquet."""
    measurements: int
    series: int
    series_fitted: int
    cross_series: dict[Literal[ENERGY_QUANTITIES], EnergyDoubling]  # type: ignore[valid-type]


class FitMetrics(Metrics):
    scale: Literal["log", "linear"]
    interval: float
    holdout_k: list[int]
    default_law: str | None
    default_law_reason: str | None = None
    default_law_scores: dict[str, float | None] | None
    all_laws_common: dict[str, Any] | None
    extrapolation: dict[str, Any]
    cross_series: dict[str, Any]
    n_series: int
    n_series_fitted: int
    n_series_extrapolated: int
    energy: EnergyFitMetrics | None = None



class FitHeadline(Headline):
    fitted: int | None = Field(ge=0)
    law: str | None
    heldout_ape: float | None = Field(ge=0)
    # energy per token, factor per doubling of N (cross-series, fit.json "energy")
    e_tok_x2: float | None = Field(gt=0)


METRICS = FitMetrics.model_validate
HEADLINE = FitHeadline

STAGE = Stage(
    name="fit", help="Scaling and efficiency laws per series, extrapolation tests, cross-series "
                     "models, energy laws.",
    params=("fit", "compare.extrapolate_n", "compare.curve_points",
            "compare.efficiency_threshold"),
    reads=("runs.parquet", "series.parquet", "power.parquet"), writes=tuple(OUTPUTS),
    plots=("fit_extrapolation.csv", "fit_efficiency.csv"), compute="pipeline.fit.stage:compute")
