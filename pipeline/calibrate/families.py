"""Framework families, the network each source ran on, and the schedule defaults where a run
does not state its schedule (docs/theory.md §11.3).

A family is the software that ran the job; its fitted parameters (compute efficiency, overlaps,
fixed cost) are shared by its sources, which differ by a random effect. The Ultra-Scale
Playbook sweep is its own family: one team's nanotron runs on one cluster, with a measured
repeat noise far above the production sources', so it must not set their values.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from pipeline.calibrate.hardware import DEFAULT_CLUSTER
# the family mapping itself lives below the stages (pipeline/frameworks.py), shared with the
# theory's memory model
from pipeline.frameworks import MEGATRON_DEEPSPEED, PLAYBOOK, family_of


def distinct_rows(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(key, first): ``key[i]`` numbers the distinct tuples of ``columns`` at row i (values equal
    AND of one type, so True, 1 and 1.0, or None and NaN, stay apart), ``first[k]`` the first
    row of key k. A per-row function ``f`` of the columns is then ``f(rows[first])[key]``, each
    distinct tuple computed once (a planner's search: ~1e4 rows, a few distinct tuples)."""
    n = len(columns[0]) if columns else 0
    key = np.zeros(n, dtype=np.int64)
    for col in columns:
        col = np.asarray(col)
        values, uniques = pd.factorize(col, use_na_sentinel=False)
        # only text equal to text: no other type could share a value (True == 1 == 1.0 and the
        # missing values are the cases that need each row's type)
        plain = col.dtype != object or all(type(u) is str for u in uniques)
        types = (np.zeros(n, dtype=np.int64) if plain else
                 pd.factorize(np.fromiter(map(id, map(type, col)), dtype=np.int64, count=n))[0])
        key = pd.factorize(key * ((int(values.max()) + 1) * (int(types.max()) + 1))
                           + values * (int(types.max()) + 1) + types)[0] if n else key
    first = np.zeros(int(key.max()) + 1 if n else 0, dtype=np.int64)
    first[key[::-1]] = np.arange(n - 1, -1, -1)
    return key, first


# Repeat noise of the Playbook sweep (the family's residual sd floor): 15 configurations measured
# more than once (13 twice, 2 three times: 17 degrees of freedom) have a pooled log-sd of 0.60
# about their means. A sample sd of repeats already estimates one measurement's sd; it is not
# divided by sqrt(2) (that is for the sd of a difference of two). tests/test_playbook_noise.py
# recomputes it from runs.parquet.
PLAYBOOK_NOISE_FLOOR = 0.60

# Layout sweeps: one team's configurations of small models on one machine, each fitted apart as
# its own family (with the Playbook's; never in the production population or its intervals)
# and scored on layout choice. vTrain's single-node sweep (github.com/VIA-Research/vTrain
# data/ground_truth_single.csv: 1,440 layouts of 0.2-1.3B GPT shapes on 2-8 A100,
# Megatron-DeepSpeed) runs 2-4 ms per layer and microbatch outside the GEMMs (its per-layer
# overhead grows with tp), a launch-bound regime no production run is in; its 109 multi-node
# runs (ground_truth_multi.csv) stay in the megatron_deepspeed family. Rows are told by their
# series (the ingest's ``series_id``), their kernels and buckets by the software that ran them.
VTRAIN_SWEEP = "vtrain_sweep"
SWEEP_FAMILIES = (PLAYBOOK, VTRAIN_SWEEP)
_SWEEP_SERIES = ((re.compile(r"^vtrain2024/vtrain2024-single-"), VTRAIN_SWEEP),)


def sweep_family(frame: pd.DataFrame, family: np.ndarray) -> np.ndarray:
    """``family`` with the rows of a layout sweep (``_SWEEP_SERIES``, by ``series_id``) given
    their sweep family."""
    if "series_id" not in frame:
        return family
    out = np.asarray(family, dtype=object).copy()
    series = frame["series_id"].astype(object).to_numpy()
    for pattern, name in _SWEEP_SERIES:
        hit = np.array([isinstance(x, str) and pattern.match(x) is not None for x in series],
                       dtype=bool)
        out[hit] = name
    return out

RECOMPUTE_CODE = {"none": 0, "selective": 1, "full": 2}

# The step model's kernels where a row states none (``KERNEL_COLUMNS``: a fused, flash attention
# core; TP collectives overlapped with compute; DP gradient traffic overlapped with the
# backward). A source whose software differed states it in its rows: megatron2021's 2021
# Megatron-LM (unfused attention, synchronous TP and DP collectives), with the citations in
# scripts/transcribe_reference.py and data/raw/published/README.md.
KERNEL_DEFAULTS = {"fused_attention": True, "tp_comm_overlap": True, "dp_comm_overlap": True}

# Data-parallel collective units (bytes at 2 B per value), the frameworks' defaults:
# - megatron: Megatron-core DistributedDataParallelConfig, bucket_size = max(40e6, 1e6 dp)
#   parameters, for the gradient reduce-scatter and the parameter all-gather alike;
# - deepspeed and megatron_deepspeed (DeepSpeed's engine reduces the fork's gradients):
#   reduce_bucket_size = allgather_bucket_size = 5e8 elements (DeepSpeed configuration
#   documentation); deepspeed's ZeRO-3 parameter gathers per submodule (below);
# - fsdp: one FSDP unit per transformer block (torchtitan wraps each block): NaN = per layer;
# - playbook (nanotron on torch DDP): bucket_cap_mb = 25 MiB.
MEGATRON_BUCKET_PARAMS, MEGATRON_BUCKET_PER_DP = 40e6, 1e6
DEEPSPEED_BUCKET = 5e8
TORCH_DDP_BUCKET_BYTES = 25.0 * 2**20

# DeepSpeed's ZeRO-3 (the deepspeed family; its runs are megatron2021's, DeepSpeed of 2021)
# gathers each submodule's parameters on its own (deepspeedai/DeepSpeed#5047; parameters below
# stage3_param_persistence_threshold, 1e5 elements by default, stay whole: a transformer
# layer's four weight matrices are gathered, 4 per layer) and moves them at a rate far below
# its links. DeepSpeed#1174 (v0.3.16, one 8-A100 node, a 5.1B BERT): a ZeRO-3 forward of
# 480 ms against ZeRO-2's 60 ms with 8.9 GB gathered per rank, 21.2 GB/s (derived) over 600 GB/s
# NVLink; DeepSpeed#1188: its backward, 900 ms, about 23 GB/s for the gather and the
# reduce-scatter, each all-gather followed by torch.cuda.synchronize(). Both collectives of a
# ZeRO-3 deepspeed row are priced at no faster than this rate per rank.
DEEPSPEED_ZERO3_BYTES_PER_S = 21.2e9
DEEPSPEED_ZERO3_GATHERS_PER_LAYER = 4.0


def buckets(family: np.ndarray, dp: np.ndarray, zero: np.ndarray, w: float = 2.0
            ) -> tuple[np.ndarray, np.ndarray]:
    """(gradient bucket bytes, parameter all-gather unit bytes) per row; NaN = one per layer."""
    megatron = np.maximum(MEGATRON_BUCKET_PARAMS, MEGATRON_BUCKET_PER_DP * dp) * w
    family = np.where(np.asarray(family, dtype=object) == MEGATRON_DEEPSPEED, "deepspeed", family)
    reduce = np.select([family == "megatron", family == "deepspeed", family == PLAYBOOK],
                       [megatron, np.full(dp.shape, DEEPSPEED_BUCKET * w),
                        np.full(dp.shape, TORCH_DDP_BUCKET_BYTES)], np.nan)
    gather = np.select([family == "megatron", (family == "deepspeed") & (zero < 3),
                        family == PLAYBOOK],
                       [megatron, np.full(dp.shape, DEEPSPEED_BUCKET * w),
                        np.full(dp.shape, TORCH_DDP_BUCKET_BYTES)], np.nan)
    return reduce.astype(float), gather.astype(float)


def zero3_transfer(family: np.ndarray, zero: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(parameter gathers per layer, the software's ZeRO-3 transfer rate in bytes/s per rank;
    NaN: as fast as the links) per row: DeepSpeed's ZeRO-3 rows (``family`` deepspeed, ZeRO 3)
    gather per submodule at ``DEEPSPEED_ZERO3_BYTES_PER_S``; every other row one gather unit
    per layer (FSDP) or its bucket, link-bound."""
    ds = (np.asarray(family, dtype=object) == "deepspeed") & (np.asarray(zero, float) >= 3)
    return (np.where(ds, DEEPSPEED_ZERO3_GATHERS_PER_LAYER, 1.0),
            np.where(ds, DEEPSPEED_ZERO3_BYTES_PER_S, np.nan))


def cluster_of(frame: pd.DataFrame, known: tuple[str, ...]) -> tuple[np.ndarray, list[str]]:
    """Each row's measured network: its ``cluster`` where it names one of ``known`` (the clusters
    of data/catalog/collectives.csv), else the default network; and, for the metrics, the
    cluster names no measurement has (those rows get the default network too)."""
    stated = (frame["cluster"].astype(object).to_numpy() if "cluster" in frame
              else np.full(len(frame), None, dtype=object))
    key, first = distinct_rows(stated)  # per distinct value, then indexed
    once = stated[first]
    named = np.array([isinstance(c, str) and c != "" for c in once], dtype=bool)
    unknown = sorted({c for c, ok in zip(once, named) if ok and c not in known})
    cluster = np.array([c if ok and c in known else DEFAULT_CLUSTER
                        for c, ok in zip(once, named)], dtype=object)[key]
    return cluster, [f"cluster={c} (not in collectives.csv: default network)" for c in unknown]


def schedule(frame: pd.DataFrame, family: np.ndarray, tp: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(recompute code 0/1/2, virtual pipeline v, sequence parallel) per row, with the defaults
    where a row states none: no recomputation, v = 1 (never L / pp: interleaving is a choice
    a run states), sequence parallelism on the TP group for Megatron-family runs with tp > 1
    (Megatron-core and NeMo recipes turn it on with TP) and off elsewhere. Returns also the
    names of the defaults used (for the metrics)."""
    n = len(frame)
    used = []

    def col(name):
        return (frame[name].astype(object).to_numpy() if name in frame
                else np.full(n, None, dtype=object))

    rec_raw = col("recompute")
    key, first = distinct_rows(rec_raw)  # per distinct value, then indexed
    rec = np.array([RECOMPUTE_CODE.get(r, -1) if isinstance(r, str) else -1
                    for r in rec_raw[first]], dtype=int)[key]
    if (rec < 0).any():
        used.append("recompute=none")
    rec = np.where(rec < 0, 0, rec)
    v = pd.to_numeric(pd.Series(col("virtual_pipeline")), errors="coerce").to_numpy(float)
    if (~np.isfinite(v)).any():
        used.append("virtual_pipeline=1")
    v = np.where(np.isfinite(v) & (v >= 1), v, 1.0)
    sp_raw = col("sequence_parallel")
    key, first = distinct_rows(sp_raw)  # per distinct value, then indexed
    stated = np.array([isinstance(x, (bool, np.bool_)) for x in sp_raw[first]], dtype=bool)[key]
    default_sp = (family == "megatron") & (tp > 1)
    if (~stated).any():
        used.append("sequence_parallel=(megatron and tp>1)")
    sp = np.where(stated, np.array([bool(x) if isinstance(x, (bool, np.bool_)) else False
                                    for x in sp_raw[first]], dtype=bool)[key], default_sp)
    return rec, v, sp, used


# Overlaps a stack leaves off unless a row states them, as (the column that tells its rows, the
# value there, their label, the overlaps off):
# - plain Megatron-LM (the framework named as such, not NeMo, Megatron-Bridge or a fork): its
#   communication overlaps are opt-in flags, off unless the command line sets them
#   (Megatron-LM megatron/training/arguments.py: --tp-comm-overlap and --overlap-grad-reduce are
#   store_true, default False);
# - Megatron-DeepSpeed runs its layers on DeepSpeed's pipeline engine, whose schedule reduces
#   the data-parallel gradients after the step's last backward
#   (deepspeed/runtime/pipe/schedule.py, TrainSchedule.steps: ReduceTiedGrads, ReduceGrads,
#   OptimizerStep at the batch's last step; the engine takes no ZeRO-2/3 with a pipeline), and
#   its ZeRO-1 has no backward hooks to overlap with (deepspeedai/DeepSpeed#1246: "overlap and
#   contiguous grads are meaningless in stage 1").
PLAIN_MEGATRON_LM = "Megatron-LM"
OVERLAPS_OFF_BY_DEFAULT = (
    ("framework", PLAIN_MEGATRON_LM, "Megatron-LM rows", ("tp_comm_overlap", "dp_comm_overlap")),
    ("family", MEGATRON_DEEPSPEED, "Megatron-DeepSpeed rows", ("dp_comm_overlap",)),
)


def kernels(frame: pd.DataFrame, family: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(fused attention core, TP collectives overlapped, DP gradient traffic overlapped) per
    row: the row's ``fused_attention`` / ``tp_comm_overlap`` / ``dp_comm_overlap`` where stated
    (true/false), else ``KERNEL_DEFAULTS`` less the overlaps its stack leaves off
    (``OVERLAPS_OFF_BY_DEFAULT``; ``family``: each row's, else :func:`family_of`'s); and the
    defaults used."""
    n = len(frame)
    out, used = [], []
    who = {"framework": (frame["framework"].astype(object).to_numpy() if "framework" in frame
                         else np.full(n, None, dtype=object)),
           "family": family_of(frame) if family is None else np.asarray(family, dtype=object)}
    for name, default in KERNEL_DEFAULTS.items():
        raw = (frame[name].astype(object).to_numpy() if name in frame
               else np.full(n, None, dtype=object))
        key, first = distinct_rows(raw)  # per distinct value, then indexed
        once = np.array([isinstance(x, (bool, np.bool_)) for x in raw[first]], dtype=bool)
        stated = once[key]
        if not stated.all():
            used.append(f"{name}={str(default).lower()}")
        off = np.zeros(n, dtype=bool)
        for column, value, label, names in OVERLAPS_OFF_BY_DEFAULT:
            hit = ((who[column] == value) & ~stated & ~off if name in names
                   else np.zeros(n, dtype=bool))
            if hit.any():
                used.append(f"{name}=false ({label})")
            off |= hit
        out.append(np.array([bool(x) if ok else default for x, ok in zip(raw[first], once)],
                            dtype=bool)[key] & ~off)
    return out[0], out[1], out[2], used
