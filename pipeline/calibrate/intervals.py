"""Naive predictors and empirically calibrated (split-conformal) prediction intervals.

Naive rules (the baselines every predictor is scored against, on the same cases):
- ``naive_linear``: per-accelerator throughput stays what it was at the largest training N,
  y(n) = y(n_max) n / n_max (median over repeated runs at n_max);
- ``naive_loglinear``: the straight line in log y against log n through the two largest
  training N (medians at each), extended to n.

Conformal intervals (Vovk et al. 2005; Lei et al. 2018, split conformal with a scale function):
the nonconformity score of a held-out case is |log(actual / predicted)| / s, with
s = sd * (1 + log2(n_target / n_train_max)) (the predictor's own log-scale sd where it has one,
else 1), growing with the extrapolation distance. A case's interval uses the ``level`` quantile
of the scores of every case from OTHER groups (other series, or other sources): never its own.
"""

from __future__ import annotations

import numpy as np


def _median_at(n: np.ndarray, y: np.ndarray, level: float) -> float:
    return float(np.median(y[n == level]))


def naive_linear(n_train: np.ndarray, y_train: np.ndarray, n_target: np.ndarray) -> np.ndarray:
    """y(n_max) n / n_max: per-accelerator throughput as at the largest training N."""
    top = float(np.max(n_train))
    return _median_at(n_train, y_train, top) * np.asarray(n_target, float) / top


def naive_loglinear(n_train: np.ndarray, y_train: np.ndarray, n_target: np.ndarray
                    ) -> np.ndarray:
    """Log-log line through the two largest training N (medians); NaN with one distinct N."""
    levels = np.unique(n_train)
    if levels.size < 2:
        return np.full(np.shape(n_target), np.nan)
    n1, n2 = levels[-2], levels[-1]
    y1, y2 = _median_at(n_train, y_train, n1), _median_at(n_train, y_train, n2)
    slope = np.log(y2 / y1) / np.log(n2 / n1)
    return y2 * (np.asarray(n_target, float) / n2) ** slope


def distance_scale(sd: np.ndarray, n_target: np.ndarray, n_train_max: np.ndarray) -> np.ndarray:
    """s = sd (1 + log2(n_target / n_train_max)): the conformal score's scale."""
    d = np.log2(np.maximum(np.asarray(n_target, float) / np.asarray(n_train_max, float), 1.0))
    return np.asarray(sd, float) * (1.0 + d)


def conformal_quantile(scores: np.ndarray, level: float) -> float:
    """The split-conformal quantile of ``scores``: the ceil((m + 1) level)-th smallest of the m
    finite scores; NaN where that rank exceeds m (too few scores: the quantile would be
    infinite)."""
    scores = np.sort(np.asarray(scores, float)[np.isfinite(scores)])
    rank = int(np.ceil((scores.size + 1) * level))
    return float(scores[rank - 1]) if 0 < rank <= scores.size else np.nan


def leave_group_out_quantile(scores: np.ndarray, groups: np.ndarray, level: float
                             ) -> np.ndarray:
    """Per case, the conformal quantile of the scores of all cases outside its group.

    The finite-sample quantile ceil((m + 1) level) / m of the m other scores (split conformal);
    NaN where fewer than 1 / (1 - level) other cases exist (the quantile would be infinite).
    The scores are sorted once: the r-th smallest of the others lies among the r-th to the
    (r + own)-th smallest of all, so each group needs only its own few scores, not a pass over
    every case (which made this quadratic in the cases).
    """
    scores = np.asarray(scores, float)
    labels, codes = np.unique(np.asarray(groups, dtype=object).astype(str), return_inverse=True)
    finite = np.isfinite(scores)
    every = np.sort(scores[finite])
    order = np.argsort(codes, kind="stable")
    starts = np.searchsorted(codes[order], np.arange(labels.size + 1))
    out = np.full(scores.size, np.nan)
    for g in range(labels.size):
        members = order[starts[g]:starts[g + 1]]
        own = np.sort(scores[members][finite[members]])
        m = every.size - own.size
        rank = int(np.ceil((m + 1) * level))
        if not 0 < rank <= m:
            continue
        candidates = every[rank - 1:rank + own.size]
        others = (np.searchsorted(every, candidates, side="right")
                  - np.searchsorted(own, candidates, side="right"))
        out[members] = candidates[np.argmax(others >= rank)]
    return out


def conformal_interval(predicted: np.ndarray, scale: np.ndarray, q: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """predicted x exp(-/+ q s)."""
    half = np.asarray(q, float) * np.asarray(scale, float)
    return predicted * np.exp(-half), predicted * np.exp(half)
