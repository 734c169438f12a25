"""The planner issue's GPT-3 175B on A100 targets (3,145,728 tokens per step), on the
workspace's pipeline outputs: with ZeRO-3 and no model parallelism the default family is within
25% of the measured 21% (768) and 11% (1,536) (megatron2021 runs); at 1,024 the top answer lies
inside the envelope of the MFU measured on 1,024 A100 for this model at bf16, or is flagged
(``above_measured_envelope``, with the highest run measured there)."""

from __future__ import annotations

import pandas as pd
import pytest

from pipeline.config import PROJ_ROOT
from pipeline.plan.cli import Paths, plan_rows

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
        or best["above_measured_envelope"], best["mfu"]
    if best["mfu"] > mine.max():  # flagged by the envelope at this N, with its record
        assert best["above_measured_envelope"]
        assert best["measured_model_mfu"] == pytest.approx(mine.max())


@pytest.mark.parametrize("n", sorted(MEASURED_ZERO3))
def test_zero3_rows_show_the_run_measured_at_their_layout_and_hold_it(n):
    row = _plan(n, "tp=1,pp=1,zero=3").iloc[0]
    assert row["measured_layout_mfu"] == pytest.approx(MEASURED_ZERO3[n], rel=1e-3)
    assert row["measured_layout_inside"] is True
    assert "megatron2021" in row["measured_layout_citation"]
