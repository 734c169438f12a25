"""Scale: each stage's CPU-seconds and peak memory on k copies of the shipped data, the growth
exponent, and the ingest of many small step logs.

For each k in ``SCALES`` (default 1, 4, 16) the data are generated (``benchmarks.scale_data``:
every published table and MLPerf tree k times, under distinct source ids) into a temporary
folder, and the stages run one after another as ``dvc repro`` runs them (the commands of
``dvc.yaml``, paths pointed at that folder), each in its own process. A stage's figures come from
``os.wait4`` on that process: CPU-seconds (user + sys, its worker processes included) and peak
resident memory (``ru_maxrss``: the largest single process of the stage, as ``/usr/bin/time -v``
reports). CPU-seconds, not wall time, are the figure that does not depend on the other users of
a shared machine; wall time is printed beside.

The growth exponent of a stage is the least-squares slope of log(CPU-s) on log(k) over the
scales measured (target <= 1.1); ``4->16`` is the slope between the two largest, where fixed
costs (imports, the catalog) weigh least. Then ``SMALL_LOGS`` (default 10^5) step logs of ~30
steps each go through the ingest stage alone (target: < 2 min, < 1 GB). Last,
``FLEET_LOGS`` (default 10^4) such logs whose campaigns state a layout go through every stage:
a fleet's archive alone, one source per campaign, the case where calibrate's source effects
number in the thousands.

Environment: ``SCALEWALL_BENCH_SCALES`` (``1,4,16``), ``SCALEWALL_BENCH_STAGES`` (all),
``SCALEWALL_BENCH_SMALL_LOGS`` (100000; 0 skips), ``SCALEWALL_BENCH_FLEET_LOGS`` (10000; 0
skips), ``SCALEWALL_BENCH_STAGE_TIMEOUT_S`` (1800: a
stage still running then is killed and reported as such), ``SCALEWALL_BENCH_DIR`` (keep the
generated data there instead of a temporary folder), ``SCALEWALL_BENCH_REUSE`` (with
``SCALEWALL_BENCH_DIR``: keep the data and stage outputs already there and run only the wanted
stages on them, e.g. calibrate alone on a 16x folder an earlier run left). Run:
``python -m benchmarks.bench_scale``.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.scale_data import JOB_SIZES, copy_shipped, small_logs
from pipeline.config import PROJ_ROOT

STAGES = ("ingest", "fit", "theory", "calibrate", "compare", "report")
SCALES = tuple(int(k) for k in os.environ.get("SCALEWALL_BENCH_SCALES", "1,4,16").split(","))
WANTED = tuple(os.environ.get("SCALEWALL_BENCH_STAGES", ",".join(STAGES)).split(","))
SMALL_LOGS = int(os.environ.get("SCALEWALL_BENCH_SMALL_LOGS", 100_000))
FLEET_LOGS = int(os.environ.get("SCALEWALL_BENCH_FLEET_LOGS", 10_000))
TIMEOUT_S = float(os.environ.get("SCALEWALL_BENCH_STAGE_TIMEOUT_S", 1800))
REUSE = bool(os.environ.get("SCALEWALL_BENCH_REUSE") and os.environ.get("SCALEWALL_BENCH_DIR"))
MAX_EXPONENT = 1.1
PIPELINE_LIMIT_S, PIPELINE_LIMIT_MB = 600.0, 4096.0
SMALL_LIMIT_S, SMALL_LIMIT_MB = 120.0, 1024.0


@dataclass
class Cost:
    """One stage process: CPU-s (user + sys, children included), peak RSS, wall, exit status."""

    cpu_s: float
    rss_mb: float
    wall_s: float
    rc: int

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def __str__(self) -> str:
        text = f"{self.cpu_s:.1f} CPU-s / {self.rss_mb:.0f} MB"
        if self.rc == -signal.SIGKILL:
            return f"killed after {text}"
        return text if self.ok else f"failed (exit {self.rc}) after {text}"


def stage_args(stage: str, data: dict[str, Path], root: Path) -> list[str]:
    """The ``python -m pipeline`` arguments of ``stage`` as dvc.yaml gives them, on ``root``."""
    processed, metrics, plots = root / "processed", root / "metrics", root / "plots"
    catalog = PROJ_ROOT / "data/catalog"
    common = ["--params", str(data["params"])]
    args = {
        "ingest": ["--published", data["published"], "--logs", data["logs"], "--catalog", catalog,
                   "--out", processed, "--metrics", metrics / "ingest.json"],
        "fit": ["--processed", processed, "--out", processed, "--metrics", metrics / "fit.json",
                "--plots", plots],
        "theory": ["--processed", processed, "--catalog", catalog, "--out", processed,
                   "--metrics", metrics / "theory.json", "--plots", plots],
        "calibrate": ["--processed", processed, "--catalog", catalog, "--out", processed,
                      "--metrics", metrics / "calibrate.json", "--plots", plots,
                      "--metrics-dir", metrics],
        "compare": ["--processed", processed, "--metrics-dir", metrics, "--out", processed,
                    "--metrics", metrics / "compare.json", "--plots", plots],
        "report": ["--processed", processed, "--metrics-dir", metrics, "--out", root / "reports"],
    }[stage]
    return [stage, *map(str, args), *common]


def run_stage(args: list[str], log: Path) -> Cost:
    """One ``python -m pipeline`` process, its own rusage (``os.wait4``), killed at the limit."""
    start = time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "pipeline", *args], cwd=PROJ_ROOT,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - start > TIMEOUT_S:
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.2)
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return Cost(usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
                time.perf_counter() - start, proc.returncode)


def exponent(scales: list[int], values: list[float]) -> float:
    """Least-squares slope of log(value) on log(scale)."""
    xs, ys = [math.log(k) for k in scales], [math.log(max(v, 1e-9)) for v in values]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else float("nan")


def _scratch(label: str) -> Path:
    base = os.environ.get("SCALEWALL_BENCH_DIR")
    if base:
        path = Path(base) / label
        if REUSE and (path / "raw" / "params.yaml").exists():
            return path
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return path
    return Path(tempfile.mkdtemp(prefix=f"scalewall-scale-{label}-"))


def _cleanup(path: Path) -> None:
    if not os.environ.get("SCALEWALL_BENCH_DIR"):
        shutil.rmtree(path, ignore_errors=True)


def measure_scales() -> dict[str, dict[int, Cost]]:
    """Every wanted stage at every scale; a stage after a failed one is not run."""
    costs: dict[str, dict[int, Cost]] = {s: {} for s in STAGES if s in WANTED}
    for k in SCALES:
        root = _scratch(f"x{k}")
        try:
            raw = root / "raw"
            data = ({"published": raw / "published", "logs": raw / "logs",
                     "params": raw / "params.yaml"} if REUSE and (raw / "params.yaml").exists()
                    else copy_shipped(k, raw))
            for stage in costs:
                cost = run_stage(stage_args(stage, data, root), root / f"{stage}.log")
                costs[stage][k] = cost
                print(f"scale_{stage}_x{k}: {cost} ({cost.wall_s:.1f} s wall, load average "
                      f"{os.getloadavg()[0]:.1f})", flush=True)
                if not cost.ok:
                    print(f"  (log tail: {(root / f'{stage}.log').read_text()[-300:]!r})")
                    break
        finally:
            _cleanup(root)
    return costs


def summarize(costs: dict[str, dict[int, Cost]]) -> None:
    """The table, each stage's exponents, and the whole pipeline at the largest scale."""
    print("| stage | " + " | ".join(f"{k}x" for k in SCALES) + " | exponent | 4->16 |")
    print("|---|" + "---|" * (len(SCALES) + 2))
    for stage, by_k in costs.items():
        ok = [k for k in SCALES if k in by_k and by_k[k].ok]
        cells = [str(by_k[k]) if k in by_k else "-" for k in SCALES]
        fit = exponent(ok, [by_k[k].cpu_s for k in ok]) if len(ok) > 1 else float("nan")
        top = ok[-2:] if len(ok) > 1 else []
        local = exponent(top, [by_k[k].cpu_s for k in top]) if top else float("nan")
        print(f"| {stage} | " + " | ".join(cells) + f" | {fit:.2f} | {local:.2f} |")
        print(f"scale_{stage}_cpu_exponent: {fit:.2f} (4->16: {local:.2f}; target <= "
              f"{MAX_EXPONENT})")
        stopped = [k for k in SCALES if k in by_k and not by_k[k].ok]
        if ok and stopped and stopped[0] > ok[-1]:
            # What it had spent when killed is a floor: the slope to it is a lower bound.
            floor = exponent([ok[-1], stopped[0]], [by_k[ok[-1]].cpu_s, by_k[stopped[0]].cpu_s])
            print(f"scale_{stage}_cpu_exponent_{ok[-1]}->{stopped[0]}: > {floor:.2f} (stopped "
                  f"at {stopped[0]}x after {by_k[stopped[0]].cpu_s:.0f} CPU-s; the exponent "
                  "above counts the finished scales only)")
    k = SCALES[-1]
    done = [by_k[k] for by_k in costs.values() if k in by_k]
    if done:
        wall, cpu = sum(c.wall_s for c in done), sum(c.cpu_s for c in done)
        peak = max(c.rss_mb for c in done)
        print(f"scale_pipeline_x{k}: {wall:.0f} s wall, {cpu:.0f} CPU-s, peak {peak:.0f} MB over "
              f"{len(done)} stages (target < {PIPELINE_LIMIT_S:.0f} s and < "
              f"{PIPELINE_LIMIT_MB:.0f} MB; wall time depends on the machine's other load)")


def measure_small_logs(n: int) -> None:
    """The ingest stage alone on ``n`` small step logs."""
    root = _scratch(f"logs{n}")
    try:
        start = time.perf_counter()
        data = small_logs(n, root / "raw")
        made = time.perf_counter() - start
        cost = run_stage(stage_args("ingest", data, root), root / "ingest.log")
        print(f"scale_small_logs_{n}: {cost}, {cost.wall_s:.1f} s wall (target < "
              f"{SMALL_LIMIT_S:.0f} s and < {SMALL_LIMIT_MB:.0f} MB; {made:.0f} s to generate; "
              f"load average {os.getloadavg()[0]:.1f})", flush=True)
        if not cost.ok:
            print(f"  (log tail: {(root / 'ingest.log').read_text()[-300:]!r})")
    finally:
        _cleanup(root)


def measure_fleet(n: int) -> None:
    """Every stage on ``n`` small step logs whose campaigns state a layout: a fleet's job
    archive alone, ``n / 8`` sources (campaigns) that calibrate fits."""
    root = _scratch(f"fleet{n}")
    try:
        data = small_logs(n, root / "raw", layout=True)
        done = []
        for stage in STAGES:
            cost = run_stage(stage_args(stage, data, root), root / f"{stage}.log")
            done.append(cost)
            print(f"scale_fleet_{n}_{stage}: {cost} ({cost.wall_s:.1f} s wall, load average "
                  f"{os.getloadavg()[0]:.1f})", flush=True)
            if not cost.ok:
                print(f"  (log tail: {(root / f'{stage}.log').read_text()[-300:]!r})")
                break
        print(f"scale_fleet_{n}: {sum(c.wall_s for c in done):.0f} s wall, "
              f"{sum(c.cpu_s for c in done):.0f} CPU-s, peak {max(c.rss_mb for c in done):.0f} MB "
              f"over {len(done)} stages ({n // len(JOB_SIZES)} campaigns)", flush=True)
    finally:
        _cleanup(root)


def main() -> None:
    if WANTED != ("",):
        summarize(measure_scales())
    if SMALL_LOGS:
        measure_small_logs(SMALL_LOGS)
    if FLEET_LOGS:
        measure_fleet(FLEET_LOGS)


if __name__ == "__main__":
    main()
