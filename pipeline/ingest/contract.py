"""The ingest stage's contracts: its input format (published tables, format v1) and its outputs.

``runs.parquet`` follows ``RUNS_SCHEMA`` exactly (column order included). Units are SI and sit in
the column name (``_s``, ``_w``, ``_per_s``); counts are plain numbers (``params`` is a count of
parameters, not billions). ``RUNS_FRAME_SCHEMA`` checks the values of the whole table before the
stage writes it; ``rejects``, ``series``, ``steps`` and ``power`` are checked by their columns
(``OUTPUTS``, see pipeline/contracts.py). The format of the published tables is documented in
data/raw/published/README.md and docs/architecture.md.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pandera.pandas as pda
import pyarrow as pa
from pydantic import Field

from pipeline.contracts import (ANY, ID, NONNEG, POS, B, F, Headline, I, Metrics, S, Stage,
                                arrow_schema, col)
from pipeline.vocab import (POWER_MEASUREMENTS, PRECISIONS, RECOMPUTE_MODES, SCALINGS,
                            SCALINGS_STATED, SOURCE_KINDS, STATUSES, STRATEGY_FAMILIES,
                            Y_METRICS)

# Published tables, format v1: the columns in file order. The "one measure"
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
# Values a published table may state (lower-cased) for ``scaling`` and ``status``: the ingest
# infers ``unknown`` itself, and ``missing_file`` marks a result whose log the source lacks (the
# record becomes a reject).
PUBLISHED_SCALINGS = SCALINGS_STATED
PUBLISHED_STATUSES = (*STATUSES, "missing_file")

# (name, type, meaning) in output order.
RUN_COLUMNS: tuple[tuple[str, pa.DataType, str], ...] = (
    ("run_id", S, "stable hash of source and the identifying fields"),
    ("source", S, "short id of the publication or input, e.g. megatron2021"),
    ("source_kind", S, "published | mlperf | log"),
    ("citation", S, "where in the source: 'arXiv:2104.04473 Table 1', a file path"),
    ("model", S, "model name as published"),
    ("model_id", S, "model catalog id when resolved"),
    ("params", F, "total parameters (count)"),
    ("active_params", F, "parameters active per token (count); = params for dense"),
    ("n_experts", I, "MoE routed experts (null: dense, or not stated and not in the catalog)"),
    ("top_k", I, "MoE routed experts per token"),
    ("capacity_factor", F, "MoE expert capacity factor of a token-dropping run (null: dropless "
                           "or not stated)"),
    ("n_layers", I, "transformer layers"),
    ("d_model", I, "hidden size"),
    ("seq_len", I, "tokens per sequence"),
    ("accelerator", S, "catalog accelerator id"),
    ("accelerator_family", S, "catalog family, e.g. H100, TPU-v5p"),
    ("n_accelerators", I, "accelerator chips in the job"),
    ("accelerators_per_node", I, "chips per node (scale-up domain when not stated otherwise)"),
    ("precision", S, "bf16 | fp16 | fp8 | fp32 | tf32 as the source states it; when it states "
                      "none: the assumed default if a derived value used its peak (then listed "
                      "in `derived`), else null"),
    ("peak_flops_per_s_per_accelerator", F, "catalog dense peak at `peak_precision` (FLOP/s)"),
    ("peak_precision", S, "precision of the catalog peak: `precision`, or the chip's stand-in "
                           "(V100 bf16 -> fp16), or the assumed default when `precision` is null "
                           "(then listed in `derived`)"),
    ("flops_per_hbm_byte", F, "peak FLOP/s over HBM bytes/s of the chip (derived, catalog)"),
    ("flops_per_scaleout_byte", F, "peak FLOP/s over scale-out bytes/s per chip (derived)"),
    ("dp", I, "data-parallel degree"),
    ("tp", I, "tensor-parallel degree"),
    ("pp", I, "pipeline-parallel degree"),
    ("cp", I, "context-parallel degree"),
    ("ep", I, "expert-parallel degree"),
    ("zero_stage", I, "ZeRO stage; FSDP = 3"),
    ("micro_batch", I, "sequences per microbatch"),
    ("recompute", S, "activation recomputation: none | selective | full (null: not stated)"),
    ("virtual_pipeline", I, "virtual pipeline chunks per stage, v >= 1 (null: not stated)"),
    ("pipeline_flushes", I, "pipeline schedules per optimizer step, each filling and draining "
                            "the pipeline: 1 where one schedule runs all of the step's "
                            "microbatches (Megatron), the gradient-accumulation steps where each "
                            "runs its own (torchtitan, NeMo Automodel) (null: not stated)"),
    ("sequence_parallel", B, "Megatron sequence parallelism on the TP group (null: not stated)"),
    ("fused_attention", B, "fused (flash) attention core (null: not stated)"),
    ("tp_comm_overlap", B, "TP collectives overlapped with compute (null: not stated)"),
    ("dp_comm_overlap", B, "data-parallel gradient traffic overlapped with the backward "
                           "(null: not stated)"),
    ("global_batch_tokens", F, "tokens per optimizer step"),
    ("strategy", S, "strategy as published (free text)"),
    ("strategy_family", S, "coarse family, see STRATEGY_FAMILIES"),
    ("framework", S, "software that ran the job as the source names it, e.g. 'nanotron', "
                     "'NeMo 24.09'; a step log's detected format (null: not stated)"),
    ("tokens_per_s", F, "whole-job training throughput (tokens/s)"),
    ("tokens_per_s_per_accelerator", F, "tokens/s per chip"),
    ("model_flops_per_s", F, "whole-job model FLOP/s on the project's count (6 N_act per token "
                             "+ 12 L d T attention, pipeline/ingest/core/flop_count.py) where "
                             "tokens/s is known, else the source's"),
    ("hardware_flops_per_s", F, "whole-job hardware FLOP/s, recompute counted (HFU x peak)"),
    ("mfu", F, "model FLOP utilization, fraction in (0, 1]: model_flops_per_s over n x the "
               "dense peak of the run's precision"),
    ("mfu_source_count", F, "the MFU on the source's own FLOP count: as printed, or its "
                            "TFLOP/s over the same peak (null: the source gives no FLOP figure)"),
    ("hfu", F, "hardware FLOP utilization (counts recompute), fraction in (0, 1]"),
    ("step_time_s", F, "seconds per optimizer step"),
    ("time_to_train_s", F, "MLPerf time-to-train: run_stop - run_start (s)"),
    ("inverse_time_to_train_per_s", F, "1 / time_to_train_s, the MLPerf throughput proxy"),
    ("power_w_per_accelerator", F, "measured power per chip (W): MLPerf node power (hosts "
                                    "included) / accelerators"),
    ("energy_j_per_token", F, "energy per training token (J): energy_j / tokens trained"),
    ("peak_memory_bytes", F, "measured peak memory per chip (B), where the source gives it"),
    ("energy_j", F, "energy to train (J), MLPerf Training rules: nodes + interconnect"),
    ("energy_j_nodes", F, "nodes' energy over the time to train (J), conversion eff. applied"),
    ("energy_j_interconnect", F, "interconnect (switch) power estimate x time to train (J)"),
    ("power_measurement", S, "AC | DC: where the MLPerf power was measured"),
    ("scaling", S, "strong | weak | single | sweep | unknown"),
    ("series_id", S, "scaling series this run belongs to (null: none)"),
    ("status", S, "ok | oom | error | aborted | no_run_stop"),
    ("benchmark", S, "MLPerf benchmark name (null elsewhere)"),
    ("mlperf_version", S, "MLPerf round, e.g. v4.1"),
    ("system", S, "MLPerf system name or cluster"),
    ("cluster", S, "the measured network it ran on: a `cluster` of data/catalog/collectives.csv "
                   "(null: the default network)"),
    ("submitter", S, "MLPerf submitter (null elsewhere)"),
    ("result_path", S, "MLPerf result file within its submission (null elsewhere)"),
    ("olympic_score_s", F, "MLPerf olympic score of the run's system (s)"),
    ("derived", S, "';'-separated columns computed by the pipeline or at transcription"),
    ("notes", S, "free text"),
    ("provenance", S, "input file and line"),
)
RUNS_SCHEMA = pa.schema([pa.field(n, t) for n, t, _ in RUN_COLUMNS])
RUN_COLUMN_NAMES = tuple(n for n, _, _ in RUN_COLUMNS)

REJECT_COLUMNS = (("source", S), ("path", S), ("line", I), ("record", S), ("reason", S))
REJECTS_SCHEMA = pa.schema([pa.field(n, t) for n, t in REJECT_COLUMNS])

SERIES_COLUMNS = (
    ("series_id", S), ("source", S), ("model", S), ("accelerator", S),
    ("precision", S), ("strategy_family", S), ("scaling", S),
    ("n_points", I), ("n_distinct", I), ("n_min", I), ("n_max", I), ("y_metric", S),
)
SERIES_SCHEMA = pa.schema([pa.field(n, t) for n, t in SERIES_COLUMNS])

# Per-step rows of training step logs (``steps.parquet``); parsers may add columns after these.
STEP_COLUMNS = (
    ("run_id", S), ("path", S), ("step", I), ("step_time_s", F), ("tokens_per_s", F),
    ("format", S), ("segment", I), ("rank", pa.int32()), ("line", I),
    ("tokens_per_s_per_accelerator", F), ("samples_per_s", F), ("batch_samples", F),
    ("loss", F), ("tflops_per_accelerator", F), ("mfu", F), ("wall_s", F),
    ("is_warmup", B), ("is_nan_loss", B), ("used", B),
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
          "power_measurement": POWER_MEASUREMENTS, "recompute": RECOMPUTE_MODES}
_FRACTIONS = ("mfu", "mfu_source_count", "hfu")
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
    dtype = {"string": str, "double": float, "int64": "Int64", "bool": "boolean"}[kind]
    return pda.Column(dtype, checks=checks, nullable=name not in _REQUIRED,
                      unique=name == "run_id", coerce=False)


def _ok_runs_have_a_measure(df: pd.DataFrame) -> pd.Series:
    measures = ["tokens_per_s", "model_flops_per_s", "mfu", "hfu", "step_time_s",
                "time_to_train_s", *Y_METRICS]
    return (df["status"] != "ok") | df[list(dict.fromkeys(measures))].notna().any(axis=1)


def _series_runs_have_y(df: pd.DataFrame) -> pd.Series:
    return df["series_id"].isna() | df[list(Y_METRICS)].notna().any(axis=1)


def _active_params_within_params(df: pd.DataFrame) -> pd.Series:
    return df["active_params"] <= df["params"]


# The checks across columns, by name (pandera names a check by its function).
_FRAME_CHECKS = {fn.__name__: (fn, error) for fn, error in (
    (_ok_runs_have_a_measure, "an ok run has no measure"),
    (_series_runs_have_y, "a run in a series has no y metric"),
    (_active_params_within_params, "active_params > params"))}
# The function of each of ``RUNS_FRAME_SCHEMA``'s checks across columns, by the check's name
# (``pipeline.ingest.schema_check`` runs them on whole columns).
RUNS_FRAME_CHECKS = {name: fn for name, (fn, _) in _FRAME_CHECKS.items()}

RUNS_FRAME_SCHEMA = pda.DataFrameSchema(
    {name: _run_column(name, t) for name, t, _ in RUN_COLUMNS},
    checks=[pda.Check(fn, error=error) for fn, error in _FRAME_CHECKS.values()],
    strict=True, ordered=True,
)


def validate_runs(df: pd.DataFrame) -> pd.DataFrame:
    """Check ``df`` against ``RUNS_FRAME_SCHEMA``, reporting every failure at once (the stage
    checks with ``schema_check.check_runs``: the same checks on whole columns, then this)."""
    return RUNS_FRAME_SCHEMA.validate(df, lazy=True)



# One row per MLPerf power measurement (``power.parquet``, ingest;
# pipeline/ingest/sources/mlperf/power.py): a run measured at the wall (AC) and after the power
# supplies (DC) has two rows and one run in runs.parquet (which carries the AC figures, or the
# only ones). Energies follow the MLPerf Training rules (mlperf_logging's result summarizer).
POWER_OUTPUT = (
    col("run_id", S, "run in runs.parquet that the measurement belongs to", **ID),
    col("source", S, "source id of that run"),
    col("result_path", S, "MLPerf result file the measurement was read with"),
    col("model", S, "model"), col("benchmark", S, "MLPerf benchmark"),
    col("accelerator", S, "catalog id"),
    col("n_accelerators", I, "accelerators of the run", **POS),
    col("system", S, "MLPerf system"), col("submitter", S, "MLPerf submitter as logged"),
    col("mlperf_version", S, "MLPerf round"),
    col("power_measurement", S, "AC | DC: where the power was measured",
       checks=[pda.Check.isin(list(POWER_MEASUREMENTS))], nullable=True),
    col("status", S, "ok, or the '; '-separated reasons (code: detail) it was not used",
       checks=[pda.Check.str_length(min_value=1)], nullable=False),
    col("used_in_runs", B, "its energy is the run's in runs.parquet", nullable=False),
    col("n_node_files", I, "node power logs read", **NONNEG),
    col("n_switch_files", I, "interconnect (switch) power logs read", **NONNEG),
    col("time_to_train_s", F, "the run's time to train (s)", **POS),
    col("tokens", F, "tokens trained: samples x sequence length", **POS),
    col("energy_j", F, "energy to train (J): nodes + interconnect", **POS),
    col("energy_j_nodes", F, "nodes' mean power x time to train x conversion efficiency (J)",
       **POS),
    col("energy_j_interconnect", F, "switch power estimate x time to train (J); null "
                                    "without switch logs", **NONNEG),
    col("power_w_per_accelerator", F, "node power (hosts included) / accelerators (W)", **POS),
    col("energy_j_per_token", F, "energy_j / tokens (J)", **POS),
    col("power_folder", S, "power/<result> folder, project-relative"),
    col("notes", S, "what was decided on the way (degenerate windows, dropouts)"),
)

OUTPUTS: dict[str, tuple] = {
    "runs.parquet": tuple((n, t, m, ANY) for n, t, m in RUN_COLUMNS),
    "rejects.parquet": tuple((n, t, "", ANY) for n, t in REJECT_COLUMNS),
    "series.parquet": tuple((n, t, "", ANY) for n, t in SERIES_COLUMNS),
    "steps.parquet": tuple((n, t, "", ANY) for n, t in STEP_COLUMNS),
    "power.parquet": POWER_OUTPUT,
}
POWER_COLUMNS = tuple((n, t) for n, t, _, _ in POWER_OUTPUT)
POWER_SCHEMA = arrow_schema(POWER_OUTPUT)


# -- reports/metrics/ingest.json and reports/headline/ingest.json -------------------------------
class PowerIngestMetrics(Metrics):
    """``ingest.json["power"]``: MLPerf power measurements read, used, and not used by code."""
    measurements: int
    ok: int
    runs_with_energy: int
    not_used_by_code: dict[str, int]


class LogsWithoutSeries(Metrics):
    """Step logs the ingest could put in no series with another N (ingest.json)."""
    count: int = Field(ge=0)
    by_reason: dict[str, int]
    logs: list[dict[str, Any]]


class IngestMetrics(Metrics):
    totals: dict[str, int]
    sources: dict[str, Any]
    rejects_by_code: dict[str, int]
    runs_by_source_kind: dict[str, int]
    runs_by_accelerator_family: dict[str, int]
    n_series: int
    runs_in_series: int
    logs_without_series: LogsWithoutSeries
    power: PowerIngestMetrics | None = None



class IngestHeadline(Headline):
    runs: int = Field(ge=0)
    rejects: int = Field(ge=0)
    series: int = Field(ge=0)


METRICS = IngestMetrics.model_validate
HEADLINE = IngestHeadline

# The ingest streams its inputs (every published table, MLPerf tree and step log under
# data/raw) and writes steps.parquet as it parses, so it runs its own entry, not the runner.
STAGE = Stage(
    name="ingest", help="Published tables, MLPerf result trees and step logs -> runs, rejects, "
                        "series, steps, power.",
    params=("ingest",), writes=tuple(OUTPUTS), catalog=True, raw=("data/raw",),
    entry="pipeline.ingest.stage:run")
