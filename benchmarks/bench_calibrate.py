"""Calibrate stage: wall time of the whole stage on the shipped data, and its headline scores.

Target (issue 9): the calibrate stage in < 60 s on 2 cores. Needs the upstream outputs
(``dvc repro`` up to theory and fit); prints a note and exits 0 when they are absent.
Also prints the in-sample and held-out scores the issue sets targets for, from the stage's own
calibrate.json of this run (written to a temporary folder, not over the project's).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from pipeline.calibrate.stage import run
from pipeline.config import CATALOG_DIR, METRICS_DIR, PARAMS_PATH, PROCESSED_DIR, load_params

NEEDS = ("runs", "series", "bounds", "extrapolation")


def main() -> None:
    if not all((PROCESSED_DIR / f"{n}.parquet").exists() for n in NEEDS):
        print("calibrate: upstream outputs absent (run `dvc repro theory fit` first); skipped")
        return
    params = load_params(PARAMS_PATH)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        start = time.perf_counter()
        run(params, processed_dir=PROCESSED_DIR, catalog_dir=CATALOG_DIR, out_dir=tmp,
            metrics_path=tmp / "calibrate.json", plots_dir=tmp / "plots",
            metrics_dir=METRICS_DIR)
        elapsed = time.perf_counter() - start
        m = json.loads((tmp / "calibrate.json").read_text(encoding="utf-8"))
    print(f"calibrate stage: {elapsed:.1f} s (target: < 60 s)")
    ins = m["in_sample"]
    print(f"calibrate in-sample median APE of MFU: {100 * ins['median_ape']:.1f}% over "
          f"{ins['n']} runs (target: <= 10%); per source: " + ", ".join(
              f"{s} {100 * v['median_ape']:.1f}%" for s, v in sorted(ins["by_source"].items())))
    for holdout, per in sorted(m["against_naive"]["largest"].items()):
        a = per["all"]
        print(f"calibrate {holdout}: selected median APE {100 * a['selected']:.1f}% vs best naive "
              f"{100 * a['best_naive']:.1f}% (ratio {a['ratio']:.2f}, target <= 0.8)")
    for source, v in sorted(m["against_naive"]["source"].items()):
        print(f"calibrate source holdout {source}: {100 * v['calibrated']:.1f}% vs family median "
              f"{100 * v['family_median']:.1f}% (target <= 25% and below)")
    for holdout, per in sorted(m["against_naive"]["coverage"].items()):
        print(f"calibrate coverage {holdout}: selected {per['selected']['coverage']:.3f} "
              f"(target 0.90-0.98)")


if __name__ == "__main__":
    main()
