"""One MFU convention for every source (pipeline/ingest/core/flop_count.py): where a run gives
tokens/s, ``mfu`` is the project's FLOP count over the dense peak, and the MFU on the source's
own count (NVIDIA's performance summaries print "model TFLOP/s per GPU" on Megatron-Bridge's
count) is kept in ``mfu_source_count``; a run whose two printed figures disagree with its group
is flagged and rated at the group's count. The shipped ``runs.parquet`` is checked too."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pipeline.config import PROJ_ROOT
from pipeline.ingest.core.derive import derive_measures
from pipeline.ingest.core.flop_count import SOURCE_COUNT_TOLERANCE, flag_misprints
from pipeline.ingest.contract import RUN_COLUMN_NAMES
from pipeline.measures import flop_per_token

PEAK = 989e12                       # H100 dense bf16 (FLOP/s)
N = 64
OURS_FPT = 36e9                     # our FLOP per token (6 x 6e9 active, no shape)
THEIRS_FPT = 27.2e9                 # the source's count for the same model


def _row(tokens_per_s: float | None, mfu: float | None = None, **extra) -> dict:
    row = dict.fromkeys(RUN_COLUMN_NAMES)
    row.update(source="megatron_bridge2025", model="GPT OSS 120B", seq_len=4096,
               n_accelerators=N, active_params=6e9, params=6e9, tokens_per_s=tokens_per_s,
               mfu=mfu, global_batch_tokens=8 * 4096, peak_flops_per_s_per_accelerator=PEAK)
    row.update(extra)
    return row


def _derived(row: dict, tflops: float | None, peak: float | None = PEAK) -> dict:
    names, _ = derive_measures(row, peak, tflops, attention=False)  # no shape: 6 N_act
    row["derived"] = ";".join(names)
    return row


def test_tflops_and_tokens_give_our_mfu_and_keep_theirs() -> None:
    tps = 1e6
    row = _derived(_row(tps), tflops=tps * THEIRS_FPT / N / 1e12)
    assert row["mfu"] == pytest.approx(tps * OURS_FPT / (N * PEAK))
    assert row["model_flops_per_s"] == pytest.approx(tps * OURS_FPT)
    assert row["mfu_source_count"] == pytest.approx(tps * THEIRS_FPT / (N * PEAK))
    assert {"mfu", "model_flops_per_s", "mfu_source_count"} <= set(row["derived"].split(";"))
    # the printed step time: our FLOP per step over MFU x n x peak
    step_s = row["global_batch_tokens"] / tps
    assert OURS_FPT * row["global_batch_tokens"] / (row["mfu"] * N * PEAK) == pytest.approx(step_s)


def test_a_printed_mfu_is_kept_as_printed() -> None:
    row = _derived(_row(1e6, mfu=0.43), tflops=None)
    assert row["mfu_source_count"] == 0.43
    assert "mfu_source_count" not in row["derived"].split(";")
    assert row["mfu"] == pytest.approx(1e6 * OURS_FPT / (N * PEAK))


def test_without_tokens_per_s_or_a_stated_precision_the_source_figure_stays() -> None:
    row = _derived(_row(None, mfu=0.43), tflops=None)
    assert row["mfu"] == 0.43 and row["mfu_source_count"] == 0.43
    row = _derived(_row(1e6, mfu=0.43), tflops=None, peak=None)   # peak withheld
    assert row["mfu"] == 0.43 and row["mfu_source_count"] == 0.43
    assert "not recounted" in row["notes"]


def test_a_run_without_a_source_figure_has_no_source_count() -> None:
    row = _derived(_row(1e6), tflops=None)
    assert row["mfu"] == pytest.approx(1e6 * OURS_FPT / (N * PEAK))
    assert row["mfu_source_count"] is None


def test_a_misprinted_row_takes_its_groups_count() -> None:
    runs = [_derived(_row(t), tflops=t * THEIRS_FPT / N / 1e12) for t in (1e6, 1.1e6, 0.95e6, 1e6)]
    bad = _row(0.5e6)                       # tokens/s misprinted: the count it implies doubles
    runs.append(_derived(bad, tflops=1e6 * THEIRS_FPT / N / 1e12))
    assert 2.0 - 1.0 > SOURCE_COUNT_TOLERANCE        # the bad row's count over the group's
    assert flag_misprints(runs) == 1
    assert bad["mfu"] == pytest.approx(1e6 * OURS_FPT / (N * PEAK))   # TFLOP/s at the group's
    assert "misprinted" in bad["notes"]
    assert all(r["notes"] is None for r in runs[:4])


def test_groups_are_per_source_model_and_sequence() -> None:
    runs = [_derived(_row(1e6), tflops=1e6 * THEIRS_FPT / N / 1e12),
            _derived(_row(1e6, source="other2025"), tflops=2e6 * THEIRS_FPT / N / 1e12)]
    assert flag_misprints(runs) == 0


# -- the shipped runs.parquet ------------------------------------------------------------------
RUNS = PROJ_ROOT / "data" / "processed" / "runs.parquet"


@pytest.fixture(scope="module")
def shipped() -> pd.DataFrame:
    if not RUNS.exists():
        pytest.skip("data/processed/runs.parquet not built")
    return pd.read_parquet(RUNS)


def _ours(r: pd.Series) -> float:
    value = lambda c: None if pd.isna(r[c]) else float(r[c])  # noqa: E731
    fpt, _ = flop_per_token(value("active_params"), value("n_layers"), value("d_model"),
                            value("seq_len"), True)
    return r["tokens_per_s"] * fpt / (r["n_accelerators"] * r["peak_flops_per_s_per_accelerator"])


def test_shipped_mfu_is_tokens_per_s_on_our_count(shipped: pd.DataFrame) -> None:
    """Every run with tokens/s and an MFU: ``mfu`` is tokens/s x our FLOP per token over the
    peak (a misprint-flagged run, or one whose precision is not stated, says why not)."""
    runs = shipped[shipped["tokens_per_s"].notna() & shipped["mfu"].notna()]
    assert {"megatron_bridge2025", "nemo_framework2025", "nemo_automodel2025"} <= set(
        runs["source"])
    off = []
    for _, r in runs.iterrows():
        if not math.isclose(r["mfu"], _ours(r), rel_tol=1e-6):
            notes = r["notes"] or ""
            if "misprinted" not in notes and "not recounted" not in notes:
                off.append((r["source"], r["model"], r["mfu"], _ours(r)))
    assert not off, off[:5]


def test_shipped_nvidia_rows_keep_their_printed_count(shipped: pd.DataFrame) -> None:
    nv = shipped[shipped["source"].isin(["megatron_bridge2025", "nemo_framework2025",
                                         "nemo_automodel2025"]) & shipped["mfu"].notna()]
    # every run but the three that print a step time alone (NeMo's GPT-3 175B, Mixtral 8x22B)
    assert nv["mfu_source_count"].isna().sum() <= 3
    nv = nv[nv["mfu_source_count"].notna()]
    ratio = (nv["mfu_source_count"] / nv["mfu"]).groupby(nv["model"]).median()
    assert ratio["GPT OSS 120B"] == pytest.approx(0.76, abs=0.01)      # sliding windows
    assert ratio["Qwen3_30B_a3B"] == pytest.approx(0.934, abs=0.005)   # their formula: 0.934
    assert ratio["DeepSeekV3"] == pytest.approx(1.07, abs=0.01)        # MLA
    flagged = nv[nv["notes"].fillna("").str.contains("misprinted")]
    assert list(flagged["model"]) == ["Qwen3_30B_a3B"]
    assert np.isclose(flagged["mfu_source_count"] / flagged["mfu"], ratio["Qwen3_30B_a3B"]).all()
