"""A stage stopped from outside: SIGTERM, Ctrl-C, a full disk, a read-only output folder.

Each stage runs with its outputs in a temporary folder that already holds "previous" outputs
(copies of the project's). ``stop_at_write.py`` stops it when it renames an output into place
(the worst moment); then the exit status is 143, 130 or 1 with a message naming the file, every
previous output is byte-identical or (for outputs renamed before the stop) a whole new file,
and no temporary file is left. A real tmpfs and a read-only bind mount (in a private mount
namespace: ``unshare``, skipped where it is not allowed) check the same without a hook, and
``scalewall report`` refuses to read outputs that ``dvc repro`` is rewriting.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).resolve().parent / "stop_at_write.py"
PROCESSED = ROOT / "data" / "processed"
METRICS = ROOT / "reports" / "metrics"
# The stages run on the project's own outputs (as `dvc repro` left them); a fresh clone that has
# not run the pipeline has none, so there is nothing to stop (`.ci/run` runs `make report` first).
pytestmark = pytest.mark.skipif(not (PROCESSED / "runs.parquet").is_file()
                                or not (PROCESSED / "calibration.parquet").is_file(),
                                reason="pipeline outputs absent (run `make report` first)")


def stage_args(stage: str, out: Path) -> list[str]:
    """CLI arguments running ``stage`` on the project's inputs with every output under ``out``."""
    p, m, plots = out / "processed", out / "metrics", out / "plots"
    common = ["--params", str(ROOT / "params.yaml")]
    return {
        "ingest": ["ingest", "--out", str(p), "--metrics", str(m / "ingest.json")],
        "fit": ["fit", "--out", str(p), "--metrics", str(m / "fit.json"), "--plots", str(plots)],
        "theory": ["theory", "--out", str(p), "--metrics", str(m / "theory.json"), "--plots",
                   str(plots)],
        "calibrate": ["calibrate", "--processed", str(PROCESSED), "--out", str(p), "--metrics",
                      str(m / "calibrate.json"), "--plots", str(plots)],
        "compare": ["compare", "--processed", str(PROCESSED), "--metrics-dir", str(METRICS),
                    "--out", str(p), "--metrics", str(m / "compare.json"), "--plots",
                    str(plots)],
        "report": ["report", "--processed", str(PROCESSED), "--metrics-dir", str(METRICS),
                   "--out", str(out / "reports")],
    }[stage] + common


def previous_outputs(out: Path) -> dict[str, str]:
    """Fill ``out`` with copies of the project's outputs; their sha256 by relative path."""
    (out / "processed").mkdir(parents=True)
    for f in PROCESSED.glob("*.parquet"):
        shutil.copy2(f, out / "processed" / f.name)
    shutil.copytree(METRICS, out / "metrics")
    (out / "reports").mkdir()
    for name in ("report.md", "report.html"):
        if (ROOT / "reports" / name).is_file():
            shutil.copy2(ROOT / "reports" / name, out / "reports" / name)
    return digests(out)


def digests(out: Path) -> dict[str, str]:
    return {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("*")) if p.is_file()}


def stray(out: Path) -> list[str]:
    """Temporary files or folders a stopped stage left behind."""
    return sorted(p.relative_to(out).as_posix() for p in out.rglob("*")
                  if p.name.startswith((".partial-", ".scratch", ".steps-")))


def whole(path: Path) -> bool:
    """Whether ``path`` is a complete file of its kind."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq
        pq.read_metadata(path)
    elif path.suffix == ".json":
        json.loads(path.read_text())
    return True


def stopped(stage: str, how: str, out: Path, at: int = 1,
            on: str = "rename") -> subprocess.CompletedProcess:
    env = dict(os.environ, STOP_WITH=how, STOP_AT=str(at), STOP_ON=on)
    env.pop("DVC_STAGE", None)
    return subprocess.run([sys.executable, str(DRIVER), *stage_args(stage, out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=900)


EXPECTED = {"sigterm": (143, "terminated (SIGTERM)"), "sigint": (130, "interrupted (Ctrl-C)"),
            "enospc": (1, "no space left on the device writing "),
            "erofs": (1, "read-only file system writing ")}
# Stopped at an output's rename (the ingest, whose compute before it is seconds) and, in every
# stage, at its first Parquet read (downstream stages compute for minutes before writing).
CASES = [("ingest", how, "rename") for how in ("sigterm", "sigint", "enospc", "erofs")]
CASES += [(stage, "sigterm", "read") for stage in ("fit", "theory", "calibrate", "compare",
                                                   "report")]
CASES += [("report", "sigint", "read")]


@pytest.mark.slow
@pytest.mark.parametrize(("stage", "how", "on"), CASES)
def test_stopped_stage_leaves_previous_outputs(tmp_path: Path, stage: str, how: str,
                                               on: str) -> None:
    before = previous_outputs(tmp_path)
    proc = stopped(stage, how, tmp_path, on=on)
    code, words = EXPECTED[how]
    assert proc.returncode == code, proc.stderr[-2000:]
    assert words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert stray(tmp_path) == []
    after = digests(tmp_path)
    changed = {k for k in before if after.get(k) != before[k]}
    assert changed == set(), changed  # stopped before or at the first rename: nothing replaced
    assert set(after) == set(before)  # and nothing new


INGEST_OUTPUTS = ("processed/runs.parquet", "processed/rejects.parquet",
                  "processed/series.parquet", "processed/steps.parquet",
                  "processed/power.parquet", "metrics/ingest.json")


@pytest.mark.slow
def test_stopped_after_some_outputs_leaves_each_whole(tmp_path: Path) -> None:
    """Stopped at the third rename: two outputs are new and whole, the others are still the
    previous ones (here sentinel files, which no stage would write)."""
    for rel in INGEST_OUTPUTS:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"previous " + rel.encode())
    proc = stopped("ingest", "sigterm", tmp_path, at=3)
    assert proc.returncode == 143, proc.stderr[-2000:]
    new = [rel for rel in INGEST_OUTPUTS
           if (tmp_path / rel).read_bytes() != b"previous " + rel.encode()]
    assert len(new) == 2 and stray(tmp_path) == [], new
    assert all(whole(tmp_path / rel) for rel in new)


def _unshare(script: str) -> subprocess.CompletedProcess | None:
    """``script`` in a private mount namespace (None where that is not allowed)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    probe = subprocess.run([unshare, "--mount", "--propagation", "private", "true"],
                           capture_output=True)
    if probe.returncode != 0:
        return None
    return subprocess.run([unshare, "--mount", "--propagation", "private", "sh", "-c", script],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_disk_full_on_a_real_tmpfs(tmp_path: Path) -> None:
    """The ingest's outputs on a 1 MiB tmpfs that the previous outputs and a filler fill: the
    stage fails naming the file, exit 1; the previous outputs are whole; no partial file."""
    out = tmp_path / "out"
    out.mkdir()
    args = " ".join(f"'{a}'" for a in stage_args("ingest", out))
    script = (f"mount -t tmpfs -o size=1m tmpfs '{out}' && mkdir '{out}/processed' && "
              f"cp '{PROCESSED}/runs.parquet' '{PROCESSED}/rejects.parquet' '{out}/processed/' "
              f"&& dd if=/dev/zero of='{out}/filler' bs=1k count=600 2>/dev/null; "
              f"df -k '{out}'; {sys.executable} -m pipeline {args}; echo rc=$?; "
              f"cd '{out}' && sha256sum processed/* && ls -A processed")
    proc = _unshare(script)
    if proc is None:
        pytest.skip("no private mount namespace here (unshare --mount not permitted)")
    assert "rc=1" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    assert "no space left on the device writing " in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    for name in ("runs.parquet", "rejects.parquet"):
        digest = hashlib.sha256((PROCESSED / name).read_bytes()).hexdigest()
        assert f"{digest}  processed/{name}" in proc.stdout
    assert ".partial-" not in proc.stdout and ".scratch" not in proc.stdout


@pytest.mark.slow
def test_read_only_outputs_on_a_real_mount(tmp_path: Path) -> None:
    before = previous_outputs(tmp_path)
    args = " ".join(f"'{a}'" for a in stage_args("ingest", tmp_path))
    script = (f"mount --bind '{tmp_path}' '{tmp_path}' && mount -o remount,bind,ro "
              f"'{tmp_path}' && {sys.executable} -m pipeline {args}; echo rc=$?")
    proc = _unshare(script)
    if proc is None:
        pytest.skip("no private mount namespace here (unshare --mount not permitted)")
    assert "rc=1" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    assert "read-only file system writing " in proc.stderr and "Traceback" not in proc.stderr
    assert digests(tmp_path) == before


# -- scalewall report while dvc repro runs ---------------------------------------------------------
def _project(tmp_path: Path) -> Path:
    (tmp_path / "data" / "processed").mkdir(parents=True)
    (tmp_path / ".dvc" / "tmp").mkdir(parents=True)
    return tmp_path


def test_report_refuses_while_a_stage_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    from pipeline.snapshot import busy
    monkeypatch.delenv("DVC_STAGE", raising=False)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    root = _project(tmp_path)
    processed = root / "data" / "processed"
    assert busy(root, processed) is None
    lock = {"read": {}, "write": {"data/processed/fits.parquet": {
        "pid": os.getpid(), "cmd": "python -m pipeline fit"}}}
    (root / ".dvc" / "tmp" / "rwlock").write_text(json.dumps(lock))
    message = busy(root, processed)
    assert message is not None and "dvc repro is running" in message
    assert "data/processed/fits.parquet" in message
    assert busy(root, tmp_path / "elsewhere") is None  # outputs no DVC pipeline writes
    monkeypatch.setenv("DVC_STAGE", "report")  # the report stage inside dvc repro itself
    assert busy(root, processed) is None


def test_report_refuses_outputs_from_different_runs(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.snapshot import busy
    monkeypatch.delenv("DVC_STAGE", raising=False)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    root = _project(tmp_path)
    lock = ("stages:\n  ingest:\n    outs:\n    - path: data/processed/runs.parquet\n"
            "      md5: {new}\n  fit:\n    deps:\n    - path: data/processed/runs.parquet\n"
            "      md5: {old}\n")
    (root / "dvc.lock").write_text(lock.format(new="aaa", old="aaa"))
    assert busy(root, root / "data" / "processed") is None
    (root / "dvc.lock").write_text(lock.format(new="bbb", old="aaa"))
    message = busy(root, root / "data" / "processed")
    assert message is not None and "fit used an older data/processed/runs.parquet" in message


def test_project_outputs_are_one_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    """The committed dvc.lock is consistent (every stage used what its producer wrote last)."""
    from pipeline.snapshot import _out_of_step
    assert _out_of_step(ROOT) == []
