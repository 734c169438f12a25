"""pipeline.processes on a two-worker ``dask.distributed.LocalCluster`` (executor
``local-cluster``): the in-process results in input order, a worker killed mid-map costing a
rerun of its tasks and not the map, and step logs read on the cluster giving the same Records
(a broken log still a reject with its reason). One cluster for the module (it takes seconds to
start)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from pipeline import processes
from pipeline.config import ExecutorSettings, load_params

pytest.importorskip("distributed")

from test_e2e_logs import STEP_TIME_MS, megatron_log  # noqa: E402

CLUSTER = ExecutorSettings(kind="local-cluster", cluster_workers=2,
                           worker_memory_bytes=2**30)


@pytest.fixture(scope="module")
def client():
    with processes.using(CLUSTER) as c:
        yield c


def _square(offset: int, marks: str, i: int) -> tuple[int, int]:
    """``i*i + offset``, slowly, leaving a mark (the worker's pid) when it starts."""
    Path(marks, f"{os.getpid()}-{i}").touch()
    time.sleep(0.15)
    return i * i + offset, os.getpid()


def _pid_with_a_task(marks: Path, busy: set[int], timeout_s: float = 60.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pids = {int(p.name.split("-")[0]) for p in marks.iterdir()} & busy
        if pids:
            return min(pids)
        time.sleep(0.02)
    raise AssertionError("no task started on a worker")


def test_results_in_input_order_on_the_cluster(client, tmp_path: Path) -> None:
    items = list(range(30))[::-1]
    out = processes.map_in_order(_square, items, 2, shared=(7, str(tmp_path)))
    assert [r for r, _ in out] == [i * i + 7 for i in items]
    assert os.getpid() not in {pid for _, pid in out}  # they ran on the workers
    with processes.stream_in_order(abs, list(range(-25, 0)), 2) as streamed:
        assert list(streamed) == list(range(25, 0, -1))


def test_the_stage_keeps_no_history_of_the_tasks_it_sent(client) -> None:
    # dask's BatchedSend keeps its last low-level-log-length messages, the client's the graphs
    # with every task's arguments: at the default 1,000 the main process held 267 MiB more
    # at 10^6 step logs (processes.LOG_CONFIG)
    kept = client.scheduler_comm.recent_message_log.maxlen
    assert kept is not None and kept <= processes.LOG_CONFIG[
        "distributed.admin.low-level-log-length"] < 100


@pytest.mark.parametrize("how", ["map", "stream"])
def test_a_worker_killed_mid_map_costs_a_rerun_not_the_map(client, tmp_path: Path,
                                                           how: str) -> None:
    workers = set(client.run(os.getpid).values())
    items = list(range(24))
    box: dict = {}

    def run() -> None:
        try:
            if how == "map":
                box["out"] = processes.map_in_order(_square, items, 2, shared=(1, str(tmp_path)))
            else:
                with processes.stream_in_order(_stream_square, [(str(tmp_path), i)
                                                                for i in items], 2) as it:
                    box["out"] = list(it)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            box["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    victim = _pid_with_a_task(tmp_path, workers)
    os.kill(victim, signal.SIGKILL)  # mid-task: its task sleeps 0.15 s after the mark
    thread.join(timeout=120)
    assert not thread.is_alive() and "error" not in box, box.get("error")
    assert [r for r, _ in box["out"]] == [i * i + 1 for i in items]
    assert victim not in {pid for _, pid in box["out"]}  # its task was rerun elsewhere
    client.wait_for_workers(2, timeout=60)  # the nanny restarted it for the next test


def _stream_square(task: tuple[str, int]) -> tuple[int, int]:
    return _square(1, *task)


def test_step_logs_read_on_the_cluster_are_the_local_records(client, tmp_path: Path) -> None:
    from pipeline.ingest.sources.steplogs.reader import read_logs

    logs = tmp_path / "logs" / "sweep"
    logs.mkdir(parents=True)
    (logs / "run.yaml").write_text("accelerator: H100-SXM5-80GB\nmodel: llama3-8b\n")
    for n, ms in STEP_TIME_MS.items():
        (logs / f"n{n}.log").write_text(megatron_log(n, ms))
    (logs / "cut.log").write_bytes(b"\x00\x01garbage\xff" * 50)
    params = load_params()
    params["ingest"]["logs"]["workers"] = 2
    on_cluster, steps_cluster = read_logs(tmp_path / "logs", params)
    with processes.using(ExecutorSettings()):  # local, inside the cluster's stage
        local, steps_local = read_logs(tmp_path / "logs", params)
    assert on_cluster == local
    assert steps_cluster.equals(steps_local)
    assert sum(r.reason is None for r in on_cluster) == len(STEP_TIME_MS)
    rejects = [r for r in on_cluster if r.path.endswith("cut.log")]
    assert len(rejects) == 1 and rejects[0].reason


def test_step_logs_under_a_url_are_read_by_the_workers_themselves(client, tmp_path: Path,
                                                                   monkeypatch) -> None:
    """A root under an fsspec URL whose store every worker can open (a zip archive of the
    fixture logs, ``zip://logs::file://...``): each task names its logs by path in the store
    and the worker fetches them; the records are the local folder's with the URL shown."""
    import shutil

    from pipeline.ingest.roots import logs_root
    from pipeline.ingest.sources.common import shown_path
    from pipeline.ingest.sources.steplogs.reader import read_logs
    from pipeline.ingest.sources.steplogs import reader
    from test_ingest_fsspec import FIXTURES, LOGS, _seen

    monkeypatch.setattr(reader, "BATCH_FILES", 5)  # 9 batches of the 42 fixture logs
    archive = shutil.make_archive(str(tmp_path / "fleet"), "zip", FIXTURES.parent, "logs")
    url = f"zip://logs::{Path(archive).as_uri()}"
    params = {"ingest": {"logs": {**LOGS, "workers": 2}}}
    before = processes._Active.tasks
    on_cluster, steps_cluster = read_logs(logs_root(url, "--logs"), params)
    assert processes._Active.tasks > before  # the batches went to the cluster
    with processes.using(ExecutorSettings()):
        local, steps_local = read_logs(FIXTURES, params)
    prefix = shown_path(FIXTURES / "x")[:-1]
    assert _seen(on_cluster) == _seen(local, prefix, url + "/")
    assert len(steps_cluster) == len(steps_local) > 0


def test_partitioned_outputs_are_the_same_bytes_on_the_cluster(client, tmp_path: Path,
                                                                monkeypatch) -> None:
    """runs/steps past ``ingest.partition_rows`` (3 here): the same parts, byte for byte, from
    the cluster's workers as from this machine's pool."""
    from pipeline.ingest import stage as ingest_stage
    from pipeline.ingest.sources.steplogs import reader
    from test_io_parts import CATALOG, FIXTURES, digests

    monkeypatch.setattr(reader, "BATCH_FILES", 5)
    monkeypatch.setenv("SCALEWALL_WORKERS", "2")
    params = load_params()
    params["ingest"]["mlperf_roots"] = []
    params["ingest"]["partition_rows"] = 3
    params["ingest"]["logs"]["workers"] = 2

    def ingest(out: Path) -> dict[str, str]:
        ingest_stage.run(params, published_dir=out / "none", logs_dir=FIXTURES,
                         catalog_dir=CATALOG, out_dir=out, metrics_path=out / "ingest.json")
        return digests(out)

    on_cluster = ingest(tmp_path / "cluster")
    with processes.using(ExecutorSettings()):
        local = ingest(tmp_path / "local")
    assert on_cluster == local
    assert (tmp_path / "local" / "steps.parquet").is_dir()
    assert len([k for k in local if k.startswith("runs.parquet/part-")]) > 2
