"""tests/workspace.py: a test reads the workspace's outputs only when dvc.lock records them."""

from __future__ import annotations

import hashlib

from tests import workspace


def test_guard_accepts_the_locked_output_and_names_every_other_case(tmp_path, monkeypatch):
    out = tmp_path / "data" / "processed" / "runs.parquet"
    out.parent.mkdir(parents=True)
    out.write_bytes(b"committed")
    locked = {"data/processed/runs.parquet": hashlib.md5(b"committed").hexdigest()}
    monkeypatch.setattr(workspace, "PROJ_ROOT", tmp_path)
    monkeypatch.setattr(workspace, "_locked_outs", lambda: locked)
    monkeypatch.setattr(workspace, "_lock_changed", lambda: False)
    assert workspace.why_not_shipped("data/processed/runs.parquet") is None
    out.write_bytes(b"a user's own runs")
    assert "not the output dvc.lock records" in workspace.why_not_shipped(
        "data/processed/runs.parquet")
    out.unlink()
    assert "absent" in workspace.why_not_shipped("data/processed/runs.parquet")
    assert "not a stage output" in workspace.why_not_shipped("data/processed/other.parquet")
    monkeypatch.setattr(workspace, "_lock_changed", lambda: True)
    assert "dvc.lock differs" in workspace.why_not_shipped("data/processed/runs.parquet")
