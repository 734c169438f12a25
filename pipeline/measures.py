"""Derived measures used by more than one stage, each computed by one function here.

* FLOP per token: ``6 N_act`` (forward + backward matmuls, Kaplan et al. 2020) plus the
  self-attention term ``12 L d T`` (PaLM, Chowdhery et al. 2022, arXiv:2204.02311, App. B).
* Training compute ``C = 6 N_act D`` (the same accounting without attention, as the scaling
  laws of theory.md §1 state it).
* The finished-run filter: runs whose ``status`` is ``ok`` (missing = ok); ``oom``, ``error``,
  ``aborted`` and ``no_run_stop`` runs are kept in ``runs.parquet`` but measure nothing.
* A series' measured points: its finished runs with a positive y.
* The extrapolation grid on which the fit stage writes each law's curve and the theory stage
  each series' ceiling, so compare joins them point by point.
* N at a threshold efficiency: the first N where efficiency falls below the threshold.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd

#: FLOP per active parameter per training token (forward 2, backward 4)
FLOP_PER_PARAM_PER_TOKEN = 6.0
#: attention FLOP per token per layer, per unit of d_model x sequence length (PaLM App. B)
ATTENTION_FLOP_FACTOR = 12.0


def attention_flop_per_token(n_layers, d_model, seq_len):
    """``12 L d T`` FLOP per token for self-attention (scalars or arrays)."""
    return ATTENTION_FLOP_FACTOR * n_layers * d_model * seq_len


def flop_per_token(active_params: float, n_layers: int | None, d_model: int | None,
                   seq_len: int | None, attention: bool = True) -> tuple[float, bool]:
    """Model FLOPs per training token: ``6 N_act`` plus ``12 L d T`` when ``attention`` and the
    shape is known. Returns the FLOPs and whether the attention term was included."""
    flops = FLOP_PER_PARAM_PER_TOKEN * active_params
    if attention and n_layers and d_model and seq_len:
        return flops + attention_flop_per_token(n_layers, d_model, seq_len), True
    return flops, False


def training_flop(active_params, tokens):
    """Training compute ``C = 6 N_act D`` (theory.md §1)."""
    return FLOP_PER_PARAM_PER_TOKEN * active_params * tokens


def finished(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs that finished and were measured (``status`` ok or missing)."""
    if "status" not in runs.columns:
        return runs
    return runs[runs["status"].fillna("ok") == "ok"]


def best_per_point(c: pd.DataFrame, col: str, keys: tuple[str, ...] = ()) -> pd.DataFrame:
    """The best (highest) ``col`` per (source, model, accelerator family, N, *keys): a grid
    search of thousands of configurations counts as one point per N, its best one."""
    by = ["source", "model", "accelerator_family", "n_accelerators", *keys]
    g = c.dropna(subset=[col, *keys])
    return g.loc[g.groupby(by, sort=True)[col].idxmax()] if len(g) else g


def y_column(runs: pd.DataFrame, y_metric: str | None) -> str:
    """The series' y column: its ``y_metric`` when the runs carry it, else model FLOP/s."""
    return y_metric if y_metric in runs.columns else "model_flops_per_s"


def series_runs(runs: pd.DataFrame, series_id: str, ycol: str) -> pd.DataFrame:
    """A series' measured points: its finished runs with a finite positive ``ycol``."""
    g = finished(runs[runs["series_id"] == series_id])
    return g[np.isfinite(g[ycol].astype(float)) & (g[ycol] > 0)]


def extrapolation_grid(n_min: float, targets: Sequence[int], points: int) -> np.ndarray:
    """N from the series' smallest measured N to the largest target: ``points`` log-spaced
    values, plus ``n_min`` and every target exactly (sorted, unique)."""
    return np.unique(np.concatenate([[n_min], np.geomspace(n_min, max(targets), points),
                                     targets]))


def n_at_efficiency(n: np.ndarray, efficiency: np.ndarray, threshold: float,
                    efficiency_of: Callable[[float], float] | None = None,
                    log_n: np.ndarray | None = None) -> float:
    """The first N of the (sorted) grid ``n`` where ``efficiency`` falls below ``threshold``.

    Between the last grid point above and the first below, N is interpolated linearly in log N;
    with ``efficiency_of`` (a continuous curve, e.g. a fitted law) it is instead the root of
    ``efficiency_of(N) = threshold`` in that bracket. ``n[0]`` when the first point is already
    below; NaN when no point is. ``log_n`` gives log N where the caller built the grid in log
    space (the bracket is then exactly its grid values).
    """
    below = np.flatnonzero(np.isfinite(efficiency) & (efficiency < threshold))
    if not len(below):
        return np.nan
    i = int(below[0])
    if i == 0:
        return float(n[0])
    x0, x1 = (np.log(n[i - 1]), np.log(n[i])) if log_n is None else (log_n[i - 1], log_n[i])
    if efficiency_of is not None:
        from scipy.optimize import brentq  # here: one-shot commands import this module
        return float(np.exp(brentq(lambda x: efficiency_of(np.exp(x)) - threshold, x0, x1,
                                   xtol=1e-10)))
    e0, e1 = efficiency[i - 1], efficiency[i]
    return float(np.exp(x0 + (threshold - e0) * (x1 - x0) / (e1 - e0)))
