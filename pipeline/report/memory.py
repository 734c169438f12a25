"""The memory model's section: its fitted overhead with the interval, and its scores on the
measured outcomes beside the naive rule (theory metrics ``_memory``, pipeline/theory/memory_fit.py).
"""

from __future__ import annotations

import math
from typing import Any

def memory_section(metrics: dict[str, Any]) -> dict[str, Any]:
    """Template context: ``available`` False when the theory metrics carry no ``_memory``."""
    node = metrics.get("theory", {}).get("_memory")
    if not node:
        return {"available": False, "reason": "the theory metrics carry no `_memory` node"}
    fitted = node.get("overhead") or {}
    if any(v is None for v in (fitted.get("activation_factor"), fitted.get("fixed_bytes"),
                               *(fitted.get("activation_factor_ci") or [None]),
                               *(fitted.get("fixed_bytes_ci") or [None]))):
        return {"available": False, "reason": "the allocator overhead was not fitted (no run "
                                              "with a measured peak memory per accelerator)"}
    peak, fits = node.get("peak_memory", {}), node.get("fits_memory", {})
    sizes = sorted(set(peak.get("per_model_size", {})) | set(fits.get("per_model_size", {})),
                   key=_size_key)
    rows = []
    for s in sizes:
        p = peak.get("per_model_size", {}).get(s, {})
        f = fits.get("per_model_size", {}).get(s, {})
        rows.append({"size": s, "n_peak": p.get("n"), "median_ape": p.get("median_ape"),
                     "p90_ape": p.get("p90_ape"),
                     "naive_median_ape": (p.get("naive") or {}).get("median_ape"),
                     "n_outcomes": (f.get("n_completed") or 0) + (f.get("n_oom") or 0) or None,
                     "balanced_accuracy": f.get("balanced_accuracy"),
                     "naive_balanced_accuracy": (f.get("naive") or {}).get("balanced_accuracy")})
    overall_ba = (fits.get("overall") or {}).get("balanced_accuracy")
    overall_ape = (peak.get("overall") or {}).get("median_ape")
    return {"available": True, "overhead": node.get("overhead", {}),
            "families": _family_rows(fitted),
            "held_out": node.get("held_out"), "overall_peak": peak.get("overall", {}),
            "naive_peak": peak.get("naive_overall", {}), "overall_fits": fits.get("overall", {}),
            "naive_fits": fits.get("naive_overall", {}), "rows": rows,
            "per_source": peak.get("per_source", {}), "misses": node.get("misses", {}),
            "buildable": fits.get("buildable") or {},
            "contradicted": [{"source": k, **v} for k, v in
                             (node.get("completed_predicted_not_to_fit") or {}).items()
                             if v.get("predicted_not_to_fit")],
            "bias_rows": _bias_rows(peak.get("by_configuration") or {}),
            "ba_verdict": _against_naive(
                overall_ba, (fits.get("naive_overall") or {}).get("balanced_accuracy"),
                higher=True),
            "ape_verdict": _against_naive(
                overall_ape, (peak.get("naive_overall") or {}).get("median_ape"), higher=False)}


def _family_rows(overhead: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per framework family: its activation factor, how it was set (``fitted`` with
    its CI, ``fixed`` at a cited value, ``counted``: Korthikanti's count) and its measured runs.
    A metrics file from before per-family factors gives one pooled row."""
    by_family = overhead.get("by_family")
    if not by_family:
        return [{"family": "all", "activation_factor": overhead.get("activation_factor"),
                 "ci": overhead.get("activation_factor_ci"), "basis": "fitted",
                 "n_runs": overhead.get("n_runs")}]
    return [{"family": f, "activation_factor": v.get("activation_factor"),
             "ci": v.get("activation_factor_ci"), "basis": v.get("basis"),
             "n_runs": v.get("n_runs")} for f, v in by_family.items()]


def _bias_rows(by_configuration: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per source, layout axis and value: runs, median bias (predicted / measured - 1,
    from the median log ratio) and median APE."""
    rows = []
    for source, axes in by_configuration.items():
        for axis, values in axes.items():
            for value, r in values.items():
                rows.append({"source": source, "axis": axis, "value": value, "n": r.get("n"),
                             "bias": math.expm1(r["median_log_ratio"])
                             if r.get("median_log_ratio") is not None else None,
                             "median_ape": r.get("median_ape")})
    return rows


def _against_naive(value: float | None, naive: float | None, higher: bool) -> str:
    """The model's score against the naive rule's on the same runs."""
    if value is None:
        return "not measured"
    if naive is None:
        return "with no naive score to compare"
    better = value > naive if higher else value < naive
    return "better than the naive rule" if better else "no better than the naive rule"


def _size_key(label: str) -> float:
    try:
        return float(label[:-1]) * (1e9 if label.endswith("B") else 1e6)
    except ValueError:
        return float("inf")
