"""Plain Megatron-LM rows that state no kernel facts run without the opt-in overlaps."""

from __future__ import annotations

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
