"""Calibrate stage: time of the whole stage on the shipped data, how the fit's cost grows with
the data, and the step model's targets as this run measures them.

Targets: the stage in < 60 s (CPU seconds, so that a loaded shared machine does not inflate
it); the fit's cost growing no faster than n^1.1 in the number of runs (simulated runs of
pipeline/calibrate/simulate.py, 500 to 4,000). Needs the upstream outputs (``dvc repro`` up to
theory and fit) for the stage; prints a note and skips that part when they are absent.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import numpy as np

from pipeline.calibrate import fitting as ft
from pipeline.calibrate.critical_path import PARAMETERS
from pipeline.calibrate.estimate import bare_model, load_data
from pipeline.calibrate.simulate import simulate_runs
from pipeline.calibrate.stage import run
from pipeline.catalog import load_catalog
from pipeline.config import CATALOG_DIR, METRICS_DIR, PARAMS_PATH, PROCESSED_DIR, load_params

from benchmarks.timing import best_of

NEEDS = ("runs", "series", "extrapolation")
SIZES = (500, 1000, 2000, 4000)


def growth() -> None:
    base = bare_model(load_catalog(CATALOG_DIR), CATALOG_DIR,
                      {"kernel_latency_s": 3e-6, "scaleup_latency_s": 2e-6}, True, 128.0)
    free = tuple(p for p in PARAMETERS if p != "attention_efficiency")
    cpu = []
    for n in SIZES:
        data = load_data(simulate_runs(0, base, n_runs=n, n_sources=8), base)
        rows, log_t = data.subset(data.fit), data.log_t[data.fit]
        _, _, c = best_of(lambda: ft.fit_group(rows, log_t, playbook=False, free=free,
                                               em_rounds=2), reps=2)
        cpu.append(c)
        print(f"calibrate fit on {n} simulated runs: {c:.2f} CPU s")
    slope = float(np.polyfit(np.log(SIZES), np.log(cpu), 1)[0])
    print(f"calibrate fit growth exponent (CPU s vs runs, {SIZES[0]}-{SIZES[-1]}): {slope:.2f} "
          f"(target <= 1.1)")


def stage() -> None:
    if not all((PROCESSED_DIR / f"{n}.parquet").exists() for n in NEEDS):
        print("calibrate: upstream outputs absent (run `dvc repro theory fit` first); skipped")
        return
    params = load_params(PARAMS_PATH)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        wall, cpu = time.perf_counter(), time.process_time()
        run(params, processed_dir=PROCESSED_DIR, catalog_dir=CATALOG_DIR, out_dir=tmp,
            metrics_path=tmp / "calibrate.json", plots_dir=tmp / "plots",
            metrics_dir=METRICS_DIR)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        m = json.loads((tmp / "calibrate.json").read_text(encoding="utf-8"))
    print(f"calibrate stage: {cpu:.1f} CPU s, {wall:.1f} s wall (target: < 60 s)")
    # the performance-model issue's targets live here, in the benchmark, not in the product
    t = m["scores"]
    for s, v in sorted(t["source_holdout"].items()):
        goal = (f" (target <= 15%: {'met' if v['median_ape'] <= 0.15 else 'missed'})"
                if s in ("megatron2021", "nvidia_dgxc2024", "llama3") else "")
        if s == "production":
            ok = 0.85 <= v["coverage"] <= 0.99 and v["median_width"] <= 3
            goal = f" (target coverage 0.85-0.99, width <= 3: {'met' if ok else 'missed'})"
        print(f"calibrate leave-source-out {s}: median APE {100 * v['median_ape']:.1f}% over "
              f"{v['n']} runs, coverage {v['coverage']:.2f}, median width "
              f"{v['median_width']:.2f}{goal}")
    for holdout, v in sorted(t["largest_k"].items()):
        ok = v["macro_selected"] <= 0.9 * v["macro_best_naive"]
        print(f"calibrate {holdout}: macro selected {100 * v['macro_selected']:.1f}% vs better "
              f"naive {100 * v['macro_best_naive']:.1f}% (target <= 0.9x: "
              f"{'met' if ok else 'missed'}); pooled {100 * v['pooled_selected']:.1f}% vs "
              f"{100 * v['pooled_best_naive']:.1f}%")
        for src, x in sorted(v["by_source"].items()):
            ok = x["minus_best_naive"] <= 0.02
            print(f"calibrate {holdout} {src}: selected {100 * x['selected']:.1f}% vs "
                  f"{100 * x['best_naive']:.1f}% (target <= naive + 2 points: "
                  f"{'met' if ok else 'missed'})")
    r = t["ranking"]
    if r.get("groups"):
        c = r["calibrated"]
        ok = c["median_spearman"] >= 0.75 and c["median_regret"] <= 0.10
        print(f"calibrate Playbook ranking: median Spearman {c['median_spearman']:.2f}"
              f", median regret {100 * c['median_regret']:.1f}% over "
              f"{r['groups']} groups (targets >= 0.75, <= 10%: {'met' if ok else 'missed'})")
    base = m["frontier"]["baseline"]["llama3_compute"]
    print(f"calibrate frontier at 3.8e25 FLOP: utilization {base['utilization']:.3f} "
          f"(target >= 0.30: {'met' if base['utilization'] >= 0.30 else 'missed'})")
    print(f"calibrate MFU above 1: {t['mfu_above_one']}")


def main() -> None:
    growth()
    stage()


if __name__ == "__main__":
    main()
