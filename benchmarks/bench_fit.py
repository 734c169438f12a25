"""Fit-stage benchmark: the whole stage (fits, extrapolation on both scales, cross-series models)
on the shipped dataset, plus the cost of one USL fit with inference.

Needs ``data/processed/{runs,series}.parquet`` (``dvc repro ingest``); outputs go to a temporary
folder so the benchmark never touches the pipeline's own outputs.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pandas as pd

from pipeline.config import PROCESSED_DIR, load_params
from pipeline.fit.laws import fit
from pipeline.fit.stage import run

SDM91_N = [1, 18, 36, 72, 108, 144, 216]
SDM91_X = [65, 996, 1652, 1853, 1829, 1775, 1702]


def main() -> None:
    start = time.perf_counter()
    reps = 200
    for _ in range(reps):
        fit(SDM91_N, SDM91_X, law="usl").predict([300])
    per_fit_ms = (time.perf_counter() - start) / reps * 1e3
    print(f"usl_fit_with_intervals: {per_fit_ms:.1f} ms (SPEC SDM91, 7 points)")

    runs, series = PROCESSED_DIR / "runs.parquet", PROCESSED_DIR / "series.parquet"
    if not runs.exists() or not series.exists():
        print("fit_stage_wall: skipped (run `dvc repro ingest` first)")
        return
    n_series = len(pd.read_parquet(series))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        start, cpu_start = time.perf_counter(), time.process_time()
        metrics = run(load_params(), processed_dir=PROCESSED_DIR, out_dir=out,
                      metrics_path=out / "fit.json", plots_dir=out / "plots")
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
        n_extra = len(pd.read_parquet(out / "extrapolation.parquet"))
    print(f"fit_stage_wall: {wall:.2f} s (target: < 30 s on 2 cores; {n_series} series, "
          f"{n_extra} extrapolation rows, default law {metrics['default_law']})")
    # CPU time is the figure to trust on a shared machine, where wall time includes waiting.
    print(f"fit_stage_cpu: {cpu:.2f} s (CPU time of this process, all threads)")


if __name__ == "__main__":
    main()
