"""The ``theory`` stage: per-run ceilings and the frontier of feasible training compute.

Reads ``runs.parquet`` and the hardware catalog; writes ``bounds.parquet``, ``frontier.parquet``,
``theory_curves.parquet`` (each series' ceiling on the extrapolation grid),
``frontier_energy.parquet`` (power and energy per token along the frontier,
``pipeline.theory.energy``; the columns of all four: pipeline/theory/contract.py),
``reports/metrics/theory.json`` ({scenario: {knee_flop, wall_flop, ...}} plus ``_bounds`` counts and ``_energy``: MW and GWh at each knee and wall) and
``reports/plots/frontier.csv`` (scenario, training_flop, utilization).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from pipeline.config import Settings, settings
from pipeline.processes import map_in_order
from pipeline.runner import Inputs, Result, run_stage
from pipeline.schema import output_column_names
from pipeline.theory.bounds import compute_bounds
from pipeline.theory.curves import series_ceilings
from pipeline.theory.energy import frontier_energy
from pipeline.theory.frontier import flop_grid, frontier_frame, headline
from pipeline.theory.memory import Overhead
from pipeline.theory.memory_fit import overhead_of, runs_memory
from pipeline.theory.scenarios import load_scenarios
from pipeline.theory.search import search


USED_COLUMNS = ["n_layers_used", "d_model_used", "seq_len_used", "micro_batch_used"]


def _scenario_frontier(grid: np.ndarray, fraction: float, rounds: int, points: int,
                       scn) -> tuple[pd.DataFrame, dict]:
    """One scenario's frontier over the C grid, and its headline metrics."""
    front = search(scn, grid)
    head = headline(scn, front, fraction, rounds, points)
    return frontier_frame(scn.name, front), {
        "knee_flop": head.knee_flop, "wall_flop": head.wall_flop,
        "plateau_utilization": head.plateau_utilization,
        "knee_utilization": head.knee_utilization,
        "wall_beyond_grid": head.wall_beyond_grid,
        "accelerator": scn.accelerator, "precision": scn.precision,
        "layout_evaluations": front.n_evaluations + head.n_evaluations,
    }


def run_frontier(params: Mapping[str, Any], catalog, overhead: Overhead = Overhead(),
                 workers: int = 1) -> tuple[pd.DataFrame, dict]:
    """Every scenario's frontier over the C grid, and its knee and wall (layouts sized by the
    memory model with the fitted ``overhead``); the scenarios, independent searches, over
    ``workers`` processes."""
    cfg = settings(params, "theory").frontier
    grid = flop_grid(cfg.min_flop, cfg.max_flop, cfg.points)
    scenarios = [replace(scn, memory_overhead=overhead) for scn in load_scenarios(params, catalog)]
    done = map_in_order(_scenario_frontier, scenarios, workers,
                        shared=(grid, cfg.knee_fraction, cfg.refine_rounds, cfg.refine_points))
    frames = [frame for frame, _ in done]
    metrics = {scn.name: head for scn, (_, head) in zip(scenarios, done)}
    frame = pd.concat(frames, ignore_index=True)
    frame = frame.sort_values(["scenario", "training_flop"], kind="mergesort")
    return frame.reset_index(drop=True), metrics


def compute(inputs: Inputs, s: Settings) -> Result:
    """The theory stage (declared in pipeline/theory/contract.py): every scenario's frontier,
    every run's ceiling, every series' ceiling on the extrapolation grid (``compare.extrapolate_n``
    and ``compare.curve_points``, the grid compare draws on) and the energy at the frontier."""
    catalog, runs = inputs.catalog, inputs["runs.parquet"]
    bounds = compute_bounds(runs, catalog, s)
    # the memory model's overhead is fitted first: the frontier searches layouts that fit
    memory, memory_metrics = runs_memory(runs, bounds, catalog, s)
    frontier, metrics = run_frontier(s, catalog, overhead_of(memory_metrics), s.theory.workers)
    metrics["_memory"] = memory_metrics
    bounds = bounds.drop(columns=USED_COLUMNS).merge(memory, on="run_id", how="left",
                                                     validate="one_to_one")
    curves = series_ceilings(runs, inputs["series.parquet"], catalog, s,
                             sorted(s.compare.extrapolate_n), s.compare.curve_points)
    energy_front, energy = frontier_energy(frontier, metrics, load_scenarios(s, catalog), catalog,
                                           runs, s.theory.duration_days)
    metrics["_bounds"] = _bounds_metrics(bounds)
    metrics["_energy"] = energy
    frames = {"bounds.parquet": bounds, "frontier.parquet": frontier,
              "theory_curves.parquet": curves,
              "frontier_energy.parquet":
                  energy_front.loc[:, output_column_names("frontier_energy.parquet")]}
    plots = {"frontier.csv": frontier.loc[:, ["scenario", "training_flop", "utilization"]]}
    return Result(frames=frames, metrics=metrics, plots=plots)


def _bounds_metrics(bounds: pd.DataFrame) -> dict[str, Any]:
    """theory.json ``_bounds``: how many runs got a ceiling, exceed it, and what binds."""
    has_bound = bounds["bound_mfu"].notna()
    exceed = bounds.loc[bounds["exceeds_bound"], ["run_id", "exceed_reason"]]
    return {
        "runs": int(len(bounds)),
        "with_bound": int(has_bound.sum()),
        "without_bound": int((~has_bound).sum()),
        "with_measurement": int((has_bound & bounds["measured_mfu"].notna()).sum()),
        "exceeding_bound": int(bounds["exceeds_bound"].sum()),
        "exceeding_runs": dict(zip(exceed["run_id"], exceed["exceed_reason"])),
        "median_fraction_of_bound": _median(bounds["measured_mfu"] / bounds["bound_mfu"]),
        "binding_counts": {str(k): int(v) for k, v in
                           bounds.loc[has_bound, "binding"].value_counts().sort_index().items()},
    }


def run(params: Mapping[str, Any], **paths: Path) -> dict[str, Any]:
    """Run the theory stage through the runner (``processed_dir``, ``catalog_dir``,
    ``out_dir``, ``metrics_path``, ``plots_dir``); returns its metrics."""
    return run_stage("theory", params, **paths)


def _median(values: pd.Series) -> float:
    values = values.replace([np.inf, -np.inf], np.nan).dropna()
    return float(values.median()) if len(values) else float("nan")
