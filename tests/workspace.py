"""Tests that read the workspace's pipeline outputs (``data/processed``, ``reports/``) read them
only when they are the committed pipeline's: each file's md5 must be the one ``dvc.lock``
records, and ``dvc.lock`` must be the committed one. Otherwise the outputs were built from other
inputs (a user's logs, an edited table, a run of other code) and the test skips, saying which
file differs and how to rebuild -- a user's own data never makes the project's tests fail.

Tests that need outputs of known content build their own instead (``tests/shared_run.py``,
``tests/synthetic_upstream.py``).
"""

from __future__ import annotations

import functools
import hashlib
import subprocess
from pathlib import Path

import pytest
import yaml

PROJ_ROOT = Path(__file__).resolve().parents[1]
LOCK = PROJ_ROOT / "dvc.lock"


@functools.lru_cache(maxsize=1)
def _locked_outs() -> dict[str, str]:
    """path -> md5 of every stage output ``dvc.lock`` records."""
    if not LOCK.exists():
        return {}
    lock = yaml.safe_load(LOCK.read_text(encoding="utf-8")) or {}
    outs: dict[str, str] = {}
    for stage in (lock.get("stages") or {}).values():
        for out in stage.get("outs") or []:
            if out.get("md5"):
                outs[out["path"]] = out["md5"]
    return outs


@functools.lru_cache(maxsize=1)
def _lock_changed() -> bool:
    """True when git says dvc.lock differs from the committed one (False without git)."""
    try:
        done = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "dvc.lock"],
                              cwd=PROJ_ROOT, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 1


@functools.lru_cache(maxsize=None)
def _md5(path: Path, mtime_ns: int, size: int) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def why_not_shipped(*relpaths: str) -> str | None:
    """None when every path holds the output ``dvc.lock`` records; else the reason."""
    outs = _locked_outs()
    if _lock_changed():
        return ("dvc.lock differs from the committed one: the workspace's outputs were built "
                "from other inputs or code (git checkout dvc.lock, then dvc repro or dvc pull)")
    for rel in relpaths:
        path = PROJ_ROOT / rel
        if rel not in outs:
            return f"{rel} is not a stage output recorded in dvc.lock"
        if not path.is_file():
            return f"{rel} absent: the pipeline has not run here (dvc repro or dvc pull)"
        stat = path.stat()
        if _md5(path, stat.st_mtime_ns, stat.st_size) != outs[rel]:
            return (f"{rel} is not the output dvc.lock records (built from other inputs or "
                    "code; dvc repro or dvc pull rebuilds it)")
    return None


def require_shipped(*relpaths: str) -> None:
    """Skip the calling test unless every path is the committed pipeline's output."""
    reason = why_not_shipped(*relpaths)
    if reason is not None:
        pytest.skip(reason)


def shipped_mark(*relpaths: str) -> pytest.MarkDecorator:
    """``pytest.mark.skipif`` form of ``require_shipped`` (decided when the module loads)."""
    reason = why_not_shipped(*relpaths)
    return pytest.mark.skipif(reason is not None, reason=reason or "")
