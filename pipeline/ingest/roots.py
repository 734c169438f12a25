"""Input roots given as paths or URLs (``--logs``, ``ingest.mlperf_roots``) -> what is read.

A root is a path (relative ones to the project root) or an fsspec URL. ``file://`` URLs name a
local folder (``file:///data/logs``) and are read as that folder, with the outputs of its path.
A logs root (``--logs``) of another protocol (``memory://``, ``s3://``, ``gs://``, ...) is read
through fsspec (``sources.steplogs.remote``); its filesystem's package (``s3fs``, ``gcsfs``) is
not a dependency of the project, so a root whose package is missing is a ConfigError (exit 2)
naming the field and the package to install. MLPerf result trees are read from local folders
only: another protocol there is a ConfigError saying to mount the store (docs/cluster.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from pipeline.bounded import short
from pipeline.config import ConfigError
from pipeline.ingest.sources.steplogs.remote import RemoteRoot

LOCAL_PROTOCOLS = (None, "file", "local")


def _split(root: str | Path) -> tuple[str, str | None, str]:
    text = root.as_posix() if isinstance(root, Path) else root
    from fsspec.core import split_protocol

    protocol, rest = split_protocol(text)
    return text, protocol, rest


def local_root(root: str | Path, field: str) -> Path:
    """The local folder ``root`` names, relative as given when it is (the caller knows what it
    is relative to)."""
    text, protocol, rest = _split(root)
    if protocol not in LOCAL_PROTOCOLS:
        raise ConfigError(
            f"{field}: {short(text)} is a {protocol}:// URL; this input is read from local "
            "folders only: mount the store (mountpoint-s3, gcsfuse, s3fs) and give the mounted "
            "path (docs/cluster.md)")
    return Path(rest)


def logs_root(root: str | Path, field: str) -> Path | RemoteRoot:
    """A step-log root: a local folder (a path or ``file://`` URL), or a ``RemoteRoot`` read
    through fsspec. ConfigError naming ``field`` when the protocol is unknown or its package
    is not installed (the package named, as fsspec's registry names it)."""
    text, protocol, _ = _split(root)
    if protocol in LOCAL_PROTOCOLS:
        return local_root(root, field)
    import fsspec
    from fsspec.registry import known_implementations

    try:
        fsspec.get_filesystem_class(protocol)
    except ImportError as exc:
        hint = known_implementations.get(protocol, {}).get("err") or str(exc)
        found = re.search(r"install (\S+)", hint, re.IGNORECASE)
        package = found.group(1) if found else hint
        raise ConfigError(
            f"{field}: {short(text)} needs the {package} package to read {protocol}:// URLs "
            f"(pip install {package}; credentials come from the environment as {package} "
            "reads them), or mount the store and give the mounted path "
            "(docs/cluster.md)") from None
    except ValueError:
        raise ConfigError(f"{field}: {short(text)}: unknown protocol {protocol}:// (fsspec "
                          "knows none of that name)") from None
    from fsspec.core import url_to_fs

    return RemoteRoot(url=text, path=url_to_fs(text)[1])
