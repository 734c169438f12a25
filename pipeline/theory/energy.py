"""Energy at the frontier: what a run at each scenario's knee and wall would draw.

Power per accelerator, two bases:

* ``tdp``: the catalog's ``tdp_w`` (board power; ``data/catalog/hardware.csv`` names each
  value's source). The chips alone: no host, network or cooling.
* ``measured``: the median MLPerf node power per accelerator (hosts included, AC: at the wall)
  of the largest N measured on that accelerator (``runs.parquet`` ``power_w_per_accelerator``;
  ``pipeline.ingest.sources.mlperf.power``). Where no run on the scenario's accelerator was
  measured, none.

At a training compute C, the frontier (``frontier.parquet``) gives the layout's accelerators
N(C) and its training time T(C). The draw is ``P = N x W`` (MW), the energy ``E = P x T``
(GWh; T is the scenario's duration wherever the frontier is feasible), and the energy per
token ``E / D(C)`` with ``D = C / (6 N_act)`` the scenario's training tokens
(``pipeline.theory.laws.training_tokens``). At the knee and wall N is interpolated on log C
between the frontier's grid points (the knee and wall are refined between them).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pipeline.theory.laws import training_tokens

J_PER_GWH = 3.6e12


def measured_power(runs: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Accelerator -> median AC node power per accelerator at its largest measured N, from
    pre-training benchmarks when there are any (the frontier is pre-training; LoRA
    fine-tuning draws less per chip: 636 W against GPT-3's 856 W on the same 512 H100)."""
    need = {"power_w_per_accelerator", "power_measurement", "accelerator", "n_accelerators"}
    if runs.empty or not need <= set(runs.columns):
        return {}
    m = runs[runs["power_w_per_accelerator"].notna() & (runs["power_measurement"] == "AC")]
    out = {}
    for acc, g in m.groupby("accelerator", sort=True):
        bench = g["benchmark"].fillna("") if "benchmark" in g else pd.Series("", index=g.index)
        pretraining = g[~bench.str.contains("lora")]
        g = pretraining if len(pretraining) else g
        n = int(g["n_accelerators"].max())
        at = g[g["n_accelerators"] == n]
        out[str(acc)] = {"power_w_per_accelerator": float(at["power_w_per_accelerator"].median()),
                         "n_accelerators": n, "runs": int(len(at)),
                         "benchmarks": ";".join(sorted(set(at.get("benchmark", pd.Series(
                             dtype=str)).dropna())))}
    return out


def _at(front: pd.DataFrame, flop: float, column: str) -> float | None:
    """``column`` of the feasible frontier at ``flop``, interpolated on log C."""
    f = front[front["feasible"]].sort_values("training_flop")
    if f.empty or not np.isfinite(flop):
        return None
    x = np.log(f["training_flop"].to_numpy(float))
    y = np.log(f[column].to_numpy(float))
    lx = np.log(flop)
    if lx < x[0] - 1e-9 or lx > x[-1] + 0.5:  # beyond the grid by more than its step: none
        return None
    return float(np.exp(np.interp(lx, x, y)))


def _point(front: pd.DataFrame, flop: float, watts: float | None) -> dict[str, Any]:
    n = _at(front, flop, "n_accelerators")
    t = _at(front, flop, "train_time_s")
    if n is None or t is None or watts is None:
        return {"training_flop": flop, "n_accelerators": n, "power_mw": None, "energy_gwh": None}
    return {"training_flop": flop, "n_accelerators": n, "power_mw": n * watts / 1e6,
            "energy_gwh": n * watts * t / J_PER_GWH}


def frontier_energy(frontier: pd.DataFrame, heads: dict[str, dict[str, Any]],
                    scenarios: list, catalog: Any, runs: pd.DataFrame,
                    duration_days: float) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(frontier rows with power and energy per token, metrics per scenario)."""
    measured = measured_power(runs)
    frames, out = [], {}
    for scn in scenarios:
        front = frontier[frontier["scenario"] == scn.name].copy()
        tdp = catalog.spec(scn.accelerator).get("tdp_w")
        meas = measured.get(scn.accelerator)
        watts = meas["power_w_per_accelerator"] if meas else tdp
        basis = (f"MLPerf {meas['benchmarks']} node power at N={meas['n_accelerators']}, AC, "
                 "hosts included"
                 if meas else ("catalog TDP, chips only" if tdp else "no power figure"))
        feas = front["feasible"].to_numpy(bool)
        tokens = training_tokens(front["training_flop"].to_numpy(float), scn.laws)
        for name, w in (("tdp", tdp), ("measured", meas["power_w_per_accelerator"] if meas
                                       else None)):
            w_arr = np.full(len(front), np.nan if w is None else float(w))
            energy = front["n_accelerators"].to_numpy(float) * w_arr * \
                front["train_time_s"].to_numpy(float)
            front[f"power_mw_{name}"] = np.where(feas, front["n_accelerators"] * w_arr / 1e6,
                                                 np.nan)
            front[f"energy_j_per_token_{name}"] = np.where(feas, energy / tokens, np.nan)
        frames.append(front)
        head = heads.get(scn.name, {})
        out[scn.name] = {
            "accelerator": scn.accelerator, "power_w_per_accelerator": watts,
            "power_basis": basis, "tdp_w": tdp, "duration_days": scn.duration_s / 86400.0,
            "measured_w": meas["power_w_per_accelerator"] if meas else None,
            "knee": _point(front, head.get("knee_flop", np.nan), watts),
            "wall": _point(front, head.get("wall_flop", np.nan), watts),
            "knee_tdp": _point(front, head.get("knee_flop", np.nan), tdp),
            "wall_tdp": _point(front, head.get("wall_flop", np.nan), tdp),
        }
    frame = pd.concat(frames, ignore_index=True) if frames else frontier
    return frame, {"duration_days": duration_days, "scenarios": out}
