"""Frontier search and the paper's headline (theory.md G1, G2) with params.yaml's scenarios."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pipeline.config import ConfigError
from pipeline.theory import laws as lw
from pipeline.theory.cost import step_cost
from pipeline.theory.frontier import flop_grid, headline
from pipeline.theory.inputs import Layout, Shape
from pipeline.theory.scenarios import load_scenarios
from pipeline.theory.search import model_for, search


GRID = flop_grid(1e24, 1e33, 61)


@pytest.fixture(scope="module")
def scenarios(params, catalog):
    return {s.name: s for s in load_scenarios(params, catalog)}


@pytest.fixture(scope="module")
def heads(scenarios):
    out = {}
    for name in ("baseline", "aggressive_batch", "fatter_models"):
        front = search(scenarios[name], GRID)
        out[name] = (front, headline(scenarios[name], front, 0.9))
    return out


def test_baseline_uses_the_ml_par_sim_laws_and_h100(scenarios):
    scn = scenarios["baseline"]
    for field in ("tokens_per_param", "layers_anchor", "batch_anchor_tokens", "width_ratio"):
        assert getattr(scn.laws, field) == getattr(lw.Laws(), field)
    assert scn.laws.batch_exponent == pytest.approx(1 / 6, rel=1e-12)
    assert scn.hardware.peak_flops_per_s == 989.5e12
    assert scn.hardware.scaleup_bytes_per_s == 450e9  # NVLink 900 GB/s bidirectional
    assert scn.duration_s == 90 * 86400


@pytest.mark.slow
def test_headline_knee_and_wall_g1_g2(heads):
    _, head = heads["baseline"]
    assert 8e27 <= head.knee_flop <= 5e28
    assert 1e31 <= head.wall_flop <= 4e31
    assert not head.wall_beyond_grid


@pytest.mark.slow
def test_aggressive_batch_and_fatter_models_move_the_wall_up(heads):
    wall = heads["baseline"][1].wall_flop
    assert heads["aggressive_batch"][1].wall_flop > 2 * wall
    assert heads["fatter_models"][1].wall_flop > 2 * wall


@pytest.mark.slow
def test_frontier_shape(heads):
    front, head = heads["baseline"]
    feas = front.feasible
    # Feasible up to the wall, infeasible beyond it; utilization within (0, 1].
    assert feas[GRID <= head.wall_flop].all() and not feas[GRID > head.wall_flop].any()
    assert np.all((front.utilization[feas] > 0) & (front.utilization[feas] <= 1))
    assert np.all(front.train_time_s[feas] <= 90 * 86400 * (1 + 1e-12))
    assert np.all(front.train_time_s[~feas] > 90 * 86400)
    assert head.plateau_utilization > 0.99
    for name in ("dp", "tp1", "tp2", "pp", "ep", "microbatches", "n_accelerators"):
        assert np.all(np.isfinite(getattr(front, name))), name
    # Utilization falls from the plateau towards the wall.
    assert front.utilization[feas][-1] < 0.1


@pytest.mark.slow
def test_reported_layouts_reproduce_their_utilization(scenarios, heads):
    scn, (front, _) = scenarios["baseline"], heads["baseline"]
    pick = np.nonzero(front.feasible)[0][::7]
    model = model_for(GRID[pick], scn)
    pp, m = front.pp[pick], front.microbatches[pick]
    v = np.where(m >= pp, np.maximum(model["n_layers"] / pp, 1.0), 1.0)
    cost = step_cost(scn.hardware, Shape(model["params"], model["active_params"],
                                         model["n_layers"], model["d_model"]),
                     Layout(dp=front.dp[pick], tp1=front.tp1[pick], tp2=front.tp2[pick], pp=pp,
                            microbatches=m, zero_stage=1, interleave=v),
                     model["batch"], scn.constants)
    assert np.allclose(cost.utilization, front.utilization[pick], rtol=1e-12)
    assert np.all(front.n_accelerators[pick] * scn.hardware.peak_flops_per_s
                  * cost.utilization * model["steps"] * cost.t_step_s
                  == pytest.approx(GRID[pick], rel=1e-9))


def test_search_beats_a_brute_force_grid_at_one_compute(scenarios):
    # Exhaustive check of the bisection at C = 3e27: no power-of-two layout does better.
    scn = scenarios["baseline"]
    scn = replace(scn, search=replace(scn.search, dp_steps_per_octave=1))
    C = np.array([3e27])
    best = search(scn, C)
    model = model_for(C, scn)
    g = np.meshgrid(*[2.0 ** np.arange(0, 13)] * 2, 2.0 ** np.arange(0, 4), 2.0 ** np.arange(0, 9),
                    2.0 ** np.arange(0, 11), indexing="ij")
    dp, tp1, tp2, pp, m = (a.ravel() for a in (g[0], g[1], g[2], g[3], g[4]))
    ok = (m == 1) | (m >= pp)
    ok &= (m <= 16 * pp) & ((pp > 1) | (m == 1))
    ok &= (tp1 <= model["active_params"] / (2 * model["n_layers"] * model["d_model"]) / 128)
    ok &= (tp2 <= model["d_model"] / 128) & (pp <= model["n_layers"])
    dp, tp1, tp2, pp, m = dp[ok], tp1[ok], tp2[ok], pp[ok], m[ok]
    v = np.where(m >= pp, np.maximum(model["n_layers"] / pp, 1.0), 1.0)
    cost = step_cost(scn.hardware, Shape(model["params"], model["active_params"],
                                         model["n_layers"], model["d_model"]),
                     Layout(dp=dp, tp1=tp1, tp2=tp2, pp=pp, microbatches=m, zero_stage=1,
                            interleave=v), model["batch"], scn.constants)
    feasible = cost.t_step_s * model["steps"] <= scn.duration_s
    assert best.utilization[0] >= cost.utilization[feasible].max() * (1 - 1e-12)


@pytest.mark.slow
def test_faster_chip_same_bandwidths_does_not_move_the_knee_up(scenarios, heads):
    scn = scenarios["baseline"]
    fast = replace(scn, hardware=scn.hardware.scaled(peak_flops_per_s=2.0))
    front = search(fast, GRID)
    head = headline(fast, front, 0.9)
    assert head.knee_flop <= heads["baseline"][1].knee_flop


def test_every_scenario_loads_and_moe_is_sparse(scenarios):
    assert {"baseline", "a100", "h200", "b200", "gb200_nvl72", "tpu_v5p", "fp8",
            "aggressive_batch", "fatter_models", "moe", "low_latency"} <= set(scenarios)
    assert scenarios["gb200_nvl72"].hardware.scaleup_domain_size == 72
    assert scenarios["fp8"].constants.bytes_per_value == 1.0
    assert scenarios["fp8"].hardware.peak_flops_per_s == 2 * 989.5e12
    assert scenarios["moe"].moe.total_per_active > 4
    assert scenarios["low_latency"].hardware.kernel_latency_s == pytest.approx(
        scenarios["baseline"].hardware.kernel_latency_s / 2)


def test_broken_scenarios_name_the_field(params, catalog):
    def with_scenario(node):
        theory = {**params["theory"], "scenarios": {"x": node}}
        return {**params, "theory": theory}

    with pytest.raises(ConfigError, match="theory.scenarios.x.accelerator"):
        load_scenarios(with_scenario({"accelerator": "H900"}), catalog)
    with pytest.raises(ConfigError, match="theory.scenarios.x.laws.bogus"):
        load_scenarios(with_scenario({"accelerator": "H100-SXM5-80GB", "laws": {"bogus": 1}}),
                       catalog)
    with pytest.raises(ValueError, match="scaleout_bytes_per_s"):
        load_scenarios(with_scenario({"accelerator": "B300-SXM-270GB"}), catalog)
    with pytest.raises(ValueError, match="precision"):
        load_scenarios(with_scenario({"accelerator": "A100-SXM4-80GB", "precision": "fp8"}),
                       catalog)


def test_memory_check_keeps_weights_and_optimizer_states_in_hbm(scenarios):
    scn = scenarios["baseline"]
    capped = replace(scn, search=replace(scn.search, memory_check=True))
    C = np.array([1e26, 1e28])
    free, fit = search(scn, C), search(capped, C)
    assert np.all(fit.utilization <= free.utilization + 1e-12)
    model = model_for(C, scn)
    local = model["params"] / (fit.tp1 * fit.tp2 * fit.pp)
    state = local * (2 * 2.0 + 12.0 / (fit.dp * fit.ep))
    assert np.all(state <= 80e9)


@pytest.mark.slow
def test_wall_lies_between_the_closed_forms_of_its_latency_chain(scenarios, heads):
    # No layout shortens the kernel chain, so the wall cannot pass the closed-form wall at
    # tau = n_k l_k; the wall's own layout pays at least that, so the search's wall is below.
    scn = scenarios["baseline"]
    wall = heads["baseline"][1].wall_flop
    tau_kernels = scn.constants.kernels_per_layer * scn.hardware.kernel_latency_s
    assert wall <= lw.latency_wall_flop(tau_kernels, scn.duration_s, scn.laws)
    # ...and work at the wall costs less than the latency chain itself: the wall is above the
    # closed form at twice the 33.3 us that gives 2e31 (G9), i.e. above 5e30
    assert wall >= lw.latency_wall_flop(2 * 33.3e-6, scn.duration_s, scn.laws)


def test_a_feasible_point_always_fits_memory(scenarios):
    """Every scenario with the memory check: a point is feasible only if its layout fits in
    HBM (the grid's floor(2^(j/q)) dp once fell just below the memory bound: 10 points of the
    shipped frontier were feasible and did not fit)."""
    for name, scn in scenarios.items():
        if not scn.search.memory_check:
            continue
        front = search(scn, GRID)
        assert not (front.feasible & ~front.fits_memory).any(), name
