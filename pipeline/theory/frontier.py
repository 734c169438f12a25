"""The frontier of one scenario over training compute, and its knee and wall.

knee: the largest C whose utilization is at least ``knee_fraction`` (0.9) of the plateau, the
highest utilization over the grid [R, theory.md §6.4]. wall: the largest feasible C [R]. Both are
first bracketed on the log-spaced grid and then refined inside the bracket by passes of
log-spaced points, each point a full layout search.
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


def _refine(scn: Scenario, lo: float, hi: float, good, rounds: int, points: int
            ) -> tuple[float, int]:
    """Largest C in [lo, hi) with ``good`` (lo is good), found by ``rounds`` passes of
    ``points`` log-spaced searches, each pass one vectorised search over all its points."""
    n_eval = 0
    for _ in range(rounds):
        inner = np.geomspace(lo, hi, points + 2)[1:-1]
        f = search(scn, inner)
        n_eval += f.n_evaluations
        ok = np.nonzero(good(f))[0]
        i = int(ok.max()) if ok.size else -1
        lo, hi = (float(inner[i]) if i >= 0 else lo), (float(inner[i + 1]) if i + 1 < points
                                                          else hi)
    return lo, n_eval


def headline(scn: Scenario, front: Frontier, knee_fraction: float, rounds: int = 2,
             points: int = 8) -> Headline:
    """Knee and wall of a frontier, refined between grid points (log C resolution of the grid
    step / (points + 1)^rounds)."""
    flop, u, feas = front.training_flop, front.utilization, front.feasible
    n_eval = 0
    if not feas.any():
        return Headline(np.nan, np.nan, np.nan, np.nan, False, 0)
    plateau = float(u[feas].max())
    threshold = knee_fraction * plateau
    last = int(np.nonzero(feas)[0].max())
    wall, beyond = float(flop[last]), last == flop.size - 1
    if not beyond:
        wall, n = _refine(scn, flop[last], flop[last + 1], lambda f: f.feasible, rounds, points)
        n_eval += n
    above = feas & (u >= threshold)
    knee_i = int(np.nonzero(above)[0].max())
    knee = float(flop[knee_i])
    if knee_i < flop.size - 1:
        knee, n = _refine(scn, flop[knee_i], flop[knee_i + 1],
                          lambda f: f.feasible & (f.utilization >= threshold), rounds, points)
        n_eval += n
        knee = min(knee, wall)
    knee_u = float(search(scn, np.array([knee])).utilization[0])
    return Headline(knee, wall, plateau, knee_u, beyond, n_eval)


def frontier_frame(name: str, front: Frontier) -> pd.DataFrame:
    """Rows of ``frontier.parquet`` for one scenario (the contract's columns first,
    pipeline/theory/contract.py)."""
    tp = front.tp1 * front.tp2
    frame = pd.DataFrame({
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
        "memory_bytes_per_accelerator": front.memory_bytes_per_accelerator,
        "fits_memory": front.fits_memory,
        "tp1": front.tp1,
        "tp2": front.tp2,
        "train_time_s": front.train_time_s,
    })
    degrees = ["n_accelerators", "dp", "tp", "pp", "ep", "microbatches", "tp1", "tp2"]
    if np.isfinite(frame[degrees].to_numpy()).all():
        frame[degrees] = frame[degrees].round().astype("int64")
    return frame
