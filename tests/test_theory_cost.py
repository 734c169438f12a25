"""The step-cost model: limits, invariants (hypothesis), golden ratios and input validation."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.theory.cost import COMPONENTS, allreduce_bytes, step_cost
from pipeline.theory.inputs import Constants, Hardware, Layout, Shape, hardware_from_spec, validate

# H100 SXM as the catalog states it (per-direction links) with the calibrated latencies.
H100 = Hardware(peak_flops_per_s=989.5e12, hbm_bytes_per_s=3.35e12, scaleup_bytes_per_s=450e9,
                scaleup_domain_size=8, scaleout_bytes_per_s=50e9, hbm_bytes=80e9,
                kernel_latency_s=3e-6, scaleup_latency_s=2e-6, scaleout_latency_s=5e-6)
LLAMA70 = Shape(params=70e9, active_params=70e9, n_layers=80, d_model=8192, seq_len=4096)
MOE = Shape(params=400e9, active_params=100e9, n_layers=64, d_model=8192, expert_fraction=0.6,
            top_k=2, n_experts=16)
CONST = Constants()
INF = Hardware(peak_flops_per_s=989.5e12, hbm_bytes_per_s=np.inf, scaleup_bytes_per_s=np.inf,
               scaleup_domain_size=8, scaleout_bytes_per_s=np.inf)

pow2 = st.integers(min_value=0, max_value=6).map(lambda k: 2.0**k)
layouts = st.builds(lambda dp, tp1, tp2, pp, ep, m, z: Layout(dp=dp, tp1=tp1, tp2=tp2, pp=pp,
                                                               ep=ep, microbatches=m,
                                                               zero_stage=z),
                    pow2, pow2, st.sampled_from([1.0, 2.0, 4.0]),
                    st.sampled_from([1.0, 2.0, 4.0, 8.0, 16.0]),
                    st.sampled_from([1.0, 2.0, 4.0]), pow2, st.sampled_from([0, 1, 3]))
shapes = st.sampled_from([LLAMA70, MOE])
batches = st.sampled_from([2.0**20, 2.0**22, 2.0**24])


def test_ring_allreduce_volume_matches_theory_md():
    # 2 (p-1)/p n w, all on the scale-up link inside one domain, all scale-out across domains.
    up, out = allreduce_bytes(np.float64(1e6), np.float64(8), np.float64(1), np.float64(8), 2.0)
    assert (up, out) == (pytest.approx(2 * 7 / 8 * 1e6 * 2), 0.0)
    up, out = allreduce_bytes(np.float64(1e6), np.float64(16), np.float64(8), np.float64(8), 2.0)
    assert (up, out) == (0.0, pytest.approx(2 * 15 / 16 * 1e6 * 2))
    # Hierarchical: 8 in the domain, 2 domains: scale-out carries n/8 over 2 ranks.
    up, out = allreduce_bytes(np.float64(1e6), np.float64(16), np.float64(1), np.float64(8), 2.0)
    assert up == pytest.approx(2 * 7 / 8 * 1e6 * 2)
    assert out == pytest.approx(2 * 1 / 2 * 1e6 / 8 * 2)


def test_infinite_bandwidth_zero_latency_gives_utilization_one_without_pipeline():
    layout = Layout(dp=np.array([1, 8, 64, 512.0]), tp1=np.array([1, 8, 4, 16.0]), tp2=2.0,
                    microbatches=np.array([1, 4, 16, 2.0]))
    cost = step_cost(INF, LLAMA70, layout, 2.0**22, CONST)
    assert np.allclose(cost.utilization, 1.0, rtol=1e-12)
    assert set(cost.binding_names()) == {"compute"}


def test_infinite_bandwidth_zero_latency_leaves_only_the_bubble():
    pp, m, v = np.array([2, 4, 8, 16.0]), np.array([1, 8, 32, 16.0]), np.array([1, 1, 2, 5.0])
    cost = step_cost(INF, LLAMA70, Layout(dp=4, pp=pp, microbatches=m, interleave=v), 2.0**22,
                     CONST)
    assert np.allclose(cost.utilization, v * m / (v * m + pp - 1), rtol=1e-12)


def test_latency_chain_is_layers_times_tau():
    zero_bw = replace(INF, kernel_latency_s=3e-6)
    cost = step_cost(zero_bw, LLAMA70, Layout(dp=8), 2.0**22, CONST)
    assert cost.t_latency_s == pytest.approx(80 * CONST.kernels_per_layer * 3e-6)
    assert cost.tau_layer_s == pytest.approx(12e-6)


def test_compute_bound_floor_is_where_weight_traffic_meets_compute_g11():
    # One chip, weight traffic only: t_hbm = t_compute at b = (4/3) F / M tokens (393.6).
    const = replace(CONST, activation_passes=0.0)
    b = 4.0 / 3.0 * 989.5e12 / 3.35e12
    cost = step_cost(H100, LLAMA70, Layout(dp=1), b, const)
    assert cost.t_hbm_s / cost.t_compute_s == pytest.approx(1.0, rel=1e-9)


@settings(max_examples=150, deadline=None)
@given(layouts, shapes, batches, st.sampled_from(["step", "microbatch"]))
def test_utilization_is_finite_and_at_most_one(layout, shape, batch, overlap):
    cost = step_cost(H100, shape, layout, batch, replace(CONST, dp_overlap=overlap))
    for name in ("t_compute_s", "t_hbm_s", "t_net_tp_s", "t_net_dp_s", "t_net_pp_s",
                 "t_net_ep_s", "t_bubble_s", "t_latency_s", "t_step_s", "utilization"):
        assert np.all(np.isfinite(getattr(cost, name))), name
    assert 0 < cost.utilization <= 1.0
    assert cost.t_step_s >= cost.t_compute_s
    # utilization is the compute share of the step (model FLOP / (G F t_step))
    assert cost.utilization == pytest.approx(cost.t_compute_s / cost.t_step_s, rel=1e-12)
    # the bubble and the latency chain add to the longest of compute and weight traffic
    assert cost.t_step_s >= (max(cost.t_compute_s, cost.t_hbm_s) + cost.t_bubble_s
                             + cost.t_latency_s) * (1 - 1e-12)
    # the binding component is the largest (DP counts only its exposed part, not reported)
    binding = COMPONENTS[int(cost.binding)]
    times = {c: float(getattr(cost, f"t_{c}_s")) for c in COMPONENTS if c != "net_dp"}
    if binding != "net_dp":
        assert times[binding] >= max(times.values()) * (1 - 1e-12), (binding, times)


@settings(max_examples=150, deadline=None)
@given(layouts, shapes, batches)
def test_doubling_every_bandwidth_never_lowers_utilization(layout, shape, batch):
    base = step_cost(H100, shape, layout, batch, CONST).utilization
    fast = H100.scaled(hbm_bytes_per_s=2, scaleup_bytes_per_s=2, scaleout_bytes_per_s=2)
    assert step_cost(fast, shape, layout, batch, CONST).utilization >= base * (1 - 1e-12)


@settings(max_examples=150, deadline=None)
@given(layouts, shapes, batches)
def test_a_faster_chip_with_the_same_bandwidths_lowers_utilization(layout, shape, batch):
    base = step_cost(H100, shape, layout, batch, CONST).utilization
    faster = step_cost(H100.scaled(peak_flops_per_s=2), shape, layout, batch, CONST).utilization
    assert faster <= base * (1 + 1e-12)


def test_network_time_grows_across_the_scale_up_domain():
    # Same tokens per chip; tp 128 spans 16 domains, so the scale-out link carries part of it.
    inside = step_cost(H100, LLAMA70, Layout(dp=8, tp1=8), 2.0**22, CONST)
    across = step_cost(H100, LLAMA70, Layout(dp=8, tp1=128), 2.0**22, CONST)
    assert across.t_net_tp_s > 1.1 * inside.t_net_tp_s
    slow_out = H100.scaled(scaleout_bytes_per_s=0.25)
    assert step_cost(slow_out, LLAMA70, Layout(dp=8, tp1=8), 2.0**22, CONST).t_net_tp_s == \
        pytest.approx(inside.t_net_tp_s)
    assert step_cost(slow_out, LLAMA70, Layout(dp=8, tp1=128), 2.0**22, CONST).t_net_tp_s > \
        3 * across.t_net_tp_s


def test_two_d_tp_places_the_larger_all_reduce_inside_the_domain():
    # tp 8 x 16 = 128 chips over 16 domains: the cheaper orientation keeps hidden traffic inside.
    one_d = step_cost(H100, LLAMA70, Layout(dp=1, tp1=128), 2.0**22, CONST)
    two_d = step_cost(H100, LLAMA70, Layout(dp=1, tp1=8, tp2=16), 2.0**22, CONST)
    assert two_d.t_net_tp_s < one_d.t_net_tp_s


def test_moe_pays_all_to_all_and_dense_does_not():
    lay = Layout(dp=4, ep=4, tp1=2)
    assert step_cost(H100, MOE, lay, 2.0**22, CONST).t_net_ep_s > 0
    assert step_cost(H100, LLAMA70, lay, 2.0**22, CONST).t_net_ep_s == 0


def test_fsdp_moves_gradient_traffic_into_the_main_phase():
    # ZeRO-1: one ring all-reduce of the gradients per step, 2 (p-1)/p N w per rank and direction.
    z1 = step_cost(H100, LLAMA70, Layout(dp=8, zero_stage=1), 2.0**22, CONST)
    assert z1.t_net_dp_s == pytest.approx(2 * 7 / 8 * 70e9 * 2 / 450e9, rel=1e-12)
    # ZeRO-3 per microbatch: all-gather forward + all-gather backward + reduce-scatter, each
    # (p-1)/p N w: 3 (p-1)/p N w = 1.5 all-reduces, m times a step.
    for m in (1.0, 4.0):
        z3 = step_cost(H100, LLAMA70, Layout(dp=8, zero_stage=3, microbatches=m), 2.0**22, CONST)
        assert z3.t_net_dp_s == pytest.approx(m * 3 * 7 / 8 * 70e9 * 2 / 450e9, rel=1e-12)
    # across domains the ratio to ZeRO-1 is the same
    z1 = step_cost(H100, LLAMA70, Layout(dp=64, zero_stage=1), 2.0**22, CONST)
    z3 = step_cost(H100, LLAMA70, Layout(dp=64, zero_stage=3), 2.0**22, CONST)
    assert z3.t_net_dp_s == pytest.approx(1.5 * z1.t_net_dp_s)
    # without resharding: one all-gather + one reduce-scatter per step = one all-reduce
    once = step_cost(H100, LLAMA70, Layout(dp=64, zero_stage=3, microbatches=8.0), 2.0**22,
                     replace(CONST, fsdp_gather="step"))
    assert once.t_net_dp_s == pytest.approx(z1.t_net_dp_s)


@pytest.mark.parametrize("layout, shape, field", [
    (Layout(dp=1, tp1=16384), LLAMA70, "layout.tp"),
    (Layout(dp=1, pp=3), LLAMA70, "layout.pp"),
    (Layout(dp=1, pp=160), LLAMA70, "layout.pp"),
    (Layout(dp=0), LLAMA70, "layout.n_accelerators"),
    (Layout(dp=1, ep=32), MOE, "layout.ep"),
    (Layout(dp=1.5), LLAMA70, "layout.dp"),
    (Layout(dp=1, zero_stage=4), LLAMA70, "layout.zero_stage"),
    (Layout(dp=1), replace(LLAMA70, d_model=0.0), "shape.d_model"),
    (Layout(dp=1), replace(LLAMA70, active_params=1e12), "shape.active_params"),
])
def test_bad_configurations_raise_naming_the_field(layout, shape, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        validate(H100, shape, layout)


def test_validate_accepts_a_good_configuration():
    assert validate(H100, LLAMA70, Layout(dp=8, tp1=8, pp=4, microbatches=16)) is None
    # the limits themselves are allowed: pp = L, tp1 * tp2 = d_model, ep = n_experts
    assert validate(H100, LLAMA70, Layout(dp=1, pp=80)) is None
    assert validate(H100, LLAMA70, Layout(dp=1, tp1=512, tp2=16)) is None
    assert validate(H100, MOE, Layout(dp=1, ep=16)) is None
    # pp = 3 does not divide 80 layers: allowed only when divisibility is not required
    assert validate(H100, LLAMA70, Layout(dp=1, pp=3), strict_divisibility=False) is None
    with pytest.raises(ValueError, match=r"layout\.pp"):
        validate(H100, LLAMA70, Layout(dp=1, pp=3))


def test_missing_catalog_field_raises_naming_it():
    spec = {"accelerator": "X", "hbm_bytes_per_s": 3e12, "scaleup_bytes_per_s": 4.5e11,
            "scaleup_domain_size": 8, "scaleout_bytes_per_s": None}
    with pytest.raises(ValueError, match="scenario.scaleout_bytes_per_s"):
        hardware_from_spec(spec, 1e15, {}, where="scenario")
    hw = hardware_from_spec(spec, 1e15, {}, overrides={"scaleout_bytes_per_s": 5e10})
    assert hw.scaleout_bytes_per_s == 5e10
    with pytest.raises(ValueError, match="hardware.peak_flops_per_s"):
        hardware_from_spec({**spec, "scaleout_bytes_per_s": 5e10}, float("nan"), {})
    with pytest.raises(ValueError, match="hardware.bogus"):
        hardware_from_spec(spec, 1e15, {}, overrides={"bogus": 1.0})
    with pytest.raises(ValueError, match="hardware.scaleup_bytes_per_s"):
        validate(replace(H100, scaleup_bytes_per_s=0.0), LLAMA70, Layout(dp=1))


def test_one_d_tp_moves_megatrons_two_all_reduces_per_block():
    # 1-D TP inside the domain: each block all-reduces b d values forward and backward.
    const = replace(CONST, blocks_per_layer=2.0)
    b = 2.0**22 / 8  # dp 8, m 1
    cost = step_cost(H100, LLAMA70, Layout(dp=8, tp1=8), 2.0**22, const)
    per_ar = 2 * 7 / 8 * b * 8192 * 2
    assert cost.t_net_tp_s == pytest.approx(80 * 2 * 2 * per_ar / 450e9, rel=1e-12)


def test_expert_all_to_all_volume():
    # ep 8 inside one domain, tp 1: 4 passes (dispatch + combine, fwd + bwd) of k b d values per
    # layer, of which (ep-1)/ep leave the chip.
    lay = Layout(dp=1, ep=8)
    b = 2.0**22 / 8
    cost = step_cost(H100, MOE, lay, 2.0**22, CONST)
    expected = 64 * 4 * 2 * b * 8192 * 7 / 8 * 2 / 450e9
    assert cost.t_net_ep_s == pytest.approx(expected, rel=1e-12)


def test_evaluate_validates_before_costing():
    from pipeline.theory.cost import evaluate

    with pytest.raises(ValueError, match=r"layout\.pp"):
        evaluate(H100, LLAMA70, Layout(dp=1, pp=3), 2.0**22, CONST)
    ok = evaluate(H100, LLAMA70, Layout(dp=8, tp1=8), 2.0**22, CONST)
    assert 0 < float(ok.utilization) <= 1
    # a valid configuration is costed exactly as step_cost costs it
    same = step_cost(H100, LLAMA70, Layout(dp=8, tp1=8), 2.0**22, CONST)
    for name in ("utilization", "t_step_s", "binding", *(f"t_{c}_s" for c in COMPONENTS)):
        assert np.array_equal(getattr(ok, name), getattr(same, name)), name
