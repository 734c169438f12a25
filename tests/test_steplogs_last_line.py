"""A last line without a newline: kept when it ends as the format's step lines end (every
number on it was followed by more text), dropped as cut otherwise -- never read short."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.ingest.sources.steplogs.reader import parse_file

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "logs"
# deepspeedai/DeepSpeed#5779 (2024-07-17), the thread's one step line, as pasted (no newline).
DEEPSPEED = (FIXTURES / "real" / "deepspeed_new" / "training_step.log").read_bytes().rstrip(b"\n")
MEGATRON = (FIXTURES / "megatron" / "gpt_n64.log").read_bytes()


def test_deepspeed_complete_last_line_is_kept(tmp_path: Path) -> None:
    log = tmp_path / "ds.log"
    log.write_bytes(DEEPSPEED)
    state, _, cut = parse_file(log, "deepspeed")
    assert cut and len(state) == 1
    assert state.counts["unterminated_step_line"] == 1 and not state.counts.get("cut_step_line")
    # the same line cut inside its memory figure is dropped
    log.write_bytes(DEEPSPEED[:-4])
    state, _, _ = parse_file(log, "deepspeed")
    assert len(state) == 0 and state.counts["cut_step_line"] == 1


def test_megatron_last_line_cut_anywhere_is_never_read_short(tmp_path: Path) -> None:
    """The last step line cut after every possible number of bytes: the step is either read
    with the full line's numbers or dropped."""
    lines = MEGATRON.rstrip(b"\n").split(b"\n")
    last = lines[-1]
    full_path = tmp_path / "full.log"
    full_path.write_bytes(MEGATRON)
    full, _, _ = parse_file(full_path, "megatron")
    kept = 0
    for keep in range(1, len(last) + 1):
        cut_path = tmp_path / "cut.log"
        cut_path.write_bytes(b"\n".join(lines[:-1] + [last[:keep]]))
        state, _, _ = parse_file(cut_path, "megatron")
        n = len(state)
        assert n in (len(full) - 1, len(full)), keep
        kept += n == len(full)
        for name, column in state.cols.items():
            assert list(column) == pytest.approx(list(full.cols[name])[:n], nan_ok=True), keep
    assert kept == 1  # only the whole line (the final "|" and nothing after it to lose)
