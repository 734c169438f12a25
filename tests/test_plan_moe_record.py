"""An MoE model's plan is held to the MFU measured on MoE runs (pipeline/plan/coverage.py)."""

from __future__ import annotations

import math

import pandas as pd

from pipeline.plan.coverage import moe_mfu_record

HARDWARE = pd.DataFrame({"family": ["H100", "H100", "A100"]},
                        index=["H100-SXM5-80GB", "H100-HBM2e-96GB", "A100-SXM4-80GB"])


def _runs() -> pd.DataFrame:
    return pd.DataFrame({
        "n_experts": [None, 8, 128, 8, 64],
        "mfu": [0.59, 0.28, 0.12, 0.40, 0.31],
        "accelerator": ["H100-SXM5-80GB", "H100-SXM5-80GB", "H100-HBM2e-96GB",
                        "A100-SXM4-80GB", "H100-SXM5-80GB"],
        "precision": ["bf16", "bf16", "bf16", "bf16", "fp8"],
        "source": ["dense", "a", "b", "c", "d"], "citation": ["t1", "t2", "t3", "t4", "t5"],
        "model": ["dense-8b", "moe-a", "moe-b", "moe-c", "moe-d"],
        "n_accelerators": [8, 8, 16, 64, 64]})


def test_the_record_is_the_best_moe_run_of_the_family_and_precision() -> None:
    value, citation = moe_mfu_record(_runs(), HARDWARE, "H100-SXM5-80GB", "bf16")
    # the dense 0.59, the A100 0.40 and the fp8 0.31 are not MoE runs on H100 at bf16
    assert value == 0.28 and "moe-a" in citation and "MoE" in citation


def test_no_moe_run_there_gives_no_record() -> None:
    value, citation = moe_mfu_record(_runs(), HARDWARE, "A100-SXM4-80GB", "fp8")
    assert math.isnan(value) and citation == ""
    assert math.isnan(moe_mfu_record(pd.DataFrame(), HARDWARE, "H100-SXM5-80GB", "bf16")[0])
