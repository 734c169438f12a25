"""No tracked text file keeps a merge's conflict markers (one once reached main in a benchmark and
a doc, where no other test reads them)."""

from __future__ import annotations

import re
import subprocess

import pytest

from pipeline.config import PROJ_ROOT

MARKER = re.compile(rb"^(<{7} |>{7} |={7}$)", re.M)


def _tracked() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=PROJ_ROOT, capture_output=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [p for p in out.decode().split("\0") if p]


def test_no_tracked_file_has_conflict_markers() -> None:
    hits = []
    for rel in _tracked():
        path = PROJ_ROOT / rel
        if not path.is_file() or path.stat().st_size > 5_000_000:
            continue
        data = path.read_bytes()
        if b"\0" in data[:4096]:
            continue
        if MARKER.search(data):
            hits.append(rel)
    assert not hits, f"conflict markers in: {hits}"


def test_the_pattern_finds_a_marker() -> None:
    assert MARKER.search(b"x\n<<<<<<< HEAD\na\n=======\nb\n>>>>>>> main\n")
    assert not MARKER.search(b"a ======= b\n")
