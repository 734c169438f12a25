"""pipeline.processes: the map over a process pool gives the in-process results, in order."""

from __future__ import annotations

import os

import numpy as np

from pipeline import processes


def _scaled(table: np.ndarray, offset: float, i: int) -> tuple[int, float, int]:
    return i, float(table[i % table.size] * i + offset), os.getpid()


def test_pool_gives_the_in_process_results_in_input_order(monkeypatch) -> None:
    monkeypatch.delenv("SCALEWALL_WORKERS", raising=False)   # the pool, even under xdist
    table = np.arange(7.0) / 3.0
    items = list(range(40))[::-1]
    plain = [_scaled(table, 0.5, i)[:2] for i in items]
    pooled = processes.map_in_order(_scaled, items, 2, shared=(table, 0.5))
    assert [r[:2] for r in pooled] == plain
    if processes.usable_workers(2) == 2:
        # the items really ran in other processes, the shared data reached them
        assert os.getpid() not in {r[2] for r in pooled}


def test_one_worker_or_one_item_runs_in_this_process() -> None:
    table = np.ones(3)
    for workers, items in ((1, range(5)), (4, [2])):
        out = processes.map_in_order(_scaled, items, workers, shared=(table, 0.0))
        assert {r[2] for r in out} == {os.getpid()}
    assert processes.map_in_order(_scaled, [], 2, shared=(table, 0.0)) == []


def test_workers_never_exceed_the_cpus(monkeypatch) -> None:
    monkeypatch.delenv("SCALEWALL_WORKERS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert processes.usable_workers(8) == 3
    assert processes.usable_workers(2) == 2
    assert processes.usable_workers(0) == 1
    monkeypatch.setenv("SCALEWALL_WORKERS", "1")
    assert processes.usable_workers(2) == 1


def test_the_executor_setting_is_checked_and_local_starts_nothing() -> None:
    """``executor.kind: dask`` needs a scheduler address (ConfigError naming the field); the
    default ``local`` maps without importing Dask (``make test``/``make report`` start nothing)."""
    import subprocess
    import sys

    import pytest

    from pipeline.config import ConfigError, settings
    with pytest.raises(ConfigError, match="executor.address"):
        settings({"executor": {"kind": "dask"}}, "executor")
    with pytest.raises(ConfigError, match="executor.address"):
        settings({"executor": {"kind": "dask", "address": "not an address"}}, "executor")
    assert settings({"executor": {"kind": "dask", "address": "tcp://10.0.0.5:8786"}},
                    "executor").address == "tcp://10.0.0.5:8786"
    probe = ("import sys\nfrom pipeline import processes\nfrom pipeline.config import "
             "ExecutorSettings\nwith processes.using(ExecutorSettings()):\n"
             "    assert processes.map_in_order(abs, [-1, -2], 2) == [1, 2]\n"
             "assert 'distributed' not in sys.modules and 'dask' not in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


class _Pool:
    """A stand-in for a process pool: runs each task when submitted, counts the tasks."""

    def __init__(self) -> None:
        self.submitted = 0

    def submit(self, fn, task):
        from concurrent.futures import Future
        self.submitted += 1
        future: Future = Future()
        future.set_result(fn(task))
        return future


def test_the_local_stream_keeps_a_window_of_tasks_submitted() -> None:
    """The local stream submits ``window`` tasks at once, then one in as one is read: results
    waiting for a slow reader stay bounded, whatever the number of tasks; in order."""
    pool = _Pool()
    results = processes._windowed(pool, lambda t: t * t, list(range(10)), 3)
    assert pool.submitted == 3  # submitted before the first result is asked for
    assert next(results) == 0 and pool.submitted == 4
    assert list(results) == [t * t for t in range(1, 10)] and pool.submitted == 10
