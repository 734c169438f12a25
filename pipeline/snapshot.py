"""Whether the stage outputs form one consistent snapshot, for a report rendered by hand.

``scalewall report --focus X`` re-renders the report from ``data/processed`` while the user may
be running ``dvc repro`` in another terminal. Each output file is replaced whole
(``pipeline.io.atomic_path``), so no read sees half a file; but a report could still mix a
new ``runs.parquet`` with the fits of the previous run. ``busy`` says why not to read now:

* a stage is running: DVC's read/write lock file (``.dvc/tmp/rwlock``; DVC releases its repo
  lock while a stage command runs and records the outputs being written there) names outputs
  that a live process is writing;
* a stage has rerun but the stages after it have not yet: in ``dvc.lock`` a stage's recorded
  dependency differs from the output its producer recorded (between two stages of a repro, or
  after one stage was run alone).

Inside ``dvc repro`` itself (``DVC_STAGE`` set by DVC for the stage command) nothing is checked:
DVC has run the upstream stages already.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml

from pipeline.config import project_relative
from pipeline.io import pid_alive

# sysexits.h EX_TEMPFAIL: a temporary failure, the user is invited to retry.
EXIT_BUSY = 75


class SnapshotBusy(RuntimeError):
    """The outputs are being rewritten (or are from different runs): not read now."""


def _writers(root: Path) -> list[str]:
    try:
        lock = json.loads((root / ".dvc" / "tmp" / "rwlock").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    writes = lock.get("write", {}) if isinstance(lock, dict) else {}
    return sorted(project_relative(path, root) for path, info in writes.items()
                  if isinstance(info, dict) and isinstance(info.get("pid"), int)
                  and pid_alive(info["pid"]))


def _out_of_step(root: Path) -> list[str]:
    try:
        stages = (yaml.safe_load((root / "dvc.lock").read_text(encoding="utf-8")) or {}).get(
            "stages", {})
    except (OSError, yaml.YAMLError):
        return []
    produced = {(o.get("path"), name): o.get("md5") for name, s in stages.items()
                for o in (s.get("outs") or [])}
    by_path = {path: (name, md5) for (path, name), md5 in produced.items()}
    stale = []
    for name, stage in stages.items():
        for dep in stage.get("deps") or []:
            producer = by_path.get(dep.get("path"))
            if producer is not None and producer[1] != dep.get("md5"):
                stale.append(f"{name} used an older {dep['path']} than {producer[0]} last wrote")
    return sorted(stale)


def busy(root: Path, processed_dir: Path) -> str | None:
    """Why the outputs under ``processed_dir`` must not be read now (None: they may be)."""
    if os.environ.get("DVC_STAGE") or os.environ.get("DVC_ROOT"):
        return None
    if Path(processed_dir).resolve() != (root / "data" / "processed").resolve():
        return None  # outputs that no DVC pipeline of this project writes
    writers = _writers(root)
    if writers:
        more = f" and {len(writers) - 3} more" if len(writers) > 3 else ""
        return ("dvc repro is running and rewriting " + ", ".join(writers[:3]) + more
                + ": rerun `scalewall report` when it has finished (its report stage renders "
                "the report anyway)")
    stale = _out_of_step(root)
    if stale:
        return ("the stage outputs are from different pipeline runs (" + "; ".join(stale[:5])
                + "): `dvc repro` is between stages, or a stage was run alone; wait for it, "
                "or run `dvc repro` first")
    return None
