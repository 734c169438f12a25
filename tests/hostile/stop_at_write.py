"""Run ``python -m pipeline ARGS`` and stop it at the moment it renames its Nth output into
place: the worst moment for a signal or a full disk (the temporary file is complete, the
previous output not yet replaced); or, with ``STOP_ON=read``, when it reads its first Parquet
input (in the middle of the stage, before any output: a stage that must first compute for
minutes is stopped in seconds).

``STOP_AT`` (default 1): which output; ``STOP_WITH``: ``sigterm``, ``sigint`` (sent to the
process itself, as ``kill`` or Ctrl-C would), ``enospc`` or ``erofs`` (the rename fails as on a
full or read-only disk). Used by ``test_operations.py``: ``python stop_at_write.py ARGS``.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's pipeline
from pipeline import io as pipeline_io  # noqa: E402

_replace = os.replace
_count = 0


def _stopping_replace(src, dst, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN201
    global _count
    if os.path.basename(str(src)).startswith(pipeline_io.PARTIAL_PREFIX):
        _count += 1
        if _count == int(os.environ.get("STOP_AT", "1")):
            _stop_now(src)
    return _replace(src, dst, *args, **kwargs)


def _stop_now(src: object) -> None:
    how = os.environ["STOP_WITH"]
    if how in ("sigterm", "sigint"):
        os.kill(os.getpid(), signal.SIGTERM if how == "sigterm" else signal.SIGINT)
    code = errno.ENOSPC if how == "enospc" else errno.EROFS
    raise OSError(code, os.strerror(code), str(src))


if os.environ.get("STOP_ON") == "read":
    import pyarrow.parquet as pq

    _read_table = pq.read_table

    def _stopping_read(source, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN201
        _stop_now(source)
        return _read_table(source, *args, **kwargs)

    pq.read_table = _stopping_read  # pandas.read_parquet looks it up when called
else:
    pipeline_io.os.replace = _stopping_replace  # the module's os is the os module: all patched

if __name__ == "__main__":
    # Ctrl-C as a terminal delivers it: a process started in the background by a shell without
    # job control (CI runners, `cmd &`) inherits SIGINT ignored, and the signal sent above
    # would then be lost and the stop seen as the read-only error raised after it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from pipeline.__main__ import app
    sys.exit(app(sys.argv[1:], prog_name="pipeline"))
