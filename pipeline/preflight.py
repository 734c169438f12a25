"""Special files (FIFO, socket, device) under the folders DVC hashes: found before DVC blocks.

DVC hashes every dependency folder of ``dvc.yaml`` before any stage runs, and it opens each
entry to read it: a FIFO (named pipe) blocks that read forever with no CPU used (``dvc status``
and ``dvc repro`` hang), and a character device such as a copy of ``/dev/zero`` never ends.
The stages themselves never open such entries (``pipeline.ingest.sources.links``: each is a
``special_file`` reject), but DVC gets there first. So ``make report``, ``scalewall validate``
and ``.ci/run`` call ``python -m pipeline preflight`` first: it walks the dependency folders
with ``lstat`` only (nothing is opened), and stops naming each special file and the fix.
Plain ``dvc repro`` does not run it (README, "Inputs DVC cannot hash").
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import yaml

_KINDS = ((stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
          (stat.S_ISBLK, "block device"))


def special_kind(path: str | Path, directories: bool = False) -> str | None:
    """``fifo``, ``socket``, ``character device``, ``block device`` (or ``directory`` when
    ``directories``) for such an entry itself (a link is not followed); None otherwise."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if directories and stat.S_ISDIR(mode):
        return "directory"
    return next((kind for test, kind in _KINDS if test(mode)), None)


def dependency_folders(dvc_yaml: Path) -> list[Path]:
    """The folders among the ``deps`` of every stage of ``dvc_yaml``, sorted."""
    root = dvc_yaml.parent
    stages = (yaml.safe_load(dvc_yaml.read_text(encoding="utf-8")) or {}).get("stages", {})
    deps = {str(d) for stage in stages.values() for d in (stage.get("deps") or [])}
    return sorted(root / d for d in deps if (root / d).is_dir())


def find_special(folders: list[Path]) -> list[tuple[Path, str]]:
    """Every special entry under ``folders`` (links not followed), sorted, with its kind."""
    found = []
    for folder in folders:
        for top, dirs, files in os.walk(folder):
            dirs.sort()
            for name in sorted(files):
                kind = special_kind(Path(top) / name)
                if kind is not None:
                    found.append((Path(top) / name, kind))
    return sorted(found)


def problem(root: Path) -> str | None:
    """The message that stops the run when special files lie under ``root``'s dependency
    folders (``root/dvc.yaml``); None when there are none."""
    dvc_yaml = root / "dvc.yaml"
    if not dvc_yaml.is_file():
        return None
    found = find_special(dependency_folders(dvc_yaml))
    if not found:
        return None
    listed = "\n".join(f"  {os.path.relpath(p, root)} ({kind})" for p, kind in found[:50])
    more = f"\n  ... and {len(found) - 50} more" if len(found) > 50 else ""
    return (f"preflight: {len(found)} special file(s) under the pipeline's input folders; DVC "
            f"would block reading them (dvc status and dvc repro hang on a FIFO):\n{listed}{more}"
            "\nfix: remove them or move them out of the folder (a FIFO or socket holds no data: "
            "`rm PATH`; for a log, save its output to a regular file), then rerun")
