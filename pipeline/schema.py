"""The run record: column names, units, types and controlled vocabularies.

``runs.parquet`` follows ``RUNS_SCHEMA`` exactly (column order included). Units are SI and sit in
the column name (``_s``, ``_w``, ``_per_s``); counts are plain numbers (``params`` is a count of
parameters, not billions). See ``../shared/ARCHITECTURE.md`` for the contract these implement.
"""

from __future__ import annotations

import pyarrow as pa

# Controlled vocabularies ---------------------------------------------------------------------
SOURCE_KINDS = ("published", "mlperf", "log")
PRECISIONS = ("bf16", "fp16", "fp8", "fp32", "tf32")
SCALINGS = ("strong", "weak", "single", "sweep", "unknown")
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

# One row per MLPerf power measurement (``power.parquet``): a run measured at the wall (AC) and
# after the power supplies (DC) has two rows and one run in runs.parquet (which carries the AC
# figures, or the only ones). ``status``: ``ok`` or the reasons it was not used.
POWER_COLUMNS = (
    ("run_id", _S), ("source", _S), ("result_path", _S), ("model", _S), ("benchmark", _S),
    ("accelerator", _S), ("n_accelerators", _I), ("system", _S), ("submitter", _S),
    ("mlperf_version", _S), ("power_measurement", _S), ("status", _S), ("used_in_runs", _B),
    ("n_node_files", _I), ("n_switch_files", _I), ("time_to_train_s", _F), ("tokens", _F),
    ("energy_j", _F), ("energy_j_nodes", _F), ("energy_j_interconnect", _F),
    ("power_w_per_accelerator", _F), ("energy_j_per_token", _F), ("power_folder", _S),
    ("notes", _S),
)
POWER_SCHEMA = pa.schema([pa.field(n, t) for n, t in POWER_COLUMNS])

# Per-step rows of training step logs (``steps.parquet``); parsers may add columns after these.
STEP_COLUMNS = (
    ("run_id", _S), ("path", _S), ("step", _I), ("step_time_s", _F), ("tokens_per_s", _F),
    ("format", _S), ("segment", _I), ("rank", pa.int32()), ("line", _I),
    ("tokens_per_s_per_accelerator", _F), ("samples_per_s", _F), ("batch_samples", _F),
    ("loss", _F), ("tflops_per_accelerator", _F), ("mfu", _F), ("wall_s", _F),
    ("is_warmup", _B), ("is_nan_loss", _B), ("used", _B),
)
STEPS_SCHEMA = pa.schema([pa.field(n, t) for n, t in STEP_COLUMNS])
