"""What every input reader shares: opening a file (plain, gzip or zstd), telling text from binary.

* ``open_binary(path)``: a binary stream of the file's *content*. ``name.gz`` is decompressed
  with :mod:`gzip` and ``name.zst`` with ``zstandard``, streamed as the reader asks for bytes;
  nothing is ever decompressed to disk. Readers match files by their logical name
  (``logical_name``: the name less ``.gz``/``.zst``), so ``result_0.txt.gz``, ``run.log.gz`` and
  ``table.csv.gz`` are read where ``result_0.txt``, ``run.log`` and ``table.csv`` are.
* ``READ_ERRORS``: what reading such a stream may raise (I/O errors, a corrupt or cut
  compressed stream). Readers catch exactly these and turn them into an ``unreadable`` reject
  whose detail ``read_error`` formats; they never skip a file silently.
* ``looks_binary(head)``: the one test, with one threshold, of whether the first bytes of a file
  are text. Used by the published-table, MLPerf and step-log readers alike.
"""

from __future__ import annotations

import codecs
import os
import gzip
import io
import zlib
from pathlib import Path, PurePosixPath
from typing import BinaryIO

import zstandard as _zstd

from pipeline.config import PROJ_ROOT, project_relative

COMPRESSED_SUFFIXES = (".gz", ".zst")
# Compressions seen on logs that are not read: such a file is found like the others and becomes
# an ``unreadable`` reject that says how to fix it, instead of being skipped in silence.
OTHER_COMPRESSION = (".bz2", ".xz", ".lzma", ".lz4", ".zip", ".7z", ".br")
# Bytes looked at to decide text or binary (the readers pass the start of the file).
SNIFF_BYTES = 1 << 16
# Share of junk (NUL, control bytes other than the ones text logs carry, bytes that are not
# UTF-8) in the first bytes above which a file is not text. One corrupt row or a few garbage
# lines stay below it: the reader then rejects or counts those alone.
BINARY_FRACTION = 0.10
# Control bytes that text carries: backspace and ESC (progress bars, colours), tab, newlines,
# form feed.
_TEXT_CONTROLS = bytes([8, 9, 10, 12, 13, 27])
_CONTROLS = bytes(b for b in range(32) if b not in _TEXT_CONTROLS) + b"\x7f"
_KEEP_ONLY_CONTROLS = bytes(b for b in range(256) if b not in _CONTROLS)

READ_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error, _zstd.ZstdError)


def logical_name(path: str | Path) -> str:
    """The file name less a compression suffix: ``result_0.txt.gz`` -> ``result_0.txt``."""
    name = Path(path).name
    for suffix in COMPRESSED_SUFFIXES + OTHER_COMPRESSION:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return name


def logical_suffix(path: str | Path) -> str:
    """The lower-case suffix of ``logical_name``: ``run.LOG.gz`` -> ``.log``."""
    return Path(logical_name(path)).suffix.lower()


def logical_stem(path: str | Path) -> str:
    """``logical_name`` less its suffix: ``result_0.txt.gz`` -> ``result_0``."""
    return Path(logical_name(path)).stem


def is_compressed(path: str | Path) -> bool:
    return Path(path).name.lower().endswith(COMPRESSED_SUFFIXES)


def existing(path: str | Path) -> Path | None:
    """``path`` if it is a file, else its ``.gz`` or ``.zst`` sibling if one is; else None."""
    path = Path(path)
    for candidate in (path, *(path.with_name(path.name + s) for s in COMPRESSED_SUFFIXES)):
        if candidate.is_file():
            return candidate
    return None


def read_text(path: str | Path, encoding: str = "utf-8") -> str:
    """The whole (small) file as text, decompressed; undecodable bytes replaced."""
    with open_binary(path) as fh:
        return fh.read().decode(encoding, errors="replace")


def open_binary(path: str | Path, buffering: int = 1 << 20) -> BinaryIO:
    """A read-only binary stream of the file's content, decompressed on the fly.

    Raises one of ``READ_ERRORS`` when the file cannot be opened; a corrupt compressed stream
    raises one of them on ``read``.
    """
    path = Path(path)
    name = path.name.lower()
    other = next((s for s in OTHER_COMPRESSION if name.endswith(s)), None)
    if other is not None:
        raise OSError(0, f"{other} compression is not read (only .gz and .zst): recompress "
                         "the file with gzip or zstd", str(path))
    if name.endswith(".gz"):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if name.endswith(".zst"):
        raw = open(path, "rb")
        try:
            reader = _zstd.ZstdDecompressor().stream_reader(raw, closefd=True)
        except Exception:
            raw.close()
            raise
        return io.BufferedReader(reader, buffer_size=buffering)  # type: ignore[arg-type]
    return open(path, "rb", buffering=buffering)


def read_error(exc: BaseException) -> str:
    """Detail for an ``unreadable`` reject: the error's kind and what went wrong, in a line."""
    kind = type(exc).__name__
    if isinstance(exc, EOFError):
        return f"{kind}: compressed stream cut short ({exc})"
    if isinstance(exc, (zlib.error, gzip.BadGzipFile)):
        return f"{kind}: corrupt compressed stream ({exc})"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{kind}: {exc.strerror}"
    return f"{kind}: {exc}"


def looks_binary(head: bytes) -> bool:
    """True when ``head`` (the start of a file) is not text: junk over ``BINARY_FRACTION``.

    Junk: NUL and control bytes other than ``\\b \\t \\n \\f \\r ESC``, and bytes that are not
    UTF-8. Text in latin-1 (MLPerf logs are read so) has isolated high bytes: far below 10 %.
    A multi-byte character cut at the end of ``head`` is not junk.
    """
    if not head:
        return False
    controls = len(head.translate(None, _KEEP_ONLY_CONTROLS))
    if controls > BINARY_FRACTION * len(head):
        return True
    if head.isascii():
        return False
    # An incremental decoder leaves a character cut at the end undecoded instead of replaced.
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(head, final=False)
    return controls + text.count("\ufffd") > BINARY_FRACTION * len(head)


def shown_path(path: Path, root: Path = PROJ_ROOT, folders: dict | None = None) -> str:
    """``path`` as outputs record it (``config.project_relative``) with its folder resolved but
    not the file itself: a symlinked input is shown where the link lies, and a looping link
    cannot raise here. ``folders`` memoizes resolved folders (``_resolved``): resolving
    costs a system call per path component, most of the cost of a small log without it."""
    path = Path(path)
    if folders is None:
        return (PurePosixPath(project_relative(path.parent, root)) / path.name).as_posix()
    folder, top = _resolved(path.parent, folders), _resolved(root, folders)
    shown = folder.relative_to(top) if folder.is_relative_to(top) else folder
    return (PurePosixPath(shown) / path.name).as_posix()


def _resolved(folder: Path, memo: dict) -> Path:
    """``folder.resolve()``, from its parent's when memoized: a folder that is no link resolves
    to its resolved parent plus its name (one ``lstat``, not one per component)."""
    key = ("resolved", folder)
    if key not in memo:
        if folder.parent == folder or folder.name in ("", "..") or os.path.islink(folder):
            memo[key] = folder.resolve()
        else:
            memo[key] = _resolved(folder.parent, memo) / folder.name
    return memo[key]
