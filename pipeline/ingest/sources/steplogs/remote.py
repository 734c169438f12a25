"""Step logs under an fsspec URL (``memory://``, ``s3://``, ``gs://``, ...): listed, fetched, read.

A logs root that is a URL of a protocol other than ``file://`` is read through fsspec
(https://filesystem-spec.readthedocs.io): ``RemoteRoot.list`` walks it once, one listing per
folder (an object store's prefix listing gives each object's name and size, so there is no
request per file); the logs are then read in the same batches as local ones
(``reader._batches``), each batch a task naming its logs by path within the store and the
sidecars (``run.yaml``, ...) they need, so a Dask worker opens the store itself: no open handle
or file content travels with a task. A task copies its batch (at most 64 logs / 4 MiB, or one
larger log) into a local scratch folder mirroring the store's layout (``mirrored``) and reads it
with the local reader (``reader._read_remote_batch``); every path the outputs show (rejects, provenance,
citations, steps' ``path``) then names the log's URL: ``<root URL>/<path below the root>``.
A file that cannot be fetched is an ``unreadable`` reject naming its URL.

The filesystem's package (``s3fs`` for ``s3://``, ``gcsfs`` for ``gs://``) is not a
dependency of the project: a root whose package is missing stops the stage (exit 2) naming the
package (``roots.fs_root``). Credentials come from the environment as the package reads them
(``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` or an instance role, ``GOOGLE_APPLICATION_
CREDENTIALS``); nothing in ``params.yaml`` holds one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pipeline.ingest.sources.common import READ_ERRORS, read_error, shown_path

SIDECAR_SUFFIXES = (".yaml", ".yml")
SIDECAR_NAME = "run.yaml"  # a folder's sidecar (``sidecar`` module docstring)
GLOB_CHARS = "*?["  # a name holding one is a pattern to ``fs.cat``
SHM = "/dev/shm"  # Linux's memory-backed folder (tmpfs)
# Free space ``SHM`` must have for a batch (at most ~4 MiB) to go there, else ``TMPDIR``: a
# container's /dev/shm is often 64 MiB, shared by the node's workers.
SHM_MIN_FREE_BYTES = 32 << 20


@dataclass(frozen=True)
class RemoteRoot:
    """A logs root given as an fsspec URL: ``url`` as given, ``path`` the root's path within its
    filesystem (``fsspec.core.url_to_fs``). Picklable: a worker rebuilds the filesystem."""

    url: str
    path: str

    def filesystem(self) -> Any:
        """The fsspec filesystem of ``url`` (fsspec caches instances per process)."""
        from fsspec.core import url_to_fs
        return url_to_fs(self.url)[0]

    def shown(self, path: str) -> str:
        """A file's path within the filesystem -> its URL as the outputs show it."""
        return self.url.rstrip("/") + "/" + self.relative(path)

    def relative(self, path: str) -> str:
        """A file's path below the root (``/``-separated)."""
        return path[len(self.path):].lstrip("/")

    def list(self, listed: Callable[[str], bool]
             ) -> tuple[list[str], list[int], dict[str, frozenset[str]]]:
        """(paths of the files whose name is ``listed``, in path order; their sizes in bytes;
        the YAML files' names by folder): one ``walk`` of the root, one listing per folder."""
        found: list[tuple[str, int]] = []
        yamls: dict[str, frozenset[str]] = {}
        fs = self.filesystem()
        for folder, _, files in fs.walk(self.path, detail=True):
            folder = folder.rstrip("/")
            names = [n for n in files if n.lower().endswith(SIDECAR_SUFFIXES)]
            if names:
                yamls[folder] = frozenset(names)
            found += [(f"{folder}/{name}", int(info.get("size") or 0))
                      for name, info in files.items() if listed(name)]
        found.sort(key=lambda item: item[0].split("/"))
        return [p for p, _ in found], [s for _, s in found], yamls

    def sidecars(self, paths: list[str], yamls: dict[str, frozenset[str]]) -> list[str]:
        """The sidecar files the logs ``paths`` may read (``sidecar.sidecar_paths``): ``run.yaml``
        in each folder from the root down, ``<stem>.run.yaml`` and ``<name>.yaml`` beside each."""
        wanted: dict[str, None] = {}
        base = self.path.rstrip("/")
        for path in paths:
            folder, name = path.rsplit("/", 1)
            parts = [p for p in self.relative(folder).split("/") if p]
            for depth in range(len(parts) + 1):
                where = "/".join([base, *parts[:depth]])
                if SIDECAR_NAME in yamls.get(where, ()):
                    wanted[f"{where}/{SIDECAR_NAME}"] = None
            for side in (PurePosixPath(name).stem + ".run.yaml", name + ".yaml"):
                if side in yamls.get(folder, ()):
                    wanted[f"{folder}/{side}"] = None
        return list(wanted)


def _renamed(value: Any, old: str, new: str) -> Any:
    """``value`` with the text ``old`` replaced by ``new`` in every string it holds (a str, or
    one inside a dict or tuple); other values (numpy columns) as they are."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {k: _renamed(v, old, new) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_renamed(v, old, new) for v in value)
    return value


def _fetch(fs: Any, root: RemoteRoot, paths: list[str], local: str) -> dict[str, str]:
    """Copy ``paths`` (within the store) below ``local``; the read error of each that failed.
    Several files (a batch of small logs and their sidecars: at most ~4 MiB) in one ``cat``,
    which an asynchronous store's package (s3fs, gcsfs) fetches concurrently; a lone file (a
    large log) streamed to disk by ``get_file``, not held in memory."""
    def dest(path: str) -> str:
        out = os.path.join(local, *root.relative(path).split("/"))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        return out

    failed = {}
    if len(paths) == 1:
        try:
            fs.get_file(paths[0], dest(paths[0]))
        except READ_ERRORS as exc:
            failed[paths[0]] = read_error(exc)
        return failed
    if any(c in path for path in paths for c in GLOB_CHARS):  # fs.cat would glob the name
        got = {path: _cat_one(fs, path) for path in paths}
    else:
        got = fs.cat(paths, on_error="return")
    for path in paths:
        data = got.get(path, got.get(fs._strip_protocol(path)))
        if isinstance(data, bytes):
            with open(dest(path), "wb") as out:
                out.write(data)
        elif isinstance(data, READ_ERRORS) or data is None:
            failed[path] = read_error(data) if data is not None else "not fetched"
        else:
            raise data  # not a read error: the task fails (and is retried) as under local
    return failed


def _room(folder: str) -> int:
    """Bytes free in ``folder`` for this process (0 where it is absent or not writable)."""
    if not os.access(folder, os.W_OK):
        return 0
    try:
        stat = os.statvfs(folder)
    except OSError:
        return 0
    return stat.f_bavail * stat.f_frsize


def _cat_one(fs: Any, path: str) -> bytes | BaseException:
    """One file's bytes, or the exception reading it raised (as ``fs.cat(on_error="return")``)."""
    try:
        return fs.cat_file(path)
    except Exception as exc:  # noqa: BLE001 - sorted as fs.cat's are, by the caller
        return exc


@contextlib.contextmanager
def mirrored(root: RemoteRoot, paths: list[str], sidecars: list[str]
             ) -> Iterator[tuple[Path, list[str], Callable[[list[Any]], list[Any]]]]:
    """A batch's logs and sidecars copied into a scratch folder laid out as the store: yields
    (the folder, the copies of the logs that could be fetched, ``urls``) where ``urls`` turns
    the local reader's outcomes for those copies into one outcome per log of ``paths``, every
    path shown as its URL, a log that could not be fetched an ``unreadable`` reject. The
    folder is removed after. A batch of small logs (at most ~4 MiB) is copied into memory
    (``SHM``, where there is one): creating and removing a folder per job folder cost ~4 ms
    on this machine's disk, more than reading the log; a lone (large) log goes to ``TMPDIR``."""
    shm = SHM if len(paths) > 1 and _room(SHM) >= SHM_MIN_FREE_BYTES else None
    with tempfile.TemporaryDirectory(prefix="scalewall-logs-", dir=shm) as tmp:
        local = os.path.realpath(tmp)
        failed = _fetch(root.filesystem(), root, [*sidecars, *paths], local)
        copies = [os.path.join(local, *root.relative(p).split("/")) for p in paths
                  if p not in failed]
        prefix = shown_path(Path(local) / "x")[:-1]  # how the local reader shows the folder

        def urls(outcomes: list[Any]) -> list[Any]:
            got = iter([_renamed(outcome, prefix, root.url.rstrip("/") + "/")
                        for outcome in outcomes])
            return [(("unreadable", f"{root.shown(p)}: {failed[p]}"), None, root.shown(p))
                    if p in failed else next(got) for p in paths]

        yield Path(local), copies, urls
