"""Plain Megatron-LM rows that state no kernel facts run without the opt-in overlaps;
Megatron-DeepSpeed rows reduce their gradients after the backward."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline.calibrate import families as fam


def test_megatron_lm_overlaps_are_opt_in() -> None:
    frame = pd.DataFrame({
        "framework": ["Megatron-LM", "Megatron-LM", "NeMo 24.09", "MegaScale (Megatron-LM based)",
                      None],
        "tp_comm_overlap": [None, True, None, None, None],
        "dp_comm_overlap": [None, None, None, None, False]})
    fused, tp, dp, used = fam.kernels(frame)
    assert tp.tolist() == [False, True, True, True, True]
    assert dp.tolist() == [False, False, True, True, False]
    assert fused.all()
    assert "tp_comm_overlap=false (Megatron-LM rows)" in used


def test_without_a_framework_column_the_defaults_hold() -> None:
    _, tp, dp, _ = fam.kernels(pd.DataFrame({"x": [1, 2]}))
    assert tp.all() and dp.all()


def test_megatron_deepspeed_reduces_its_gradients_after_the_backward() -> None:
    # DeepSpeed's pipeline schedule issues ReduceGrads after the batch's last backward
    frame = pd.DataFrame({
        "framework": ["Megatron-DeepSpeed", "Megatron-DeepSpeed", "DeepSpeed", None],
        "strategy": [None, None, "ZeRO-3 (DeepSpeed)", "Megatron-DeepSpeed 3D + ZeRO-1"],
        "dp_comm_overlap": [None, True, None, None]})
    fused, tp, dp, used = fam.kernels(frame)
    assert dp.tolist() == [False, True, True, False]
    assert tp.all() and fused.all()
    assert "dp_comm_overlap=false (Megatron-DeepSpeed rows)" in used
    # and its buckets are DeepSpeed's, not Megatron's
    family = np.array(["megatron_deepspeed", "deepspeed", "megatron"], dtype=object)
    reduce, gather = fam.buckets(family, np.array([64.0, 64.0, 64.0]), np.zeros(3))
    assert reduce[0] == reduce[1] == fam.DEEPSPEED_BUCKET * 2.0 != reduce[2]
    assert gather[0] == gather[1]
