"""Data-parallel traffic and optimizer state of MoE rows (pipeline/calibrate/critical_path.py
``Config.param_split``, ``_dp_exposed``): the routed experts' gradients go over the expert
data-parallel group dp tp cp / (ep etp), the other parameters over dp."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pipeline.calibrate import critical_path as cp_
from pipeline.calibrate import moe
from pipeline.calibrate.critical_path import Theta
from tests.step_rows import deepseek_v3_rows

# DeepSeek-V3: 58 MoE layers x 256 experts x SwiGLU (3 matrices of 7,168 x 2,048)
DSV3_ROUTED = 58 * 256 * 3 * 7168 * 2048


def test_routed_parameters_of_deepseek_v3_by_hand() -> None:
    """653.6 B of the 671 B sit in routed experts; the other 17.4 B (attention, dense layers,
    shared experts, embeddings) are what every EP rank holds."""
    got = float(moe.routed_total(256.0, 8.0, 2048.0, 58.0, 7168.0, 6.71e11, 3.7e10))
    assert got == pytest.approx(DSV3_ROUTED)
    assert got == pytest.approx(653.6e9, rel=1e-3)
    assert float(moe.routed_total(1.0, 1.0, np.nan, 32.0, 4096.0, 8e9, 8e9)) == 0.0


def test_param_split_takes_the_experts_from_the_moe_columns(catalog) -> None:
    rows = deepseek_v3_rows(catalog, 1, tp=1, pp=4, dp=64, ep=64, n_accelerators=256)
    dense, routed = rows.config.param_split
    assert float(routed[0]) == pytest.approx(DSV3_ROUTED)
    assert float(dense[0]) == pytest.approx(6.71e11 - DSV3_ROUTED)


def _dp(rows, n: int) -> np.ndarray:
    """Exposed DP seconds with no overlap (every byte counts)."""
    th = Theta(*(np.full(n, x) for x in (0.5, 0.0, 0.0, 0.0, 0.0, 1.0)))
    t_comp, m = np.ones(n), np.full(n, 8.0)
    exposed, _ = cp_._dp_exposed(rows.config, rows.machine, th, t_comp, m,
                                 cp_.stage_layers(rows.config))
    return exposed


def test_expert_gradients_move_only_where_ranks_share_experts(catalog) -> None:
    """Halving the experts' width (and the parameter count with it, so the other parameters
    stay) leaves the DP traffic unchanged at ep = dp, where each rank holds experts no other
    rank of its stage holds, and lowers it at ep = dp / 2, where two ranks share them."""
    dense = 6.71e11 - DSV3_ROUTED
    for ep, moves in ((64, False), (32, True)):
        rows = deepseek_v3_rows(catalog, 2, tp=1, pp=4, dp=64, ep=ep, n_accelerators=256,
                                zero_stage=1, global_batch_tokens=2097152, micro_batch=1,
                                params=[6.71e11, dense + DSV3_ROUTED / 2])
        half = replace(rows, config=replace(rows.config, expert_ffn_size=np.array(
            [2048.0, 1024.0])))
        assert float(half.config.param_split[0][1]) == pytest.approx(dense)
        full, halved = _dp(half, 2)
        if moves:
            assert halved < 0.9 * full
        else:
            assert halved == pytest.approx(full, rel=1e-9)


def test_optimizer_state_shards_experts_over_their_own_group(catalog) -> None:
    """ZeRO-1 on 256 H100 (tp 1, pp 4, dp 64): dense / (pp dp) + routed / (pp ep edp), with
    edp = dp / ep; without ZeRO, each rank steps all of its stage's parameters."""
    rows = deepseek_v3_rows(catalog, 2, tp=1, pp=4, dp=64, ep=[64, 16], n_accelerators=256,
                            zero_stage=1, global_batch_tokens=2097152, micro_batch=1)
    th = Theta(*(np.full(2, x) for x in (0.5, 0.0, 0.0, 0.0, 0.0, 1.0)))
    _, on_rank = cp_._dp_exposed(rows.config, rows.machine, th, np.ones(2), np.full(2, 8.0),
                                 cp_.stage_layers(rows.config))
    dense = 6.71e11 - DSV3_ROUTED
    for i, ep in enumerate((64, 16)):
        want = dense / (4 * 64) + DSV3_ROUTED / (4 * ep * (64 / ep))
        assert float(on_rank[i]) == pytest.approx(want)
    plain = deepseek_v3_rows(catalog, 1, tp=1, pp=4, dp=64, ep=64, n_accelerators=256,
                             zero_stage=0, global_batch_tokens=2097152, micro_batch=1)
    _, whole = cp_._dp_exposed(plain.config, plain.machine, Theta(*(np.ones(1),) * 6),
                               np.ones(1), np.full(1, 8.0), cp_.stage_layers(plain.config))
    assert float(whole[0]) == pytest.approx(dense / 4 + DSV3_ROUTED / (4 * 64))


def test_a_dense_model_pays_no_expert_collective(catalog) -> None:
    """GPT-3 175B has no routed experts: no expert group, and a group with no bytes costs
    nothing (not even the ring's latency over its ranks)."""
    from tests.step_rows import gpt3_175b_rows
    rows = gpt3_175b_rows(catalog, 1, tp=8, pp=8, dp=16, n_accelerators=1024, zero_stage=1)
    dense, routed = rows.config.param_split
    assert float(routed[0]) == 0.0 and float(dense[0]) == pytest.approx(1.75e11)
    layers = cp_.stage_layers(rows.config)
    ranks = np.full(1, 1024.0)
    for t in cp_._dp_collectives(rows.config, rows.machine, np.zeros(1), layers, ranks, ranks,
                                 np.ones(1)):
        assert float(t[0]) == 0.0
    t_ar, t_rs, t_ag, t_rep = cp_._dp_collectives(rows.config, rows.machine, np.full(1, 1e9),
                                                  layers, ranks, ranks, np.ones(1))
    assert min(float(t_ar[0]), float(t_rs[0]), float(t_ag[0])) > 0.0
    assert float(t_rep[0]) == 0.0  # shard = dp: no replicas to all-reduce across
    # unknown bytes are not read as none: NaN stays NaN (the row is then not costed)
    unknown = cp_._dp_collectives(rows.config, rows.machine, np.full(1, np.nan), layers, ranks,
                                  ranks, np.ones(1))
    assert np.isnan(float(unknown[0][0])) and np.isnan(float(unknown[1][0]))
