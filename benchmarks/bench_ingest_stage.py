"""The ingest stage on the shipped data (published tables, the MLPerf power trees, logs):
wall time of one ``pipeline.ingest.stage.run`` into a temporary folder (target < 20 s).
Run: ``python -m benchmarks.bench_ingest_stage``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from pipeline.config import PROJ_ROOT, load_params
from pipeline.ingest.stage import run

TARGET_S = 20.0


def main() -> None:
    params = load_params(PROJ_ROOT / "params.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        t, c = time.perf_counter(), time.process_time()
        metrics = run(params, published_dir=PROJ_ROOT / "data/raw/published",
                      logs_dir=PROJ_ROOT / "data/raw/logs", catalog_dir=PROJ_ROOT / "data/catalog",
                      out_dir=Path(tmp), metrics_path=Path(tmp) / "ingest.json")
        wall, cpu = time.perf_counter() - t, time.process_time() - c
    tot = metrics["totals"]
    print(f"ingest_stage_s: {wall:.2f} (target < {TARGET_S:.0f}; {cpu:.2f} CPU-s in this process; "
          f"{tot['read']} records, {tot['runs']} runs, {metrics['power']['measurements']} power "
          "measurements)")


if __name__ == "__main__":
    main()
