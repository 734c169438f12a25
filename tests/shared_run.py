"""One pipeline run per test session, shared by every test that only reads its outputs, also
when ``make test`` spreads the tests over worker processes (pytest-xdist).

Under xdist each worker is its own Python process, so a module-level cache would build the same
run once per worker. ``once_per_session`` builds it in a folder beside the workers' own temporary
folders (pytest-xdist gives every worker ``<session basetemp>/popen-gwN``, so their parent belongs
to this session alone), under a file lock: the first worker to ask builds it, the others wait and
read the same files. Without xdist it is a plain in-process cache. The builder's result (paths)
is pickled beside the files, so a worker that did not build it gets the same value.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from filelock import FileLock

T = TypeVar("T")

_IN_PROCESS: dict[str, Any] = {}


def once_per_session(tmp_path_factory: Any, name: str, build: Callable[[Path], T]) -> T:
    """``build(folder)`` once per test session (all workers together); its value every time.

    The folder is read-only by convention: a test that changes files copies them first.
    """
    if name in _IN_PROCESS:
        return _IN_PROCESS[name]
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        value = build(tmp_path_factory.mktemp(name))
    else:
        shared = tmp_path_factory.getbasetemp().parent
        folder, done = shared / name, shared / f"{name}.pickle"
        with FileLock(str(shared / f"{name}.lock")):
            if done.exists():
                value = pickle.loads(done.read_bytes())
            else:
                folder.mkdir()
                value = build(folder)
                done.write_bytes(pickle.dumps(value))
    _IN_PROCESS[name] = value
    return value
