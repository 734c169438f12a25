"""The contracts between stages: every Parquet output and every metrics JSON, in one module.

``runs.parquet`` follows ``RUNS_SCHEMA`` exactly (column order included). Units are SI and sit in
the column name (``_s``, ``_w``, ``_per_s``); counts are plain numbers (``params`` is a count of
parameters, not billions). See ``../shared/ARCHITECTURE.md`` for the contract these implement.

The other Parquet outputs are listed in ``OUTPUT_COLUMNS`` (name, pyarrow type, meaning) with
their value checks; ``check_output(name, frame)`` validates a frame against its contract (pandera
for the values, pyarrow for the types) and every stage calls it on what it writes.
``check_metrics(stage, obj)`` does the same for ``reports/metrics/<stage>.json`` with pydantic
models, and ``check_headline(stage, obj)`` for the short ``reports/headline/<stage>.json``. A contract lists the columns and keys other stages read; producers may add more.
"""

from __future__ import annotations

from typing import Any, Literal

import pandas as pd
import pandera.pandas as pda
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, ValidationError

# Controlled vocabularies ---------------------------------------------------------------------
SOURCE_KINDS = ("published", "mlperf", "log")
PRECISIONS = ("bf16", "fp16", "fp8", "fp32", "tf32")
# Other spellings of those precisions (after lower-casing), accepted by the ingest and by the
# catalog's peak lookup alike.
PRECISION_ALIASES: dict[str, str] = {
    "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "single": "fp32",
    "float8": "fp8", "fp8_e4m3": "fp8", "e4m3": "fp8", "tensorfloat32": "tf32",
}
SCALINGS = ("strong", "weak", "single", "sweep", "unknown")

#: multiples of a series' largest measured N the fit stage predicts each law at (fits.parquet
#: ``*_at_<m>x_n_max``), read by the report's section on the user's own runs (issue 11: 4x, 16x)
MULTIPLES_OF_N_MAX = (4, 16)

# `ok` ran and was measured; `oom` / `error` ran out of memory or crashed (published sweeps keep
# them as runs); `aborted` / `no_run_stop` are MLPerf runs that did not reach a result.
STATUSES = ("ok", "oom", "error", "aborted", "no_run_stop")
# Where MLPerf power was measured: at the wall (AC) or after the power supplies (DC).
POWER_MEASUREMENTS = ("AC", "DC")
# Coarse strategy families, used to form series and to compare FSDP against model parallelism.
STRATEGY_FAMILIES = ("ddp", "fsdp", "tp", "pp", "tp_pp", "hybrid_fsdp", "3d", "unknown")
# y-metrics a series can be fitted on, in order of preference (ARCHITECTURE.md, fit stage).
# hardware_flops_per_s comes last: sources that report only HFU (Megatron-LM 2021) have no other.
Y_METRICS = ("model_flops_per_s", "tokens_per_s", "inverse_time_to_train_per_s",
             "hardware_flops_per_s")

# Published tables, format v1 (ARCHITECTURE.md): the columns in file order. The "one measure"
# columns (a run needs at least one) and the energy columns are named apart because the ingest
# and the step-log sidecars treat them apart. Used by the ingest, the sidecar reader and
# scripts/transcribe_reference.py.
PUBLISHED_MEASURES = ("tokens_per_s", "tokens_per_s_per_accelerator", "tflops_per_accelerator",
                      "mfu", "hfu", "step_time_s", "time_to_train_s")
PUBLISHED_ENERGY = ("power_w_per_accelerator", "energy_j_per_token")
PUBLISHED_COLUMNS = (
    "source", "citation", "model", "params_b", "active_params_b", "n_layers", "d_model", "seq_len",
    "accelerator", "n_accelerators", "global_batch_tokens", "micro_batch", "dp", "tp", "pp", "cp",
    "ep", "zero_stage", "strategy", "precision", *PUBLISHED_MEASURES, *PUBLISHED_ENERGY,
    "scaling", "series", "status", "derived", "notes",
)

_S, _F, _I, _B = pa.string(), pa.float64(), pa.int64(), pa.bool_()

# (name, type, meaning) in output order.
RUN_COLUMNS: tuple[tuple[str, pa.DataType, str], ...] = (
    ("run_id", _S, "stable hash of source and the identifying fields"),
    ("source", _S, "short id of the publication or input, e.g. megatron2021"),
    ("source_kind", _S, "published | mlperf | log"),
    ("citation", _S, "where in the source: 'arXiv:2104.04473 Table 1', a file path"),
    ("model", _S, "model name as published"),
    ("model_id", _S, "model catalog id when resolved"),
    ("params", _F, "total parameters (count)"),
    ("active_params", _F, "parameters active per token (count); = params for dense"),
    ("n_layers", _I, "transformer layers"),
    ("d_model", _I, "hidden size"),
    ("seq_len", _I, "tokens per sequence"),
    ("accelerator", _S, "catalog accelerator id"),
    ("accelerator_family", _S, "catalog family, e.g. H100, TPU-v5p"),
    ("n_accelerators", _I, "accelerator chips in the job"),
    ("accelerators_per_node", _I, "chips per node (scale-up domain when not stated otherwise)"),
    ("precision", _S, "bf16 | fp16 | fp8 | fp32 | tf32 as the source states it; when it states "
                      "none: the assumed default if a derived value used its peak (then listed "
                      "in `derived`), else null"),
    ("peak_flops_per_s_per_accelerator", _F, "catalog dense peak at `peak_precision` (FLOP/s)"),
    ("peak_precision", _S, "precision of the catalog peak: `precision`, or the chip's stand-in "
                           "(V100 bf16 -> fp16), or the assumed default when `precision` is null "
                           "(then listed in `derived`)"),
    ("flops_per_hbm_byte", _F, "peak FLOP/s over HBM bytes/s of the chip (derived, catalog)"),
    ("flops_per_scaleout_byte", _F, "peak FLOP/s over scale-out bytes/s per chip (derived)"),
    ("dp", _I, "data-parallel degree"),
    ("tp", _I, "tensor-parallel degree"),
    ("pp", _I, "pipeline-parallel degree"),
    ("cp", _I, "context-parallel degree"),
    ("ep", _I, "expert-parallel degree"),
    ("zero_stage", _I, "ZeRO stage; FSDP = 3"),
    ("micro_batch", _I, "sequences per microbatch"),
    ("global_batch_tokens", _F, "tokens per optimizer step"),
    ("strategy", _S, "strategy as published (free text)"),
    ("strategy_family", _S, "coarse family, see STRATEGY_FAMILIES"),
    ("tokens_per_s", _F, "whole-job training throughput (tokens/s)"),
    ("tokens_per_s_per_accelerator", _F, "tokens/s per chip"),
    ("model_flops_per_s", _F, "whole-job model FLOP/s (6N per token + attention, see derive)"),
    ("hardware_flops_per_s", _F, "whole-job hardware FLOP/s, recompute counted (HFU x peak)"),
    ("mfu", _F, "model FLOP utilization, fraction in (0, 1]"),
    ("hfu", _F, "hardware FLOP utilization (counts recompute), fraction in (0, 1]"),
    ("step_time_s", _F, "seconds per optimizer step"),
    ("time_to_train_s", _F, "MLPerf time-to-train: run_stop - run_start (s)"),
    ("inverse_time_to_train_per_s", _F, "1 / time_to_train_s, the MLPerf throughput proxy"),
    ("power_w_per_accelerator", _F, "measured power per chip (W): MLPerf node power (hosts "
                                    "included) / accelerators"),
    ("energy_j_per_token", _F, "energy per training token (J): energy_j / tokens trained"),
    ("peak_memory_bytes", _F, "measured peak memory per chip (B), where the source gives it"),
    ("energy_j", _F, "energy to train (J), MLPerf Training rules: nodes + interconnect"),
    ("energy_j_nodes", _F, "nodes' energy over the time to train (J), conversion eff. applied"),
    ("energy_j_interconnect", _F, "interconnect (switch) power estimate x time to train (J)"),
    ("power_measurement", _S, "AC | DC: where the MLPerf power was measured"),
    ("scaling", _S, "strong | weak | single | sweep | unknown"),
    ("series_id", _S, "scaling series this run belongs to (null: none)"),
    ("status", _S, "ok | oom | error | aborted | no_run_stop"),
    ("benchmark", _S, "MLPerf benchmark name (null elsewhere)"),
    ("mlperf_version", _S, "MLPerf round, e.g. v4.1"),
    ("system", _S, "MLPerf system name or cluster"),
    ("submitter", _S, "MLPerf submitter (null elsewhere)"),
    ("result_path", _S, "MLPerf result file within its submission (null elsewhere)"),
    ("olympic_score_s", _F, "MLPerf olympic score of the run's system (s)"),
    ("derived", _S, "';'-separated columns computed by the pipeline or at transcription"),
    ("notes", _S, "free text"),
    ("provenance", _S, "input file and line"),
)
RUNS_SCHEMA = pa.schema([pa.field(n, t) for n, t, _ in RUN_COLUMNS])
RUN_COLUMN_NAMES = tuple(n for n, _, _ in RUN_COLUMNS)

REJECT_COLUMNS = (("source", _S), ("path", _S), ("line", _I), ("record", _S), ("reason", _S))
REJECTS_SCHEMA = pa.schema([pa.field(n, t) for n, t in REJECT_COLUMNS])

SERIES_COLUMNS = (
    ("series_id", _S), ("source", _S), ("model", _S), ("accelerator", _S),
    ("precision", _S), ("strategy_family", _S), ("scaling", _S),
    ("n_points", _I), ("n_distinct", _I), ("n_min", _I), ("n_max", _I), ("y_metric", _S),
)
SERIES_SCHEMA = pa.schema([pa.field(n, t) for n, t in SERIES_COLUMNS])

# Per-step rows of training step logs (``steps.parquet``); parsers may add columns after these.
STEP_COLUMNS = (
    ("run_id", _S), ("path", _S), ("step", _I), ("step_time_s", _F), ("tokens_per_s", _F),
    ("format", _S), ("segment", _I), ("rank", pa.int32()), ("line", _I),
    ("tokens_per_s_per_accelerator", _F), ("samples_per_s", _F), ("batch_samples", _F),
    ("loss", _F), ("tflops_per_accelerator", _F), ("mfu", _F), ("wall_s", _F),
    ("is_warmup", _B), ("is_nan_loss", _B), ("used", _B),
)
STEPS_SCHEMA = pa.schema([pa.field(n, t) for n, t in STEP_COLUMNS])


# -- value checks of runs.parquet (pandera) ----------------------------------------------------
# ``normalize`` rejects bad records one by one; this schema is the second line that checks the
# whole table before it is written. A failure here is a bug in the ingest code, not bad input,
# so the stage stops (``pandera.errors.SchemaErrors`` lists every failing check and row).

_REQUIRED = ("run_id", "source", "source_kind", "model", "params", "active_params", "accelerator",
             "n_accelerators", "strategy_family", "status", "provenance")
_VOCAB = {"source_kind": SOURCE_KINDS, "precision": PRECISIONS, "scaling": SCALINGS,
          "status": STATUSES, "strategy_family": STRATEGY_FAMILIES,
          "power_measurement": POWER_MEASUREMENTS}
_FRACTIONS = ("mfu", "hfu")
_NON_NEGATIVE = ("zero_stage",)
# The switches' estimate may be 0 W (null when no switch log was submitted).
_ZERO_OK = ("energy_j_interconnect",)
_PANDAS_DTYPE = {"string": object, "double": "float64", "int64": "Int64", "bool": "boolean"}


def pandas_dtype(arrow_type: object) -> object:
    """pandas dtype used for a run column of the given pyarrow type (nullable ints)."""
    return _PANDAS_DTYPE[str(arrow_type)]


def _run_column(name: str, arrow_type: object) -> pda.Column:
    kind = str(arrow_type)
    checks: list[pda.Check] = []
    if name in _VOCAB:
        checks.append(pda.Check.isin(list(_VOCAB[name])))
    elif name in _FRACTIONS:
        checks += [pda.Check.gt(0.0), pda.Check.le(1.0)]
    elif name in _NON_NEGATIVE:
        checks.append(pda.Check.in_range(0, 3))
    elif name in _ZERO_OK:
        checks.append(pda.Check.ge(0))
    elif kind in ("double", "int64"):
        # Every other number of a run is a positive count or a positive SI quantity.
        checks.append(pda.Check.gt(0))
    if name == "run_id":
        checks.append(pda.Check.str_matches(r"^[0-9a-f]{16}$"))
    dtype = {"string": str, "double": float, "int64": "Int64"}[kind]
    return pda.Column(dtype, checks=checks, nullable=name not in _REQUIRED,
                      unique=name == "run_id", coerce=False)


def _ok_runs_have_a_measure(df: pd.DataFrame) -> pd.Series:
    measures = ["tokens_per_s", "model_flops_per_s", "mfu", "hfu", "step_time_s",
                "time_to_train_s", *Y_METRICS]
    return (df["status"] != "ok") | df[list(dict.fromkeys(measures))].notna().any(axis=1)


def _series_runs_have_y(df: pd.DataFrame) -> pd.Series:
    return df["series_id"].isna() | df[list(Y_METRICS)].notna().any(axis=1)


RUNS_FRAME_SCHEMA = pda.DataFrameSchema(
    {name: _run_column(name, t) for name, t, _ in RUN_COLUMNS},
    checks=[pda.Check(_ok_runs_have_a_measure, error="an ok run has no measure"),
            pda.Check(_series_runs_have_y, error="a run in a series has no y metric"),
            pda.Check(lambda df: df["active_params"] <= df["params"],
                      error="active_params > params")],
    strict=True, ordered=True,
)


def validate_runs(df: pd.DataFrame) -> pd.DataFrame:
    """Check ``df`` against ``RUNS_FRAME_SCHEMA``, reporting every failure at once."""
    return RUNS_FRAME_SCHEMA.validate(df, lazy=True)


# -- the other Parquet outputs -----------------------------------------------------------------
# Components a ceiling can be bound by (bounds.binding, frontier.binding).
COMPONENTS = ("compute", "hbm", "net_tp", "net_dp", "net_pp", "net_ep", "bubble", "latency")
LAW_NAMES = ("power", "amdahl", "usl", "comm")
_NULL = pa.null()

_ID = dict(checks=[], nullable=False)
_POS = dict(checks=[pda.Check.gt(0)], nullable=True)
_NONNEG = dict(checks=[pda.Check.ge(0)], nullable=True)
_UNIT = dict(checks=[pda.Check.gt(0), pda.Check.le(1)], nullable=True)
# shares are differences of floats: allow rounding noise
_UNIT_CLOSED = dict(checks=[pda.Check.ge(0), pda.Check.le(1)], nullable=True)
_SHARE = dict(checks=[pda.Check.ge(-1e-9), pda.Check.le(1 + 1e-9)], nullable=True)
_ANY = dict(checks=[], nullable=True)


def _c(name: str, arrow: pa.DataType, meaning: str, **rule: Any) -> tuple:
    return (name, arrow, meaning, rule or _ANY)


_TIMES = tuple(_c(f"t_{k}_s", _F, f"time of the {k} component per step (s)", **_NONNEG)
               for k in COMPONENTS)
_SHARES = tuple(_c(f"share_{k}", _F, f"share of the measured step time: {k}", **_SHARE)
                for k in (*COMPONENTS, "other", "unexplained"))
# Predicted peak memory per accelerator (pipeline/theory/memory.py) and whether it fits in HBM.
_MEMORY = (
    _c("memory_bytes_per_accelerator", _F, "predicted peak memory per chip (B)", **_POS),
    _c("fits_memory", _B, "predicted peak memory <= the chip's HBM capacity (catalog)"),
)
_SERIES_KEYS = (
    _c("series_id", _S, "scaling series", **_ID), _c("source", _S, "source id"),
    _c("model", _S, "model"), _c("scaling", _S, "strong | weak | ..."),
    _c("strategy_family", _S, "coarse strategy"), _c("accelerator", _S, "catalog id"),
    _c("accelerator_family", _S, "catalog family"), _c("y_metric", _S, "fitted throughput"),
    _c("law", _S, "law of the curve (null: none fitted)",
       checks=[pda.Check.isin(list(LAW_NAMES))], nullable=True),
    _c("law_is_default", _B, "the law is the fit stage's default"),
)

OUTPUT_COLUMNS: dict[str, tuple[tuple, ...]] = {
    "fits.parquet": (
        _c("series_id", _S, "scaling series", **_ID), _c("source", _S, "source id"),
        _c("scaling", _S, "strong | weak | ..."),
        _c("law", _S, "law name", checks=[pda.Check.isin(list(LAW_NAMES))], nullable=False),
        _c("y_metric", _S, "fitted throughput column"),
        _c("scale", _S, "least-squares scale", checks=[pda.Check.isin(["log", "linear"])],
           nullable=False),
        _c("params", _S, "JSON name -> value"), _c("stderr", _S, "JSON name -> standard error"),
        _c("ci_low", _S, "JSON name -> lower interval bound"),
        _c("ci_high", _S, "JSON name -> upper interval bound"),
        _c("aicc", _F, "corrected Akaike criterion"), _c("bic", _F, "Bayesian criterion"),
        _c("r2", _F, "R^2 on the fitting scale"), _c("delta_aicc", _F, "AICc - best AICc"),
        _c("n_points", _I, "runs fitted", **_POS), _c("n_distinct", _I, "distinct N", **_POS),
        _c("n_min", _I, "smallest N", **_POS), _c("n_max", _I, "largest N", **_POS),
        _c("converged", _B, "the optimiser converged"), _c("note", _S, "why a fit is doubtful"),
        _c("n_peak", _F, "N of peak throughput", **_NONNEG),
        _c("n_at_threshold", _F, "N where efficiency falls to the threshold", **_POS),
        _c("predicted_at_n_min", _F, "the law's throughput at the smallest N"),
        *(_c(f"{k}_at_{m}x_n_max", _F, f"{what} at {m}x the largest N (fit.interval)")
          for m in MULTIPLES_OF_N_MAX for k, what in (("predicted", "the law's throughput"),
                                           ("pi_low", "prediction interval, low"),
                                           ("pi_high", "prediction interval, high"))),
        _c("efficiency_at_n_max", _F, "measured efficiency at the largest N", **_POS),
    ),
    "extrapolation.parquet": (
        _c("series_id", _S, "scaling series", **_ID), _c("source", _S, "source id"),
        _c("law", _S, "law name", checks=[pda.Check.isin(list(LAW_NAMES))], nullable=False),
        _c("k", _I, "largest points held out", checks=[pda.Check.ge(1)], nullable=False),
        _c("n_train_max", _I, "largest N fitted", **_POS),
        _c("n_target", _I, "N predicted", **_POS), _c("y_metric", _S, "throughput column"),
        _c("actual", _F, "measured value", **_POS), _c("predicted", _F, "law's prediction"),
        _c("pi_low", _F, "prediction interval, low"), _c("pi_high", _F, "prediction interval, high"),
        _c("ape", _F, "|predicted - actual| / actual", **_NONNEG),
        _c("covered", _B, "actual inside the interval"),
    ),
    "cross_series.parquet": (
        _c("model", _S, "cross-series regression", **_ID), _c("term", _S, "term", **_ID),
        _c("estimate", _F, "coefficient"), _c("stderr", _F, "standard error", **_NONNEG),
        _c("ci_low", _F, "interval, low"), _c("ci_high", _F, "interval, high"),
        _c("n_obs", _I, "observations", **_POS),
    ),
    "bounds.parquet": (
        _c("run_id", _S, "run", **_ID),
        _c("bound_mfu", _F, "the theory's utilization ceiling for the run", **_UNIT),
        *_TIMES,
        _c("binding", _S, "limiting component",
           checks=[pda.Check.isin(list(COMPONENTS))], nullable=True),
        _c("assumed", _S, "fields the model had to assume"),
        _c("t_step_s", _F, "the theory's step time (s)", **_POS),
        _c("measured_mfu", _F, "the run's MFU (or HFU) compared", **_UNIT),
        _c("exceeds_bound", _B, "measured above the ceiling by more than the tolerance"),
        *_MEMORY,
    ),
    "frontier.parquet": (
        _c("scenario", _S, "scenario name", **_ID),
        _c("training_flop", _F, "training compute C", checks=[pda.Check.gt(0)], nullable=False),
        _c("utilization", _F, "best utilization at C", **_SHARE),
        _c("n_accelerators", _I, "accelerators of the best layout", **_POS),
        _c("dp", _I, "data-parallel degree", **_POS), _c("tp", _I, "tensor-parallel degree", **_POS),
        _c("pp", _I, "pipeline degree", **_POS), _c("ep", _I, "expert degree", **_POS),
        _c("microbatches", _I, "microbatches per step", **_POS),
        _c("global_batch_tokens", _F, "tokens per step", **_POS),
        _c("binding", _S, "limiting component",
           checks=[pda.Check.isin(list(COMPONENTS))], nullable=True),
        _c("feasible", _B, "a layout finishes within the duration"),
        *_MEMORY,
    ),
    "comparison.parquet": (
        _c("run_id", _S, "run", **_ID), _c("source", _S, "source id"),
        _c("n_accelerators", _I, "chips", **_POS), _c("series_id", _S, "series"),
        _c("mfu", _F, "measured MFU", **_UNIT), _c("bound_mfu", _F, "ceiling", **_UNIT),
        _c("fraction_of_ceiling", _F, "measured / ceiling", **_POS),
        *_SHARES,
        _c("training_flop", _F, "compute placed on the frontier", **_POS),
        _c("training_flop_basis", _S, "how training_flop was obtained"),
    ),
    "comparison_curves.parquet": (
        *_SERIES_KEYS,
        _c("kind", _S, "curve | measured | target",
           checks=[pda.Check.isin(["curve", "measured", "target"])], nullable=False),
        _c("n_accelerators", _F, "N", checks=[pda.Check.gt(0)], nullable=False),
        _c("y", _F, "measured throughput"), _c("efficiency", _F, "measured efficiency", **_POS),
        _c("efficiency_theory", _F, "the ceiling's efficiency", **_POS),
        _c("predicted", _F, "law's throughput"), _c("pi_low", _F, "interval, low"),
        _c("pi_high", _F, "interval, high"), _c("efficiency_law", _F, "law's efficiency"),
        _c("predictor", _S, "what predicted the row: the law, or selected:<rule> on target rows "
                            "(calibrate's selected_targets.parquet)"),
    ),
    "comparison_series.parquet": (
        *_SERIES_KEYS,
        _c("n_min", _F, "smallest N", **_POS), _c("n_max", _F, "largest N", **_POS),
        _c("n_distinct", _I, "distinct N", **_POS),
        _c("efficiency_at_n_max", _F, "measured efficiency at the largest N", **_POS),
        _c("theory_efficiency_at_n_max", _F, "the ceiling's efficiency there", **_POS),
        _c("n_at_threshold_law", _F, "N at the threshold efficiency, by the law", **_POS),
        _c("n_at_threshold_theory", _F, "N at the threshold efficiency, by the ceiling", **_POS),
        _c("n_at_threshold_measured", _F, "N at the threshold efficiency, measured", **_POS),
        _c("note", _S, "why a series lacks a curve"),
    ),
}
OUTPUT_COLUMNS["fit_curves.parquet"] = (
    _c("series_id", _S, "scaling series", **_ID),
    _c("law", _S, "law name", checks=[pda.Check.isin(list(LAW_NAMES))], nullable=False),
    _c("scale", _S, "least-squares scale"),
    _c("n_accelerators", _F, "N of the extrapolation grid (measures.extrapolation_grid)",
       checks=[pda.Check.gt(0)], nullable=False),
    _c("predicted", _F, "the law's throughput at N"),
    _c("pi_low", _F, "prediction interval (fit.interval), low"),
    _c("pi_high", _F, "prediction interval, high"),
)
OUTPUT_COLUMNS["theory_curves.parquet"] = (
    _c("series_id", _S, "scaling series", **_ID),
    _c("n_accelerators", _F, "N of the extrapolation grid", checks=[pda.Check.gt(0)],
       nullable=False),
    _c("bound_mfu", _F, "the ceiling of the series' configuration moved to N", **_UNIT),
)
# One row per MLPerf power measurement (``power.parquet``, ingest;
# pipeline/ingest/sources/mlperf/power.py): a run measured at the wall (AC) and after the power
# supplies (DC) has two rows and one run in runs.parquet (which carries the AC figures, or the
# only ones). Energies follow the MLPerf Training rules (mlperf_logging's result summarizer).
OUTPUT_COLUMNS["power.parquet"] = (
    _c("run_id", _S, "run in runs.parquet that the measurement belongs to", **_ID),
    _c("source", _S, "source id of that run"),
    _c("result_path", _S, "MLPerf result file the measurement was read with"),
    _c("model", _S, "model"), _c("benchmark", _S, "MLPerf benchmark"),
    _c("accelerator", _S, "catalog id"),
    _c("n_accelerators", _I, "accelerators of the run", **_POS),
    _c("system", _S, "MLPerf system"), _c("submitter", _S, "MLPerf submitter as logged"),
    _c("mlperf_version", _S, "MLPerf round"),
    _c("power_measurement", _S, "AC | DC: where the power was measured",
       checks=[pda.Check.isin(list(POWER_MEASUREMENTS))], nullable=True),
    _c("status", _S, "ok, or the '; '-separated reasons (code: detail) it was not used",
       checks=[pda.Check.str_length(min_value=1)], nullable=False),
    _c("used_in_runs", _B, "its energy is the run's in runs.parquet", nullable=False),
    _c("n_node_files", _I, "node power logs read", **_NONNEG),
    _c("n_switch_files", _I, "interconnect (switch) power logs read", **_NONNEG),
    _c("time_to_train_s", _F, "the run's time to train (s)", **_POS),
    _c("tokens", _F, "tokens trained: samples x sequence length", **_POS),
    _c("energy_j", _F, "energy to train (J): nodes + interconnect", **_POS),
    _c("energy_j_nodes", _F, "nodes' mean power x time to train x conversion efficiency (J)",
       **_POS),
    _c("energy_j_interconnect", _F, "switch power estimate x time to train (J); null "
                                    "without switch logs", **_NONNEG),
    _c("power_w_per_accelerator", _F, "node power (hosts included) / accelerators (W)", **_POS),
    _c("energy_j_per_token", _F, "energy_j / tokens (J)", **_POS),
    _c("power_folder", _S, "power/<result> folder, project-relative"),
    _c("notes", _S, "what was decided on the way (degenerate windows, dropouts)"),
)
_ENERGY_SERIES_KEYS = (
    _c("series_id", _S, "energy series: energy|model|accelerator|AC/DC|submitter|round", **_ID),
    _c("model", _S, "model"), _c("accelerator", _S, "catalog id"),
    _c("power_measurement", _S, "AC | DC", checks=[pda.Check.isin(list(POWER_MEASUREMENTS))],
       nullable=False),
)
ENERGY_QUANTITIES = ("energy_j_per_token", "power_w_per_accelerator", "energy_j")
# Energy laws per series and quantity (``energy_fits.parquet``, fit; pipeline/laws/energy.py).
OUTPUT_COLUMNS["energy_fits.parquet"] = (
    *_ENERGY_SERIES_KEYS,
    _c("submitter", _S, "submitter family (the -ac-power/-dc-power suffix dropped)"),
    _c("mlperf_version", _S, "MLPerf round"),
    _c("quantity", _S, "the fitted quantity", checks=[pda.Check.isin(list(ENERGY_QUANTITIES))],
       nullable=False),
    _c("n_runs", _I, "measurements fitted", **_NONNEG),
    _c("n_distinct", _I, "distinct N", **_NONNEG),
    _c("n_min", _I, "smallest N", **_POS), _c("n_max", _I, "largest N", **_POS),
    _c("b", _F, "exponent of y = a N^b"), _c("b_low", _F, "interval of b, low"),
    _c("b_high", _F, "interval of b, high"),
    _c("doubling_factor", _F, "2^b: y's factor per doubling of N", **_POS),
    _c("doubling_low", _F, "2^b_low", **_POS), _c("doubling_high", _F, "2^b_high", **_POS),
    _c("r2", _F, "R^2 on log y"),
    _c("lack_of_fit_p", _F, "p of the lack-of-fit F test", **_UNIT_CLOSED),
    _c("converged", _B, "fitted", nullable=False),
    _c("note", _S, "why not fitted, or why doubtful"),
)
# Per (energy series, N): the runs' median and range (``energy_points.parquet``, fit).
OUTPUT_COLUMNS["energy_points.parquet"] = (
    *_ENERGY_SERIES_KEYS,
    _c("n_accelerators", _I, "N", checks=[pda.Check.gt(0)], nullable=False),
    _c("n_runs", _I, "measurements at N", checks=[pda.Check.gt(0)], nullable=False),
    *(_c(f"{q}_{stat}", _F, f"{stat} of {q} over the runs", **_POS)
      for q in ENERGY_QUANTITIES[:2] for stat in ("median", "min", "max")),
    _c("energy_j_median", _F, "median energy to train (J)", **_POS),
    _c("time_to_train_s_median", _F, "median time to train (s)", **_POS),
    _c("interconnect_share", _F, "median energy_j_interconnect / energy_j", **_SHARE),
)
# Power and energy per token along the frontier (``frontier_energy.parquet``, theory;
# pipeline/theory/energy.py): ``_tdp`` on the catalog's TDP, ``_measured`` on the MLPerf node
# power per accelerator; null where the frontier is infeasible or no power figure exists.
OUTPUT_COLUMNS["frontier_energy.parquet"] = (
    _c("scenario", _S, "scenario name", **_ID),
    _c("training_flop", _F, "training compute C", checks=[pda.Check.gt(0)], nullable=False),
    _c("n_accelerators", _I, "accelerators of the best layout", **_POS),
    _c("feasible", _B, "a layout finishes within the duration"),
    _c("power_mw_tdp", _F, "N x TDP (MW)", **_POS),
    _c("power_mw_measured", _F, "N x measured node power per accelerator (MW)", **_POS),
    _c("energy_j_per_token_tdp", _F, "N x TDP x train time / tokens (J)", **_POS),
    _c("energy_j_per_token_measured", _F, "the same on the measured power (J)", **_POS),
)


# -- calibrate stage (docs/theory.md §10) ------------------------------------------------------
# Components of calibrated.parquet's shares of the step time (share_<component>, summing to 1).
CALIBRATED_SHARES = ("compute", "hbm", "net_tp", "net_dp", "net_pp", "net_ep", "bubble",
                     "latency", "overhead", "residual")
CALIBRATION_GROUPS = ("efficiency", "efficiency_fixed", "source_effect", "residual_sd",
                      "between_source_sd")
# predictors of predictions.parquet: the naive rules, the calibrated model, the recommended
# rule, the hardware family's median MFU (source holdout) and the fit stage's laws
PREDICTORS = ("naive_linear", "naive_loglinear", "calibrated", "selected", "family_median",
              *LAW_NAMES)
_HOLDOUT = r"^(largest_k[0-9]+|source)$"
OUTPUT_COLUMNS["calibration.parquet"] = (
    _c("parameter", _S, "term of the model, or source (source_effect)", **_ID),
    _c("group", _S, "efficiency | efficiency_fixed | source_effect | residual_sd | "
                    "between_source_sd", checks=[pda.Check.isin(list(CALIBRATION_GROUPS))],
       nullable=False),
    _c("form", _S, "model form chosen (calibrate.forms)", **_ID),
    _c("estimate", _F, "estimate"), _c("stderr", _F, "standard error", **_NONNEG),
    _c("ci_low", _F, "confidence interval (fit.interval), low"),
    _c("ci_high", _F, "confidence interval, high"),
    _c("n_runs", _I, "runs where the term is non-zero", **_NONNEG),
)
OUTPUT_COLUMNS["calibrated_forms.parquet"] = (
    _c("form", _S, "candidate form (calibrate.forms)", **_ID),
    _c("terms", _S, "','-separated terms fitted"), _c("dropped", _S, "terms no run exercises"),
    _c("n_params", _I, "estimated parameters", **_POS), _c("loglik", _F, "log-likelihood"),
    _c("aicc", _F, "corrected Akaike criterion"), _c("bic", _F, "Bayesian criterion"),
    _c("median_ape", _F, "in-sample median APE of MFU", **_NONNEG),
)
OUTPUT_COLUMNS["calibrated.parquet"] = (
    _c("run_id", _S, "run", **_ID), _c("source", _S, "source id", **_ID),
    _c("series_id", _S, "series"), _c("n_accelerators", _F, "N", **_POS),
    _c("measured_mfu", _F, "measured MFU (null: none measured)", **_UNIT),
    _c("predicted_mfu", _F, "calibrated in-sample MFU", **_POS),
    _c("pi_low", _F, "95% prediction interval, low", **_NONNEG),
    _c("pi_high", _F, "95% prediction interval, high", **_POS),
    # the arithmetic's share can exceed 1 and the residual be negative where the model predicts
    # a longer step than measured; the shares still sum to 1 (frame check)
    *(_c(f"share_{k}", _F, f"calibrated share of the step time: {k}", **_NONNEG)
      for k in CALIBRATED_SHARES[:-1]),
    _c("share_residual", _F, "share the calibrated model leaves unexplained"),
    _c("ape", _F, "|predicted - measured| / measured", **_NONNEG),
    _c("covered", _B, "measured inside the interval"),
)
OUTPUT_COLUMNS["predictions.parquet"] = (
    _c("run_id", _S, "held-out run"), _c("series_id", _S, "series (null: source holdout)"),
    _c("source", _S, "source id", **_ID),
    _c("holdout", _S, "largest_k<k> | source", checks=[pda.Check.str_matches(_HOLDOUT)],
       nullable=False),
    _c("predictor", _S, "predictor", checks=[pda.Check.isin(list(PREDICTORS))], nullable=False),
    _c("metric", _S, "predicted quantity: the series' y metric, or mfu", **_ID),
    _c("n_train_max", _F, "largest N trained on", **_POS),
    _c("n_target", _F, "N predicted", **_POS), _c("actual", _F, "measured value", **_POS),
    _c("predicted", _F, "prediction"), _c("pi_low", _F, "95% interval, low"),
    _c("pi_high", _F, "95% interval, high"),
    _c("ape", _F, "|predicted - actual| / actual", **_NONNEG),
    _c("covered", _B, "actual inside the interval"),
    _c("interval_method", _S, "conformal | analytic | law | '' (no interval: family_median)",
       checks=[pda.Check.isin(["conformal", "analytic", "law", ""])], nullable=True),
    _c("assumed_layout", _B, "the theory assumed the run's layout (MLPerf)"),
)
OUTPUT_COLUMNS["calibrated_frontier.parquet"] = OUTPUT_COLUMNS["frontier.parquet"]
OUTPUT_COLUMNS["selected_targets.parquet"] = (
    _c("series_id", _S, "series", **_ID), _c("source", _S, "source id"),
    _c("n_accelerators", _F, "target N (compare.extrapolate_n)", checks=[pda.Check.gt(0)],
       nullable=False),
    _c("y_metric", _S, "throughput column"),
    _c("predictor", _S, "selected:<rule>",
       checks=[pda.Check.str_matches(r"^selected:(calibrated|naive_linear|naive_loglinear)$")],
       nullable=False),
    _c("predicted", _F, "predicted throughput", **_POS),
    _c("pi_low", _F, "95% interval, low", **_NONNEG), _c("pi_high", _F, "95% interval, high",
                                                          **_POS),
    _c("assumed_layout", _B, "no stated layout: naive_linear"),
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

OUTPUT_COLUMNS["runs.parquet"] = tuple((n, t, m, _ANY) for n, t, m in RUN_COLUMNS)
OUTPUT_COLUMNS["rejects.parquet"] = tuple((n, t, "", _ANY) for n, t in REJECT_COLUMNS)
OUTPUT_COLUMNS["series.parquet"] = tuple((n, t, "", _ANY) for n, t in SERIES_COLUMNS)
OUTPUT_COLUMNS["steps.parquet"] = tuple((n, t, "", _ANY) for n, t in STEP_COLUMNS)

POWER_COLUMNS = tuple((n, t) for n, t, _, _ in OUTPUT_COLUMNS["power.parquet"])
POWER_SCHEMA = pa.schema([pa.field(n, t) for n, t in POWER_COLUMNS])

OUTPUT_SCHEMAS: dict[str, pda.DataFrameSchema] = {
    name: pda.DataFrameSchema({n: pda.Column(None, coerce=False, **rule)
                               for n, _, _, rule in cols}, strict=False,
                        checks=FRAME_CHECKS.get(name, []))
    for name, cols in OUTPUT_COLUMNS.items()}


def empty_frame(name: str) -> pd.DataFrame:
    """A frame with no rows and the contract columns of output ``name`` (typed)."""
    return pa.schema([pa.field(n, t) for n, t, _, _ in OUTPUT_COLUMNS[name]]).empty_table() \
        .to_pandas()


def output_column_names(name: str) -> list[str]:
    """The contract columns of output ``name``, in order."""
    return [n for n, _, _, _ in OUTPUT_COLUMNS[name]]


class ContractError(ValueError):
    """A stage's output breaks its contract: a bug in the stage, not bad input."""


def check_output(name: str, frame: pd.DataFrame) -> pd.DataFrame:
    """Validate ``frame`` against the contract of output ``name`` (e.g. ``"fits.parquet"``):
    every contract column present with its pyarrow type (or all null), every value check
    passing. Returns ``frame`` unchanged; raises ContractError listing what failed."""
    try:
        OUTPUT_SCHEMAS[name].validate(frame, lazy=True)
    except pda.errors.SchemaErrors as exc:
        cases = exc.failure_cases
        parts = [f"column {col!r} fails {check} ({len(g)} rows, e.g. {g['failure_case'].iloc[0]!r})"
                 for (col, check), g in cases.groupby(["column", "check"], dropna=False, sort=True)]
        raise ContractError(f"{name}: " + "; ".join(parts)[:2000]) from None
    types = pa.Schema.from_pandas(frame, preserve_index=False)
    for col, arrow, _, _ in OUTPUT_COLUMNS[name]:
        got = types.field(col).type
        if got != arrow and got != _NULL and not (frame[col].isna().all()):
            raise ContractError(f"{name}: column {col!r} is {got}, the contract says {arrow}")
    return frame


# -- metrics JSONs (pydantic) ------------------------------------------------------------------
class _Metrics(BaseModel):
    # the keys other stages and the report read; a stage may write more
    model_config = ConfigDict(extra="allow")


class PowerIngestMetrics(_Metrics):
    """``ingest.json["power"]``: MLPerf power measurements read, used, and not used by code."""
    measurements: int
    ok: int
    runs_with_energy: int
    not_used_by_code: dict[str, int]


class LogsWithoutSeries(_Metrics):
    """Step logs the ingest could put in no series with another N (ingest.json)."""
    count: int = Field(ge=0)
    by_reason: dict[str, int]
    logs: list[dict[str, Any]]


class IngestMetrics(_Metrics):
    totals: dict[str, int]
    sources: dict[str, Any]
    rejects_by_code: dict[str, int]
    runs_by_source_kind: dict[str, int]
    runs_by_accelerator_family: dict[str, int]
    n_series: int
    runs_in_series: int
    logs_without_series: LogsWithoutSeries
    power: PowerIngestMetrics | None = None


class EnergyDoubling(_Metrics):
    """``fit.json["energy"]["cross_series"][quantity]``: the shared slope across energy series
    as a factor per doubling of N, with intervals from the runs and from the per-N means
    (pipeline/laws/energy.py); without two distinct N only ``note`` says why."""
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


class EnergyFitMetrics(_Metrics):
    """``fit.json["energy"]``: the energy laws on power.parquet."""
    measurements: int
    series: int
    series_fitted: int
    cross_series: dict[Literal[ENERGY_QUANTITIES], EnergyDoubling]  # type: ignore[valid-type]


class FitMetrics(_Metrics):
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


class ScenarioMetrics(_Metrics):
    knee_flop: float | None
    wall_flop: float | None
    plateau_utilization: float | None
    knee_utilization: float | None
    wall_beyond_grid: bool
    accelerator: str
    precision: str


class BoundsMetrics(_Metrics):
    runs: int
    with_bound: int
    without_bound: int
    exceeding_bound: int
    median_fraction_of_bound: float | None
    binding_counts: dict[str, int]


class CompareMetrics(_Metrics):
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


class EnergyAtPoint(_Metrics):
    """The frontier's draw at a knee or wall: null where the frontier has no such point or no
    power figure exists."""
    training_flop: float | None
    n_accelerators: float | None
    power_mw: float | None
    energy_gwh: float | None


class ScenarioEnergy(_Metrics):
    """``theory.json["_energy"]["scenarios"][name]`` (pipeline/theory/energy.py)."""
    accelerator: str
    power_w_per_accelerator: float | None
    power_basis: str
    tdp_w: float | None
    measured_w: float | None
    duration_days: float
    knee: EnergyAtPoint
    wall: EnergyAtPoint
    knee_tdp: EnergyAtPoint
    wall_tdp: EnergyAtPoint


class TheoryEnergyMetrics(_Metrics):
    """``theory.json["_energy"]``: energy at the frontier per scenario."""
    duration_days: float
    scenarios: dict[str, ScenarioEnergy]


class CalibratedScenarioMetrics(_Metrics):
    knee_flop_calibrated: float | None
    knee_flop_calibrated_ci: list[float | None]
    wall_flop_calibrated: float | None
    wall_flop_calibrated_ci: list[float | None]
    knee_flop: float | None
    wall_flop: float | None
    plateau_at_grid_start: bool
    wall_beyond_grid_calibrated: bool


class CalibrateInSample(_Metrics):
    n: int
    median_ape: float | None
    coverage: float | None
    by_source: dict[str, dict[str, float | int | None]]


class CalibrateMetrics(_Metrics):
    form: str
    forms: list[dict[str, Any]]
    fit_runs: int
    fit_runs_by_source: dict[str, int]
    stderr_kind: str
    sigma_u: float | None
    parameters: dict[str, dict[str, float | None]]
    in_sample: CalibrateInSample
    predictors: list[dict[str, Any]]
    targets: dict[str, Any]
    frontier: dict[str, CalibratedScenarioMetrics]
    selected_rule: dict[str, str]
    interval_method: dict[str, str]


def _theory_metrics(obj: dict[str, Any]) -> None:
    BoundsMetrics.model_validate(obj["_bounds"])
    if "_energy" in obj:
        TheoryEnergyMetrics.model_validate(obj["_energy"])
    for name, node in obj.items():
        if not name.startswith("_"):
            ScenarioMetrics.model_validate(node)


_METRICS = {"ingest": IngestMetrics.model_validate, "fit": FitMetrics.model_validate,
            "theory": _theory_metrics, "compare": CompareMetrics.model_validate,
            "calibrate": CalibrateMetrics.model_validate}


# -- headline metrics (reports/headline/<stage>.json: what `dvc metrics show` prints) -----------
class _Headline(BaseModel):
    # a headline is short by design (pipeline/headline.py): no key beyond these
    model_config = ConfigDict(extra="forbid", strict=True)


class IngestHeadline(_Headline):
    runs: int = Field(ge=0)
    rejects: int = Field(ge=0)
    series: int = Field(ge=0)


class FitHeadline(_Headline):
    fitted: int | None = Field(ge=0)
    law: str | None
    heldout_ape: float | None = Field(ge=0)
    # energy per token, factor per doubling of N (cross-series, fit.json "energy")
    e_tok_x2: float | None = Field(gt=0)


class TheoryHeadline(_Headline):
    knee_flop: float | None = Field(gt=0)
    wall_flop: float | None = Field(gt=0)


class CompareHeadline(_Headline):
    eff_at_n_max: float | None = Field(gt=0)
    n_at_threshold: float | None = Field(gt=0)


class CalibrateHeadline(_Headline):
    # the `selected` predictor in the largest_k1 holdout: median APE and 95% coverage
    sel_ape: float | None = Field(ge=0)
    sel_cov: float | None = Field(ge=0, le=1)


HEADLINES = {"ingest": IngestHeadline, "fit": FitHeadline, "theory": TheoryHeadline,
             "compare": CompareHeadline, "calibrate": CalibrateHeadline}


def check_headline(stage: str, obj: dict[str, Any]) -> dict[str, Any]:
    """Validate a stage's headline dict against its model; returns it unchanged."""
    try:
        HEADLINES[stage].model_validate(obj)
    except (ValidationError, KeyError) as exc:
        raise ContractError(f"reports/headline/{stage}.json: {str(exc)[:2000]}") from None
    return obj


def check_metrics(stage: str, obj: dict[str, Any]) -> dict[str, Any]:
    """Validate a stage's metrics dict against its model; returns it unchanged."""
    try:
        _METRICS[stage](obj)
    except (ValidationError, KeyError) as exc:
        raise ContractError(f"reports/metrics/{stage}.json: {str(exc)[:2000]}") from None
    return obj
