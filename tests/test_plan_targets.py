"""The planner issue's GPT-3 175B on A100 targets (3,145,728 tokens per step), on the
workspace's pipeline outputs: with ZeRO-3 and no model parallelism the default family is within
25% of the measured 21% (768) and 11% (1,536) (megatron2021 runs); at 1,024 the top answer lies
inside the envelope of the MFU measured on 1,024 A100 for this model at bf16, or is flagged
(``outside_measured_envelope``, ``~`` in the text table)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipeline.config import PROJ_ROOT
from pipeline.plan.cli import Paths, plan_rows
from pipeline.plan.coverage import measured_envelope

PATHS = Paths(PROJ_ROOT / "data/processed", PROJ_ROOT / "data/catalog",
              PROJ_ROOT / "reports/metrics/theory.json", PROJ_ROOT / "params.yaml")
pytestmark = pytest.mark.skipif(
    not all(p.exists() for p in (PATHS.processed / "calibration.parquet",
                                 PATHS.processed / "runs.parquet", PATHS.theory_metrics)),
    reason="pipeline outputs absent (run dvc repro)")
MEASURED_ZERO3 = {768: 0.2118, 1536: 0.1059}   # megatron2021 ZeRO-3 runs, runs.parquet


def _plan(n: int, layout: str | None, top: int = 1) -> pd.DataFrame:
    rows, _, batch, _ = plan_rows(
        model="gpt3-175b", accelerator="A100-SXM4-80GB", n=[n],
        global_batch_tokens=3145728.0, seq_len=None, layout=layout, top=top,
        train_tokens=None, shape={}, paths=PATHS, framework=None, precision=None, kernels={})
    assert batch.tokens == 3145728
    return rows


def test_zero3_at_1536_within_25_percent():
    assert _plan(1536, "tp=1,pp=1,zero=3")["mfu"].iat[0] == pytest.approx(
        MEASURED_ZERO3[1536], rel=0.25)


def test_zero3_at_768_within_25_percent():
    assert _plan(768, "tp=1,pp=1,zero=3")["mfu"].iat[0] == pytest.approx(
        MEASURED_ZERO3[768], rel=0.25)


def test_at_1024_the_top_answer_is_inside_the_measured_envelope_or_flagged():
    runs = pd.read_parquet(PATHS.processed / "runs.parquet",
                           columns=["model_id", "accelerator_family", "precision", "mfu",
                                    "n_accelerators"])
    mine = runs[(runs["model_id"] == "gpt3-175b") & (runs["accelerator_family"] == "A100")
                & (runs["precision"].fillna("bf16") == "bf16")
                & (runs["n_accelerators"] == 1024)]["mfu"].dropna()
    # megatron2021 (33.8%), MegaScale's Megatron baseline (44.7%) and MegaScale (59.0%)
    assert len(mine) >= 2
    best = _plan(1024, None).iloc[0]
    inside = mine.min() <= best["mfu"] <= mine.max()
    assert inside or best["outside_measured"] or best["above_measured_mfu"] \
        or best["outside_measured_envelope"], best["mfu"]
    # the envelope the answer is compared with is the one these runs measured
    assert bool(best["outside_measured_envelope"]) == (not inside)
    assert best["measured_envelope"].startswith(f"{mine.min():.1%}-{mine.max():.1%} (")


def test_the_envelope_is_the_range_of_two_or_more_runs_of_the_model_at_that_n():
    hardware = pd.DataFrame({"family": {"A100-SXM4-80GB": "A100", "A100-SXM4-40GB": "A100",
                                        "H100-SXM5-80GB": "H100"}})
    runs = pd.DataFrame({
        "model_id": ["m", "m", "m", "m", "other"],
        "accelerator": ["A100-SXM4-80GB", "A100-SXM4-40GB", "H100-SXM5-80GB", "A100-SXM4-80GB",
                        "A100-SXM4-80GB"],
        "precision": [None, "bf16", "bf16", "bf16", "bf16"],
        "n_accelerators": [64, 64, 64, 128, 128],
        "mfu": [0.30, 0.50, 0.90, 0.40, 0.45], "source": ["b", "a", "c", "a", "a"]})
    low, high, names = measured_envelope(runs, hardware, "m", "A100-SXM4-80GB", "bf16",
                                         np.array([64.0, 128.0, 256.0]))
    assert (low[0], high[0], names[0]) == (0.30, 0.50, "a, b")   # H100 run left out
    assert np.isnan(low[1]) and names[1] == ""                    # one run is no envelope
    assert np.isnan(low[2]) and np.isnan(high[2])
