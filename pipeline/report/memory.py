"""The memory model's section: its fitted overhead with the interval, and its scores on the
measured outcomes beside the naive rule (theory metrics ``_memory``, pipeline/theory/memory_fit.py).
"""

from __future__ import annotations

import math
from typing import Any

# Targets the section states (aim, bar) for the balanced accuracy and the median APE.
BALANCED_ACCURACY = (0.95, 0.90)
MEDIAN_APE = (0.10, 0.15)


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
            "held_out": node.get("held_out"), "overall_peak": peak.get("overall", {}),
            "naive_peak": peak.get("naive_overall", {}), "overall_fits": fits.get("overall", {}),
            "naive_fits": fits.get("naive_overall", {}), "rows": rows,
            "per_source": peak.get("per_source", {}), "misses": node.get("misses", {}),
            "buildable": fits.get("buildable") or {},
            "contradicted": [{"source": k, **v} for k, v in
                             (node.get("completed_predicted_not_to_fit") or {}).items()
                             if v.get("predicted_not_to_fit")],
            "bias_rows": _bias_rows(peak.get("by_configuration") or {}),
            "ba_verdict": _verdict(overall_ba, BALANCED_ACCURACY, higher=True),
            "ape_verdict": _verdict(overall_ape, MEDIAN_APE, higher=False),
            "targets": {"balanced_accuracy": BALANCED_ACCURACY, "median_ape": MEDIAN_APE}}


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


def _verdict(value: float | None, target: tuple[float, float], higher: bool) -> str:
    if value is None:
        return "not measured"
    aim, bar = target
    met = (lambda t: value >= t) if higher else (lambda t: value <= t)
    return "meets the aim" if met(aim) else ("meets the bar, not the aim" if met(bar)
                                             else "misses the bar")


def _size_key(label: str) -> float:
    try:
        return float(label[:-1]) * (1e9 if label.endswith("B") else 1e6)
    except ValueError:
        return float("inf")
