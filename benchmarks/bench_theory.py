"""Theory stage speed: layout evaluations per second, and the whole frontier.

Targets (issue 6): >= 1,000,000 layout evaluations per second on 2 cores; every scenario's
frontier (>= 60 values of C each, full layout search, knee and wall refinement) in < 10 s, as
the theory stage runs it: its scenarios over ``theory.workers`` processes (params.yaml; process
start included). The same frontier in one process is printed beside it.
"""

from __future__ import annotations

import time

import numpy as np

from pipeline.catalog import load_catalog
from pipeline.config import CATALOG_DIR, PARAMS_PATH, load_params, settings
from pipeline.theory.cost import step_cost
from pipeline.theory.inputs import Layout, Shape
from pipeline.theory.stage import run_frontier

N_LAYOUTS = 1_000_000


def layouts_per_second(params, catalog) -> float:
    """Best of 3 timings of one vectorised call on 1e6 random power-of-two layouts."""
    from pipeline.theory.scenarios import load_scenarios

    scn = next(s for s in load_scenarios(params, catalog) if s.name == "baseline")
    rng = np.random.default_rng(0)
    pick = lambda hi: 2.0 ** rng.integers(0, hi, N_LAYOUTS)  # noqa: E731
    layout = Layout(dp=pick(12), tp1=pick(7), tp2=pick(3), pp=pick(6), microbatches=pick(8),
                    zero_stage=rng.integers(0, 4, N_LAYOUTS).astype(float))
    shape = Shape(params=405e9, active_params=405e9, n_layers=128, d_model=16384)
    best = np.inf
    for _ in range(3):
        start = time.perf_counter()
        step_cost(scn.hardware, shape, layout, 2.0**24, scn.constants)
        best = min(best, time.perf_counter() - start)
    return N_LAYOUTS / best


def main() -> None:
    params, catalog = load_params(PARAMS_PATH), load_catalog(CATALOG_DIR)
    rate = layouts_per_second(params, catalog)
    print(f"theory layout evaluations: {rate:,.0f} per s (target: >= 1,000,000 per s)")
    workers = settings(params, "theory").workers
    start = time.perf_counter()
    frame, metrics = run_frontier(params, catalog, workers=workers)
    elapsed = time.perf_counter() - start
    evaluations = sum(m["layout_evaluations"] for m in metrics.values())
    points = frame.groupby("scenario").size().min()
    print(f"theory frontier, {len(metrics)} scenarios x {points} values of C: {elapsed:.2f} s "
          f"over theory.workers = {workers} processes, as the stage runs it (target: < 10 s)")
    start = time.perf_counter()
    run_frontier(params, catalog, workers=1)
    alone = time.perf_counter() - start
    print(f"theory frontier in one process: {alone:.2f} s")
    print(f"theory frontier layout evaluations: {evaluations:,} "
          f"({evaluations / alone:,.0f} per s within the search, one process)")


if __name__ == "__main__":
    main()
