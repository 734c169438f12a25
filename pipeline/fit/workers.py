"""The fit stage's map over series, in worker processes when there are enough series.

Each series is fitted on its own (its runs and the settings, nothing shared), so the fit stage
is a map over series: ``map_in_order`` runs it over ``fit.workers`` processes
(``pipeline.processes``: at most the machine's CPUs, results in input order, so outputs do not
depend on the number of workers). Below ``MIN_PARALLEL`` series the pool's start-up and the
copying of results cost more than they save (``benchmarks/bench_scale.py`` measures the
stage), and the map runs in this process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from pipeline import processes

T = TypeVar("T")
R = TypeVar("R")

MIN_PARALLEL = 200


def map_in_order(fn: Callable[[T], R], items: Iterable[T], workers: int) -> list[R]:
    """``[fn(x) for x in items]``, over ``workers`` processes when there are enough items."""
    items = list(items)
    return processes.map_in_order(fn, items, workers if len(items) >= MIN_PARALLEL else 1)
