"""Symbolic links among input files: followed only when they stay inside the folder read.

A link that dangles, loops, or leads outside the data folder being read is a ``bad_link``
reject naming the link and its target: a dangling link is a lost input the user
should hear about, and a link out of the data folder would make the pipeline's result depend
on a file that DVC does not track.

An entry that is no regular file (a FIFO, socket or device, or a directory named like an
input, ``job.log/``) is a ``special_file: <kind>`` reject: it is never opened (a FIFO would
block the reader forever) and never dropped in silence (``entry_problem``).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from pipeline.bounded import cap
from pipeline.preflight import special_kind


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


def special_problem(path: Path) -> str | None:
    """Why ``path`` itself (not followed) is no file to open: a FIFO, socket, device or
    directory (None: a regular file or a link)."""
    kind = special_kind(path, directories=True)
    if kind is None:
        return None
    if kind == "directory":
        return (f"{path.name}/ is a directory named like an input file: nothing read from it "
                "as a file (the files inside, if any, are read on their own)")
    return f"{path.name} is a {kind}, not a regular file: nothing read (save the output to a " \
           "regular file)"


def entry_problem(path: Path, root: Path) -> tuple[str, str] | None:
    """(reject code, detail) for an entry found under ``root`` that may not be read as a file:
    ``special_file`` (FIFO, socket, device, directory) or ``bad_link``; None when it may."""
    special = special_problem(path)
    if special is not None:
        return "special_file", special
    bad_link = link_problem(path, root)
    return ("bad_link", bad_link) if bad_link else None


def candidates(paths: list[Path], directories: bool = False) -> list[Path]:
    """The files among ``paths``, every symbolic link (a dangling one included) and every
    special entry (FIFO, socket, device; with ``directories`` also directories), which
    ``entry_problem`` turns into rejects."""
    return [p for p in paths if p.is_symlink() or p.is_file()
            or special_kind(p, directories) is not None]
