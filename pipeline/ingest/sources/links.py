"""Symbolic links among input files: followed only when they stay inside the folder read.

A link that dangles, loops, or leads outside the data folder being read is a ``bad_link``
reject naming the link and its target: a dangling link is a lost input the user
should hear about, and a link out of the data folder would make the pipeline's result depend
on a file that DVC does not track.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from pipeline.bounded import cap


def _target(path: Path) -> str:
    try:
        return cap(os.readlink(path), 200)
    except OSError:
        return "?"


def link_problem(path: Path, root: Path) -> str | None:
    """Why ``path`` (found under ``root``) may not be read as a file; None when it may."""
    path = Path(path)
    if not path.is_symlink():
        return None
    try:
        target = path.resolve(strict=True)
    except FileNotFoundError:
        return f"dangling symlink {path.name} -> {_target(path)}"
    except RuntimeError:  # Python < 3.13 reports a loop this way
        return f"symlink loop {path.name} -> {_target(path)}"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"symlink loop {path.name} -> {_target(path)}"
        return f"symlink {path.name} -> {_target(path)} unreadable ({exc.strerror})"
    if not target.is_relative_to(Path(root).resolve()):
        return (f"symlink {path.name} -> {_target(path)} points outside the data folder "
                f"{Path(root).name}/")
    if not target.is_file():
        return f"symlink {path.name} -> {_target(path)} is not a file"
    return None


def candidates(paths: list[Path]) -> list[Path]:
    """The files among ``paths`` and every symbolic link (a dangling one included)."""
    return [p for p in paths if p.is_symlink() or p.is_file()]
