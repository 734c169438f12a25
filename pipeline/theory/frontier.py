"""The frontier of one scenario over training compute, and its knee and wall.

knee: the largest C whose utilization is at least ``knee_fraction`` (0.9) of the plateau, the
highest utilization over the grid [R, theory.md §6.4]. wall: the largest feasible C [R]. Both are
first bracketed on the log-spaced grid and then refined by bisection in log C, each step a full
layout search at one C.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pipeline.theory.scenarios import Scenario
from pipeline.theory.search import Frontier, search


@dataclass(frozen=True)
class Headline:
    knee_flop: float
    wall_flop: float
    plateau_utilization: float
    knee_utilization: float
    wall_beyond_grid: bool
    n_evaluations: int


def flop_grid(min_flop: float, max_flop: float, points: int) -> np.ndarray:
    """Log-spaced training compute grid (FLOP)."""
    return np.logspace(np.log10(min_flop), np.log10(max_flop), points)


def _bisect(scn: Scenario, lo: float, hi: float, good, steps: int) -> tuple[float, int]:
    """Largest C in [lo, hi] (log scale) with good(search(C)), lo good and hi not."""
    n_eval = 0
    for _ in range(steps):
        mid = float(np.sqrt(lo * hi))
        f = search(scn, np.array([mid]))
        n_eval += f.n_evaluations
        if good(f):
            lo = mid
        else:
            hi = mid
    return lo, n_eval


def headline(scn: Scenario, front: Frontier, knee_fraction: float, refine_steps: int
             ) -> Headline:
    """Knee and wall of a frontier, refined by bisection between grid points."""
    flop, u, feas = front.training_flop, front.utilization, front.feasible
    n_eval = 0
    if not feas.any():
        return Headline(np.nan, np.nan, np.nan, np.nan, False, 0)
    plateau = float(u[feas].max())
    threshold = knee_fraction * plateau
    last = int(np.nonzero(feas)[0].max())
    wall, beyond = float(flop[last]), last == flop.size - 1
    if not beyond:
        wall, n = _bisect(scn, flop[last], flop[last + 1], lambda f: bool(f.feasible[0]),
                          refine_steps)
        n_eval += n
    above = feas & (u >= threshold)
    knee_i = int(np.nonzero(above)[0].max())
    knee = float(flop[knee_i])
    if knee_i < flop.size - 1:
        knee, n = _bisect(scn, flop[knee_i], flop[knee_i + 1],
                          lambda f: bool(f.feasible[0] and f.utilization[0] >= threshold),
                          refine_steps)
        n_eval += n
        knee = min(knee, wall)
    knee_u = float(search(scn, np.array([knee])).utilization[0])
    return Headline(knee, wall, plateau, knee_u, beyond, n_eval)


def frontier_frame(name: str, front: Frontier) -> pd.DataFrame:
    """Rows of ``frontier.parquet`` for one scenario (ARCHITECTURE.md columns first)."""
    tp = front.tp1 * front.tp2
    return pd.DataFrame({
        "scenario": name,
        "training_flop": front.training_flop,
        "utilization": front.utilization,
        "n_accelerators": front.n_accelerators,
        "dp": front.dp,
        "tp": tp,
        "pp": front.pp,
        "ep": front.ep,
        "microbatches": front.microbatches,
        "global_batch_tokens": front.global_batch_tokens,
        "binding": front.binding.astype(str),
        "feasible": front.feasible,
        "tp1": front.tp1,
        "tp2": front.tp2,
        "train_time_s": front.train_time_s,
    })
