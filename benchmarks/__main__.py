"""``make bench``: run every ``benchmarks/bench_*.py`` in its own process, print its figures and
write them to docs/benchmarks.md (``benchmarks/document.py``).

Each benchmark module has a ``main()`` that prints lines of ``name: value unit (target ...)``.
A separate process per benchmark keeps peak-memory figures (ru_maxrss) independent.
``python -m benchmarks bench_plan bench_theory`` runs only those and replaces only their sections
of docs/benchmarks.md; ``--no-doc`` writes nothing. The command recorded with each section names
the ``SCALEWALL_BENCH_*`` settings it ran under.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from benchmarks.document import DOC, describe_machine, merge

HERE = Path(__file__).resolve().parent


def _run(stem: str) -> tuple[int, list[str]]:
    """Run one benchmark, echoing its output as it comes; (exit status, its stdout lines)."""
    proc = subprocess.Popen([sys.executable, "-m", f"benchmarks.{stem}"], cwd=HERE.parent,
                            stdout=subprocess.PIPE, text=True)
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        print(line, end="", flush=True)
        lines.append(line.rstrip("\n"))
    return proc.wait(), lines


def command_line(argv: list[str]) -> str:
    """The command as run, with the ``SCALEWALL_BENCH_*`` settings it ran under before it."""
    settings = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items())
                        if k.startswith("SCALEWALL_BENCH_"))
    command = "python -m benchmarks " + " ".join(argv) if argv else "make bench"
    return f"{settings} {command}" if settings else command


def main(argv: list[str]) -> int:
    write_doc = "--no-doc" not in argv
    only = [a for a in argv if not a.startswith("--")]
    stems = [p.stem for p in sorted(HERE.glob("bench_*.py")) if not only or p.stem in only]
    machine = describe_machine(command_line(argv))
    failed, results = 0, []
    for stem in stems:
        print(f"== {stem}", flush=True)
        rc, lines = _run(stem)
        failed += rc != 0
        results.append((stem + ("" if rc == 0 else f" (exit {rc})"), lines))
    if write_doc:
        page = DOC.read_text(encoding="utf-8") if DOC.exists() else None
        DOC.write_text(merge(page, machine, results), encoding="utf-8")
        print(f"wrote {DOC}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
