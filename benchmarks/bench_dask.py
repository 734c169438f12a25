"""Ingest of many small step logs under each executor (params.yaml ``executor``), side by side.

The same ``SCALEWALL_BENCH_DASK_LOGS`` small logs (``scale_data.small_logs``: 30 steps each,
one campaign per 8 jobs; default 100,000) go through the ingest stage under each executor, in
one run of this module (``SCALEWALL_BENCH_DASK_ROUNDS`` rounds, default 2, in the order local, Dask, Dask,
local, ...; each executor's cheapest run in CPU-s is compared, as the machine's other load
drifts): under ``local`` (this machine's process pool, ``ingest.logs.workers`` 2) and under
``local-cluster`` (a two-worker ``dask.distributed.LocalCluster`` the stage starts). For each:
wall time; CPU-s of the whole process tree (the stage process and every descendant, by
``os.wait4``: descendants count once reaped); the peak resident memory of the stage's main
process (with a LocalCluster's scheduler and nannies, which live in it) and of each worker,
sampled every ``SAMPLE_S`` by psutil.
Then per file: the CPU-s the workers spent (the parse cost), and the Dask overhead, the extra
CPU-s of the whole tree under Dask over ``local`` (targets: main process < 2 GB; overhead
<= 20% of the parse cost). Wall times depend on the machine's other load (printed).
``SCALEWALL_BENCH_DASK_KINDS=local`` runs one executor only (its runs' lines, no comparison):
the main process's peak memory per log, e.g. at 2x10^4 and 10^5 logs.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import yaml

from benchmarks.bench_scale import stage_args
from benchmarks.scale_data import small_logs

N_LOGS = int(os.environ.get("SCALEWALL_BENCH_DASK_LOGS", 100_000))
ROUNDS = int(os.environ.get("SCALEWALL_BENCH_DASK_ROUNDS", 2))
KINDS = tuple(os.environ.get("SCALEWALL_BENCH_DASK_KINDS", "local,local-cluster").split(","))
TIMEOUT_S = float(os.environ.get("SCALEWALL_BENCH_STAGE_TIMEOUT_S", 3600))
SAMPLE_S = 0.2
MAIN_LIMIT_MB, OVERHEAD_LIMIT = 2048.0, 0.20  # MiB (2 GiB); share of the parse cost


@dataclass
class Run:
    """One ingest process tree: wall, tree CPU-s, peaks by role, workers' CPU-s."""

    wall_s: float = 0.0
    cpu_s: float = 0.0
    rc: int = 0
    main_mb: float = 0.0
    peaks_mb: dict[int, float] = field(default_factory=dict)
    cpu_by_pid: dict[int, float] = field(default_factory=dict)
    roles: dict[int, str] = field(default_factory=dict)

    def worker_cpu_s(self) -> float:
        return sum(c for pid, c in self.cpu_by_pid.items() if self.roles.get(pid) == "worker")

    def others(self) -> str:
        by_role: dict[str, float] = {}
        for pid, mb in self.peaks_mb.items():
            role = self.roles.get(pid, "other")
            by_role[role] = max(by_role.get(role, 0.0), mb)
        return ", ".join(f"{role} {mb:.0f} MiB" for role, mb in sorted(by_role.items()))


def _role(proc: psutil.Process) -> str:
    """``worker`` (a process of the local pool, or a Dask worker: a LocalCluster's nannies
    live in the stage's process and spawn the workers as its children), or ``other``
    (multiprocessing's resource tracker)."""
    try:
        return "other" if "resource_tracker" in " ".join(proc.cmdline()) else "worker"
    except psutil.Error:
        return "other"


def _sample(root: psutil.Process, run: Run) -> None:
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return
    for proc in procs:
        try:
            rss, times = proc.memory_info().rss / 2**20, proc.cpu_times()
        except psutil.Error:
            continue
        if proc.pid == root.pid:
            run.main_mb = max(run.main_mb, rss)
            continue
        run.peaks_mb[proc.pid] = max(run.peaks_mb.get(proc.pid, 0.0), rss)
        run.cpu_by_pid[proc.pid] = times.user + times.system
        run.roles.setdefault(proc.pid, _role(proc))


def run_ingest(args: list[str], log: Path) -> Run:
    """One ``python -m pipeline ingest`` process tree, sampled until it exits."""
    run, start = Run(), time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "pipeline", *args], stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        root = psutil.Process(proc.pid)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            _sample(root, run)
            if time.perf_counter() - start > TIMEOUT_S:
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(SAMPLE_S)
    run.rc = os.waitstatus_to_exitcode(status)
    run.wall_s = time.perf_counter() - start
    run.cpu_s = usage.ru_utime + usage.ru_stime
    return run


_START = """
from pipeline import processes
from pipeline.config import ExecutorSettings
with processes.using(ExecutorSettings(kind="local-cluster", cluster_workers=2)) as client:
    client.run(lambda: __import__("pipeline.ingest.sources.steplogs.reader"))
"""


def cluster_start_cpu_s() -> float:
    """CPU-s of the process tree that starts a two-worker LocalCluster, imports the log reader
    in each worker and stops it: the fixed part of the Dask cost."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", _START], check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def same_files(a: Path, b: Path) -> tuple[bool, int]:
    """Whether the two folders hold the same files with the same bytes (an output written as a
    folder of parts past ``ingest.partition_rows`` counts part by part), and how many."""
    def files(root: Path) -> list[Path]:
        return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())
    names = files(a)
    return names == files(b) and all((a / n).read_bytes() == (b / n).read_bytes()
                                     for n in names), len(names)


def _params(base: Path, kind: str, root: Path) -> Path:
    params = yaml.safe_load(base.read_text(encoding="utf-8"))
    params["ingest"]["logs"]["workers"] = 2
    params["executor"] = {**params.get("executor", {}), "kind": kind, "cluster_workers": 2}
    path = root / f"params-{kind}.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return path


def main() -> None:
    base = os.environ.get("SCALEWALL_BENCH_DIR")
    root = Path(base) / f"dask{N_LOGS}" if base else Path(tempfile.mkdtemp(prefix="scalewall-dask-"))
    try:
        start = time.perf_counter()
        data = small_logs(N_LOGS, root / "raw")
        print(f"dask_bench_logs: {N_LOGS} small logs written in "
              f"{time.perf_counter() - start:.0f} s", flush=True)
        runs: dict[str, Run] = {}
        # ABBA...: the machine's other load drifts; each executor keeps its cheapest run
        order = [k for i in range(ROUNDS) for k in (KINDS if i % 2 == 0 else KINDS[::-1])]
        for kind in order:
            out = root / kind
            args = stage_args("ingest", {**data, "params": _params(data["params"], kind, root)},
                              out)
            run = run_ingest(args, root / f"ingest-{kind}.log")
            if kind not in runs or run.cpu_s < runs[kind].cpu_s:
                runs[kind] = run
            print(f"dask_ingest_{kind}_{N_LOGS}: {run.wall_s:.1f} s wall, {run.cpu_s:.1f} CPU-s "
                  f"(tree), workers {run.worker_cpu_s():.1f} CPU-s, main process peak "
                  f"{run.main_mb:.0f} MiB (target < {MAIN_LIMIT_MB:.0f} MiB = 2 GiB); others: "
                  f"{run.others()}"
                  f"{'' if run.rc == 0 else f'; FAILED exit {run.rc}'} (load average "
                  f"{os.getloadavg()[0]:.1f}; {1e3 * run.main_mb * 2**20 / 1e6 / N_LOGS:.2f} "
                  "kB a log)", flush=True)
        if set(KINDS) != {"local", "local-cluster"}:
            return
        local, dask = runs["local"], runs["local-cluster"]
        parse_ms = 1e3 * local.worker_cpu_s() / N_LOGS
        overhead_ms = 1e3 * (dask.cpu_s - local.cpu_s) / N_LOGS
        print(f"dask_parse_cost_per_file: {parse_ms:.3f} CPU-ms (local pool workers)")
        start_s = cluster_start_cpu_s()
        beyond_ms = overhead_ms - 1e3 * start_s / N_LOGS
        print(f"dask_overhead_per_file: {overhead_ms:.3f} CPU-ms = "
              f"{overhead_ms / parse_ms:.0%} of the parse cost (target <= "
              f"{OVERHEAD_LIMIT:.0%}); wall {dask.wall_s / local.wall_s:.2f}x local's")
        print(f"dask_cluster_start: {start_s:.1f} CPU-s (two workers started with the reader "
              f"imported, and stopped); overhead per file beyond it: {beyond_ms:.3f} CPU-ms = "
              f"{beyond_ms / parse_ms:.0%} of the parse cost")
        same, files = same_files(root / "local" / "processed", root / "local-cluster" / "processed")
        print(f"dask_outputs_identical: {same} ({files} files)")
    finally:
        if not base:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
