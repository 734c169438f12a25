"""Mixture of experts end to end: a NeMo 2 Qwen3-30B-A3B log with the documented sidecar keys,
the same run stated on its total parameters (rejected), and the catalog's MoE FLOP count.

The log is built from issue 32's figures (tests/fixtures/moe/README.md): 16 H100, PP 2,
EP 8, the log's own 85.8 TFLOP/s per GPU = 8.67 % of the 989.5 TFLOP/s bf16 peak (its own FLOP
count), a 26.9 s step = MFU 0.121 on the project's.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.catalog import load_catalog
from pipeline.config import load_params
from pipeline.ingest.sources.steplogs.reader import read_logs
from pipeline.ingest.stage import convert, read_options

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "moe"
LOG = "qwen3_30b_a3b_nemo2.log"
PEAK_BF16 = 989.5e12
LOG_MFU = 85.8e12 / PEAK_BF16      # what the log's own TFLOP/s imply: 0.0867


def _ingest(folder: Path):
    params = load_params()
    records, _ = read_logs(folder, params)
    options, _ = read_options(params)
    runs, rejects, _ = convert(iter(records), load_catalog(ROOT / "data" / "catalog"), options)
    return runs, rejects


def test_qwen3_log_with_documented_sidecar_keeps_the_logs_own_mfu_apart() -> None:
    """``mfu`` on the project's FLOP count from the step time (the issue's 0.121), the log's
    own TFLOP/s in ``mfu_source_count`` (pipeline/ingest/core/flop_count.py)."""
    runs, rejects = _ingest(FIXTURE)
    assert not rejects
    (run,) = runs
    assert run["model_id"] == "qwen3-30b-a3b"
    assert (run["active_params"], run["n_experts"], run["top_k"], run["ep"]) == (3.3e9, 128, 8, 8)
    assert run["mfu_source_count"] == pytest.approx(LOG_MFU, rel=0.10)   # the target
    assert run["mfu_source_count"] == pytest.approx(0.0867, abs=5e-4)    # printed TFLOP/s, median
    per_token = 6 * 3.3e9 + 12 * 48 * 2048 * 4096
    assert run["mfu"] == pytest.approx(per_token * run["tokens_per_s"] / (16 * PEAK_BF16),
                                       rel=1e-9)
    assert run["mfu"] == pytest.approx(0.121, abs=1e-3)


def test_same_log_stated_on_total_params_is_rejected_naming_active_params(tmp_path) -> None:
    """Without the log's TFLOP/s and with only the 30.5 B total, the FLOP would count every
    expert: MFU ~0.9 on H100, above the highest measured, a reject naming the key."""
    text = (FIXTURE / LOG).read_text().replace(" | TFLOPS_per_GPU:", " | other:")
    (tmp_path / LOG).write_text(text)
    (tmp_path / "run.yaml").write_text(
        "accelerator: H100-SXM5-80GB\nn_accelerators: 16\nparams_b: 30.5\nn_layers: 48\n"
        "d_model: 2048\nseq_len: 4096\npp: 2\nep: 8\nprecision: bf16\n")
    runs, rejects = _ingest(tmp_path)
    assert not runs
    (reject,) = rejects
    assert "implausible" in reject["reason"] and "active_params_b" in reject["reason"]


def test_same_log_with_active_params_from_the_sidecar_is_kept(tmp_path) -> None:
    """The unnamed run with ``active_params_b`` (no TFLOP/s printed): MFU on 3.3 B active plus
    attention, 6 x 3.3e9 + 12 x 48 x 2048 x 4096 FLOP per token at 512 x 4096 tokens per
    26.9 s step on 16 GPUs."""
    text = (FIXTURE / LOG).read_text().replace(" | TFLOPS_per_GPU:", " | other:")
    (tmp_path / LOG).write_text(text)
    (tmp_path / "run.yaml").write_text(
        "accelerator: H100-SXM5-80GB\nn_accelerators: 16\nparams_b: 30.5\nactive_params_b: 3.3\n"
        "n_experts: 128\ntop_k: 8\nn_layers: 48\nd_model: 2048\nseq_len: 4096\npp: 2\nep: 8\n"
        "precision: bf16\n")
    (run,), rejects = _ingest(tmp_path)
    assert not rejects and (run["n_experts"], run["top_k"]) == (128, 8)
    per_token = 6 * 3.3e9 + 12 * 48 * 2048 * 4096
    tokens_per_gpu_s = 512 * 4096 / 16 / run["step_time_s"]
    assert run["step_time_s"] == pytest.approx(26.9, abs=0.05)
    assert run["mfu"] == pytest.approx(per_token * tokens_per_gpu_s / PEAK_BF16, rel=1e-6)


def test_sidecar_top_k_above_experts_is_rejected(tmp_path) -> None:
    shutil.copy(FIXTURE / LOG, tmp_path / LOG)
    (tmp_path / "run.yaml").write_text(
        "accelerator: H100-SXM5-80GB\nn_accelerators: 16\nmodel: Qwen3-30B-A3B\nn_experts: 4\n"
        "top_k: 8\npp: 2\nep: 4\nseq_len: 4096\nprecision: bf16\n")
    runs, rejects = _ingest(tmp_path)
    assert not runs and "top_k 8 > n_experts 4" in rejects[0]["reason"]


# --- plan: the MoE flags -------------------------------------------------------------------


def test_plan_moe_flags_override_and_check() -> None:
    from pipeline.plan.request import PlanError, resolve_model
    cat = load_catalog(ROOT / "data" / "catalog")
    mix = resolve_model(cat, "mixtral-8x7b", {})
    assert (mix.n_experts, mix.top_k, mix.expert_ffn_size, mix.active_params) == (
        8, 2, 14336, 12.9e9)
    shape = {"params_b": 47.0, "layers": 32, "d_model": 4096}
    flagged = resolve_model(cat, "my-moe", shape, {"experts": 8, "top_k": 2,
                                                   "active_params_b": 13.0})
    assert (flagged.params, flagged.active_params, flagged.n_experts) == (47e9, 13e9, 8)
    for moe, field in (({"experts": 8, "top_k": 9, "active_params_b": 13.0}, "--top-k"),
                       ({"experts": 8, "top_k": 2}, "--active-params-b"),
                       ({"experts": 1}, "--experts"),
                       ({"experts": 8, "top_k": 2, "active_params_b": 60.0}, "--active-params-b"),
                       ({"top_k": 2.5}, "--top-k")):
        with pytest.raises(PlanError, match=field):
            resolve_model(cat, "my-moe", shape, moe)


# --- the step terms (pipeline/calibrate/moe.py) -----------------------------------------------


def test_routed_params_from_shape_equal_those_from_counts() -> None:
    """Mixtral 8x7B: 32 layers x 2 experts x 3 x 4096 x 14336 = 11.27e9 routed parameters per
    token, and (46.7e9 - 12.9e9) x 2 / (8 - 2) from the stated counts agrees to 0.1 %."""
    from pipeline.calibrate import moe
    shape = moe.routed_params(8, 2, 14336, 32, 4096, 46.7e9, 12.9e9)
    counts = moe.routed_params(8, 2, float("nan"), 32, 4096, 46.7e9, 12.9e9)
    assert float(shape) == pytest.approx(32 * 2 * 3 * 4096 * 14336)
    assert float(counts) == pytest.approx(float(shape), rel=1e-3)
    assert float(moe.routed_params(float("nan"), 2, 14336, 32, 4096, 7e9, 7e9)) == 0.0  # dense


def test_all_to_all_per_tier() -> None:
    """Inside one 8-GPU domain only NVLink moves bytes; EP 16 over two nodes sends half of
    them over one 50 GB/s NIC per GPU at the NIC efficiency, and both tiers run at once."""
    from pipeline.calibrate import moe
    n, up, out, e_up = 1e8, 450e9, 50e9, 0.8
    inside = moe.a2a_time(n, 8, 1, 8, up, out, e_up, 0.0)
    assert float(inside) == pytest.approx(n * 7 / 8 / (e_up * up))
    two_nodes = moe.a2a_time(n, 16, 1, 8, up, out, e_up, 0.0)
    assert float(two_nodes) == pytest.approx(n * 8 / 16 / (moe.SCALEOUT_A2A_EFFICIENCY * out))
    assert float(moe.a2a_time(n, 1, 1, 8, up, out, e_up, 1e-5)) == 0.0
    # a stride of 8 (EP across TP groups of 8) leaves every peer outside the domain
    assert float(moe.a2a_time(n, 8, 8, 8, up, out, e_up, 0.0)) == pytest.approx(
        n * 7 / 8 / (moe.SCALEOUT_A2A_EFFICIENCY * out))


def test_imbalance_and_linear_scale() -> None:
    from pipeline.calibrate import moe
    nan = float("nan")
    assert moe.imbalance(nan, nan) == 1.0                     # dropless, forced balance
    assert moe.imbalance(1.25, nan) == 1.25                   # token-dropping: capacity factor
    assert moe.imbalance(1.25, 1.4) == 1.4                    # a stated imbalance wins
    # routed share 0.8 at 1.5x imbalance and experts half as fast: 0.2 + 0.8 x 1.5 x 2 = 2.6
    assert float(moe.linear_time_scale(0.8, 1.5, 2.0)) == pytest.approx(2.6)


# --- memory: experts sharded by EP -----------------------------------------------------------


def test_qwen3_layout_states_shard_experts_by_ep_and_fit() -> None:
    """Issue 32's run (16 H100, PP 2, EP 8, micro-batch 1, ZeRO-1): per rank 1/2 of the
    non-expert layers and 1/16 of the 29 B routed-expert parameters (PP 2 x EP 8); the expert
    data-parallel group is dp / ep = 1, so their optimizer states are not sharded further.
    Weights 5.1 GB, gradients 10.2 GB, optimizer 22.9 GB; with the activations it fits the
    80 GB part the log shows 57.7 GB reserved on."""
    import pandas as pd
    from pipeline.theory.memory import MemoryConstants, peak_memory
    from pipeline.theory.memory_inputs import memory_inputs
    row = pd.DataFrame([dict(model_id="qwen3-30b-a3b", params=30.5e9, active_params=3.3e9,
                             n_layers=48, d_model=2048, n_accelerators=16, tp=1, pp=2, cp=1,
                             ep=8, dp=8, seq_len=4096, micro_batch=1,
                             global_batch_tokens=512 * 4096, virtual_pipeline=12,
                             precision="bf16", source="logs", framework="NeMo")])
    x, const = memory_inputs(row, load_catalog(ROOT / "data" / "catalog"), MemoryConstants(),
                             {"seq_len": 4096, "micro_batch": 1, "zero_stage": 1})
    b = peak_memory(x, const)
    assert float(b.weights[0]) == pytest.approx(5.11e9, rel=0.01)
    assert float(b.optimizer[0]) == pytest.approx(22.9e9, rel=0.01)
    assert 40e9 < float(b.raw[0]) < 80e9
