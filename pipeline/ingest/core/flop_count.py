"""One MFU convention for every source: model FLOP on the project's count, against the dense
peak of the run's precision.

The project's count is ``pipeline.measures.flop_per_token``: ``6 N_act`` per token for the
matmuls (forward 2, backward 4; Kaplan et al. 2020, arXiv:2001.08361) plus ``12 L d T`` for
self-attention where the shape is known (PaLM, Chowdhery et al. 2022, arXiv:2204.02311, App. B),
recompute not counted. The calibrate stage prices a step with the same count, so
``mfu x n x peak / (tokens/s)`` is its FLOP per token and ``step_time_s`` follows.

Sources count FLOP their own way. NVIDIA's performance summaries (Megatron-Bridge, NeMo
Framework, NeMo Automodel) print "model TFLOP/s per GPU" on Megatron-Bridge's
``num_floating_point_operations`` (NVIDIA-NeMo/Megatron-Bridge
src/megatron/bridge/training/utils/flop_utils.py; NeMo's nemo/tron/utils/flop_utils.py): 6 FLOP
per weight of every GEMM a token meets (the output layer's included, the embedding's not),
causal attention halved, sliding-window layers at their window, MLA's own projections. Their
count over ours: GPT-OSS 120B ~0.76, Qwen3-30B-A3B 0.93, DeepSeek-V3 ~1.07. Papers that print
an MFU next to tokens/s (MegaScale, NVIDIA DGX Cloud, KempnerForge, PaLM) are within 0.93-1.01.

So where a run gives its throughput (tokens/s, printed or from a printed step time) and the
peak of a stated precision (``derive.derive_measures`` gets ``peak`` None otherwise), its
``model_flops_per_s`` and ``mfu`` are recounted from tokens/s (``recount``; both then named in
``derived``), and the MFU the source's own figure gives (printed, or its FLOP/s over the peak)
is kept in ``mfu_source_count``. A run without a throughput keeps the source's MFU in both
columns; a run whose precision the source does not state keeps the MFU it printed (its peak is
the source's choice) and says so in ``notes``.

The two printed figures come from one step time, so their ratio is the source's count over ours
for that model. A run whose ratio is off its (source, model, seq_len) group's median by more than
``SOURCE_COUNT_TOLERANCE`` carries a misprint in one of them (Qwen3-30B-A3B on 16 H100 in
Megatron-Bridge 25.09: 2,557 tokens/s per GPU beside 118 TFLOP/s, twice the group's count):
``flag_misprints`` rates it by the source's FLOP figure at the group's count, with a note.
"""

from __future__ import annotations

import math
from collections import defaultdict
from statistics import median
from typing import Any

from pipeline.measures import flop_per_token

#: A run whose printed tokens/s and FLOP figure imply a count this far (relative) from the
#: median of its (source, model, seq_len) group carries a misprint in one of them.
SOURCE_COUNT_TOLERANCE = 0.25
NOTE_NO_ATTENTION = "model FLOPs without attention term (shape unknown)"
NOTE_NOT_RECOUNTED = ("mfu as printed, on the source's FLOP count: not recounted from tokens/s "
                      "(precision not stated, the chip has fp8 units)")


def project_flops_per_s(row: dict[str, Any], attention: bool) -> tuple[float, bool] | None:
    """Whole-job model FLOP/s on the project's count, tokens/s x ``flop_per_token`` (module
    docstring), and whether the attention term is in it; None without tokens/s or an active
    parameter count."""
    if row["tokens_per_s"] is None or row["active_params"] is None:
        return None
    fpt, with_attention = flop_per_token(row["active_params"], row["n_layers"], row["d_model"],
                                         row["seq_len"], attention)
    return row["tokens_per_s"] * fpt, with_attention or not attention


def source_flops_per_s(row: dict[str, Any], tflops_per_accelerator: float | None,
                       peak: float | None) -> float | None:
    """Whole-job model FLOP/s on the source's own count: printed FLOP/s, TFLOP/s per chip, or
    its MFU x the peak; None when it gives none of them."""
    n = row["n_accelerators"]
    if row["model_flops_per_s"] is not None:
        return row["model_flops_per_s"]
    if tflops_per_accelerator is not None:
        return tflops_per_accelerator * 1e12 * n
    if row["mfu"] is not None and peak is not None:
        return row["mfu"] * n * peak
    return None


def model_flops_and_mfu(row: dict[str, Any], peak: float | None,
                        tflops_per_accelerator: float | None, attention: bool
                        ) -> tuple[list[str], bool]:
    """Fill ``model_flops_per_s``, ``mfu`` and ``mfu_source_count`` of ``row`` in place by the
    module's convention; return the columns computed and whether one rests on ``peak``.
    ``peak`` None: the precision is not stated on a chip with fp8 units, no MFU is derived."""
    n, names = row["n_accelerators"], []
    theirs = source_flops_per_s(row, tflops_per_accelerator, peak)
    ours = project_flops_per_s(row, attention)
    if ours is not None and not ours[1] and (theirs is None or peak is not None):
        row["notes"] = _note(row["notes"], NOTE_NO_ATTENTION)
    if ours is not None and theirs is not None and peak is not None:
        printed = row["mfu"] is not None
        row["mfu_source_count"] = row["mfu"] if printed else theirs / (n * peak)
        row["model_flops_per_s"], row["mfu"] = ours[0], ours[0] / (n * peak)
        return ["model_flops_per_s", "mfu"] + ([] if printed else ["mfu_source_count"]), True
    if row["model_flops_per_s"] is None and (theirs or ours) is not None:
        row["model_flops_per_s"] = theirs if theirs is not None else ours[0]
        names.append("model_flops_per_s")
    if row["mfu"] is None and row["model_flops_per_s"] is not None and peak is not None:
        row["mfu"] = row["model_flops_per_s"] / (n * peak)
        names.append("mfu")
    if row["mfu"] is not None and (theirs is not None or "mfu" not in names):
        row["mfu_source_count"] = row["mfu"]
        names += ["mfu_source_count"] if "mfu" in names else []
        if ours is not None and "mfu" not in names:
            row["notes"] = _note(row["notes"], NOTE_NOT_RECOUNTED)
    uses_peak = "mfu" in names or (tflops_per_accelerator is None and row["tokens_per_s"] is None
                                   and "model_flops_per_s" in names)
    return names, uses_peak


def flag_misprints(runs: list[dict[str, Any]]) -> int:
    """Apply the misprint rule (module docstring) to the recounted runs in place; return how
    many runs it rated by their group's count."""
    groups: dict[tuple[Any, ...], list[tuple[dict[str, Any], float]]] = defaultdict(list)
    for row in runs:
        theirs, ours = row.get("mfu_source_count"), row.get("mfu")
        if theirs is None or ours is None or row.get("tokens_per_s") is None:
            continue
        if "mfu" not in (row.get("derived") or "").split(";"):
            continue
        key = (row["source"], row.get("model"), row.get("seq_len"))
        groups[key].append((row, theirs / ours))
    flagged = 0
    for members in groups.values():
        mid = median(ratio for _, ratio in members)
        for row, ratio in members:
            if abs(ratio / mid - 1.0) <= SOURCE_COUNT_TOLERANCE or not math.isfinite(ratio):
                continue
            mfu = row["mfu_source_count"] / mid
            if not 0.0 < mfu <= 1.0:
                continue
            row["notes"] = _note(row.get("notes"), (
                f"tokens/s and the source's FLOP figure imply {ratio:.3g}x the project's FLOP "
                f"count, its (source, model, seq_len) group {mid:.3g}x: one figure misprinted; "
                f"mfu {row['mfu']:.4g} from tokens/s replaced by the source's MFU over the "
                f"group's count"))
            row["mfu"] = mfu
            row["model_flops_per_s"] = (mfu * row["n_accelerators"]
                                        * row["peak_flops_per_s_per_accelerator"])
            flagged += 1
    return flagged


def _note(notes: str | None, note: str) -> str:
    return f"{notes} [{note}]" if notes else f"[{note}]"
