"""The fit stage's map over series, in worker processes when there are enough series.

Each series is fitted on its own (its runs and the settings, nothing shared), so the fit stage
is a map over series: ``map_in_order`` runs it in a ``concurrent.futures`` process pool of
``fit.workers`` processes and returns the results in input order, so outputs do not depend on
the number of workers. Below ``MIN_PARALLEL`` series the pool's start-up and the copying of
results cost more than they save (``benchmarks/bench_scale.py`` measures the stage), and the
map runs in this process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

MIN_PARALLEL = 200


def map_in_order(fn: Callable[[T], R], items: Iterable[T], workers: int) -> list[R]:
    """``[fn(x) for x in items]``, over ``workers`` processes when there are enough items."""
    items = list(items)
    if workers <= 1 or len(items) < MIN_PARALLEL:
        return [fn(x) for x in items]
    chunk = max(1, len(items) // (8 * workers))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, items, chunksize=chunk))
