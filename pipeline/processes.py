"""A map over independent items in a standard-library process pool, results in input order.

The fit stage's series and calibrate's held-out refits are each a function of one item and of
data shared by all items: ``map_in_order`` runs them in a ``concurrent.futures`` process pool
and returns the results in input order, so a stage's outputs do not depend on the number of
workers. The shared data go to each worker once (``initargs``: inherited, not pickled, where
processes are forked), not once per item. The pool never has more processes than the CPUs this
process may run on (nor than ``SCALEWALL_WORKERS``, when set): more would only share the same
cores and hold more memory.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_SHARED: tuple[Any, ...] = ()


def usable_workers(requested: int) -> int:
    """``requested``, at most the CPUs available to this process and ``SCALEWALL_WORKERS``
    (when set: a cap for every stage's pool, e.g. where the cores already run other work, as
    the test suite's worker processes do), at least 1."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        cpus = os.cpu_count() or 1
    cap = os.environ.get("SCALEWALL_WORKERS", "").strip()
    if cap.isdigit() and int(cap) >= 1:
        cpus = min(cpus, int(cap))
    return max(1, min(int(requested), cpus))


def _share(*shared: Any) -> None:
    global _SHARED
    _SHARED = shared


def _call(fn: Callable[..., R], item: Any) -> R:
    return fn(*_SHARED, item)


def map_in_order(fn: Callable[..., R], items: Iterable[T], workers: int,
                 shared: tuple[Any, ...] = ()) -> list[R]:
    """``[fn(*shared, x) for x in items]``, over ``usable_workers(workers)`` processes when
    that is more than one and there is more than one item. ``fn`` must be a module-level
    function (it is pickled by name)."""
    items = list(items)
    workers = min(usable_workers(workers), len(items))
    if workers <= 1:
        return [fn(*shared, x) for x in items]
    chunk = max(1, len(items) // (8 * workers))
    with ProcessPoolExecutor(max_workers=workers, initializer=_share,
                             initargs=shared) as pool:
        return list(pool.map(functools.partial(_call, fn), items, chunksize=chunk))
