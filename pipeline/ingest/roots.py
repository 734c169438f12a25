"""Input roots given as paths or URLs (``--logs``, ``ingest.mlperf_roots``) -> local folders.

A root is a path (relative ones to the project root) or an fsspec URL. ``file://`` URLs name a
local folder (``file:///data/logs``) and are read as that folder. The ingest reads local
files only: an object store (``s3://``, ``gs://``, ...) is read through a mount of it
(docs/cluster.md), so any other protocol is a ConfigError naming the field and saying so,
instead of a folder that silently does not exist.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.bounded import short
from pipeline.config import ConfigError


def local_root(root: str | Path, field: str) -> Path:
    """The local folder ``root`` names, relative as given when it is (the caller knows what it
    is relative to)."""
    text = root.as_posix() if isinstance(root, Path) else root
    from fsspec.core import split_protocol

    protocol, rest = split_protocol(text)
    if protocol not in (None, "file", "local"):
        raise ConfigError(
            f"{field}: {short(text)} is a {protocol}:// URL; the ingest reads local folders "
            "only: mount the store (mountpoint-s3, gcsfuse, s3fs) and give the mounted path "
            "(docs/cluster.md)")
    return Path(rest)
