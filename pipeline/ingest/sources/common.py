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
* ``open_text_bytes(path)``: ``open_binary`` for text inputs: a file that starts with a UTF-16
  or UTF-32 byte-order mark is decoded and streamed as UTF-8 (a UTF-8 BOM is dropped), so the
  readers see UTF-8 whatever the encoding; ``utf16_without_bom`` names the encoding and the
  ``iconv`` command for a file that has no BOM but is UTF-16 (a NUL in every other byte).
* ``line_cut`` and ``unify_line_ends``: ``\\n``, ``\\r\\n`` and a lone ``\\r`` (progress-bar
  output, old Mac files) are all line ends.
"""

from __future__ import annotations

import codecs
import os
import gzip
import io
import zlib
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

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

_KNOWN_COMPRESSION = COMPRESSED_SUFFIXES + OTHER_COMPRESSION

READ_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error, _zstd.ZstdError)


def logical_name(path: str | Path) -> str:
    """The file name less a compression suffix: ``result_0.txt.gz`` -> ``result_0.txt``."""
    # A bare name (a folder listing's) is its own name: no Path built for it.
    name = path if isinstance(path, str) and "/" not in path and path != "." else Path(path).name
    lower = name.lower()
    if lower.endswith(_KNOWN_COMPRESSION):   # one test for the usual name (no compression)
        for suffix in _KNOWN_COMPRESSION:
            if lower.endswith(suffix):
                return name[: -len(suffix)]
    return name


def logical_suffix(path: str | Path) -> str:
    """The lower-case suffix of ``logical_name``: ``run.LOG.gz`` -> ``.log``."""
    name = logical_name(path)
    dot = name.rfind(".")  # ``PurePath.suffix`` of a bare name, without building the path
    return name[dot:].lower() if 0 < dot < len(name) - 1 else ""


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


# Byte-order marks, longest first (the UTF-32-LE mark begins with the UTF-16-LE one).
BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
        (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"),
        (codecs.BOM_UTF8, "utf-8"))


def bom_encoding(head: bytes) -> str | None:
    """The encoding a byte-order mark at the start of ``head`` names (None: no mark)."""
    return next((enc for bom, enc in BOMS if head.startswith(bom)), None)


class _Recoded(io.RawIOBase):
    """A binary stream of UTF-8 bytes: ``prefix`` then the rest of ``raw``, decoded from
    ``encoding`` (None: passed through). Undecodable units become U+FFFD, which the readers
    count."""

    def __init__(self, raw: BinaryIO, prefix: bytes, encoding: str | None) -> None:
        super().__init__()
        self._raw, self._pending = raw, b""
        self._decoder = (codecs.getincrementaldecoder(encoding)("replace")
                         if encoding is not None else None)
        self._prefix = prefix
        self._done = False
        self.source_encoding = encoding  # what the bytes were decoded from (None: as they are)

    def readable(self) -> bool:
        return True

    def _more(self) -> bytes:
        data, self._prefix = self._prefix + self._raw.read(1 << 20), b""
        if self._decoder is None:
            self._done = not data
            return data
        if not data:
            self._done = True
            return self._decoder.decode(b"", final=True).encode("utf-8")
        return self._decoder.decode(data).encode("utf-8")

    def readinto(self, buffer: Any) -> int:
        while not self._pending and not self._done:
            self._pending = self._more()
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


def open_text_bytes(path: str | Path, buffering: int = 1 << 20) -> BinaryIO:
    """``open_binary``, with a UTF-16/32 file (by its BOM) decoded to UTF-8 and a UTF-8 BOM
    dropped; any other file's bytes as they are."""
    raw = open_binary(path, buffering)
    try:
        head = raw.read(4)
        encoding = bom_encoding(head)
        if encoding == "utf-8":
            head, encoding = head[len(codecs.BOM_UTF8):], None
        elif encoding is not None:  # the codec without an endianness would want the BOM
            head = head[len(next(b for b, e in BOMS if e == encoding)):]
    except BaseException:
        raw.close()
        raise
    return io.BufferedReader(_Recoded(raw, head, encoding), buffer_size=buffering)  # type: ignore[return-value]


def utf16_without_bom(head: bytes, path: str | Path) -> str | None:
    """For a head that looks binary: what to say when it is UTF-16 text without a BOM (NUL
    in every other byte, ASCII in the others); None otherwise."""
    sample = head[: 1 << 12]
    if len(sample) < 8:
        return None
    for zeros, encoding in ((sample[1::2], "UTF-16LE"), (sample[0::2], "UTF-16BE")):
        other = sample[0::2] if encoding == "UTF-16LE" else sample[1::2]
        if zeros.count(0) > 0.9 * len(zeros) and other.count(0) < 0.1 * len(other):
            name, out = Path(path).name, logical_name(path)
            out = f"{Path(out).stem}.utf8{Path(out).suffix}"
            return (f"looks like {encoding} text without a byte-order mark; convert it to "
                    f"UTF-8: iconv -f {encoding} -t UTF-8 {name} > {out} (or save it with a "
                    "BOM)")
    return None


def line_cut(data: bytes) -> int:
    """The position after the last line end in ``data`` (0: none). A ``\\r`` at the very end
    is not counted: the next block may start with the ``\\n`` of its ``\\r\\n``."""
    end = len(data) - 1 if data.endswith(b"\r") else len(data)
    return max(data.rfind(b"\n", 0, end), data.rfind(b"\r", 0, end)) + 1


def unify_line_ends(data: bytes) -> bytes:
    """``\\r\\n`` and lone ``\\r`` -> ``\\n`` (a C-level search when there is no ``\\r``)."""
    if b"\r" not in data:
        return data
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


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
    A multi-byte character cut at the end of ``head`` is not junk, nor is a U+FFFD the text
    itself holds (a log written after a lossy decode): only the decoder's replacements count.
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
    invalid = text.count("\ufffd") - head.count("\ufffd".encode("utf-8"))
    return controls + invalid > BINARY_FRACTION * len(head)


def shown_path(path: Path, root: Path = PROJ_ROOT, folders: dict | None = None) -> str:
    """``path`` as outputs record it (``config.project_relative``) with its folder resolved but
    not the file itself: a symlinked input is shown where the link lies, and a looping link
    cannot raise here. ``folders`` memoizes resolved folders (``_resolved``): resolving
    costs a system call per path component, most of the cost of a small log without it."""
    path = path if isinstance(path, Path) else Path(path)
    if folders is None:
        return (PurePosixPath(project_relative(path.parent, root)) / path.name).as_posix()
    # Keyed by the folder's text (a path's text is its normalized form, so one text is one
    # folder): no Path built and hashed per log for a look-up.
    folder_text, name = os.path.split(str(path))
    key = ("shown", folder_text, root)
    if key not in folders:  # the folder's shown form, once per folder: a dummy name joined
        folder, top = _resolved(path.parent, folders), _resolved(root, folders)
        shown = folder.relative_to(top) if folder.is_relative_to(top) else folder
        folders[key] = (PurePosixPath(shown) / "x").as_posix()[:-1]
    return folders[key] + name


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
