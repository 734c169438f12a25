"""Kill test (issue 13): SIGKILL every stage at random moments, then ``dvc repro``.

On a clean copy of the project (``benchmarks.bench_report.clean_copy``):

1. a clean run, one stage at a time (``dvc repro -s STAGE``), timing each stage and hashing
   every file under ``data/processed`` and ``reports`` (the reference);
2. 24 times: ``dvc repro -s -f --no-run-cache STAGE`` (each of the 6 stages 4 times, in turn; DVC
   removes the outputs first, as in any rerun, and the run cache would skip the work) killed
   with SIGKILL (its
   whole process group: DVC, the stage, its workers) after a random delay within the stage's
   duration; after each kill, every output present must be whole (Parquet footer and schema
   readable, JSON parses, PNG ends in IEND);
   DVC's own lock record ``.dvc/tmp/rwlock`` is rewritten in place by DVC, so a kill while DVC
   writes it leaves it empty, and every later ``dvc`` command stops with "Unable to read
   RWLock-file". That file is DVC's, not a stage output: the test counts such kills and removes
   the file, which is the recovery the README gives (no ``dvc`` process is running then);
3. ``dvc repro``: must exit 0 with every file byte-identical to the reference and no file that
   the reference lacks (no ``.partial-*``, no ingest scratch).

Prints one line per kill and a summary; exit status 0 when all holds. Takes a few minutes.
Run: ``python scripts/kill_test.py [--seed N]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.bench_report import clean_copy  # noqa: E402

BIN = Path(sys.executable).parent
STAGES = ("ingest", "fit", "theory", "calibrate", "compare", "report")
OUT_FOLDERS = ("data/processed", "reports")


def snapshot(work: Path) -> dict[str, str]:
    files = {}
    for folder in OUT_FOLDERS:
        for path in sorted((work / folder).rglob("*")):
            if path.is_file():
                files[path.relative_to(work).as_posix()] = hashlib.sha256(
                    path.read_bytes()).hexdigest()
    return files


def broken_outputs(work: Path) -> list[str]:
    """Output files that are not whole (a truncated write)."""
    import pyarrow.parquet as pq

    bad = []
    for folder in OUT_FOLDERS:
        for path in (work / folder).rglob("*"):
            if not path.is_file() or path.name.startswith("."):
                continue
            try:
                if path.suffix == ".parquet":
                    pq.read_metadata(path)
                elif path.suffix == ".json":
                    json.loads(path.read_text(encoding="utf-8"))
                elif path.suffix == ".png":
                    if not path.read_bytes().endswith(b"IEND\xaeB`\x82"):
                        bad.append(path.relative_to(work).as_posix())
                elif path.suffix in (".html", ".md", ".csv") and path.stat().st_size == 0:
                    bad.append(path.relative_to(work).as_posix())
            except Exception:  # noqa: BLE001 - any failure to read is a broken file
                bad.append(path.relative_to(work).as_posix())
    return bad


def repair_dvc_lock(work: Path) -> bool:
    """Remove DVC's lock record when a kill left it unreadable; True when it did."""
    rwlock = work / ".dvc" / "tmp" / "rwlock"
    try:
        json.loads(rwlock.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False
    except ValueError:
        rwlock.unlink()
        return True
    return False


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--kills", type=int, default=24)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", PYTHONPATH="")
    dvc = str(BIN / "dvc")
    with tempfile.TemporaryDirectory(prefix="scalewall-kill-") as tmp:
        work = Path(tmp)
        clean_copy(work)
        durations = {}
        for stage in STAGES:
            start = time.perf_counter()
            proc = subprocess.run([dvc, "repro", "-s", stage], cwd=work, env=env,
                                  capture_output=True, text=True)
            durations[stage] = time.perf_counter() - start
            if proc.returncode:
                print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)
                return 1
        reference = snapshot(work)
        print("clean run: " + ", ".join(f"{s} {d:.1f} s" for s, d in durations.items())
              + f"; {len(reference)} output files")
        broken_total, killed_running, tries, dvc_locks = 0, 0, 0, 0
        # Only kills that find the stage running count; a stage that finished before its kill
        # has its time lowered to the time it took, so the next delay falls within it.
        while killed_running < args.kills and tries < 3 * args.kills:
            stage = STAGES[killed_running % len(STAGES)]
            tries += 1
            delay = rng.uniform(0.0, durations[stage])
            start = time.perf_counter()
            proc = subprocess.Popen([dvc, "repro", "-s", "-f", "--no-run-cache", stage],
                                    cwd=work, env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True)
            while proc.poll() is None and time.perf_counter() - start < delay:
                time.sleep(0.01)
            running = proc.poll() is None
            if running:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                durations[stage] = min(durations[stage], time.perf_counter() - start)
            proc.wait()
            killed_running += running
            lock_note = ""
            if repair_dvc_lock(work):
                dvc_locks += 1
                lock_note = "; DVC's .dvc/tmp/rwlock left unreadable (removed)"
            broken = broken_outputs(work)
            broken_total += len(broken)
            partial = [p for p in snapshot(work) if Path(p).name.startswith(".")]
            print(f"try {tries:2d}: {stage:8s} at {delay:5.2f} s "
                  f"({'killed' if running else 'had finished: not counted'}); broken outputs "
                  f"{broken}; partial/scratch files left {len(partial)}{lock_note}")
        proc = subprocess.run([dvc, "repro"], cwd=work, env=env, capture_output=True, text=True)
        final = snapshot(work)
        changed = sorted(p for p in reference if p in final and final[p] != reference[p])
        missing = sorted(set(reference) - set(final))
        stray = sorted(set(final) - set(reference))
        print(f"final dvc repro: exit {proc.returncode}; {killed_running} kills of a running "
              f"stage in {tries} tries; broken outputs after kills: {broken_total}; files differing "
              f"from the clean run: {len(changed)} {changed[:5]}; missing: {missing[:5]}; "
              f"stray: {stray[:5]}; DVC lock records removed after a kill: {dvc_locks}")
        if proc.returncode:
            print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)
        ok = not (proc.returncode or broken_total or changed or missing or stray
                  or killed_running < args.kills)
    print("kill test: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
