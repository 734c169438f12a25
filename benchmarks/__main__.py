"""``make bench``: run every ``benchmarks/bench_*.py`` in its own process and print its figures.

Each benchmark module has a ``main()`` that prints lines of ``name: value unit (target ...)``.
A separate process per benchmark keeps peak-memory figures (ru_maxrss) independent.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    failed = 0
    for path in sorted(HERE.glob("bench_*.py")):
        print(f"== {path.stem}", flush=True)
        proc = subprocess.run([sys.executable, "-m", f"benchmarks.{path.stem}"], cwd=HERE.parent)
        failed += proc.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
