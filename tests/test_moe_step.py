"""MoE step-time terms of pipeline/calibrate/moe.py: the routed tokens' permute/unpermute HBM
traffic beside the expert GEMMs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.calibrate import moe

H100 = dict(peak_flops_per_s=989e12, hbm_bytes_per_s=3.35e12)


def test_permute_traffic_per_flop_by_hand() -> None:
    """Qwen3-30B-A3B (d 2048, f 768) on H100: 4 x 2048 x 2 bytes over 6 x 2048 x 768 FLOP at
    3.35 TB/s, in units of 1 / 989 TFLOP/s."""
    got = float(moe.permute_time_per_flop(2048, 768, 2.0, **H100))
    assert got == pytest.approx(4 * 2 / (6 * 768) * 989 / 3.35, rel=1e-9)
    assert got == pytest.approx(0.512, abs=0.001)


def test_permute_traffic_falls_with_expert_width_and_vanishes_without_one() -> None:
    fine, coarse = (float(moe.permute_time_per_flop(7168, f, 2.0, **H100)) for f in (512, 2048))
    assert fine == pytest.approx(4 * coarse)
    assert float(moe.permute_time_per_flop(7168, math.nan, 2.0, **H100)) == 0.0


def test_fine_grained_experts_run_slower_per_flop_than_the_dense_rate() -> None:
    args = dict(microbatch_tokens=4096.0, ep=8.0, n_experts=128.0, top_k=8.0, etp=1.0,
                d_model=2048.0, dense_rate=0.7, eta_max=0.8, sm_count=132.0,
                bytes_per_value=2.0, launch_s=4e-6, **H100)
    fine = float(moe.expert_rate_ratio(expert_ffn_size=768.0, **args))
    coarse = float(moe.expert_rate_ratio(expert_ffn_size=8192.0, **args))
    assert fine > 1.0 and fine > 1.5 * coarse
    # the permutation alone adds dense_rate x its time per FLOP
    assert fine - 0.7 * float(moe.permute_time_per_flop(2048, 768, 2.0, **H100)) > 1.0
    assert np.isfinite(fine)


def test_host_issue_of_expert_gemms_by_hand() -> None:
    """DeepSeek-V3 on EP 8 (256 experts: 32 local), 4 MoE layers on the stage: 32 x 4 x 6 GEMMs
    x 24.75 us (TransformerEngine#3134: (0.267 - 0.069) ms over 8 expert GEMMs) = 19.0 ms per
    microbatch; 8 GEMMs per expert under full recomputation."""
    assert moe.GEMM_HOST_S == pytest.approx(24.75e-6)
    got = float(moe.host_issue_time(256.0, 8.0, 4.0, 1.0))
    assert got == pytest.approx(32 * 4 * 6 * 24.75e-6)
    assert got == pytest.approx(19.008e-3)
    assert float(moe.host_issue_time(256.0, 8.0, 4.0, 2.0)) == pytest.approx(32 * 4 * 8 * 24.75e-6)


def test_host_issue_falls_with_ep_and_is_zero_for_dense_rows() -> None:
    """More EP ranks, fewer local experts, less to issue per rank; a dense row issues none."""
    ep8, ep64 = (float(moe.host_issue_time(256.0, ep, 1.0, 0.0)) for ep in (8.0, 64.0))
    assert ep8 == pytest.approx(8 * ep64)
    assert float(moe.host_issue_time(1.0, 1.0, 32.0, 0.0)) == 0.0
    assert float(moe.host_issue_time(math.nan, 8.0, 4.0, 0.0)) == 0.0


def test_fp8_casts_of_routed_copies_by_hand() -> None:
    """Qwen3-30B-A3B (d 2048, k 8, f 768), tp 1: forward 2048 + 2048 + 8 x 2048 + 8 x 768,
    backward 3 x 2048 + 2048 + 16 x 768 + 8 x 2048: 26,624 + 36,864 = 63,488 values per token
    and MoE layer; every routed copy is cast, so it is k times a single copy's expert part."""
    got = float(moe.fp8_cast_values_per_token(2048.0, 1.0, 8.0, 768.0, 1.0))
    assert got == pytest.approx(2048 * 2 + 8 * 2048 + 8 * 768 + 2048 * 4 + 16 * 768 + 8 * 2048)
    assert got == pytest.approx(63488.0)
    one = float(moe.fp8_cast_values_per_token(2048.0, 1.0, 1.0, 768.0, 1.0))
    attention = 2048 * 2 + 2048 * 4
    assert got - attention == pytest.approx(8 * (one - attention))
    # expert tensor parallelism splits the expert width; no width: NaN (the dense count stays)
    half = float(moe.fp8_cast_values_per_token(2048.0, 1.0, 8.0, 768.0, 2.0))
    assert got - half == pytest.approx(8 * 768 * 3 / 2)
    assert math.isnan(float(moe.fp8_cast_values_per_token(2048.0, 1.0, 8.0, math.nan, 1.0)))


def test_moe_fp8_casts_enter_the_step_of_fp8_rows_only() -> None:
    """critical_path's per-token FP8 cast bytes of an MoE row use the routed count on its MoE
    layers (here all of them), and stay 0 without fp8."""
    from pipeline.calibrate.critical_path import FP8_CAST_BYTES, Config

    one = np.ones(1)
    cfg = dict(params=30.5e9 * one, active_params=3.3e9 * one, expert_fraction=0.89 * one,
               top_k=8 * one, n_layers=48 * one, d_model=2048 * one, batch_tokens=4096 * one,
               microbatch_tokens=4096 * one, microbatches=one, flop_per_token=2e10 * one,
               counted_attention_flop_per_token=0 * one, attention_flop_per_token=0 * one,
               dp=one, tp=one, pp=one, cp=one, ep=8 * one, zero_stage=one, recompute=0 * one,
               virtual_pipeline=one, sequence_parallel=np.zeros(1, bool),
               reduce_bucket_bytes=np.full(1, np.nan), gather_bucket_bytes=np.full(1, np.nan),
               n_experts=128 * one, expert_ffn_size=768 * one, moe_layers=48 * one, etp=one,
               ffn_size=768 * one, gated_mlp=np.ones(1, bool))
    fp8 = Config(**cfg, fp8_linear=np.ones(1, bool)).fp8_cast_bytes_per_token
    assert float(fp8[0]) == pytest.approx(FP8_CAST_BYTES * 63488.0)
    assert float(Config(**cfg, fp8_linear=np.zeros(1, bool)).fp8_cast_bytes_per_token[0]) == 0.0


def test_dedup_dispatch_shares_by_hand() -> None:
    """DeepSeek-V3 (k 8) on EP 64 over 8 nodes of 8: one copy per routed expert sends 7/8 of
    its 8 copies across nodes (7 per token); DeepEP sends a token once per other node hit,
    7 (1 - (7/8)^8) = 4.59 (deepseek-ai/DeepEP layout.cu counts a token once per RDMA rank)."""
    f_in, f_out = moe.dispatch_shares(8.0, 64.0, 8.0, None)
    assert float(f_out) * 8 == pytest.approx(7.0)
    assert float(f_in) * 8 == pytest.approx(8 * 7 / 64)
    d_in, d_out = moe.dispatch_shares(8.0, 64.0, 8.0, True)
    assert float(d_out) * 8 == pytest.approx(7 * (1 - (7 / 8) ** 8))
    assert float(d_out) * 8 == pytest.approx(4.594, abs=1e-3)
    assert float(d_in) * 8 == pytest.approx(7 * (1 - (63 / 64) ** 8))
    # top-1 routing never sends a token twice: both dispatchers move the same bytes
    one = moe.dispatch_shares(1.0, 64.0, 8.0, np.array([False, True]))
    assert one[1][0] == pytest.approx(one[1][1]) and one[0][0] == pytest.approx(one[0][1])


def test_dedup_dispatch_shortens_the_scale_out_all_to_all() -> None:
    """Same bytes and links: the deduplicating dispatch takes 4.59 / 7 of the per-copy time
    across nodes (latency 0)."""
    args = dict(nbytes=470e6, ep=64.0, stride=1.0, domain=8.0, up_bytes_per_s=450e9,
                out_bytes_per_s=50e9, e_up=0.8, latency_s=0.0, e_out=1.0, top_k=8.0)
    copies = float(moe.a2a_time(dedup=np.array([False]), **args)[0])
    dedup = float(moe.a2a_time(dedup=np.array([True]), **args)[0])
    assert copies == pytest.approx(470e6 * 7 / 8 / 50e9)
    assert dedup / copies == pytest.approx((1 - (7 / 8) ** 8), rel=1e-9)


def test_automodel_moe_rows_state_deepep_and_a_stated_dispatcher_is_kept() -> None:
    import pandas as pd

    from pipeline.calibrate.estimate import with_stated_dispatcher

    runs = pd.DataFrame({"source": ["nemo_automodel2025", "nemo_automodel2025",
                                    "megatron_bridge2025", "nemo_automodel2025"],
                         "params": [671e9, 8e9, 235e9, 30e9],
                         "active_params": [37e9, 8e9, 22e9, 3e9],
                         "moe_dispatcher": [None, None, None, "alltoall"]})
    got = with_stated_dispatcher(runs)["moe_dispatcher"].tolist()
    assert got[0] == "deepep" and got[3] == "alltoall"
    assert pd.isna(got[1]) and pd.isna(got[2])


def test_bridge_token_dropping_rows_state_capacity_one_and_price_as_balanced() -> None:
    """Megatron-Bridge 25.09's "(tokendrop)" rows state the run script's capacity factor 1.0
    (derived, cited); every other row of that table is dropless (empty). Capacity 1.0 caps the
    busiest expert at the mean: the same imbalance as force-balanced routing."""
    import pandas as pd

    from pipeline.config import PROJ_ROOT
    rows = pd.read_csv(PROJ_ROOT / "data/raw/published/megatron_bridge2025.csv")
    drop = rows["notes"].fillna("").str.contains("Token-dropping run")
    assert drop.sum() == 8
    assert (rows.loc[drop, "capacity_factor"] == 1.0).all()
    assert rows.loc[drop, "derived"].str.contains("capacity_factor").all()
    assert rows.loc[drop, "notes"].str.contains("apply_moe_token_drop").all()
    assert rows.loc[~drop, "capacity_factor"].isna().all()
    assert moe.imbalance(np.array([1.0, np.nan, 1.25]), np.full(3, np.nan)).tolist() == [
        1.0, 1.0, 1.25]
