"""Stopping a stage from outside: Ctrl-C, SIGTERM, a full disk, a read-only output folder.

What a stopped stage leaves: each output is its previous version or absent, never a partial
file, and no temporary file stays behind. That holds because every output is written to a
temporary file in its folder and renamed into place (``pipeline.io.atomic_path``), which
removes the temporary file on any exception, and because ``handled_signals`` turns SIGTERM
into an exception (Python's default would end the process at once, skipping that clean-up)
the same way Ctrl-C (SIGINT) is one. A stage that had replaced some of its outputs before it
was stopped leaves a mix of new and previous files; DVC records no new lock for a failed stage,
so the next ``dvc repro`` reruns it.

Exit status (``exit_status``): 130 after Ctrl-C and 143 after SIGTERM (128 + the signal
number, as a shell reports them); 1 when an output cannot be written (disk full, read-only,
permission), with a message naming the file.
"""

from __future__ import annotations

import contextlib
import errno
import signal
import threading
from collections.abc import Iterator
from typing import Any

EXIT_SIGINT = 128 + signal.SIGINT
EXIT_SIGTERM = 128 + signal.SIGTERM
EXIT_WRITE_FAILED = 1
# Errors of writing an output that are the machine's state, not a bug.
WRITE_ERRNOS = {errno.ENOSPC: "no space left on the device",
                errno.EDQUOT: "disk quota exceeded",
                errno.EROFS: "read-only file system",
                errno.EACCES: "permission denied",
                errno.EPERM: "operation not permitted"}


class Terminated(BaseException):
    """SIGTERM, raised where the stage is (a ``BaseException``, as ``KeyboardInterrupt``, so
    that no ``except Exception`` of a stage swallows it)."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


@contextlib.contextmanager
def handled_signals() -> Iterator[None]:
    """SIGTERM raises ``Terminated`` inside the block (main thread only; else unchanged)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def write_failure(exc: BaseException) -> str | None:
    """The message for an OSError of writing an output (None: some other error)."""
    if not isinstance(exc, OSError) or exc.errno not in WRITE_ERRNOS:
        return None
    where = f" writing {exc.filename}" if exc.filename else ""
    return (f"{WRITE_ERRNOS[exc.errno]}{where}: the stage stopped; its outputs are the previous "
            "versions (or absent), no partial file is left")


def exit_status(exc: BaseException) -> int | None:
    """The exit status for a stage stopped by ``exc`` (None: not a stop this module knows)."""
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_SIGINT
    if isinstance(exc, Terminated):
        return EXIT_SIGTERM
    if write_failure(exc) is not None:
        return EXIT_WRITE_FAILED
    return None
