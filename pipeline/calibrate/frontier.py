"""The frontier at today's measured efficiencies: the theory's layout search, each layout costed
by the calibrated step function (:func:`pipeline.calibrate.critical_path.step_components`, the
one the fit uses), at the production population values (no source effect), with CIs of the
knee and wall from draws of those values.

What the calibrated search lets a layout be: what frameworks run (1-D TP with sequence
parallelism, no recomputation, ZeRO as ``theory.search.zero_stage``), on the default measured
network (data/catalog/collectives.csv) and the chip's measured GEMM rate. The pipeline runs
interleaved 1F1B with one layer per chunk (v = L / pp) once m >= pp, else plain 1F1B: the
schedule Llama 3 405B ran on 16K H100 (arXiv:2407.21783 §3.3.2; data/raw/published/README.md),
with NeMo's recipes at v = 5-7 and torchtitan's interleaved 1F1B beside it. The step function
charges the schedule's cost: 2 v activation sends per microbatch and stage, and the search's
memory check holds the interleaved schedule's extra in-flight activations.
Layouts whose predicted peak memory (:mod:`pipeline.theory.memory`, the theory stage's fitted
overhead) exceeds HBM are left out, as in the ideal search (``theory.search.memory_check``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from pipeline.calibrate import fitting as ft
from pipeline.calibrate.families import buckets
from pipeline.calibrate.critical_path import COMPONENTS, Config, Machine, Theta, step_components
from pipeline.calibrate.hardware import DEFAULT_CLUSTER, gemm_max_efficiency, sm_counts_of
from pipeline.calibrate.step import StepModel
from pipeline.processes import map_in_order
from pipeline.theory.cost import COMPONENTS as THEORY_COMPONENTS
from pipeline.theory.cost import StepCost
from pipeline.theory.frontier import headline
from pipeline.theory.search import search

# calibrated component -> the theory's component vocabulary (frontier.parquet's binding)
_AS_THEORY = {"compute": "compute", "kernel_overhead": "latency", "tp_comm": "net_tp", "cp_comm": "net_tp", "ep_comm": "net_ep",
              "pp_p2p": "net_pp", "bubble": "bubble", "dp_comm": "net_dp", "optimizer": "hbm",
              "fixed": "latency"}


def _f(x) -> np.ndarray:
    return np.asarray(x, dtype=float)


@dataclass(frozen=True)
class CalibratedStep:
    """``step_cost`` with the signature of the ideal one, for :func:`search`."""

    model: StepModel
    theta: np.ndarray                 # natural units, order PARAMETERS
    accelerator: str
    precision: str

    @property
    def bound_scale(self) -> tuple[float, float, float]:
        """Factors on the search's lower bound: compute time is at least model FLOP over the
        measured GEMM rate times eta; the HBM and latency terms of the ideal bound are not
        separate components here, so they are not used to prune (0)."""
        eta = gemm_max_efficiency(self.model.gemm, np.array([self.accelerator]),
                                  np.array([self.precision]))[0]
        return 1.0 / (eta * float(self.theta[0])), 0.0, 0.0

    def step_cost(self, hw, shape, layout, batch_tokens, const) -> StepCost:
        arrays = np.broadcast_arrays(
            _f(shape.params), _f(shape.active_params), _f(shape.expert_fraction),
            _f(shape.top_k), _f(shape.n_layers), _f(shape.d_model), _f(batch_tokens),
            _f(layout.dp), _f(layout.tp1) * _f(layout.tp2), _f(layout.pp), _f(layout.ep),
            _f(layout.microbatches), _f(layout.zero_stage), _f(shape.attention_flop_per_token),
            _f(shape.seq_len), _f(hw.peak_flops_per_s), _f(hw.hbm_bytes_per_s),
            _f(hw.scaleup_domain_size), _f(hw.scaleup_bytes_per_s), _f(hw.scaleout_bytes_per_s),
            _f(layout.interleave))
        shape_ = arrays[0].shape
        (params, active, expert, top_k, layers, d, batch, dp, tp, pp, ep, m, zero, attn, seq,
         peak, hbm, domain, up, out, v) = (a.ravel().astype(float) for a in arrays)
        n = params.size
        peak16, _ = self.model.catalog.peak_flops_per_s(self.accelerator, "bf16")
        reduce_bucket, gather_bucket = buckets(np.full(n, "megatron", dtype=object), dp * ep,
                                               zero)
        cfg = Config(params=params, active_params=active, expert_fraction=expert, top_k=top_k,
                     n_layers=layers, d_model=d, batch_tokens=batch,
                     microbatch_tokens=batch / (dp * ep * m), microbatches=m,
                     flop_per_token=6.0 * active + attn, counted_attention_flop_per_token=attn,
                     attention_flop_per_token=12.0 * layers * d * seq, dp=dp * ep, tp=tp, pp=pp,
                     cp=np.ones(n), ep=ep, zero_stage=zero, recompute=np.zeros(n),
                     virtual_pipeline=np.maximum(v, 1.0), sequence_parallel=tp > 1,
                     reduce_bucket_bytes=reduce_bucket, gather_bucket_bytes=gather_bucket,
                     **_moe_columns(shape, layers))
        eta = gemm_max_efficiency(self.model.gemm, np.full(n, self.accelerator, dtype=object),
                                  np.full(n, self.precision, dtype=object))
        mach = Machine(peak_flops_per_s=peak,
                       attention_peak_flops_per_s=np.minimum(peak, float(peak16 or peak[0])),
                       hbm_bytes_per_s=hbm, domain=domain, scaleup_bytes_per_s=up,
                       scaleout_bytes_per_s=out, gemm_max_efficiency=eta,
                       cluster=np.full(n, DEFAULT_CLUSTER, dtype=object),
                       network=self.model.network,
                       scaleup_latency_s=self.model.scaleup_latency_s,
                       launch_s=self.model.kernel_latency_s,
                       sm_count=sm_counts_of(self.model.sm_count,
                                             np.full(n, self.accelerator, dtype=object)),
                       accelerator=np.full(n, self.accelerator, dtype=object))
        th = Theta(*(np.full(n, v) for v in self.theta))
        parts = step_components(cfg, mach, th)
        t = parts["step_time_s"].reshape(shape_)
        theory_index = {name: i for i, name in enumerate(THEORY_COMPONENTS)}
        stacked = np.stack([parts[k] for k in COMPONENTS])
        which = np.argmax(stacked, axis=0)
        binding = np.array([theory_index[_AS_THEORY[c]] for c in COMPONENTS],
                           dtype=np.int8)[which].reshape(shape_)

        def r(name):
            return parts[name].reshape(shape_)
        t_compute = (parts["model_flop_per_rank"] / peak).reshape(shape_)
        return StepCost(t_compute_s=t_compute, t_hbm_s=r("optimizer"),
                        t_net_tp_s=r("tp_comm") + r("cp_comm"), t_net_dp_s=r("dp_comm"),
                        t_net_pp_s=r("pp_p2p"), t_net_ep_s=r("ep_comm"), t_bubble_s=r("bubble"),
                        t_latency_s=r("fixed") + r("kernel_overhead"), t_step_s=t,
                        utilization=t_compute / t, binding=binding,
                        n_accelerators=(dp * ep * tp * pp).reshape(shape_),
                        microbatch_tokens=(batch / (dp * ep * m)).reshape(shape_),
                        tau_layer_s=np.zeros(shape_))


def _moe_columns(shape, layers: np.ndarray) -> dict[str, np.ndarray]:
    """An MoE scenario's columns for the calibrated MoE terms (pipeline/calibrate/moe.py): its
    experts, every layer MoE, the expert width from the parameter counts; none when dense."""
    experts = float(getattr(shape, "n_experts", 1) or 1)
    if experts <= 1:
        return {}
    n = layers.size
    return {"n_experts": np.full(n, experts), "expert_ffn_size": np.full(n, np.nan),
            "moe_layers": layers}


def _percentiles(values: list[float]) -> list[float]:
    """2.5 and 97.5 percentiles of the finite draws (NaN without any)."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    return np.percentile(v, [2.5, 97.5]).tolist() if v.size else [np.nan, np.nan]


def _interval(draws: list[float], coarse: float, point: float) -> list[float]:
    """The 95% interval of a knee or wall around ``point`` (found on the main grid): the draws'
    2.5 and 97.5 percentiles, searched on the coarser CI grid, times point / coarse, where
    ``coarse`` is the population values' own result on that grid. The coarse grid moves every
    draw by about the same factor; read relative to the population's coarse result, the
    draws' spread is placed around the point it belongs to (without this, grid steps put the
    point outside its own interval). The knee is a threshold of a nonlinear search, so the
    population values' result can lie past every draw (a handful of draws, ``frontier_samples``):
    the interval is then extended to the point, the range of all the searches made."""
    low, high = _percentiles(draws)
    finite = all(isinstance(v, (int, float)) and np.isfinite(v) for v in (point, coarse))
    if not finite or coarse <= 0 or not np.isfinite(low):
        return [low, high]
    scale = point / coarse
    return [min(low * scale, point), max(high * scale, point)]


def _framework_search(scn):
    """What frameworks run: 1-D TP, interleaved 1F1B at one layer per chunk (module docstring)."""
    return replace(scn.search, interleave="max", two_d_tp=False)


def _searched(scenarios, model: StepModel, held: list[int], grids: tuple[np.ndarray, np.ndarray],
              knee_fraction: float, refine: tuple[int, int], task: tuple[int, np.ndarray, bool]):
    """One scenario searched at one draw of the population parameters ``z``: the frontier and
    its headline (``full``: on the main grid with ``rounds`` refinements, else on the CI grid
    with one, and only the headline is returned)."""
    i, z, full = task
    scn = scenarios[i]
    th = ft.to_natural(z)
    for j in held:
        th[j] = ft.OFF[ft.PARAMETERS[j]]
    costed = replace(scn, search=_framework_search(scn),
                     efficiency=CalibratedStep(model, th, scn.accelerator, scn.precision))
    rounds, points = refine
    if full:
        front = search(costed, grids[0])
        return front, headline(costed, front, knee_fraction, rounds, points)
    return None, headline(costed, search(costed, grids[1]), knee_fraction, 1, points)


def calibrated_frontier(scenarios, model: StepModel, z_pop: np.ndarray, cov_z: np.ndarray,
                        free: tuple[str, ...], grid: np.ndarray, knee_fraction: float,
                        samples: int, seed: int, rounds: int = 2, points: int = 8,
                        ci_grid: np.ndarray | None = None, workers: int = 1) -> dict:
    """Per scenario: calibrated knee and wall (population values) and their 95% CIs from
    ``samples`` draws of the population parameters (logistic scale, Gaussian with the fit's
    covariance; each draw searched on ``ci_grid`` with one refinement round). Every (scenario,
    draw) search is independent: they run over ``workers`` processes (``pipeline.processes``,
    results in order, so they do not depend on it)."""
    ci_grid = grid if ci_grid is None else ci_grid
    rng = np.random.default_rng(seed)
    held = [j for j, p in enumerate(ft.PARAMETERS) if p not in free]
    draws = rng.multivariate_normal(z_pop, cov_z, size=samples, method="eigh") if samples \
        else np.zeros((0, z_pop.size))
    scenarios = list(scenarios)
    n = len(scenarios)
    tasks = [(i, z, False) for i in range(n) for z in draws]
    # the population values on the CI grid too: the draws' spread is read relative to it
    tasks += [(i, z_pop, False) for i in range(n)] + [(i, z_pop, True) for i in range(n)]
    done = map_in_order(_searched, tasks, workers, shared=(
        scenarios, model, held, (grid, ci_grid), knee_fraction, (rounds, points)))
    heads = [h for _, h in done[:len(draws) * n]]
    out = {}
    for i, scn in enumerate(scenarios):
        coarse = done[len(heads) + i][1]
        front, head = done[len(heads) + n + i]
        mine = heads[i * len(draws):(i + 1) * len(draws)]
        out[scn.name] = dict(knee_flop_calibrated=head.knee_flop,
                             knee_flop_calibrated_ci=_interval(
                                 [h.knee_flop for h in mine], coarse.knee_flop, head.knee_flop),
                             wall_flop_calibrated=head.wall_flop,
                             wall_flop_calibrated_ci=_interval(
                                 [h.wall_flop for h in mine], coarse.wall_flop, head.wall_flop),
                             plateau_utilization_calibrated=head.plateau_utilization,
                             plateau_at_grid_start=bool(front.feasible[0] and np.nanargmax(
                                 np.where(front.feasible, front.utilization, -np.inf)) == 0),
                             wall_beyond_grid_calibrated=head.wall_beyond_grid,
                             frontier=front)
    return out


def utilization_at(scenario, model: StepModel, theta: np.ndarray, flop: float) -> tuple[float,
                                                                                      dict]:
    """Best calibrated utilization at one training compute (feasible or not) and its layout."""
    scn = replace(scenario, search=_framework_search(scenario),
                  efficiency=CalibratedStep(model, theta, scenario.accelerator,
                                            scenario.precision))
    front = search(scn, np.array([float(flop)]))
    layout = {k: float(getattr(front, k)[0]) for k in ("dp", "tp1", "tp2", "pp", "ep",
                                                       "microbatches", "n_accelerators")}
    return (float(front.utilization[0]) if front.feasible[0] else 0.0), dict(
        layout, feasible=bool(front.feasible[0]), binding=str(front.binding[0]))
