"""Atomic outputs (issue 13, item 5): a failed or killed writer never leaves a truncated file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from pipeline.io import atomic_path, write_json, write_parquet


def test_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    write_json({"a": 1}, target)
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("{half", encoding="utf-8")
            raise RuntimeError("killed")
    assert target.read_text(encoding="utf-8") == '{\n  "a": 1\n}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_partials_of_dead_writers_removed_live_ones_kept(tmp_path: Path) -> None:
    target = tmp_path / "runs.parquet"
    dead = tmp_path / f".partial-{_dead_pid()}-runs.parquet"
    live = tmp_path / f".partial-{os.getppid()}-runs.parquet"
    other = tmp_path / f".partial-{_dead_pid()}-series.parquet"  # another output's: later
    for p in (dead, live, other):
        p.write_bytes(b"PAR1 cut")
    write_parquet(pd.DataFrame({"a": [1]}), target)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [target.name, live.name, other.name])
    assert pd.read_parquet(target)["a"].tolist() == [1]
