"""Figures read off a fitted law: where efficiency falls to a threshold, and what the next
doubling buys.

Parallel efficiency against the smallest measured scale, ``E(N) = X(N) / (N * X(N_min) / N_min)``
(the usual strong-scaling efficiency; for weak scaling it is per-accelerator throughput relative
to N_min). ``n_at_threshold`` solves ``E(N) = threshold`` (``compare.efficiency_threshold``,
0.5 by default) on the fitted curve (inf when E stays above it up to ``N_SEARCH_MAX``);
``next_doubling_gain`` is ``X(2 N_max) / X(N_max) - 1``, the fractional throughput gained by
doubling past the largest measured scale. ``predictions_at_multiples`` is the law at ``N_min``
and at ``MULTIPLES`` x ``N_max`` with its prediction interval (the report's prediction for a
user's own series, read from ``fits.parquet`` instead of refitting).
"""

from __future__ import annotations

import numpy as np

from pipeline.fit.result import FitResult, prediction_columns
from pipeline.measures import n_at_efficiency
from pipeline.fit.contract import MULTIPLES_OF_N_MAX as MULTIPLES

N_SEARCH_MAX = 1e8


def n_at_threshold(result: FitResult, n_min: float, threshold: float = 0.5) -> float:
    """N at which the fitted efficiency falls to ``threshold`` (``compare.efficiency_threshold``,
    50%; inf if not below N_SEARCH_MAX): the root of the law's efficiency curve, bracketed on a
    241-point log grid (``pipeline.measures.n_at_efficiency``). The one answer for a law's N at
    the threshold: compare quotes it too."""
    x_min = float(result.fitted([n_min])[0])
    if not np.isfinite(x_min) or x_min <= 0:
        return np.nan

    def efficiency(n: float) -> float:
        return float(result.fitted([n])[0]) / (n * x_min / n_min)

    grid = np.linspace(np.log(n_min), np.log(N_SEARCH_MAX), 241)
    n_grid = np.exp(grid)
    eff = result.fitted(n_grid) / (n_grid * x_min / n_min)
    n_grid[0] = n_min  # the answer when the curve starts below 0.5 (bracket: log_n)
    found = n_at_efficiency(n_grid, eff, threshold, efficiency_of=efficiency, log_n=grid)
    return np.inf if np.isnan(found) else found


def law_figures(result: FitResult, n_min: float, n_max: float,
                threshold: float = 0.5) -> dict[str, float]:
    """The law's own derived figures plus the efficiency-based ones above."""
    out = result.derived()
    out["n_at_threshold"] = n_at_threshold(result, n_min, threshold)
    x_max_n, x_next = result.fitted([n_max, 2.0 * n_max])
    out["next_doubling_gain"] = float(x_next / x_max_n - 1.0)
    return out


def multiple_columns(multiples: tuple[int, ...] = MULTIPLES) -> tuple[str, ...]:
    """The fits.parquet columns ``predictions_at_multiples`` fills."""
    return ("predicted_at_n_min", *(f"{k}_at_{m}x_n_max" for m in multiples
                                    for k in ("predicted", "pi_low", "pi_high")))


def predictions_at_multiples(result: FitResult, n_min: float, n_max: float, interval: float,
                             multiples: tuple[int, ...] = MULTIPLES) -> dict[str, float]:
    """The law's throughput at ``n_min`` (the efficiency reference) and at each multiple of
    ``n_max``, with the ``interval`` prediction interval for one new measurement there
    (``prediction_columns``); NaN where the law cannot predict."""
    n = np.array([n_min] + [m * n_max for m in multiples], float)
    try:
        pred = prediction_columns(result, n, interval)
    except Exception:  # noqa: BLE001 - no prediction; the report says so
        return dict.fromkeys(multiple_columns(multiples), np.nan)
    predicted, low, high = (np.asarray(pred[k], float) for k in ("predicted", "pi_low", "pi_high"))
    out = {"predicted_at_n_min": float(predicted[0])}
    for i, m in enumerate(multiples, start=1):
        out.update({f"predicted_at_{m}x_n_max": float(predicted[i]),
                    f"pi_low_at_{m}x_n_max": float(low[i]), f"pi_high_at_{m}x_n_max": float(high[i])})
    return out
