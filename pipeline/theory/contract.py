"""The theory stage's contracts: bounds, frontier, theory_curves and frontier_energy (Parquet),
reports/metrics/theory.json and reports/headline/theory.json.

Columns are ``(name, pyarrow type, meaning, rule)`` (pipeline/contracts.py); ``OUTPUTS`` maps
each file name to them.
"""

from __future__ import annotations

from typing import Any

import pandera.pandas as pda
from pydantic import Field

from pipeline.contracts import (ID, NONNEG, POS, SHARE, UNIT, B, F, Headline, I, Metrics, S, Stage,
                                col)
from pipeline.vocab import COMPONENTS

_TIMES = tuple(col(f"t_{k}_s", F, f"time of the {k} component per step (s)", **NONNEG)
               for k in COMPONENTS)

# Predicted peak memory per accelerator (pipeline/theory/memory.py) and whether it fits in HBM.
_MEMORY = (
    col("memory_bytes_per_accelerator", F, "predicted peak memory per chip (B)", **POS),
    col("fits_memory", B, "predicted peak memory <= the chip's HBM capacity (catalog)"),
)

OUTPUTS: dict[str, tuple] = {
    "bounds.parquet": (
        col("run_id", S, "run", **ID),
        col("bound_mfu", F, "the theory's utilization ceiling for the run", **UNIT),
        *_TIMES,
        col("binding", S, "limiting component",
           checks=[pda.Check.isin(list(COMPONENTS))], nullable=True),
        col("assumed", S, "fields the model had to assume"),
        col("t_step_s", F, "the theory's step time (s)", **POS),
        col("measured_mfu", F, "the run's MFU (or HFU) compared", **UNIT),
        col("exceeds_bound", B, "measured above the ceiling by more than the tolerance"),
        *_MEMORY,
    ),
    "frontier.parquet": (
        col("scenario", S, "scenario name", **ID),
        col("training_flop", F, "training compute C", checks=[pda.Check.gt(0)], nullable=False),
        col("utilization", F, "best utilization at C", **SHARE),
        col("n_accelerators", I, "accelerators of the best layout", **POS),
        col("dp", I, "data-parallel degree", **POS), col("tp", I, "tensor-parallel degree", **POS),
        col("pp", I, "pipeline degree", **POS), col("ep", I, "expert degree", **POS),
        col("microbatches", I, "microbatches per step", **POS),
        col("global_batch_tokens", F, "tokens per step", **POS),
        col("binding", S, "limiting component",
           checks=[pda.Check.isin(list(COMPONENTS))], nullable=True),
        col("feasible", B, "a layout finishes within the duration"),
        *_MEMORY,
    ),
}
OUTPUTS["theory_curves.parquet"] = (
    col("series_id", S, "scaling series", **ID),
    col("n_accelerators", F, "N of the extrapolation grid", checks=[pda.Check.gt(0)],
       nullable=False),
    col("bound_mfu", F, "the ceiling of the series' configuration moved to N", **UNIT),
)
# Power and energy per token along the frontier (``frontier_energy.parquet``, theory;
# pipeline/theory/energy.py): ``_tdp`` on the catalog's TDP, ``_measured`` on the MLPerf node
# power per accelerator; null where the frontier is infeasible or no power figure exists.
OUTPUTS["frontier_energy.parquet"] = (
    col("scenario", S, "scenario name", **ID),
    col("training_flop", F, "training compute C", checks=[pda.Check.gt(0)], nullable=False),
    col("n_accelerators", I, "accelerators of the best layout", **POS),
    col("feasible", B, "a layout finishes within the duration"),
    col("power_mw_tdp", F, "N x TDP (MW)", **POS),
    col("power_mw_measured", F, "N x measured node power per accelerator (MW)", **POS),
    col("energy_j_per_token_tdp", F, "N x TDP x train time / tokens (J)", **POS),
    col("energy_j_per_token_measured", F, "the same on the measured power (J)", **POS),
)




# -- reports/metrics/theory.json and reports/headline/theory.json -------------------------------
class ScenarioMetrics(Metrics):
    knee_flop: float | None
    wall_flop: float | None
    plateau_utilization: float | None
    knee_utilization: float | None
    wall_beyond_grid: bool
    accelerator: str
    precision: str


class BoundsMetrics(Metrics):
    runs: int
    with_bound: int
    without_bound: int
    exceeding_bound: int
    median_fraction_of_bound: float | None
    binding_counts: dict[str, int]


class EnergyAtPoint(Metrics):
    """The frontier's draw at a knee or wall: null where the frontier has no such point or no
    power figure exists."""
    training_flop: float | None
    n_accelerators: float | None
    power_mw: float | None
    energy_gwh: float | None


class ScenarioEnergy(Metrics):
    """``theory.json["_energy"]["scenarios"][name]`` (pipeline/theory/energy.py)."""
    accelerator: str
    power_w_per_accelerator: float | None
    power_basis: str
    tdp_w: float | None
    measured_w: float | None
    duration_days: float
    knee: EnergyAtPoint
    wall: EnergyAtPoint
    knee_tdp: EnergyAtPoint
    wall_tdp: EnergyAtPoint


class TheoryEnergyMetrics(Metrics):
    """``theory.json["_energy"]``: energy at the frontier per scenario."""
    duration_days: float
    scenarios: dict[str, ScenarioEnergy]



def validate_metrics(obj: dict[str, Any]) -> None:
    BoundsMetrics.model_validate(obj["_bounds"])
    if "_energy" in obj:
        TheoryEnergyMetrics.model_validate(obj["_energy"])
    for name, node in obj.items():
        if not name.startswith("_"):
            ScenarioMetrics.model_validate(node)



class TheoryHeadline(Headline):
    knee_flop: float | None = Field(gt=0)
    wall_flop: float | None = Field(gt=0)


METRICS = validate_metrics
HEADLINE = TheoryHeadline

STAGE = Stage(
    name="theory", help="Per-run ceilings, series ceilings and the frontier of feasible compute "
                        "(data-movement limits).",
    params=("theory", "ingest.attention_flops", "ingest.default_precision",
            "compare.extrapolate_n", "compare.curve_points"),
    reads=("runs.parquet", "series.parquet"), catalog=True, writes=tuple(OUTPUTS),
    plots=("frontier.csv",), plot_significant=6, compute="pipeline.theory.stage:compute")
