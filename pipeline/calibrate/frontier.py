"""The frontier at today's measured efficiencies: the theory's search with the calibrated step
time (population values, no source effect), and a CI of its knee from parameter draws.

The calibrated step time of a layout is the model of docs/theory.md §10 applied to the ideal
component times of :func:`pipeline.theory.cost.step_cost`:

    T = theta_compute t_c + theta_small t_c W_ref / W + theta_hbm t_hbm + theta_tp t_tp (inside
        the scale-up domain) + theta_tp_out t_tp (beyond it) + theta_dp t_dp + theta_pp t_pp
        + theta_ep t_ep + theta_bubble t_bubble + theta_latency t_latency + theta_overhead
        + theta_sync log2 G + theta_launch m L / pp,

and utilization = t_c / T (t_c is the model FLOP over G F). Terms the fit dropped count 0;
terms it held at the ideal count 1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

import numpy as np

from pipeline.calibrate.features import WORK_REF
from pipeline.calibrate.model import Calibration
from pipeline.theory.cost import COMPONENTS, StepCost, step_cost
from pipeline.theory.frontier import headline
from pipeline.theory.search import search

_ORDER = {name: i for i, name in enumerate(COMPONENTS)}


@dataclass(frozen=True)
class Efficiencies:
    """theta per term (missing terms: 0). ``step_cost`` has the signature of the ideal one."""

    theta: Mapping[str, float]

    def _t(self, name: str) -> float:
        return float(self.theta.get(name, 0.0))

    @property
    def bound_scale(self) -> tuple[float, float, float]:
        """Factors on the search's lower bound: compute, HBM weight traffic, latency chain."""
        return self._t("compute"), self._t("hbm"), self._t("latency")

    def parts(self, ideal: StepCost, hw, shape, layout) -> dict[str, np.ndarray]:
        """Calibrated seconds per step by component (``overhead``: the fixed, sync and launch
        terms), from the ideal cost of the same configuration."""
        t_c = ideal.t_compute_s
        tp = np.asarray(layout.tp1, float) * np.asarray(layout.tp2, float)
        outside = tp > np.asarray(hw.scaleup_domain_size, float)
        work = ideal.microbatch_tokens * np.asarray(shape.d_model, float) / tp
        parts = {
            "compute": self._t("compute") * t_c + self._t("small_work") * t_c * WORK_REF / work,
            "hbm": self._t("hbm") * ideal.t_hbm_s,
            "net_tp": np.where(outside, self._t("net_tp_out"), self._t("net_tp")) * ideal.t_net_tp_s,
            "net_dp": self._t("net_dp") * ideal.t_net_dp_s,
            "net_pp": self._t("net_pp") * ideal.t_net_pp_s,
            "net_ep": self._t("net_ep") * ideal.t_net_ep_s,
            "bubble": self._t("bubble") * ideal.t_bubble_s,
            "latency": self._t("latency") * ideal.t_latency_s,
            "overhead": self._t("overhead") + self._t("sync") * np.log2(np.maximum(
                ideal.n_accelerators, 1.0)) + self._t("launch") * np.asarray(
                layout.microbatches, float) * np.asarray(shape.n_layers, float)
            / np.asarray(layout.pp, float),
        }
        shape_ = np.broadcast(*parts.values()).shape
        return {k: np.broadcast_to(v, shape_) for k, v in parts.items()}

    def step_cost(self, hw, shape, layout, batch_tokens, const) -> StepCost:
        ideal = step_cost(hw, shape, layout, batch_tokens, const)
        parts = self.parts(ideal, hw, shape, layout)
        shape_ = parts["compute"].shape
        t_step = sum(parts.values())
        # the fixed per-step terms count with the latency chain (COMPONENTS has no overhead)
        parts["latency"] = parts["latency"] + parts.pop("overhead")
        names = list(parts)
        stacked = np.stack([parts[n] for n in names])
        binding = np.array([_ORDER[n] for n in names], dtype=np.int8)[np.argmax(stacked, axis=0)]
        return replace(ideal, t_step_s=t_step,
                       utilization=np.broadcast_to(ideal.t_compute_s, shape_) / t_step,
                       binding=binding)


def efficiencies_of(cal: Calibration, log_theta: np.ndarray | None = None) -> Efficiencies:
    """Population efficiencies of a fit (or of a draw of its log theta)."""
    lt = cal.log_theta if log_theta is None else log_theta
    theta = {t: float(np.exp(v)) for t, v in zip(cal.terms, lt)}
    theta.update(cal.fixed)
    return Efficiencies(theta)


def _percentiles(values: list[float]) -> list[float]:
    """2.5 and 97.5 percentiles of the finite draws (NaN without any)."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    return np.percentile(v, [2.5, 97.5]).tolist() if v.size else [np.nan, np.nan]


def calibrated_frontier(scenarios, cal: Calibration, grid: np.ndarray, knee_fraction: float,
                        samples: int, seed: int, rounds: int = 2, points: int = 8,
                        ci_grid: np.ndarray | None = None) -> dict:
    """Per scenario: calibrated knee and wall (population values) and their 95% CIs from
    ``samples`` draws of log theta ~ N(estimate, covariance) (each searched on ``ci_grid``, a
    coarser grid, with one refinement round), with the frontier at the point estimate."""
    ci_grid = grid if ci_grid is None else ci_grid
    rng = np.random.default_rng(seed)
    p = len(cal.terms)
    draws = rng.multivariate_normal(cal.log_theta, cal.cov[:p, :p], size=samples,
                                    method="eigh") if samples else np.zeros((0, p))
    # the compute term is held >= 1 in the fit; draws keep that constraint
    if cal.terms and cal.terms[0] == "compute":
        draws[:, 0] = np.maximum(draws[:, 0], 0.0)
    out = {}
    for scn in scenarios:
        mine = replace(scn, efficiency=efficiencies_of(cal))
        front = search(mine, grid)
        head = headline(mine, front, knee_fraction, rounds, points)
        knees, walls = [], []
        for lt in draws:
            drawn = replace(scn, efficiency=efficiencies_of(cal, lt))
            f = search(drawn, ci_grid)
            h = headline(drawn, f, knee_fraction, 1, points)
            knees.append(h.knee_flop)
            walls.append(h.wall_flop)
        ci, wci = _percentiles(knees), _percentiles(walls)
        out[scn.name] = dict(knee_flop_calibrated=head.knee_flop, knee_flop_calibrated_ci=ci,
                             wall_flop_calibrated=head.wall_flop, wall_flop_calibrated_ci=wci,
                             plateau_utilization_calibrated=head.plateau_utilization,
                             # utilization highest at the grid's smallest C: the plateau (and so
                             # the knee) lies at or below theory.frontier.min_flop, unresolved
                             plateau_at_grid_start=bool(front.feasible[0] and np.nanargmax(
                                 np.where(front.feasible, front.utilization, -np.inf)) == 0),
                             wall_beyond_grid_calibrated=head.wall_beyond_grid,
                             frontier=front)
    return out
