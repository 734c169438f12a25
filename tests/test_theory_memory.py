"""The memory model (pipeline/theory/memory.py): hand computations, Korthikanti et al. 2022
Table 2, and monotonicity over random layouts."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.theory.memory import (MemoryConstants, MemoryInputs,
                                    activation_bytes_per_layer, layers_in_flight, peak_memory,
                                    state_bytes)
from pipeline.theory.memory_fit import fit_overhead
from pipeline.theory.memory_scores import residuals_by_axis, unbuildable_depth

KORTHIKANTI = MemoryConstants(flash_attention=False, dropout=True)


def test_weights_gradients_optimizer_match_a_hand_computation():
    # Llama 3 70B shape (catalog), tp 8, pp 4, dp 16, ZeRO-1, bf16 weights, fp32 grads, Adam.
    # Stage 0 holds 80/4 = 20 layers and the input embedding; all split over tp = 8.
    params, vocab, h = 70553706496.0, 128256.0, 8192.0
    in_layers = params - 2 * vocab * h            # untied embedding and LM head
    local = in_layers / 4 / 8 + vocab * h / 8     # the first stage's share on one rank
    x = MemoryInputs(params=params, n_layers=80, d_model=h, seq_len=8192, vocab_size=vocab,
                     n_embeddings=2, n_heads=64, n_kv_heads=8, ffn_size=28672, gated_mlp=True,
                     dp=16, tp=8, pp=4, zero_stage=1, microbatches=16)
    out = peak_memory(x)
    hand = local * 2 + local * 4 + local * 12 / 16   # 2 + 4 bytes, 12 / dp
    assert out.stage == 0
    assert out.weights + out.gradients + out.optimizer == pytest.approx(hand, rel=1e-12)
    assert out.weights == pytest.approx(local * 2, rel=1e-12)


@pytest.mark.parametrize("zero, expected", [
    (0, 18.0), (1, 6.0 + 12.0 / 8), (2, 2.0 + 16.0 / 8), (3, 18.0 / 8)])
def test_zero_stages_shard_as_megatron_distributed_optimizer(zero, expected):
    # Megatron-LM dist_optimizer.md: bf16 param + fp32 grad = 18 B/param; 6 + 12/d sharded
    w, g, o = state_bytes(1.0, 8.0, zero, MemoryConstants())
    assert float(w + g + o) == pytest.approx(expected)


# Korthikanti et al. 2022 Table 2 (activations per layer, bytes), with their Table 3 models.
CONFIGS = [  # (h, a, s, b, t)
    (6144, 64, 2048, 4, 8), (12288, 96, 2048, 1, 8), (20480, 128, 2048, 1, 8),
    (25600, 160, 2048, 1, 8)]


@pytest.mark.parametrize("h, a, s, b, t", CONFIGS)
def test_activations_match_korthikanti_table_2(h, a, s, b, t):
    sbh = s * b * h
    cases = {  # (tp, sp, recompute) -> Table 2 row
        (1, False, 0): sbh * (34 + 5 * a * s / h),
        (t, False, 0): sbh * (10 + 24 / t + 5 * a * s / (h * t)),
        (t, True, 0): sbh * (34 / t + 5 * a * s / (h * t)),
        (t, False, 1): sbh * (10 + 24 / t),
        (t, True, 1): sbh * 34 / t,
        (1, False, 2): 2 * sbh,
    }
    for (tp, sp, rc), expected in cases.items():
        got = activation_bytes_per_layer(s, b, h, a, a, 4 * h, False, tp, 1, sp, rc, KORTHIKANTI)
        assert float(got) == pytest.approx(expected, rel=1e-12), (tp, sp, rc)


def test_interleaving_in_flight_follows_korthikanti():
    # 1F1B: the first stage holds p microbatches of L/p layers = L; interleaved: L(1 + (p-1)/pv)
    assert layers_in_flight(96, 8, 64, 1) == pytest.approx(96)
    assert layers_in_flight(96, 8, 64, 4) == pytest.approx(96 * (1 + 7 / 32))
    assert layers_in_flight(96, 8, 2, 1) == pytest.approx(96 / 8 * 2)   # fewer than p in flight
    assert layers_in_flight(96, 1, 64, 1) == pytest.approx(96)


def test_overhead_fit_recovers_known_parameters():
    rng = np.random.default_rng(1)
    fixed = np.exp(rng.uniform(np.log(2e9), np.log(60e9), 300))
    act = np.exp(rng.uniform(np.log(1e9), np.log(30e9), 300))
    measured = (fixed + 2.2 * act + 1.5e9) * np.exp(rng.normal(0, 0.02, fixed.size))
    fit = fit_overhead(fixed, act, measured, 4.0, 8e9)
    assert fit.overhead.activation_factor == pytest.approx(2.2, abs=0.05)
    assert fit.overhead.fixed_bytes == pytest.approx(1.5e9, rel=0.25)
    lo, hi = fit.activation_factor_ci
    assert lo <= fit.overhead.activation_factor <= hi


layout = st.fixed_dictionaries({
    "tp": st.sampled_from([1, 2, 4, 8]), "pp": st.sampled_from([1, 2, 4, 8]),
    "dp": st.sampled_from([1, 2, 8, 64]), "cp": st.sampled_from([1, 2]),
    "zero": st.integers(0, 3), "mb": st.sampled_from([1, 2, 4]),
    "m": st.sampled_from([1, 4, 16]), "v": st.sampled_from([1, 2]),
    "rc": st.integers(0, 2), "sp": st.booleans(), "vocab": st.sampled_from([0.0, 128256.0]),
    "flash": st.booleans()})


def _mem(d: dict, **change) -> float:
    d = {**d, **change}
    x = MemoryInputs(params=8.0e9, n_layers=32, d_model=4096, seq_len=4096, micro_batch=d["mb"],
                     n_heads=32, n_kv_heads=8, ffn_size=14336, gated_mlp=True,
                     vocab_size=d["vocab"], n_embeddings=2, dp=d["dp"], tp=d["tp"],
                     pp=d["pp"], cp=d["cp"], zero_stage=d["zero"], microbatches=d["m"],
                     virtual_pipeline=d["v"], recompute=d["rc"], sequence_parallel=d["sp"])
    return float(peak_memory(x, MemoryConstants(flash_attention=d["flash"])).raw)


@settings(max_examples=200, deadline=None)
@given(layout)
def test_more_sharding_never_needs_more_memory(d):
    if d["zero"] < 3:
        assert _mem(d, zero=d["zero"] + 1) <= _mem(d) * (1 + 1e-12)
    if d["tp"] < 8:
        assert _mem(d, tp=d["tp"] * 2) <= _mem(d) * (1 + 1e-12)
    if d["rc"] < 2:
        assert _mem(d, rc=d["rc"] + 1) <= _mem(d) * (1 + 1e-12)
    assert _mem(d, dp=d["dp"] * 2) <= _mem(d) * (1 + 1e-12)
    assert _mem(d, sp=True) <= _mem(d) * (1 + 1e-12)
    assert _mem(d, mb=d["mb"] * 2) >= _mem(d) * (1 - 1e-12)


# Scores beyond the pooled figures (pipeline/theory/memory_scores.py) ----------------------------
def test_unbuildable_depth_marks_only_pipelines_deeper_than_any_completed():
    frame = pd.DataFrame({
        "model": ["A", "A", "A", "A", "A", "B", "B"],
        "pp": [1, 2, 2, 4, 8, 1, 2],
        "status": ["ok", "oom", "ok", "oom", "oom", "oom", "oom"]})
    # A completed at pp 2 at most: pp 4 and 8 are deeper; its pp-2 crash is a memory candidate.
    # B never completed: nothing to compare with, nothing marked.
    assert unbuildable_depth(frame).tolist() == [False, False, False, True, True, False, False]


def test_residuals_by_axis_give_the_bias_and_ape_per_value():
    peak = pd.DataFrame({"source": ["s"] * 4, "tp": [1, 1, 8, 8],
                         "predicted": [2.0, 0.5, 3.0, 3.0], "measured": [1.0, 1.0, 2.0, 2.0]})
    out = residuals_by_axis(peak)["s"]["tp"]
    assert list(out) == ["1", "8"]
    assert out["1"]["n"] == 2 and out["1"]["median_log_ratio"] == pytest.approx(0.0)
    assert out["1"]["median_ape"] == pytest.approx((1.0 + 0.5) / 2)
    assert out["8"]["median_log_ratio"] == pytest.approx(math.log(1.5))
    assert out["8"]["median_ape"] == pytest.approx(0.5)


def test_report_section_shows_bias_by_axis_and_the_buildable_score():
    from pipeline.report.memory import memory_section
    node = {"overhead": {"activation_factor": 2.0, "activation_factor_ci": [1.9, 2.1],
                         "fixed_bytes": 1e9, "fixed_bytes_ci": [0.9e9, 1.1e9], "n_runs": 3},
            "peak_memory": {"overall": {"median_ape": 0.12}, "by_configuration": {
                "src": {"pp": {"1": {"n": 4, "median_log_ratio": math.log(0.8),
                                     "median_ape": 0.2}}}}},
            "fits_memory": {"overall": {"balanced_accuracy": 0.91},
                            "buildable": {"rule": "r", "n_excluded": 5,
                                          "overall": {"balanced_accuracy": 0.93}}},
            "completed_predicted_not_to_fit": {
                "a": {"n_completed": 3, "predicted_not_to_fit": 0},
                "b": {"n_completed": 4, "predicted_not_to_fit": 2}}}
    out = memory_section({"theory": {"_memory": node}})
    assert out["bias_rows"] == [{"source": "src", "axis": "pp", "value": "1", "n": 4,
                                 "bias": pytest.approx(-0.2), "median_ape": 0.2}]
    assert out["buildable"]["overall"]["balanced_accuracy"] == 0.93
    assert out["ba_verdict"] == "with no naive score to compare"
    node["fits_memory"]["naive_overall"] = {"balanced_accuracy": 0.6}
    node["peak_memory"]["naive_overall"] = {"median_ape": 0.1}
    node["peak_memory"]["overall"] = {"median_ape": 0.2}
    out = memory_section({"theory": {"_memory": node}})
    assert out["ba_verdict"] == "better than the naive rule"
    assert out["ape_verdict"] == "no better than the naive rule"
    assert out["contradicted"] == [{"source": "b", "n_completed": 4, "predicted_not_to_fit": 2}]


def test_completed_runs_predicted_not_to_fit_are_counted_per_source():
    from pipeline.theory.memory_scores import completed_not_fitting
    scored = pd.DataFrame({"source": ["a", "a", "a", "b"], "status": ["ok", "ok", "oom", "ok"],
                           "predicted": [90.0, 70.0, 95.0, 10.0], "hbm": [80.0] * 4})
    assert completed_not_fitting(scored) == {
        "a": {"n_completed": 2, "predicted_not_to_fit": 1},
        "b": {"n_completed": 1, "predicted_not_to_fit": 0}}


# The activation factor per framework family (pipeline/theory/memory_fit.py) --------------------
def _family_data(rng, n: int, factor: float, fixed_bytes: float = 1.5e9):
    fixed = np.exp(rng.uniform(np.log(2e9), np.log(60e9), n))
    act = np.exp(rng.uniform(np.log(1e9), np.log(30e9), n))
    measured = (fixed + factor * act + fixed_bytes) * np.exp(rng.normal(0, 0.02, n))
    return fixed, act, measured


def test_each_family_gets_its_own_factor_fixed_fitted_or_counted():
    rng = np.random.default_rng(7)
    parts = [_family_data(rng, 300, 2.2), _family_data(rng, 200, 1.0)]
    # a third family whose "peaks" are the allocator filling the chip: 90 GB whatever the need
    sat = _family_data(rng, 50, 1.0)
    sat = (sat[0], sat[1], np.full(50, 90e9))
    fixed, act, measured = (np.concatenate(x) for x in zip(*parts, sat))
    family = np.array(["playbook"] * 300 + ["megatron"] * 200 + ["fsdp"] * 50, dtype=object)
    fit = fit_overhead(fixed, act, measured, 4.0, 8e9, family=family,
                       fixed_factors={"megatron": 1.0}, fitted_families=["playbook"])
    f = fit.by_family
    assert f["playbook"].basis == "fitted" and f["playbook"].n_runs == 300
    assert f["playbook"].activation_factor == pytest.approx(2.2, abs=0.05)
    assert f["playbook"].ci[0] <= f["playbook"].activation_factor <= f["playbook"].ci[1]
    assert (f["megatron"].basis, f["megatron"].activation_factor) == ("fixed", 1.0)
    # the saturated family keeps the count and does not drag c (1.5 GB) or the fitted factor
    assert (f["fsdp"].basis, f["fsdp"].activation_factor, f["fsdp"].n_runs) == ("counted", 1.0, 50)
    assert fit.overhead.fixed_bytes == pytest.approx(1.5e9, rel=0.25)
    # the top-level overhead is the default family's (Megatron), what plan and the frontier use
    assert fit.overhead.activation_factor == 1.0
    rows = np.array(["playbook", "megatron", "fsdp", "unknown"], dtype=object)
    assert fit.factors(rows).tolist() == [f["playbook"].activation_factor, 1.0, 1.0, 1.0]


def test_fitting_every_family_lets_the_saturated_peaks_raise_their_factor():
    # what the shipped settings avoid: fitted on saturated peaks, a factor means nothing
    rng = np.random.default_rng(8)
    fixed, act, _ = _family_data(rng, 60, 1.0)
    family = np.full(60, "fsdp", dtype=object)
    fit = fit_overhead(fixed, act, np.full(60, 90e9), 4.0, 8e9, family=family,
                       default_family="fsdp")
    assert fit.by_family["fsdp"].basis == "fitted"
    assert fit.by_family["fsdp"].activation_factor > 1.2


def test_predictions_use_the_row_s_family_factor():
    from pipeline.theory.memory import MemoryBreakdown
    from pipeline.theory.memory_fit import FamilyFactor, OverheadFit
    from dataclasses import replace

    from pipeline.theory.memory import Overhead, fits_in
    fit = OverheadFit(Overhead(1.0, 1e9), (1.0, 1.0), (1e9, 1e9), 10, 0.1,
                      {"playbook": FamilyFactor(2.0, (1.9, 2.1), "fitted", 10),
                       "megatron": FamilyFactor(1.0, (1.0, 1.0), "fixed", 0)})
    z = np.zeros(2)
    parts = MemoryBreakdown(weights=np.array([10e9, 10e9]), gradients=z, optimizer=z,
                            activations=np.array([5e9, 5e9]), transient=z, raw=z, stage=z)
    out = fit.apply(parts, np.array(["playbook", "megatron"], dtype=object))
    assert out.tolist() == [10e9 + 2 * 5e9 + 1e9, 10e9 + 5e9 + 1e9]


def test_overhead_of_reads_the_default_or_a_named_family():
    from pipeline.theory.memory_fit import overhead_of
    node = {"overhead": {"activation_factor": 1.0, "fixed_bytes": 8e8,
                         "by_family": {"playbook": {"activation_factor": 2.16}}}}
    assert overhead_of(node).activation_factor == 1.0
    assert overhead_of(node, "playbook").activation_factor == 2.16
    assert overhead_of(node, "fsdp").activation_factor == 1.0
    assert overhead_of(node, "playbook").fixed_bytes == 8e8


def test_fits_in_counts_the_runtime_reserve():
    from pipeline.theory.memory import fits_in
    const = MemoryConstants(runtime_reserve_bytes=3e8)
    cap = 85520809984.0
    assert fits_in([cap - 3e8, cap - 2e8], cap, const).tolist() == [True, False]


def test_the_settings_family_names_are_the_framework_families():
    import typing

    from pipeline.config import FrameworkFamily
    from pipeline.frameworks import FAMILIES
    assert set(typing.get_args(FrameworkFamily)) == set(FAMILIES)


# The contradiction invariant, on the shipped outputs ---------------------------------------------
from pipeline.config import PROJ_ROOT  # noqa: E402
from tests.workspace import require_shipped  # noqa: E402

SHIPPED = (PROJ_ROOT / "data/processed/bounds.parquet", PROJ_ROOT / "data/processed/runs.parquet")
# Completed runs the model still says could not fit, per production source, each with its cause
# (docs/theory.md §11). A count may only fall; every other production source must have none.
# torchtitan's three 8B selective rows on 8 GPUs fit since the FSDP family's selective is
# torchtitan's per-operator policy, and PaLM's since its row states its within-pod full sharding
# (arXiv:2204.02311 §4).
# Rows that state no recompute policy (most vendor tables: semianalysis2025's Llama 3 70B on 64
# H100, Megatron-Bridge's GPT-OSS 120B on 64 H100 at micro-batch 4) are sized at the least
# recompute they fit with (pipeline/theory/memory_fit.py _unstated_recompute). The MoE recipes'
# state bytes (NeMo Automodel all-bf16 states, the Megatron-Bridge / NeMo 2 MoE recipes' bf16
# gradients) are counted (tests/test_moe_memory.py). One row is left, stating full recompute:
# - kempnerforge2026, Llama-3-style 70B on 8 H200 (TP4 x FSDP2, full recompute): the source
#   measured 128.5 GB per GPU (benchmarks/weak_scaling_160gpu/README.md); the model predicts
#   163 GB. 70.55e9 / 8 = 8.8e9 parameters per GPU at the model's 18 bytes of state each
#   (pipeline/theory/memory.py: bf16 weights 2, fp32 gradients 4, master and Adam 12) are
#   159 GB; the measured 128.5 GB leaves ~14 bytes per parameter (bf16 gradients would give
#   that), which the row does not state.
KNOWN_CONTRADICTIONS: dict[str, int] = {"kempnerforge2026": 1}


@pytest.fixture(scope="module")
def shipped_memory() -> pd.DataFrame:
    # the committed pipeline's outputs only: a user's own runs may well not fit (and must not
    # fail the project's tests); tests/workspace.py checks them against dvc.lock
    require_shipped("data/processed/bounds.parquet", "data/processed/runs.parquet")
    bounds = pd.read_parquet(SHIPPED[0], columns=["run_id", "fits_memory"])
    runs = pd.read_parquet(SHIPPED[1], columns=["run_id", "source", "status"])
    return bounds.merge(runs, on="run_id", validate="one_to_one")


def test_no_completed_production_run_is_predicted_not_to_fit(shipped_memory):
    from pipeline.frameworks import PLAYBOOK, family_of
    done = shipped_memory[shipped_memory["status"].astype(str).ne("oom")
                          & shipped_memory["fits_memory"].notna()]
    production = done[family_of(done) != PLAYBOOK]
    sized = set(production["source"])
    # the sources this invariant is about are all sized (a lost memory column would pass it)
    assert {"megatron2021", "nvidia_dgxc2024", "llama3", "bloom2022", "torchtitan2024",
            "palm2022"} <= sized
    over = production[~production["fits_memory"].astype(bool)]
    counts = over.groupby("source").size().to_dict()
    excess = {s: n for s, n in counts.items() if n > KNOWN_CONTRADICTIONS.get(s, 0)}
    assert not excess, f"completed runs predicted not to fit: {excess} " \
                       f"({sorted(over.loc[over['source'].isin(excess), 'run_id'])[:10]})"


def test_the_held_out_scores_size_each_run_with_the_same_recompute_policy():
    # the report's count of completed runs predicted not to fit (theory.json, held-out overhead)
    # sizes a run that states no recompute with the policy bounds.parquet sizes it with
    # (memory_fit._unstated_recompute): it never names more runs than the in-sample invariant
    require_shipped("reports/metrics/theory.json")
    node = json.loads((PROJ_ROOT / "reports/metrics/theory.json").read_text())["_memory"]
    counts = {s: v["predicted_not_to_fit"]
              for s, v in node["completed_predicted_not_to_fit"].items()
              if s != "ultrascale_playbook2025"}  # its outcomes score fits_memory instead
    excess = {s: n for s, n in counts.items() if n > KNOWN_CONTRADICTIONS.get(s, 0)}
    assert not excess, excess


# --- per-family loss working set and torchtitan's per-operator selective recompute ----------

LLAMA31_8B = dict(params=8030261248.0, n_layers=32, d_model=4096.0, vocab_size=128256.0,
                  n_embeddings=2, n_heads=32, n_kv_heads=8, ffn_size=14336.0, gated_mlp=True)


def test_op_selective_keeps_every_other_matmul_sdpa_and_the_block_input():
    # torchtitan parallelize_llama.py: wq, wv, w1, w2 (odd mm of wq wk wv wo w1 w3 w2), the
    # SDPA output and the checkpoint input. Llama 3.1 8B: h (1 + 1/4 + 1 + 1 + 1) + f values
    # per token = 4.25 x 4096 + 14336 = 31,744; 2 sequences of 8192 tokens in bf16.
    got = activation_bytes_per_layer(8192, 2, 4096, 32, 8, 14336, True, 1, 1, False, 1,
                                     MemoryConstants(), op_selective=True)
    assert float(got) == pytest.approx(31744 * 2 * 16384, rel=1e-12)
    # Korthikanti's selective on the same layer keeps 4h + h(2 + 2/4) + 3f = 69,632 values
    kor = activation_bytes_per_layer(8192, 2, 4096, 32, 8, 14336, True, 1, 1, False, 1,
                                     MemoryConstants(), op_selective=False)
    assert float(kor) == pytest.approx(69632 * 2 * 16384, rel=1e-12)
    # full recompute and no recompute ignore the policy
    for rc in (0, 2):
        a = activation_bytes_per_layer(8192, 2, 4096, 32, 8, 14336, True, 1, 1, False, rc,
                                       MemoryConstants(), op_selective=True)
        b = activation_bytes_per_layer(8192, 2, 4096, 32, 8, 14336, True, 1, 1, False, rc,
                                       MemoryConstants())
        assert float(a) == float(b)


def test_op_selective_splits_column_parallel_outputs_over_tp():
    from pipeline.theory.memory import op_selective_values_per_token
    # tp 4 with sequence parallelism: (wq h + wv h/4 + SDPA h + w1 f) / 4, w2's whole partial
    # sum h, the block input h / 4
    got = op_selective_values_per_token(4096, 32, 8, 14336, True, 4, True)
    assert float(got) == pytest.approx((4096 * 2.25 + 14336) / 4 + 4096 + 4096 / 4)
    # a plain MLP runs six matmuls: w2 is the sixth, recomputed (wq, wv, SDPA, w1, input)
    plain = op_selective_values_per_token(4096, 32, 32, 16384, False, 1, False)
    assert float(plain) == pytest.approx(4096 * 4 + 16384)


def test_torchtitan_8b_selective_on_8_gpus_by_hand():
    # torchtitan Table 1 row (8 H100, FSDP 8, local batch 2 x 8192, selective 'op'):
    # states 18 B/param / 8 + two gathered layers (bf16, less the own shard) + 32 layers'
    # kept set + the first layer input + the rebuilt rest of one layer + the loss, 12 B/logit.
    const = MemoryConstants(loss_bytes_per_logit=(("fsdp", 12.0),),
                            op_selective_families=("fsdp",))
    x = MemoryInputs(**LLAMA31_8B, seq_len=8192, micro_batch=2, dp=8, zero_stage=3,
                     recompute=1, op_selective=True)
    tokens = 16384.0
    out = peak_memory(x, MemoryConstants(logits_bytes_per_value=12.0))
    layer_params = (8030261248.0 - 2 * 128256 * 4096) / 32
    hand = (8030261248.0 * 18 / 8 + 2 * layer_params * 2 * (1 - 1 / 8)
            + 32 * 31744 * 2 * tokens + tokens * 4096 * 2 + (69632 - 31744) * 2 * tokens
            + tokens * 128256 * 12)
    assert float(out.raw) == pytest.approx(hand, rel=1e-12)
    assert const.loss_bytes_per_logit == (("fsdp", 12.0),)


def test_memory_inputs_take_the_family_s_loss_bytes_and_selective_policy():
    from pipeline.theory.memory_inputs import memory_inputs
    const = MemoryConstants(loss_bytes_per_logit=(("fsdp", 12.0), ("megatron", 4.0)),
                            op_selective_families=("fsdp",))
    frame = pd.DataFrame({"source": ["torchtitan2024", "megatron2021", "elsewhere"],
                          "params": 8e9, "n_layers": 32, "d_model": 4096, "seq_len": 8192,
                          "n_accelerators": 8, "dp": 8, "recompute": "selective",
                          "strategy": ["FSDP", "PTD-P", "nanotron"]})
    x, rc = memory_inputs(frame, None, const, {"seq_len": 2048, "micro_batch": 1,
                                                "zero_stage": 1})
    assert list(rc.logits_bytes_per_value) == [12.0, 4.0, 4.0]  # playbook: the default 4
    assert list(np.asarray(x.op_selective)) == [True, False, False]


def test_settings_give_hashable_per_family_constants():
    from pipeline.config import load_params
    from pipeline.theory.memory_fit import memory_constants
    const = memory_constants(load_params())
    assert dict(const.loss_bytes_per_logit) == {"deepspeed": 4.0, "fsdp": 12.0, "megatron": 4.0,
                                                "megatron_deepspeed": 4.0}
    assert const.op_selective_families == ("fsdp",)
    hash(const)


def test_near_capacity_peaks_are_counted_and_scored_apart():
    from pipeline.theory.memory_fit import _near_capacity
    peak = pd.DataFrame({"source": ["a", "a", "b"], "measured": [90e9, 50e9, 79e9],
                         "capacity": [94e9, 94e9, 85.5e9], "predicted": [80e9, 55e9, 79e9]})
    out = _near_capacity(peak, 0.95)
    assert out["n"] == 1 and out["per_source"] == {"a": 1}
    assert out["overall_without"]["n"] == 2
    assert out["overall_without"]["median_ape"] == pytest.approx((0.1 + 0.0) / 2)


def test_a_pipeline_over_fsdp2_holds_the_stage_s_unsharded_fp32_gradients():
    # torch/distributed/pipelining/stage.py turns FSDP's gradient sync off per microbatch and
    # FSDP2 accumulates the unsharded gradient in fp32: L/p layers x per-layer params / t x 4 B
    x = dict(**LLAMA31_8B, seq_len=8192, micro_batch=1, dp=4, tp=2, pp=4, zero_stage=3,
             microbatches=8, recompute=2)
    base = peak_memory(MemoryInputs(**x))
    held = peak_memory(MemoryInputs(**x, pipeline_unsharded_grads=True))
    layer_params = (8030261248.0 - 2 * 128256 * 4096) / 32
    assert float(held.raw - base.raw) == pytest.approx(32 / 4 * layer_params / 2 * 4, rel=1e-12)
    # no pipeline, or no ZeRO-3: nothing held
    for change in ({"pp": 1}, {"zero_stage": 1}):
        a = peak_memory(MemoryInputs(**(x | change)))
        b = peak_memory(MemoryInputs(**(x | change), pipeline_unsharded_grads=True))
        assert float(a.raw) == float(b.raw)


def test_only_the_named_sources_hold_unsharded_pipeline_gradients():
    from pipeline.theory.memory_inputs import memory_inputs
    frame = pd.DataFrame({"source": ["torchtitan2024", "llama3"], "params": 8e9,
                          "n_layers": 32, "d_model": 4096, "seq_len": 8192,
                          "n_accelerators": 64, "tp": 2, "pp": 4, "dp": 8, "zero_stage": 3})
    x, _ = memory_inputs(frame, None, MemoryConstants(), {"seq_len": 2048, "micro_batch": 1,
                                                           "zero_stage": 1})
    assert list(np.asarray(x.pipeline_unsharded_grads)) == [True, False]


def test_an_unstated_recompute_policy_is_the_least_recompute_that_fits():
    # Llama 3 70B, FSDP over 64 chips, 2 sequences of 8K: without recompute the activations
    # (~365 GB) overflow any chip; with full recompute they fit 186 GB. A row that states no
    # policy gets the full-recompute peak; one that states `none` keeps its own; a Playbook row
    # (nanotron, policy `none` by convention, its outcome scored) is never changed.
    from dataclasses import replace

    from pipeline.theory.memory import Overhead, fits_in
    from pipeline.theory.memory_fit import _unstated_recompute
    from pipeline.theory.memory_inputs import memory_inputs
    const = MemoryConstants()
    frame = pd.DataFrame({"params": 70.6e9, "n_layers": 80, "d_model": 8192, "seq_len": 8192,
                          "micro_batch": 2, "n_accelerators": 64, "dp": 64, "tp": 1,
                          "zero_stage": 3, "recompute": [None, "none", None],
                          "strategy": ["FSDP", "FSDP", "nanotron"]})
    x, rc = memory_inputs(frame, None, const, {"seq_len": 8192, "micro_batch": 2,
                                                "zero_stage": 3})

    class _Fit:  # the fitted overhead as one family's, factor 1 and nothing fixed
        def apply(self, parts, family):
            return Overhead(1.0, 0.0).apply(parts)

    family = np.array(["megatron", "megatron", "playbook"], dtype=object)
    none_peak = _Fit().apply(peak_memory(x, rc), family)
    capacity = np.full(3, 186e9)
    got, codes = _unstated_recompute(none_peak, frame, x, rc, _Fit(), family, capacity)
    full = _Fit().apply(peak_memory(replace(x, recompute=np.full(3, 2)), rc), family)
    assert not fits_in(none_peak[0], 186e9, rc)
    assert got[0] == pytest.approx(full[0]) and fits_in(got[0], 186e9, rc)
    assert got[1] == none_peak[1] and got[2] == none_peak[2]
    # the policy each row is sized with (0 none, 2 full), for the held-out scores
    assert codes.tolist() == [2, 0, 0]
