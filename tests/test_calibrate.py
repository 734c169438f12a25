"""The calibrated step-time model: one step function for fit, decomposition, frontier and
planner; parameter recovery; physical invariants; intervals; its settings."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipeline.calibrate import families as fam
from pipeline.calibrate import fitting as ft
from pipeline.calibrate import intervals as iv
from pipeline.calibrate.critical_path import COMPONENTS, PARAMETERS, Theta, step_components
from pipeline.calibrate.estimate import bare_model, load_data
from pipeline.calibrate.simulate import TRUE_THETA, simulate_layouts, simulate_runs
from pipeline.calibrate.step import StepModel, predict, rows_of
from pipeline.config import ConfigError, settings

CATALOG = Path(__file__).resolve().parents[1] / "data" / "catalog"
LATENCY = {"kernel_latency_s": 3e-6, "scaleup_latency_s": 2e-6}


@pytest.fixture(scope="module")
def base(catalog) -> StepModel:
    return bare_model(catalog, CATALOG, LATENCY, True, 128.0)


def _model(base: StepModel, theta: dict[str, float] = TRUE_THETA) -> StepModel:
    m = copy.copy(base)
    m.theta = {"megatron": np.array([theta[p] for p in PARAMETERS])}
    m.population = m.theta["megatron"]
    m.interval_q = {"production": 0.3, "megatron": 0.3}
    return m


def test_parameter_recovery_on_simulated_runs(base) -> None:
    """Family parameters that matter for these layouts come back within 10% of the truth,
    the fitted step times (median) within the spread of the sources' mean effect of the
    noise-free ones."""
    runs = simulate_runs(0, base, n_runs=300, sigma=0.03, sigma_u=0.05)
    data = load_data(runs, base)
    assert data.fit.all()
    free = tuple(p for p in PARAMETERS if p != "attention_efficiency")
    g = ft.fit_group(data.subset(data.fit), data.log_t[data.fit], playbook=False, free=free)
    got = dict(zip(PARAMETERS, g.theta("megatron")))
    for p in ("compute_efficiency", "tp_overlap", "dp_overlap"):
        assert got[p] == pytest.approx(TRUE_THETA[p], rel=0.10), (p, got[p])
    th = np.array([g.theta(f) for f in data.rows.family])
    truth = Theta(*(np.full(len(runs), TRUE_THETA[p]) for p in PARAMETERS))
    clean = np.log(step_components(data.rows.config, data.rows.machine, truth)["step_time_s"])
    # the population level is confounded with the mean of the 4 sources' random effects (sd
    # sigma_u / sqrt(4) = 0.025 in log time): no estimator pins it closer than that
    assert np.median(np.abs(ft.log_step_time(data.rows, th) - clean)) < 0.05 / np.sqrt(4)


def test_fit_decomposition_frontier_and_planner_share_one_step_time(base, params) -> None:
    """The frontier's step cost and predict() give the same step time for the same layout,
    and the components sum to it."""
    from pipeline.calibrate.frontier import CalibratedStep
    from pipeline.theory.inputs import Layout, Shape
    from pipeline.theory.scenarios import load_scenarios

    from pipeline.catalog import load_catalog
    model = _model(base)
    scn = next(s for s in load_scenarios(params, load_catalog(CATALOG)) if s.name == "baseline")
    shape = Shape(params=70e9, active_params=70e9, n_layers=80.0, d_model=8192.0, seq_len=4096.0)
    # the second layout interleaved at one layer per chunk (v = 80 / 8), as the search runs it
    layout = Layout(dp=np.array([16.0, 64.0]), tp1=np.array([4.0, 8.0]), pp=np.array([4.0, 8.0]),
                    microbatches=np.array([16.0, 32.0]), zero_stage=1.0,
                    interleave=np.array([1.0, 10.0]))
    batch = 4.0e6
    cost = CalibratedStep(model, model.population, scn.accelerator, scn.precision).step_cost(
        scn.hardware, shape, layout, batch, scn.constants)
    layouts = pd.DataFrame({
        "params": 70e9, "active_params": 70e9, "n_layers": 80, "d_model": 8192, "seq_len": 4096,
        "accelerator": scn.accelerator, "n_accelerators": [16 * 4 * 4, 64 * 8 * 8],
        "accelerators_per_node": 8, "precision": scn.precision, "dp": [16, 64], "tp": [4, 8],
        "pp": [4, 8], "cp": 1, "ep": 1, "zero_stage": 1,
        "micro_batch": [batch / (16 * 16 * 4096), batch / (64 * 32 * 4096)],
        "global_batch_tokens": batch, "recompute": "none", "virtual_pipeline": [1, 10],
        "sequence_parallel": True, "framework_family": "megatron"})
    out = predict(layouts, model)
    np.testing.assert_allclose(out["step_time_s"], cost.t_step_s, rtol=1e-9)
    assert out["bubble_s"].iloc[1] < predict(layouts.assign(virtual_pipeline=1),
                                             model)["bubble_s"].iloc[1] / 5
    np.testing.assert_allclose(out[[f"{c}_s" for c in COMPONENTS]].sum(axis=1),
                               out["step_time_s"], rtol=1e-12)


def test_predict_interface_and_mfu_never_above_its_ceiling(base) -> None:
    layouts = simulate_layouts(3, n_runs=60).drop(columns=["mfu", "hfu"])
    layouts.loc[0, "accelerator"] = "Warp-Drive-9000"     # unknown chip: NaN, binding None
    layouts.index = np.arange(100, 160)
    out = predict(layouts, _model(base), interval=0.9)
    assert list(out.index) == list(layouts.index)
    assert {"step_time_s", "step_time_low_s", "step_time_high_s", "mfu", "mfu_low", "mfu_high",
            "ceiling_mfu", "binding", *(f"{c}_s" for c in COMPONENTS)} <= set(out)
    assert out.iloc[0].drop("binding").isna().all() and out["binding"].iloc[0] is None
    ok = out.iloc[1:]
    assert (ok["mfu_high"] <= ok["ceiling_mfu"] + 1e-12).all() and (ok["ceiling_mfu"] <= 1).all()
    assert (ok["mfu_low"] <= ok["mfu"]).all() and (ok["mfu"] <= ok["mfu_high"]).all()
    assert (ok["step_time_low_s"] <= ok["step_time_s"]).all()
    assert set(ok["binding"]) <= set(COMPONENTS)


def test_schedule_is_an_input(base) -> None:
    """Full recomputation costs a third more arithmetic; interleaving divides the bubble by v;
    ZeRO-3 exposes more data-parallel time than ZeRO-1 without overlap (as much under
    pipelining); v is 1 where not
    stated, never L/pp."""
    row = simulate_layouts(5, n_runs=1).assign(pp=8.0, tp=4.0, dp=8.0, n_accelerators=256.0,
                                                 micro_batch=1.0, global_batch_tokens=8 * 32
                                                 * 4096.0, n_layers=80, d_model=8192,
                                                 params=70e9, active_params=70e9)
    model = _model(base)

    def with_(**kw):
        return predict(row.assign(**kw), model).iloc[0]
    none, full = with_(recompute="none"), with_(recompute="full")
    assert full["compute_s"] / none["compute_s"] == pytest.approx(4.0 / 3.0, rel=1e-9)
    v1, v4 = with_(virtual_pipeline=1), with_(virtual_pipeline=4)
    assert v4["bubble_s"] == pytest.approx(v1["bubble_s"] / 4.0, rel=0.05)
    assert with_(virtual_pipeline=None)["bubble_s"] == pytest.approx(v1["bubble_s"])
    m0 = copy.copy(model)
    m0.theta = {"megatron": np.array([0.8, 0.6, 0.0, 0.1, 5e-4, 1.0])}  # no DP overlap
    # without pipelining ZeRO-3 gathers in every microbatch, forward and backward; with it the
    # gathered parameters stay through the step (one gather, one reduce-scatter: ZeRO-1's)
    flat = row.assign(pp=1.0, n_accelerators=32.0)
    assert predict(flat.assign(zero_stage=3), m0)["dp_comm_s"].iloc[0] > \
        predict(flat.assign(zero_stage=1), m0)["dp_comm_s"].iloc[0]
    assert predict(row.assign(zero_stage=3), m0)["dp_comm_s"].iloc[0] >= \
        predict(row.assign(zero_stage=1), m0)["dp_comm_s"].iloc[0] * (1 - 1e-9)


def _gpt3_tp8_row() -> pd.DataFrame:
    """A 175B layer stack on one TP-8 x DP-4 A100 stage, 8 microbatches, full recomputation."""
    return simulate_layouts(5, n_runs=1).assign(
        pp=1.0, tp=8.0, dp=4.0, n_accelerators=32.0, micro_batch=1.0, seq_len=2048.0,
        global_batch_tokens=4 * 8 * 2048.0, n_layers=96, d_model=12288, params=175e9,
        active_params=175e9, accelerator="A100-SXM4-80GB", recompute="full")


def test_unfused_attention_and_synchronous_tp_are_inputs(base) -> None:
    """An unfused attention core adds its score traffic to the stage: tokens x L x heads x s
    score elements per rank, 13 B forward (twice with recomputation) + 19 B backward, at HBM
    bandwidth (golden); a framework without TP overlap exposes all of its TP traffic, one
    without DP overlap all of its gradient traffic; all default to today's kernels (fused,
    overlapped), whatever the source's id: the data state the old ones."""
    row = _gpt3_tp8_row()
    model = _model(base)

    def with_(**kw):
        return predict(row.assign(**kw), model).iloc[0]
    fused, unfused = with_(fused_attention=True), with_(fused_attention=False)
    assert with_()["kernel_overhead_s"] == pytest.approx(fused["kernel_overhead_s"])
    tokens = 4 * 8 * 2048.0 / 32          # per rank and step
    scores = tokens * 96 * (12288 / 128) * 2048
    expected = scores * (2 * 13.0 + 19.0) / 2039e9
    assert unfused["kernel_overhead_s"] - fused["kernel_overhead_s"] == \
        pytest.approx(expected, rel=1e-9)
    overlapped, synchronous = with_(tp_comm_overlap=True), with_(tp_comm_overlap=False)
    omega = TRUE_THETA["tp_overlap"]
    assert synchronous["tp_comm_s"] == pytest.approx(overlapped["tp_comm_s"] / (1 - omega))
    # the source id states nothing: a copy of megatron2021 under another id behaves the same
    renamed = predict(row.assign(source="megatron2021"), model).iloc[0]
    assert renamed["tp_comm_s"] == pytest.approx(overlapped["tp_comm_s"])
    assert renamed["kernel_overhead_s"] == pytest.approx(fused["kernel_overhead_s"])
    old = predict(row.assign(fused_attention=False, tp_comm_overlap=False,
                             dp_comm_overlap=False), model).iloc[0]
    assert old["tp_comm_s"] == pytest.approx(synchronous["tp_comm_s"])
    assert old["kernel_overhead_s"] == pytest.approx(unfused["kernel_overhead_s"])
    # gradients reduced after the backward: nothing hidden (phi = 0), as with phi held at 0
    m0 = copy.copy(model)
    m0.theta = {"megatron": np.array([TRUE_THETA[p] if p != "dp_overlap" else 0.0
                                      for p in PARAMETERS])}
    after = with_(dp_comm_overlap=False)["dp_comm_s"]
    assert after > with_(dp_comm_overlap=True)["dp_comm_s"]
    assert after == pytest.approx(predict(row, m0)["dp_comm_s"].iloc[0])
    assert old["dp_comm_s"] == pytest.approx(after)
    # an unstated fact is today's kernel, and the metrics say the default was used
    assert [k.all() for k in fam.kernels(row)[:3]] == [True, True, True]
    assert fam.kernels(row)[3] == ["fused_attention=true", "tp_comm_overlap=true",
                                   "dp_comm_overlap=true"]


def test_tp_traffic_leaving_the_scale_up_domain_is_never_hidden(base) -> None:
    """TP 16 on 8-GPU A100 nodes: the TP traffic splits into the ring's in-domain share, which
    the family hides by omega, and its scale-out share, exposed whole (comm+GEMM overlap runs
    inside one NVLink domain only); TP 8 has no scale-out share; the ideal machine hides both."""
    from pipeline.calibrate.critical_path import ring_parts, ring_time
    row = _gpt3_tp8_row()
    model = _model(base)
    wide = row.assign(tp=16.0, dp=2.0, sequence_parallel=False)   # all-reduce
    rows = rows_of(wide, model)
    msg = np.array([1 * 2048.0 * 12288 * 2])         # tokens x d x 2 bytes per microbatch
    inside, outside = ring_parts(rows.machine, "all_reduce", msg, np.array([16.0]),
                                 np.array([1.0]))
    assert outside[0] > 0 and inside[0] > 0
    assert inside[0] + outside[0] == pytest.approx(
        ring_time(rows.machine, "all_reduce", msg, np.array([16.0]), np.array([1.0]))[0])
    _, none_out = ring_parts(rows_of(row, model).machine, "all_reduce", msg,
                             np.array([8.0]), np.array([1.0]))
    assert none_out[0] == 0.0
    omega = TRUE_THETA["tp_overlap"]
    m, layers, n_tp = 4 * 8 * 2048.0 / (2 * 2048.0), 96, 6.0   # full recompute: 6 ops
    scale = m * layers * n_tp
    got = predict(wide, model)["tp_comm_s"].iloc[0]
    expect = scale * ((1 - omega) * inside[0] + outside[0])
    assert got == pytest.approx(expect, rel=1e-9)
    assert got > scale * (1 - omega) * (inside[0] + outside[0])   # omega alone hides more
    # a synchronous framework exposes all of it
    sync = predict(wide.assign(tp_comm_overlap=False), model)["tp_comm_s"].iloc[0]
    assert sync == pytest.approx(scale * (inside[0] + outside[0]), rel=1e-9)


def test_a_cluster_is_the_rows_not_the_sources(base) -> None:
    """A row's ``cluster`` picks its measured network (the Playbook's hf_playbook) whatever its
    source's id; an unmeasured name gets the default network and is named in the defaults."""
    row = _gpt3_tp8_row()
    named = row.assign(cluster="hf_playbook", source="someone_elses_sweep")
    cluster, unknown = fam.cluster_of(named, base.network.clusters)
    assert list(cluster) == ["hf_playbook"] and unknown == []
    cluster, unknown = fam.cluster_of(row.assign(cluster="my_cluster"), base.network.clusters)
    assert list(cluster) == ["default"]
    assert unknown == ["cluster=my_cluster (not in collectives.csv: default network)"]
    assert list(fam.cluster_of(row.assign(source="ultrascale_playbook2025"),
                               base.network.clusters)[0]) == ["default"]
    assert predict(named, base)["dp_comm_s"].iloc[0] != predict(row, base)["dp_comm_s"].iloc[0]


def test_replicated_elementwise_traffic_without_sequence_parallelism(base) -> None:
    """Without sequence parallelism every TP rank runs the norms and residual adds on the
    whole microbatch: per layer and microbatch token x d x (20 B forward, twice with full
    recomputation, + 24 B backward) at HBM bandwidth; with it a 1/tp share (golden)."""
    row = _gpt3_tp8_row()
    model = _model(base)

    def overhead(**kw):
        return predict(row.assign(**kw), model)["kernel_overhead_s"].iloc[0]
    m = 4 * 8 * 2048.0 / (4 * 1 * 2048.0)          # microbatches per step
    full = m * 96 * 2048 * 12288 * (2 * 20.0 + 24.0) / 2039e9
    assert overhead(sequence_parallel=False) - overhead(sequence_parallel=True) == \
        pytest.approx(full * (1 - 1 / 8), rel=1e-9)
    # one TP rank: nothing to split, nothing replicated
    assert overhead(sequence_parallel=False, tp=1.0, dp=32.0) == pytest.approx(
        overhead(sequence_parallel=True, tp=1.0, dp=32.0))
    # the ideal ceiling prices no elementwise traffic
    ideal = predict(row.assign(sequence_parallel=False), model)
    assert (ideal["ceiling_mfu"] >= ideal["mfu_high"]).all()


def test_alpha_beta_ring_golden(base) -> None:
    """An 8-rank all-reduce inside one domain: 2 (p-1) alpha + 2 (p-1)/p n / (e B)."""
    from pipeline.calibrate.critical_path import ring_time
    rows = rows_of(simulate_layouts(0, n_runs=1).assign(accelerator="H100-SXM5-80GB"), base)
    e = base.network.up_efficiency("default", "all_reduce")
    assert e == pytest.approx(436e9 / 450e9)          # Playbook 1-node all-reduce / NVLink
    t = ring_time(rows.machine, "all_reduce", np.array([1e8]), np.array([8.0]), np.array([1.0]))
    assert t[0] == pytest.approx(2 * 7 * 2e-6 + 2 * 7 / 8 * 1e8 / (e * 450e9), rel=1e-12)
    # the scale-out latency of the default network: 8-byte all-reduce on 2 x 8 H100 / (2 (p-1))
    assert base.network.hop_latency("default") == pytest.approx(123.5e-6 / 30)


def test_chip_without_nvlink_sharp_keeps_its_own_all_reduce(base) -> None:
    """A100's NVSwitch reduces nothing in the switch: its one-node all-reduce is its own
    measured ring figure (Azure ND A100 v4, 231.58 GB/s busbw at 8 GB of 300 GB/s per
    direction; the largest message of that table), not H100's NVLS 436 of 450, while
    chips with no measurement of their own keep the default network's."""
    from pipeline.calibrate.critical_path import ring_time
    net = base.network
    assert net.up_efficiency("default", "all_reduce", "A100-SXM4-80GB") == pytest.approx(
        231.58e9 / 300e9)
    assert net.up_efficiency("default", "all_reduce", "H100-SXM5-80GB") == pytest.approx(
        436e9 / 450e9)
    assert net.up_efficiency("default", "all_reduce", "B200-SXM-180GB") == pytest.approx(
        436e9 / 450e9)
    assert net.up_efficiency("default", "all_reduce") == pytest.approx(436e9 / 450e9)
    # the chip's own p2p figure is the one it had (sendrecv on 8 A100)
    assert net.up_efficiency("default", "p2p", "A100-SXM4-80GB") == pytest.approx(
        195.56e9 / 300e9)
    rows = rows_of(simulate_layouts(0, n_runs=2).assign(
        accelerator=["A100-SXM4-80GB", "H100-SXM5-80GB"]), base)
    t = ring_time(rows.machine, "all_reduce", np.array([1e8, 1e8]), np.array([8.0, 8.0]),
                  np.array([1.0, 1.0]))
    assert t[0] == pytest.approx(2 * 7 * 2e-6 + 2 * 7 / 8 * 1e8 / 231.58e9, rel=1e-12)
    assert t[1] == pytest.approx(2 * 7 * 2e-6 + 2 * 7 / 8 * 1e8 / 436e9, rel=1e-12)


def test_gemm_efficiency_roofline_golden() -> None:
    from pipeline.calibrate.hardware import gemm_efficiency
    big = gemm_efficiency(np.array([16384.0]), np.array([16384.0]), np.array([16384.0]),
                          np.array([0.8]), np.array([989.5e12]), np.array([3.35e12]), 2.0, 3e-6)
    assert big[0] == pytest.approx(0.8)
    # a 1-token GEMM is HBM bound: 2kn FLOP over w kn bytes at M
    tiny = gemm_efficiency(np.array([1.0]), np.array([8192.0]), np.array([8192.0]),
                           np.array([0.8]), np.array([989.5e12]), np.array([3.35e12]), 2.0, 0.0)
    expected = (2 * 8192 ** 2 / 989.5e12) / (2 * (8192 + 8192 ** 2 + 8192) / 3.35e12)
    assert tiny[0] == pytest.approx(expected, rel=1e-12)


def test_wave_quantization_golden(base) -> None:
    """Output tiles of 256 x 128 against the chip's SMs (132 on H100 SXM): a 4096 x 256
    output is 32 tiles, 32 busy SMs; 4096 x 2048 is 256 tiles, all busy (stream-K spreads the
    second, partial wave); no SM count, no penalty. Skinny high-TP GEMMs run slower."""
    from pipeline.calibrate.hardware import wave_efficiency
    eff = wave_efficiency(np.array([4096.0, 4096.0, 4096.0]), np.array([256.0, 2048.0, 256.0]),
                          np.array([132.0, 132.0, np.nan]))
    np.testing.assert_allclose(eff, [32 / 132, 1.0, 1.0], rtol=1e-12)
    assert base.sm_count["H100-SXM5-80GB"] == 132 and base.sm_count["A100-SXM4-80GB"] == 108
    row = simulate_layouts(1, n_runs=1).assign(accelerator="H100-SXM5-80GB", d_model=2048,
                                                 n_layers=16, params=1.2e9, active_params=1.2e9,
                                                 micro_batch=1.0, seq_len=4096, pp=1.0, cp=1.0)
    model = _model(base)
    wide = predict(row.assign(tp=1.0, dp=8.0, n_accelerators=8.0), model).iloc[0]
    skinny = predict(row.assign(tp=32.0, dp=1.0, n_accelerators=32.0), model).iloc[0]
    # the same FLOP per token; tp32's 4096 x 256 up-projection fills 32 of 132 SMs
    assert skinny["compute_s"] * 4 > 2.0 * wide["compute_s"]   # 4x the ranks: same work


def test_conformal_interval_covers_on_simulated_series() -> None:
    rng = np.random.default_rng(0)
    scores = np.abs(rng.normal(0, 0.2, 400))
    groups = np.repeat(np.arange(40), 10)
    q = iv.leave_group_out_quantile(scores, groups, 0.95)
    covered = scores <= q
    assert 0.92 <= covered.mean() <= 0.98


def test_leave_group_out_quantile_never_uses_own_group() -> None:
    scores = np.r_[np.full(20, 0.1), 100.0]
    groups = np.r_[np.zeros(20), 1]
    q = iv.leave_group_out_quantile(scores, groups, 0.9)
    assert q[-1] == pytest.approx(0.1)


def test_naive_rules() -> None:
    n = np.array([8.0, 16.0, 32.0, 32.0])
    y = np.array([10.0, 18.0, 30.0, 34.0])
    assert iv.naive_linear(n, y, np.array([64.0]))[0] == pytest.approx(64.0)
    slope = np.log(32.0 / 18.0) / np.log(2.0)
    assert iv.naive_loglinear(n, y, np.array([64.0]))[0] == pytest.approx(32.0 * 2 ** slope)
    assert np.isnan(iv.naive_loglinear(np.array([8.0]), np.array([1.0]), np.array([16.0]))[0])


@pytest.mark.parametrize("field, value, message", [
    ("forms", {"bad": ["compute_efficiency", "warp_drive"]}, "calibrate.forms.bad"),
    ("forms", {"bad": ["fixed_s", "compute_efficiency"]}, "calibrate.forms.bad"),
    ("balance", 2.0, "calibrate.balance"),
    ("criterion", "vibes", "calibrate.criterion"),
    ("interval_method", {"largest": "vibes", "source": "analytic"},
     "calibrate.interval_method.largest"),
])
def test_broken_settings_name_the_field(params, field, value, message) -> None:
    bad = copy.deepcopy(params)
    bad["calibrate"][field] = value
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        settings(bad, "calibrate")


def test_config_terms_are_the_model_parameters() -> None:
    from typing import get_args

    from pipeline.config import CalibrateTerm
    assert list(get_args(CalibrateTerm)) == list(PARAMETERS)


def test_parameters_stay_in_their_physical_ranges() -> None:
    z = np.linspace(-30, 30, 61)
    for j, p in enumerate(PARAMETERS):
        zz = np.zeros((61, len(PARAMETERS)))
        zz[:, j] = z
        values = ft.to_natural(zz)[:, j]
        lo, hi = ft.BOUNDS[p]
        assert (values >= lo).all() and (values <= hi).all()
    assert ft.BOUNDS["compute_efficiency"][1] <= 1.0 and ft.BOUNDS["tp_overlap"][1] < 1.0


def test_source_folds_hold_every_source_out_once_and_cap_the_refits() -> None:
    from pipeline.folds import group_folds as source_folds

    few = [f"s{i:02d}" for i in range(7)]
    assert source_folds(few, 16) == [[s] for s in few]
    many = [f"s{i:03d}" for i in range(112)]   # the scale benchmark's 16 x 7 sources
    folds = source_folds(many, 16)
    assert len(folds) == 16 and all(folds)
    flat = [s for f in folds for s in f]
    assert sorted(flat) == many and len(flat) == len(set(flat))
    assert max(map(len, folds)) - min(map(len, folds)) <= 1
