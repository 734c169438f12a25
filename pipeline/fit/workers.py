"""The fit stage's map over series, in worker processes when there are enough series.

Each series is fitted on its own (its runs and the settings, nothing else), so the fit stage
is a map over series: ``map_in_order`` runs it over ``fit.workers`` processes
(``pipeline.processes``: at most the machine's CPUs, results in input order, so outputs do not
depend on the number of workers). Below ``MIN_PARALLEL`` series the pool's start-up and the
copying of results cost more than they save (``benchmarks/bench_scale.py`` measures the
stage), and the map runs in this process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pipeline import processes

T = TypeVar("T")
R = TypeVar("R")

MIN_PARALLEL = 200


def map_in_order(fn: Callable[..., R], items: Iterable[T], workers: int,
                 shared: tuple[Any, ...] = ()) -> list[R]:
    """``[fn(*shared, x) for x in items]``, over ``workers`` processes when there are enough
    items (``shared`` sent to each worker once)."""
    items = list(items)
    return processes.map_in_order(fn, items, workers if len(items) >= MIN_PARALLEL else 1,
                                  shared)
