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
