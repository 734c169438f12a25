"""The controlled vocabularies shared by stages: each list of names has its home here.

The ingest writes these values, the contracts check them (``pipeline/<stage>/contract.py``), the
published-table lint, the catalog, the theory and the report read them. Nothing else re-lists
them: a new precision, strategy family or step-time component is added here once.
"""

from __future__ import annotations

SOURCE_KINDS = ("published", "mlperf", "log")

# The law families the fit stage fits (pipeline/fit/__init__.py registers one module per name);
# fit, calibrate and compare outputs name them in their `law` columns.
LAW_NAMES = ("power", "amdahl", "usl", "comm")

PRECISIONS = ("bf16", "fp16", "fp8", "fp32", "tf32")
# Activation recomputation of a run's schedule (``recompute``): none, selective (attention core
# only, Korthikanti et al. 2022) or full (every layer's forward replayed in the backward).
RECOMPUTE_MODES = ("none", "selective", "full")
# Optional schedule columns of published tables and step-log sidecars (after the v1 columns;
# empty = the source does not state it): recompute, virtual pipeline chunks per stage (v >= 1),
# Megatron sequence parallelism (true/false), pipeline schedules per optimizer step (>= 1).
SCHEDULE_COLUMNS = ("recompute", "virtual_pipeline", "sequence_parallel", "pipeline_flushes")
# Optional kernel facts of the software that ran a job, where it differs from today's kernels
# (true/false; empty = not stated, the step model's default, pipeline/calibrate/families.py):
# a fused (flash) attention core, TP collectives overlapped with compute, data-parallel gradient
# traffic overlapped with the backward.
KERNEL_COLUMNS = ("fused_attention", "tp_comm_overlap", "dp_comm_overlap")
# Other spellings of those precisions (after lower-casing), accepted by the ingest and by the
# catalog's peak lookup alike.
PRECISION_ALIASES: dict[str, str] = {
    "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "single": "fp32",
    "float8": "fp8", "fp8_e4m3": "fp8", "e4m3": "fp8", "tensorfloat32": "tf32",
}

# How a source scaled its runs; ``unknown`` is the ingest's value where the source states none.
SCALINGS_STATED = ("strong", "weak", "single", "sweep")
SCALINGS = (*SCALINGS_STATED, "unknown")

# `ok` ran and was measured; `oom` / `error` ran out of memory or crashed (published sweeps keep
# them as runs); `aborted` / `no_run_stop` are MLPerf runs that did not reach a result.
STATUSES = ("ok", "oom", "error", "aborted", "no_run_stop")

# Where MLPerf power was measured: at the wall (AC) or after the power supplies (DC).
POWER_MEASUREMENTS = ("AC", "DC")

# Coarse strategy families, used to form series and to compare FSDP against model parallelism.
STRATEGY_FAMILIES = ("ddp", "fsdp", "tp", "pp", "tp_pp", "hybrid_fsdp", "3d", "unknown")

# y-metrics a series can be fitted on, in order of preference (the fit stage takes the first a
# series' runs all carry). hardware_flops_per_s comes last: sources that report only HFU
# (Megatron-LM 2021) have no other.
Y_METRICS = ("model_flops_per_s", "tokens_per_s", "inverse_time_to_train_per_s",
             "hardware_flops_per_s")

# Step-time components of the theory's cost model (``t_<component>_s`` of bounds.parquet; a
# ceiling's ``binding`` is one of them).
COMPONENTS = ("compute", "hbm", "net_tp", "net_dp", "net_pp", "net_ep", "bubble", "latency")
# Slots of a measured step time split into shares (``share_<slot>``, summing to 1): the
# components, the ``overhead`` a model attributes to no component (the theory's remainder in
# compare, the calibrated fixed and launch costs in calibrate), and the ``residual`` the model
# leaves unexplained (negative where the model predicts a longer step than measured).
SHARE_SLOTS = (*COMPONENTS, "overhead", "residual")
