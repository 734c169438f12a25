"""``make report`` reproduces the pipeline without DVC's advice that does not apply."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config import PROJ_ROOT

DVC = Path(sys.executable).with_name("dvc")


def _repo(tmp_path: Path, cmd: str) -> Path:
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([str(DVC), "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "dvc.yaml").write_text(f"stages:\n  a:\n    cmd: {cmd}\n    outs:\n"
                                       "      - out.txt\n")
    subprocess.run(git + ["add", "-A"], cwd=tmp_path, check=True)
    subprocess.run(git + ["commit", "-qm", "init"], cwd=tmp_path, check=True)
    return tmp_path


def _reproduce(repo: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(PROJ_ROOT))
    return subprocess.run([sys.executable, "-m", "pipeline.reproduce"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not DVC.exists(), reason="dvc is not installed beside the interpreter")
def test_no_git_or_push_advice_without_a_remote(tmp_path):
    repo = _repo(tmp_path, "echo hi > out.txt")
    done = _reproduce(repo)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "Running stage 'a'" in out and (repo / "out.txt").read_text() == "hi\n"
    assert "git add" not in out and "dvc push" not in out and "autostage" not in out
    # With a remote the push hint applies, and is printed.
    subprocess.run([str(DVC), "remote", "add", "store", str(tmp_path / "store")], cwd=repo,
                   check=True)
    (repo / "out.txt").unlink()
    done = _reproduce(repo)
    assert "`dvc push` sends the outputs to the remote (store)" in done.stdout


@pytest.mark.slow  # a second DVC start-up (~10 s); the behaviour is DVC's own
@pytest.mark.skipif(not DVC.exists(), reason="dvc is not installed beside the interpreter")
def test_a_failing_stage_fails_the_run(tmp_path):
    done = _reproduce(_repo(tmp_path, "exit 3"))
    assert done.returncode == 1
    assert "failed to reproduce 'a'" in done.stderr + done.stdout
