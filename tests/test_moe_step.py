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
