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

from typing import Mapping

import numpy as np
import pandas as pd


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


# -- Mondrian split-conformal intervals on leave-source-out scores ------------------------------
# A level of a cell's chain is used when its scores come from at least this many sources other
# than the held-out one: fewer labs say little about a lab the model never saw.
MONDRIAN_MIN_SOURCES = 3


def min_scores(level: float) -> int:
    """The fewest scores whose split-conformal quantile at ``level`` is finite:
    ceil((m + 1) level) <= m, i.e. m >= level / (1 - level) (19 at 0.95)."""
    return int(np.ceil(level / (1.0 - level) - 1e-9))


def per_configuration(scores: np.ndarray, config: np.ndarray, source: np.ndarray,
                      cell: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One score per distinct configuration (the median of its rows' scores, with its source and
    cell): runs repeated at one configuration (software releases, repeats) would otherwise count
    as many independent cases and set the quantile. Finite scores only; order by config key."""
    frame = pd.DataFrame({"score": scores, "config": config, "source": source, "cell": cell})
    frame = frame[np.isfinite(frame["score"].to_numpy(float))]
    g = frame.groupby("config", sort=True)
    return (g["score"].median().to_numpy(float), g["source"].first().to_numpy(object),
            g["cell"].first().to_numpy(object))


def _level_quantile(scores: np.ndarray, sources: np.ndarray, mask: np.ndarray, level: float,
                    min_sources: int) -> float:
    """The conformal quantile of the scores under ``mask``, NaN unless they number at least
    :func:`min_scores` and come from at least ``min_sources`` sources."""
    if mask.sum() < min_scores(level) or np.unique(sources[mask]).size < min_sources:
        return np.nan
    return conformal_quantile(scores[mask], level)


def mondrian_quantiles(scores: np.ndarray, sources: np.ndarray, cells: np.ndarray,
                       chain, level: float, exclude: str | None = None) -> dict[str, float]:
    """Per cell, the conformal quantile at the first level of ``chain(cell)`` (keys: chip family
    x kind, architecture x kind, kind, 'production'; pipeline/calibrate/classes.py; the kind is
    the chain's next-to-last level) with enough scores from sources other
    than ``exclude`` (``MONDRIAN_MIN_SOURCES`` of them; the last level, all production, any);
    keyed by every level that has enough (a planner row walks the same chain). A kind without
    enough is an unseen class: :func:`unseen_kind_quantile`.
    ``scores`` one per configuration (:func:`per_configuration`)."""
    keep = np.ones(scores.size, bool) if exclude is None else sources != exclude
    members: dict[str, np.ndarray] = {}
    last = set()
    for cell in sorted(set(cells.tolist())):
        keys = chain(cell)
        last.add(keys[-1])
        for depth, key in enumerate(keys):
            if key not in members:
                inside = np.array([chain(c)[depth] == key for c in cells.tolist()], bool)
                members[key] = inside & keep
    out = {}
    for key, mask in members.items():
        # the last level (all production) takes any sources, as the unclassed interval did
        need = 1 if key in last else MONDRIAN_MIN_SOURCES
        q = _level_quantile(scores, sources, mask, level, need)
        if np.isfinite(q):
            out[key] = q
    kinds = {chain(c)[-2] for c in cells.tolist() if len(chain(c)) > 2}
    widest = unseen_kind_quantile([out[k] for k in kinds if k in out],
                                  [out[k] for k in last if k in out])
    for kind in kinds - set(out):
        if np.isfinite(widest):
            out[kind] = widest
    return out


def unseen_kind_quantile(calibrated: list[float], production: list[float]) -> float:
    """The half-width of a kind (moe, long context, ...) whose scores come from too few other
    sources to calibrate it: the largest of the calibrated kinds' quantiles and production's.

    Such a kind is a class the other sources do not describe (e.g. MoE with Megatron-Bridge
    left out: 11 configurations from 2 sources, where 19 from 3 are needed), so its error on an
    unseen source is not estimated by them, nor by the production quantile, which pools the
    kinds the data do calibrate. Treating the calibrated kinds as exchangeable draws of a kind,
    the unseen kind's quantile is a further draw: the split-conformal bound over K kinds at
    rank ceil((K + 1) level) exceeds K for the few kinds there are, and the largest of them is
    the tightest finite bound (Vovk et al. 2005 §4.5, Mondrian taxonomies; the categories here
    are the kinds). Never narrower than production. NaN where nothing is calibrated."""
    values = [float(v) for v in list(calibrated) + list(production) if np.isfinite(v)]
    return max(values) if values else np.nan


def first_in_chain(q: Mapping[str, float], keys) -> float:
    """The half-width of the first key of ``keys`` that ``q`` has (NaN if none)."""
    return next((float(q[k]) for k in keys if k in q), np.nan)


def mondrian_half_widths(scores: np.ndarray, config: np.ndarray, source: np.ndarray,
                         cell: np.ndarray, production: np.ndarray, chain, level: float
                         ) -> tuple[np.ndarray, dict[str, float]]:
    """(per row: the leave-source-out Mondrian half-width of its cell, computed without its own
    source's scores (the layout sweeps' rows too: they are scored on the production sources'
    scores); the half-widths per chain key over every production source, for the planner).
    Calibration scores: the production rows', one per distinct configuration."""
    cs, csrc, ccell = per_configuration(np.where(production, scores, np.nan), config, source,
                                        cell)
    out = np.full(scores.size, np.nan)
    for s in sorted(set(x for x in source.tolist() if isinstance(x, str))):
        q = mondrian_quantiles(cs, csrc, ccell, chain, level, exclude=s)
        mine = source == s
        for c in set(cell[mine].tolist()):
            out[mine & (cell == c)] = first_in_chain(q, chain(c))
    return out, mondrian_quantiles(cs, csrc, ccell, chain, level)
