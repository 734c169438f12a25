"""Sidecar metadata for step logs: what a log does not say (accelerator, N, model, layout).

A sidecar is a YAML mapping whose keys are published format-v1 column names
(data/raw/published/README.md), e.g. ``accelerator: H100-SXM5-80GB``, ``n_accelerators: 64``,
``model: llama3-8b``, ``tp: 2``, plus ``format:`` to force a parser. Files, from the weakest to
the strongest (a stronger file's key replaces a weaker one's):

1. ``run.yaml`` in each folder from the logs root down to the log's own folder (a deeper
   folder's ``run.yaml`` wins over its parents');
2. ``<log stem>.run.yaml`` next to the log (``job64.run.yaml`` for ``job64.log``);
3. ``<log name>.yaml`` next to the log (``job64.log.yaml``).

Sidecar values are defaults: a value the log itself prints is used, and a log value that
differs from a sidecar value rejects the log (``conflict``, both values named).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pipeline.bounded import cap, short
from pipeline.ingest.contract import PUBLISHED_ENERGY, PUBLISHED_MEASURES

INT_KEYS = ("n_accelerators", "n_layers", "d_model", "seq_len", "micro_batch", "dp", "tp", "pp",
            "cp", "ep", "zero_stage", "accelerators_per_node")
FLOAT_KEYS = ("params_b", "active_params_b", "global_batch_tokens")
STR_KEYS = ("source", "citation", "model", "accelerator", "strategy", "precision", "scaling",
            "series", "status", "notes", "system", "format")
ALLOWED_KEYS = frozenset(INT_KEYS + FLOAT_KEYS + STR_KEYS)
# Format-v1 columns a sidecar may not set: the measures come from the log, ``derived`` from
# the pipeline.
MEASURE_KEYS = (*PUBLISHED_MEASURES, *PUBLISHED_ENERGY, "derived")

# A sidecar is a handful of keys; a larger file is not one (and is not read into memory).
MAX_SIDECAR_BYTES = 1 << 20
# Nesting deeper than this is no sidecar value (values are scalars); refused while composing,
# before the parser's own recursion can exhaust the stack.
MAX_YAML_DEPTH = 20


class _SidecarLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` without aliases and with a depth limit.

    Aliases (``*name``) are refused: sidecar values are scalars, and aliases are how a "billion
    laughs" file of under 1 KB expands to 10^9 strings.
    """

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "YAML aliases (*name) are not allowed in a sidecar",
                event.start_mark)
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested deeper than {MAX_YAML_DEPTH} levels",
                    self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class SidecarError(Exception):
    """A sidecar that cannot be used; ``code`` is a reject code, the message names the file."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


@dataclass
class Sidecar:
    """Merged sidecar values and, per key, the file that gave it."""

    values: dict[str, Any] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)


def _files_in(folder: Path, cache: dict | None) -> frozenset[str] | None:
    """Names of the files in ``folder`` (links to files included, as ``Path.is_file`` counts
    them), listed once per folder when a cache is given: a folder of 10^4 logs is read once,
    not stat-ed three times per log. None without a cache (each candidate is stat-ed)."""
    if cache is None:
        return None
    key = ("files", folder)
    if key not in cache:
        try:
            with os.scandir(folder) as entries:
                cache[key] = frozenset(e.name for e in entries if e.is_file())
        except OSError:
            cache[key] = frozenset()
    return cache[key]


def sidecar_paths(log_path: Path, logs_dir: Path, cache: dict | None = None) -> list[Path]:
    """Existing sidecar files for ``log_path``, weakest first (see module docstring)."""
    log_path, logs_dir = Path(log_path), Path(logs_dir)
    folders: list[Path] = []
    folder = log_path.parent
    while True:
        folders.append(folder)
        if folder == logs_dir or folder == folder.parent or logs_dir not in folder.parents:
            break
        folder = folder.parent
    candidates = [f / "run.yaml" for f in reversed(folders)]
    candidates += [log_path.with_name(log_path.stem + ".run.yaml"),
                   log_path.with_name(log_path.name + ".yaml")]
    found = []
    for path in candidates:
        names = _files_in(path.parent, cache)
        if (path.name in names) if names is not None else path.is_file():
            found.append(path)
    return found


def _check(key: str, value: Any, where: str) -> Any:
    if key in MEASURE_KEYS:
        raise SidecarError("bad_value", f"sidecar {where}: '{key}' is measured, so it comes "
                                        "from the log, not from a sidecar")
    if key not in ALLOWED_KEYS:
        raise SidecarError("bad_value", f"sidecar {where}: unknown key '{key}' (keys are "
                                        "format-v1 column names, see data/raw/logs/README.md)")
    if value is None:
        return None
    if key in INT_KEYS:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SidecarError("bad_value", f"sidecar {where}: '{key}' must be a non-negative "
                                            f"integer, got {short(value)}")
    elif key in FLOAT_KEYS:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise SidecarError("bad_value", f"sidecar {where}: '{key}' must be a non-negative "
                                            f"number, got {short(value)}")
        value = float(value)
    elif not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise SidecarError("bad_value", f"sidecar {where}: '{key}' must be text, got {short(value)}")
    else:
        value = str(value)
    return value


def _parse(text: str, cache: dict | None) -> Any:
    """The YAML of one sidecar; with a cache, each distinct text is parsed once (a fleet's job
    folders hold a few distinct sidecars many times over: pure-Python YAML costs ~0.5 ms each).
    The parsed value is only read afterwards (``_check`` builds new values from it)."""
    if cache is None:
        return yaml.load(text, Loader=_SidecarLoader)
    key = ("yaml", text)
    if key not in cache:
        cache[key] = yaml.load(text, Loader=_SidecarLoader)
    return cache[key]


def read_sidecar(path: Path, cache: dict[Path, dict[str, Any]] | None = None) -> dict[str, Any]:
    """One sidecar file as a checked mapping; raises SidecarError naming the file."""
    if cache is not None and path in cache:
        return cache[path]
    try:
        if path.stat().st_size > MAX_SIDECAR_BYTES:
            raise SidecarError("malformed_row", f"sidecar {path}: over {MAX_SIDECAR_BYTES} "
                                                "bytes; a sidecar is a short mapping")
        data = _parse(path.read_text(encoding="utf-8"), cache)
    except (OSError, UnicodeDecodeError) as exc:
        raise SidecarError("unreadable", f"sidecar {path}: {short(exc, 200)}") from exc
    except yaml.YAMLError as exc:
        raise SidecarError("malformed_row", f"sidecar {path}: not valid YAML "
                                            f"({cap(str(exc).splitlines()[0], 200)})") from exc
    except (RecursionError, MemoryError) as exc:
        raise SidecarError("malformed_row", f"sidecar {path}: nested too deeply to read "
                                            f"({type(exc).__name__})") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SidecarError("malformed_row", f"sidecar {path}: must be a mapping of column "
                                            f"names to values, got {type(data).__name__}")
    checked = {str(k): _check(str(k), v, str(path)) for k, v in data.items()}
    checked = {k: v for k, v in checked.items() if v is not None}
    if cache is not None:
        cache[path] = checked
    return checked


def load_sidecar(log_path: Path, logs_dir: Path,
                 cache: dict[Path, dict[str, Any]] | None = None,
                 display: Any = str) -> Sidecar:
    """Merge the sidecars of ``log_path`` (weakest first); ``display`` names files in notes."""
    merged = Sidecar()
    for path in sidecar_paths(log_path, logs_dir, cache):
        values = read_sidecar(path, cache)
        name = display(path)
        merged.files.append(name)
        for key, value in values.items():
            merged.values[key] = value
            merged.origin[key] = name
    return merged


def same_value(key: str, log_value: Any, side_value: Any) -> bool:
    """Whether a log value and a sidecar value agree (params to 2 %, text case-blind)."""
    if isinstance(log_value, str) or isinstance(side_value, str):
        return str(log_value).strip().lower() == str(side_value).strip().lower()
    try:
        a, b = float(log_value), float(side_value)
    except (TypeError, ValueError):
        return log_value == side_value
    if key in ("params_b", "active_params_b"):
        # A log counts parameters exactly; a sidecar rounds them (llama3-8b is 8.03e9).
        return abs(a - b) <= 0.02 * max(abs(a), abs(b))
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1.0)
