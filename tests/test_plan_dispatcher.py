"""``plan --moe-dispatcher``: the MoE token dispatcher a run states, as the calibrate stage
prices NeMo Automodel's DeepEP rows (pipeline/calibrate/estimate.py DEDUP_DISPATCH_SOURCES,
moe.dispatch_shares): the same configuration planned with it gets the stage's prediction; a
name the model does not know, or a dispatcher for a dense model, is refused naming the flag."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pipeline.config import PROJ_ROOT
from pipeline.plan.cli import Paths, _dispatcher, plan_rows
from pipeline.plan.request import ModelShape, PlanError

PROCESSED = PROJ_ROOT / "data/processed"
OUTPUTS = (PROCESSED / "calibration.parquet", PROCESSED / "calibrated.parquet",
           PROCESSED / "runs.parquet", PROJ_ROOT / "reports/metrics/theory.json")


def test_a_named_dispatcher_is_a_column_and_the_default_is_said() -> None:
    moe, dense = (ModelShape(model_id=m, params=p, active_params=a, n_layers=61,
                             d_model=7168, n_experts=e)
                  for m, p, a, e in (("deepseek-v3", 6.71e11, 3.7e10, 256.0),
                                     ("llama-3-70b", 7.06e10, 7.06e10, np.nan)))
    assert _dispatcher("deepep", moe) == ({"moe_dispatcher": "deepep"}, [])
    columns, assumed = _dispatcher(None, moe)
    assert columns == {} and len(assumed) == 1 and "--moe-dispatcher deepep" in assumed[0]
    assert _dispatcher(None, dense) == ({}, [])
    with pytest.raises(PlanError, match="--moe-dispatcher.*'nccl' is not one of alltoall"):
        _dispatcher("nccl", moe)
    with pytest.raises(PlanError, match="--moe-dispatcher.*llama-3-70b is dense"):
        _dispatcher("deepep", dense)


@pytest.mark.skipif(not all(p.exists() for p in OUTPUTS),
                    reason="pipeline outputs absent (run dvc repro)")
def test_automodel_deepseek_v3_replans_to_its_calibrate_prediction_with_deepep() -> None:
    """NeMo Automodel's DeepSeek-V3 on 256 H100 (FSDP 64, PP 4, v 8, EP 64, DeepEP): with
    ``--moe-dispatcher deepep`` the plan gives the stage's prediction (its source effect taken
    out) and its ceiling lies above the measured MFU; with the default all-to-all the plan
    prices 4.6 node copies per token as 8 and comes out slower."""
    runs = pd.read_parquet(PROCESSED / "runs.parquet")
    run = runs[(runs["source"] == "nemo_automodel2025") & (runs["model_id"] == "deepseek-v3")
               & (runs["n_accelerators"] == 256)]
    assert len(run) == 1
    r = run.iloc[0]
    cal = pd.read_parquet(PROCESSED / "calibrated.parquet").set_index("run_id")
    table = pd.read_parquet(PROCESSED / "calibration.parquet")
    effect = table[(table["group"] == "source_effect") & (table["parameter"] == r["source"])]
    want = float(cal.loc[r["run_id"], "predicted_mfu"]) * math.exp(
        float(effect["estimate"].iloc[0]) if len(effect) else 0.0)

    def plan(dispatcher):
        rows, *_ = plan_rows(
            model="deepseek-v3", accelerator=r["accelerator"], n=[256],
            global_batch_tokens=float(r["global_batch_tokens"]), seq_len=float(r["seq_len"]),
            layout=f"tp=1,pp=4,v=8,dp=64,ep=64,mb=1,zero=3,recompute=full", top=1,
            train_tokens=None, shape={}, framework="fsdp", precision="bf16", kernels={},
            paths=Paths(PROCESSED, PROJ_ROOT / "data/catalog",
                        PROJ_ROOT / "reports/metrics/theory.json", PROJ_ROOT / "params.yaml"),
            dispatcher=dispatcher)
        return rows.iloc[0]

    deepep, alltoall = plan("deepep"), plan(None)
    assert float(deepep["mfu"]) == pytest.approx(want, rel=0.02)
    assert float(deepep["ceiling_mfu"]) > float(r["mfu"])
    assert float(alltoall["mfu"]) < 0.9 * float(deepep["mfu"])
