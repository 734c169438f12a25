"""A map over independent items, results in input order, on this machine or on a Dask cluster.

The fit stage's series, calibrate's held-out refits, theory's scenarios and held-out memory fits
and ingest's MLPerf power logs are each a function of one item and of data shared by all items:
``map_in_order`` runs them and returns the results in input order, so a stage's outputs do not
depend on where or over how many workers they ran. Ingest's step logs use ``stream_in_order``,
the same map yielding each result as soon as the ones ahead of it are in.

Where the maps run is ``params.yaml``'s ``executor`` group (``ExecutorSettings``), set for the
length of a stage by ``using(settings)`` (the CLI does it for the stages in ``MAPPED_STAGES``):

- ``local`` (the default): a standard-library ``concurrent.futures`` process pool. The shared
  data go to each worker once (``initargs``: inherited, not pickled, where processes are
  forked), not once per item. The pool never has more processes than the CPUs this process may
  run on (nor than ``SCALEWALL_WORKERS``, when set): more would only share the same cores.
- ``dask``: the ``dask.distributed`` scheduler at ``executor.address`` (``tcp://host:8786``);
  the cluster (its workers, their memory limit) is whoever started it.
- ``local-cluster``: a ``dask.distributed.LocalCluster`` of ``executor.cluster_workers``
  processes (one thread each, ``executor.worker_memory_bytes`` each) started for the stage.

Under Dask the shared data are scattered to every worker once; the items go in chunks (at most
``CHUNKS_PER_WORKER`` per worker, like the local pool's ``chunksize``; a stream's tasks up to
``STREAM_GROUP`` at a time), so a Dask task's cost (~5 ms of a worker's CPU and as much of
this process's, measured) is paid per chunk, not per item; each chunk's results come back as
one pickled bytes object. A worker that dies mid-map (killed,
out of memory) costs its chunks a rerun on another worker (the scheduler's
``distributed.scheduler.allowed-failures``, 3 by default); an exception raised by a task is
retried ``executor.retries`` times (a transient read error of an object store), then stops the
stage as it would locally. Dask is imported only when chosen: ``local`` needs nothing started.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import itertools
import os
import pickle
import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from pipeline.config import ExecutorSettings

T = TypeVar("T")
R = TypeVar("R")

_SHARED: tuple[Any, ...] = ()
#: the stages whose maps follow ``executor`` (the others, e.g. the report's figures, which
#: write files the main process reads, always run on this machine)
MAPPED_STAGES = frozenset({"ingest", "fit", "theory", "calibrate"})
#: Dask tasks per worker in one map: enough to balance uneven items, few enough that the
#: scheduler's per-task cost stays small beside the work
CHUNKS_PER_WORKER = 8
#: tasks of ``stream_in_order`` run as one Dask task (a Dask task costs ~5 ms of a worker's
#: CPU and as much of the client's, measured; a batch of 64 small step logs ~50 ms)
STREAM_GROUP = 16
#: a ``local-cluster``'s settings: no statistical profiler (it samples every worker's stack
#: every 10 ms; no map here reads it) and the event loops' housekeeping once a second, not every
#: 20-500 ms (an idle two-worker cluster took 0.59 CPU-s per 10 s with dask's defaults, 0.16
#: with these, measured; the memory limit is then checked once a second)
CLUSTER_CONFIG = {"distributed.worker.profile.enabled": False,
                  "distributed.admin.tick.interval": "1s",
                  "distributed.admin.system-monitor.interval": "1s",
                  "distributed.worker.memory.monitor-interval": "1s"}
#: Dask's debugging history in the stage's process, for either Dask kind: every ``BatchedSend``
#: keeps its last ``distributed.admin.low-level-log-length`` messages (default 1,000;
#: dask/distributed#1630), the client's among them the graphs it sent, each step-log task's
#: arguments (1,024 logs' paths, ~0.3 MB), so the main process held the last 1,000 tasks': 267
#: MiB more than under ``local`` at 10^6 logs (measured). The scheduler's transition and event
#: logs share the setting.
LOG_CONFIG = {"distributed.admin.low-level-log-length": 16}
#: Dask chunks in flight at once per worker in ``stream_in_order`` (bounds the results held)
STREAM_WINDOW_PER_WORKER = 4
#: local pool tasks submitted and not yet read, per process, in ``stream_in_order``: the
#: results waiting for a slower reader (a stage's main process behind many workers) stay
#: bounded (a batch of 64 small step logs comes back as ~100 kB), and a worker still has
#: tasks queued behind one large item
LOCAL_WINDOW_PER_WORKER = 32


class _Active:
    """The Dask client of the stage running now (None: the local pool)."""

    client: Any = None
    retries: int = 0
    #: maps and tasks sent to the cluster while it was active (``using`` reports them)
    maps: int = 0
    tasks: int = 0


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


@contextlib.contextmanager
def using(cfg: ExecutorSettings) -> Iterator[Any]:
    """The body's maps run where ``cfg`` says (yields the Dask client, or None for ``local``);
    a cluster started here (``local-cluster``) is closed after it."""
    if cfg.kind == "local":
        saved, _Active.client = _Active.client, None
        try:
            yield None
        finally:
            _Active.client = saved
        return
    import dask.config
    from distributed import Client, LocalCluster

    with contextlib.ExitStack() as stack:
        stack.enter_context(dask.config.set(LOG_CONFIG))  # read as the client and cluster start
        if cfg.kind == "local-cluster":
            stack.enter_context(dask.config.set(CLUSTER_CONFIG))  # the nannies pass it on
            cluster = stack.enter_context(LocalCluster(
                n_workers=cfg.cluster_workers, threads_per_worker=1, processes=True,
                memory_limit=cfg.worker_memory_bytes, dashboard_address=None,
                host="127.0.0.1"))
            client = stack.enter_context(Client(cluster))
        else:
            client = stack.enter_context(Client(cfg.address, timeout=cfg.connect_timeout_s))
        saved = (_Active.client, _Active.retries, _Active.maps, _Active.tasks)
        _Active.client, _Active.retries, _Active.maps, _Active.tasks = client, cfg.retries, 0, 0
        stack.callback(_restore, saved, f"{cfg.kind} ({_dask_workers(client)} workers)")
        yield client


def stage_executor(stage: str, cfg: ExecutorSettings) -> contextlib.AbstractContextManager[Any]:
    """``using(cfg)`` for a stage in ``MAPPED_STAGES``, else the local pool."""
    return using(cfg if stage in MAPPED_STAGES else ExecutorSettings())


def _restore(saved: tuple[Any, int, int, int], where: str) -> None:
    print(f"executor {where}: {_Active.maps} maps, {_Active.tasks} tasks on the cluster",
          file=sys.stderr)
    _Active.client, _Active.retries, _Active.maps, _Active.tasks = saved


def _share(*shared: Any) -> None:
    global _SHARED
    _SHARED = shared


def _call(fn: Callable[..., R], item: Any) -> R:
    return fn(*_SHARED, item)


def _call_chunk(fn: Callable[..., R], shared: tuple[Any, ...], chunk: list[Any]) -> bytes:
    """``[fn(*shared, x) for x in chunk]``, pickled in the worker (Dask passes bytes on as they
    are)."""
    return pickle.dumps([fn(*shared, x) for x in chunk], protocol=pickle.HIGHEST_PROTOCOL)




def _chunks(items: list[T], size: int) -> list[list[T]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def _dask_workers(client: Any) -> int:
    return max(1, len(client.scheduler_info(n_workers=-1).get("workers", {})))


def map_in_order(fn: Callable[..., R], items: Iterable[T], workers: int,
                 shared: tuple[Any, ...] = ()) -> list[R]:
    """``[fn(*shared, x) for x in items]``: in this process when ``workers`` is 1 (a caller's
    choice, e.g. too little work to pay for workers) or there is one item; else over
    ``usable_workers(workers)`` local processes, or the stage's Dask cluster (whatever its
    size). ``fn`` must be a module-level function (it is pickled by name)."""
    items = list(items)
    client = _Active.client
    if client is not None and workers > 1 and len(items) > 1:
        return _dask_map(client, fn, items, shared)
    workers = min(usable_workers(workers), len(items))
    if workers <= 1:
        return [fn(*shared, x) for x in items]
    chunk = max(1, len(items) // (8 * workers))
    with ProcessPoolExecutor(max_workers=workers, initializer=_share,
                             initargs=shared) as pool:
        return list(pool.map(functools.partial(_call, fn), items, chunksize=chunk))


def _dask_map(client: Any, fn: Callable[..., R], items: list[T],
              shared: tuple[Any, ...]) -> list[R]:
    """``map_in_order`` on a Dask cluster: the shared data scattered once to every worker, the
    items in chunks, the results gathered in input order."""
    size = -(-len(items) // (CHUNKS_PER_WORKER * _dask_workers(client)))
    [shared_on_workers] = client.scatter([shared], broadcast=True, hash=False)
    chunks = _chunks(items, size)
    _Active.maps, _Active.tasks = _Active.maps + 1, _Active.tasks + len(chunks)
    futures = client.map(_call_chunk, [fn] * len(chunks), [shared_on_workers] * len(chunks),
                         chunks, pure=False, retries=_Active.retries)
    try:
        return [r for part in client.gather(futures) for r in pickle.loads(part)]
    finally:
        client.cancel([*futures, shared_on_workers])


@contextlib.contextmanager
def stream_in_order(fn: Callable[[T], R], tasks: list[T], workers: int,
                    initializer: Callable[[], None] | None = None) -> Iterator[Iterator[R]]:
    """``fn(t)`` for every task, yielded in task order as the results come (the caller's work
    on one overlaps the computing of those after it): over ``min(usable_workers(workers),
    len(tasks))`` local processes (at most ``LOCAL_WINDOW_PER_WORKER`` tasks per process
    submitted and not yet read), on the stage's Dask cluster (at most
    ``STREAM_WINDOW_PER_WORKER`` tasks per worker in flight), so the results waiting stay
    bounded; or in this process when ``workers`` is 1. ``initializer`` runs once in each worker
    first. Leaving the ``with`` early cancels the tasks not yet done."""
    client = _Active.client
    if workers <= 1 or len(tasks) <= 1:
        if initializer is not None:
            initializer()
        yield (fn(t) for t in tasks)
    elif client is not None:
        if initializer is not None:
            client.run(initializer)
        with _dask_stream(client, fn, tasks) as results:
            yield results
    else:
        processes = min(usable_workers(workers), len(tasks))
        with ProcessPoolExecutor(max_workers=processes, initializer=initializer) as pool:
            try:
                yield _windowed(pool, fn, tasks, LOCAL_WINDOW_PER_WORKER * processes)
            finally:
                # an early exit must not wait for tasks nobody will read
                pool.shutdown(wait=True, cancel_futures=True)


def _windowed(pool: ProcessPoolExecutor, fn: Callable[[T], R], tasks: list[T],
              window: int) -> Iterator[R]:
    """``pool.map(fn, tasks)``'s results, in order, with at most ``window`` tasks submitted
    and not yet read: the first ``window`` are submitted now, then one in as one comes out."""
    ahead = iter(tasks)
    pending = collections.deque(pool.submit(fn, t) for t in itertools.islice(ahead, window))

    def results() -> Iterator[R]:
        while pending:
            future = pending.popleft()
            for task in itertools.islice(ahead, 1):
                pending.append(pool.submit(fn, task))
            result = future.result()
            del future  # a read result is not held by its future
            yield result

    return results()


@contextlib.contextmanager
def _dask_stream(client: Any, fn: Callable[[T], R], tasks: list[T]) -> Iterator[Iterator[R]]:
    """``stream_in_order`` on a Dask cluster: consecutive tasks grouped into one Dask task (at
    most ``STREAM_GROUP`` each, at least ``CHUNKS_PER_WORKER`` groups per worker when there
    are enough), at most ``STREAM_WINDOW_PER_WORKER`` groups per worker in flight."""
    workers = _dask_workers(client)
    size = max(1, min(STREAM_GROUP, len(tasks) // (CHUNKS_PER_WORKER * workers)))
    groups = _chunks(tasks, size)
    _Active.maps, _Active.tasks = _Active.maps + 1, _Active.tasks + len(groups)
    pending: list[Any] = []

    def submit(group: list[T]) -> None:
        pending.append(client.submit(_call_chunk, fn, (), group, pure=False,
                                     retries=_Active.retries))

    def results() -> Iterator[R]:
        ahead = iter(groups)
        for group in itertools.islice(ahead, STREAM_WINDOW_PER_WORKER * workers):
            submit(group)
        while pending:
            future = pending.pop(0)
            for group in itertools.islice(ahead, 1):  # one in, one out: the window stays full
                submit(group)
            done = pickle.loads(future.result())
            future.release()
            yield from done

    try:
        yield results()
    finally:
        if pending:
            client.cancel(pending)
