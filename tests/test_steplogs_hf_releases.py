"""The Hugging Face Trainer's end-of-training summary in the layouts its releases print, written
here from transformers' own format code (not pasted output): ``speed_metrics`` gives
``train_runtime`` and ``train_samples_per_second`` since 4.2 and ``train_steps_per_second`` only
from 4.9; ``ProgressCallback`` draws tqdm's bar (``format_meter``: ``n/total [elapsed<remaining,
rate]``) before the summary dict. Each layout gives the step time by the documented fallback
(``hf_trainer._step_time``), never ``truncated_log`` while the summary is there."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest.sources.steplogs.reader import read_logs

PARAMS = {"ingest": {"logs": {"warmup_steps": "auto", "max_warmup_fraction": 0.5,
                              "min_steady_steps": 3, "settle_tolerance": 0.05}}}
LOSS = "{'loss': 2.1, 'learning_rate': 4e-05, 'epoch': 1.0}\n"
BAR = "100%|##########| 950/950 [27:00<00:00,  1.28s/it]\n"
SETUP = ("***** Running training *****\n  Num examples = 3800\n  Num Epochs = 3\n"
         "  Total train batch size (w. parallel, distributed & accumulation) = 12\n"
         "  Total optimization steps = 950\n")
OLD = "{'train_runtime': 1620.4, 'train_samples_per_second': 2.346, 'epoch': 3.0}\n"
NEW = ("{'train_runtime': 1620.4, 'train_samples_per_second': 2.346, "
       "'train_steps_per_second': 0.586, 'train_loss': 2.0, 'epoch': 3.0}\n")


def _read(tmp_path: Path, text: str, sidecar: str = "") -> object:
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "t.log").write_text(text, encoding="utf-8")
    (folder / "run.yaml").write_text("accelerator: A100-SXM4-80GB\nn_accelerators: 4\n"
                                     + sidecar, encoding="utf-8")
    records, _ = read_logs(tmp_path, PARAMS)
    return records[0]


@pytest.mark.parametrize("text, step_time_s, how", [
    (LOSS * 3 + NEW, 1 / 0.586, "train_steps_per_second"),           # 4.9 and later
    (SETUP + LOSS * 3 + OLD, 1620.4 / 950, "Total optimization steps"),  # 4.2-4.8, set-up
    (LOSS * 3 + BAR + OLD, 1620.4 / 950, "progress bar's steps"),    # 4.2-4.8, bar before
    (LOSS * 3 + BAR, 1620.0 / 950, "elapsed time"),                  # summary lost, bar kept
])
def test_every_release_layout_gives_the_step_time(tmp_path, text, step_time_s, how) -> None:
    record = _read(tmp_path, text)
    assert record.reason is None, record.reason
    assert record.fields["step_time_s"] == pytest.approx(step_time_s)
    assert how in record.fields["notes"]


def test_samples_per_second_with_the_sidecars_seq_len_gives_tokens(tmp_path) -> None:
    record = _read(tmp_path, LOSS + OLD, "seq_len: 512\n")
    assert record.reason is None
    assert record.fields["tokens_per_s"] == pytest.approx(2.346 * 512)
    assert "step_time_s" not in record.fields


def test_without_any_summary_the_reject_says_what_to_give(tmp_path) -> None:
    record = _read(tmp_path, LOSS + OLD)
    assert record.reason.startswith("truncated_log")
    assert "give seq_len in the sidecar" in record.reason


@settings(max_examples=40, deadline=None)
@given(steps=st.integers(3, 10**6), seconds=st.integers(1, 10**6))
def test_bar_round_trip(tmp_path_factory, steps: int, seconds: int) -> None:
    """A finished bar in tqdm's layout (H:MM:SS past an hour) reads back its seconds / steps."""
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    elapsed = f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"
    bar = f"100%|##########| {steps}/{steps} [{elapsed}<00:00,  1.00it/s]\n"
    record = _read(tmp_path_factory.mktemp("bar"), LOSS + bar)
    assert record.fields["step_time_s"] == pytest.approx(seconds / steps)
