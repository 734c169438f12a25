"""Timing shared by the benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def best_of(fn: Callable[[], T], reps: int = 5) -> tuple[T, float, float]:
    """(last result, best wall s, best CPU s) of ``reps`` calls of ``fn``. Best of several: the
    machine is shared, so wall time is noisy; CPU time (process_time) is the figure that does
    not depend on other processes' load."""
    best_wall = best_cpu = float("inf")
    result: T
    for _ in range(reps):
        w, c = time.perf_counter(), time.process_time()
        result = fn()
        best_wall = min(best_wall, time.perf_counter() - w)
        best_cpu = min(best_cpu, time.process_time() - c)
    return result, best_wall, best_cpu
