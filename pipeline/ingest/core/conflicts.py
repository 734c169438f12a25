"""One measurement of one configuration: runs that state the same configuration are one run.

Two runs have the same configuration when every column that describes what ran is equal
(``CONFIGURATION``: source, model and shape, chip, N, layout, batch, precision, software, the
scaling label, and the peak memory a source states, since a different footprint shows that
something unlisted differed: the Ultra-Scale Playbook lists some configurations several times,
"what differs is not shown", each with its own memory). MLPerf results are left alone: a
submission's repeated runs of one system are its measurement (the olympic score uses them).

Within a group, the runs are ordered by where they were read (file, line) and compared on the
first measure all of them state (``MEASURES``):

* all within ``REPEAT_RTOL`` of the first: a repeat. The first is kept; each later one is a
  ``duplicate`` reject naming the kept run and both values;
* any further apart: the records cannot all be right and nothing says which is. Every run of
  the group becomes a ``conflict`` reject naming all values and where each was read, so that
  neither enters a series or a fit.

``REPEAT_RTOL = 0.10`` is a stated tolerance, not a measurement: repeated runs of one
configuration differ by a few percent (the shipped tables' repeats agree within it: none
differs here), while a factor like 1.5 (30,000 vs 45,000 tokens/s) or 2 (1.0 vs 2.0 s a
step) is a different configuration or a wrong value.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from pipeline.ingest.core.rows import columns_getter

REPEAT_RTOL = 0.10
CONFIGURATION = (
    "source", "source_kind", "model", "model_id", "params", "active_params", "n_layers",
    "d_model", "seq_len", "accelerator", "n_accelerators", "accelerators_per_node", "precision",
    "peak_precision", "dp", "tp", "pp", "cp", "ep", "zero_stage", "micro_batch", "recompute",
    "virtual_pipeline", "pipeline_flushes", "sequence_parallel", "fused_attention",
    "tp_comm_overlap", "dp_comm_overlap", "global_batch_tokens", "strategy", "framework",
    "scaling", "system", "cluster", "status", "peak_memory_bytes",
)
MEASURES = ("step_time_s", "tokens_per_s", "tokens_per_s_per_accelerator", "model_flops_per_s",
            "mfu", "time_to_train_s")


def _measure(group: list[dict[str, Any]]) -> str | None:
    return next((m for m in MEASURES if all(r.get(m) is not None for r in group)), None)


def _where(row: dict[str, Any]) -> str:
    return str(row.get("provenance") or row.get("_path"))


_MLPERF_KEYS = ("source_kind", "benchmark", "mlperf_version")


def _compared(keys: tuple[Any, ...]) -> bool:
    """Whether the rule applies to a run of these ``_MLPERF_KEYS`` values (MLPerf results are
    left alone)."""
    return keys[0] != "mlperf" and keys[1] is None and keys[2] is None


def _shared(runs: list[dict[str, Any]],
            configuration: Callable[[dict[str, Any]], tuple[Any, ...]] | None = None
            ) -> np.ndarray:
    """Which runs may share their configuration with another: those the rule applies to whose
    configuration's hash occurs twice or more. Memory holds one hash a run (8 bytes), not one
    key of ~35 values (~320 bytes) a run; equal keys have equal hashes, and a hash collision
    only adds a run to the exact grouping of ``one_per_configuration``. ``configuration``: a
    ``columns_getter(CONFIGURATION)`` (a new one if None)."""
    configuration = configuration or columns_getter(CONFIGURATION)
    compared = np.fromiter(map(_compared, map(columns_getter(_MLPERF_KEYS), runs)), dtype=bool,
                           count=len(runs))
    hashes = np.fromiter((hash(configuration(r)) if c else 0 for r, c in zip(runs, compared)),
                         dtype=np.int64, count=len(runs))
    values, counts = np.unique(hashes[compared], return_counts=True)
    return compared & np.isin(hashes, values[counts > 1])


def one_per_configuration(runs: list[dict[str, Any]]
                          ) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], str]]]:
    """(runs kept, [(run, reject reason)]) under the module's rule; ``runs`` keep their order."""
    # a run's CONFIGURATION values (planned once for each base and layout of RunRows)
    configuration = columns_getter(CONFIGURATION)
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for row, shared in zip(runs, _shared(runs, configuration)):
        if shared:
            groups[configuration(row)].append(row)
    dropped: dict[int, str] = {}
    for group in groups.values():
        if len(group) < 2:
            continue
        group.sort(key=lambda r: (str(r.get("_path")), r.get("_line") or 0, r["run_id"]))
        measure = _measure(group)
        if measure is None:
            continue
        first = group[0][measure]
        values = ", ".join(f"{r[measure]:.6g} ({_where(r)})" for r in group)
        if all(abs(r[measure] - first) <= REPEAT_RTOL * abs(first) for r in group):
            for r in group[1:]:
                dropped[id(r)] = (f"duplicate: same configuration as {_where(group[0])}, "
                                  f"{measure} {r[measure]:.6g} vs {first:.6g} (within "
                                  f"{REPEAT_RTOL:.0%}): one measurement per configuration, "
                                  "the first kept")
            continue
        for r in group:
            dropped[id(r)] = (f"conflict: {len(group)} records of one configuration disagree on "
                              f"{measure}: {values}, more than {REPEAT_RTOL:.0%} apart; which "
                              "is right cannot be told: correct or remove one, or state what "
                              "differs (layout, batch, precision, system)")
    kept = [r for r in runs if id(r) not in dropped]
    return kept, [(r, dropped[id(r)]) for r in runs if id(r) in dropped]
