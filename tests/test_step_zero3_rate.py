"""DeepSpeed's ZeRO-3 transfer rate (pipeline/calibrate/families.py ``zero3_transfer``): the
deepspeed family's ZeRO-3 gathers and reduce-scatters take at least the bytes each rank moves
over DeepSpeed's measured rate; FSDP's ZeRO-3 and DeepSpeed's ZeRO-1 stay link-bound; the ideal
machine (the theory's ceiling) never pays a software rate."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pipeline.calibrate import families as fam
from pipeline.calibrate.critical_path import Theta, step_components
from tests.step_rows import gpt3_175b_rows


def test_only_deepspeed_zero3_rows_carry_the_rate() -> None:
    family = np.array(["deepspeed", "deepspeed", "fsdp", "megatron_deepspeed", "megatron"],
                      dtype=object)
    gathers, rate = fam.zero3_transfer(family, np.array([3.0, 1.0, 3.0, 3.0, 3.0]))
    assert gathers.tolist() == [4.0, 1.0, 1.0, 1.0, 1.0]
    assert rate[0] == fam.DEEPSPEED_ZERO3_BYTES_PER_S == pytest.approx(21.2e9)
    assert np.isnan(rate[1:]).all()


@pytest.fixture()
def gpt3_zero3(catalog):
    """GPT-3 175B with ZeRO-3 and no model parallelism on 768 A100 (megatron2021's layout):
    DeepSpeed, FSDP, and DeepSpeed at ZeRO-1."""
    return gpt3_175b_rows(catalog, 3, n_accelerators=768, tp=1, pp=1,
                          global_batch_tokens=3145728, micro_batch=2, zero_stage=[3, 3, 1],
                          framework_family=["deepspeed", "fsdp", "deepspeed"])


def test_deepspeed_zero3_moves_its_bytes_no_faster_than_the_rate(gpt3_zero3) -> None:
    r = gpt3_zero3
    assert r.config.zero3_bytes_per_s[0] == fam.DEEPSPEED_ZERO3_BYTES_PER_S
    n = 3
    theta = Theta(np.full(n, 0.8), np.full(n, 0.5), np.zeros(n), np.zeros(n), np.zeros(n),
                  np.ones(n))
    dp = step_components(r.config, r.machine, theta)["dp_comm"]
    # one microbatch per step, nothing hidden (dp_overlap 0): gather forward, gather and
    # reduce-scatter backward, each (p - 1) / p of the 350 GB of BF16 parameters per rank
    moved = 3 * 767 / 768 * 1.75e11 * 2.0
    assert dp[0] >= moved / fam.DEEPSPEED_ZERO3_BYTES_PER_S
    assert dp[0] == pytest.approx(moved / fam.DEEPSPEED_ZERO3_BYTES_PER_S, rel=0.05)
    # FSDP's ZeRO-3 is link-bound: faster than DeepSpeed's rate on the same layout
    assert dp[1] < 0.8 * dp[0]
    # ZeRO-1 moves the parameters once per step, not per microbatch, and at the links
    assert dp[2] < moved / 3 / fam.DEEPSPEED_ZERO3_BYTES_PER_S
    # the ideal machine prices the links alone
    ideal = step_components(r.config, replace(r.machine, ideal=True), Theta.ideal(n))
    assert ideal["dp_comm"][0] == pytest.approx(ideal["dp_comm"][1])
