"""Hostile input through the whole pipeline: ``dvc repro`` on a clean copy of the project with
the hostile-input corpus (``tests/hostile/corpus.py``) added to ``data/raw``, plus a sparse
2 GiB log of NUL bytes. The corpus's symbolic links are left out: DVC fails to hash a
dependency folder with a dangling link before any stage runs (``tests/hostile`` runs the
ingest on them directly). Prints the exit status, whether every corpus file ended as the reject
(or run) the corpus expects, the accounting, and the peak memory of the largest process of the
run (``ru_maxrss`` of the reaped process tree; target < 1 GiB).

Run: ``python -m benchmarks.bench_hostile``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bench_report import clean_copy

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TARGET_MB = 1024
sys.path.insert(0, str(ROOT / "tests" / "hostile"))
import corpus  # noqa: E402


def run_measured(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, float, float, str]:
    """(exit status, seconds, peak RSS in MB of the largest process in the tree, output)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        text = log.read().decode("utf-8", errors="replace")
    return proc.returncode, time.perf_counter() - start, usage.ru_maxrss / 1024, text


def main() -> int:
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONPATH="")
    with tempfile.TemporaryDirectory(prefix="scalewall-hostile-") as tmp:
        work = Path(tmp)
        clean_copy(work)
        data = work / "data" / "raw"
        expected = corpus.build(data, links=False)  # DVC cannot hash dangling links
        sparse = data / "logs" / "hostile_sparse" / "sparse.log"
        sparse.parent.mkdir(parents=True)
        with open(sparse, "wb") as fh:
            fh.truncate(2 << 30)
        expected["logs/hostile_sparse/sparse.log"] = (
            "binary_file: NUL, control or non-UTF-8 bytes in the first 64 KiB: not a text log")
        rc, seconds, peak_mb, log = run_measured([str(BIN / "dvc"), "repro"], work, env)
        print(f"hostile_dvc_repro_exit: {rc} ({seconds:.1f} s)")
        if rc:
            print(log[-4000:], file=sys.stderr)
            return 1
        problems = corpus.check(expected, data, work / "data" / "processed", work)
        metrics = json.loads((work / "reports" / "metrics" / "ingest.json").read_text())
        t = metrics["totals"]
        print(f"hostile_corpus_files: {len(expected)} checked, {len(problems)} not as expected")
        for problem in problems:
            print(f"  {problem}")
        print(f"hostile_ingest_accounting: read {t['read']} = runs {t['runs']} + rejects "
              f"{t['rejects']}: {t['read'] == t['runs'] + t['rejects']}")
        figures = {p.name for p in (work / "reports" / "figures").glob("*.png")}
        md_path = work / "reports" / "report.md"
        linked = (set(re.findall(r"\]\(figures/([^)]+\.png)\)", md_path.read_text(encoding="utf-8")))
                  if md_path.is_file() else set())
        figures_ok = bool(linked) and linked <= figures
        print(f"hostile_report: report.html {(work / 'reports' / 'report.html').is_file()}, "
              f"{len(figures)} figures, every figure report.md links is there: {figures_ok}"
              + (f" (missing {sorted(linked - figures)})" if linked - figures else "")
              + (f" (not linked: {sorted(figures - linked)})" if figures - linked else ""))
        stray = sorted(p.relative_to(work).as_posix() for folder in ("data/processed", "reports")
                       for p in (work / folder).rglob(".*"))
        print(f"hostile_stray_files: {len(stray)} {stray[:5]}")
        print(f"hostile_peak_rss_MB: {peak_mb:.0f} (target < {TARGET_MB})")
        ok = not problems and peak_mb < TARGET_MB and not stray and figures_ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
