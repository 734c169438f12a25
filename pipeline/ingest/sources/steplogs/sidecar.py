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

Values are read as written: no YAML implicit typing at all (YAML 1.1 would make ``series: 010``
the series "8" and ``system: 1:30`` the number 90). Text keys keep the scalar's text; numeric
keys go through the one number parser (``pipeline.numbers``), so a 400-digit ``n_accelerators``
is a ``bad_value`` reject quoting it. ``null``, ``~`` or nothing leaves a key unset. A key given
twice is a ``malformed_row`` reject naming it and both lines.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pipeline.bounded import cap, short
from pipeline.vocab import KERNEL_COLUMNS, RECOMPUTE_MODES
from pipeline.ingest.contract import PUBLISHED_ENERGY, PUBLISHED_MEASURES
from pipeline.numbers import NumberError, parse_count, parse_number
from pipeline.preflight import special_kind
from pipeline.yaml12 import CORE_NULL, first_duplicate

INT_KEYS = ("n_accelerators", "n_layers", "d_model", "seq_len", "micro_batch", "dp", "tp", "pp",
            "cp", "ep", "zero_stage", "accelerators_per_node", "virtual_pipeline",
            "pipeline_flushes", "n_experts", "top_k")
FLOAT_KEYS = ("params_b", "active_params_b", "global_batch_tokens", "capacity_factor")
STR_KEYS = ("source", "citation", "model", "accelerator", "strategy", "precision", "scaling",
            "series", "status", "notes", "system", "format", "recompute", "framework",
            "cluster")
# The kernel facts (fused attention, TP and DP communication overlapped with compute) the
# calibrate stage's step model reads per run; a log never prints them.
BOOL_KEYS = ("sequence_parallel", *KERNEL_COLUMNS)
ALLOWED_KEYS = frozenset(INT_KEYS + FLOAT_KEYS + STR_KEYS + BOOL_KEYS)
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


def _entries_in(folder: Path, cache: dict | None
                ) -> tuple[frozenset[str], frozenset[str]] | None:
    """Names in ``folder``, listed once per folder when a cache is given (a folder of 10^4 logs
    is read once, not stat-ed three times per log): (files, links to files included, as
    ``Path.is_file`` counts them; every other entry: folders, special files, broken links).
    None without a cache (each candidate is stat-ed)."""
    if cache is None:
        return None
    key = ("entries", folder)
    if key not in cache:
        files, others = set(), set()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    (files if entry.is_file() else others).add(entry.name)
        except OSError:
            pass
        cache[key] = (frozenset(files), frozenset(others))
    return cache[key]


def _below(folder: Path, logs_dir: Path, cache: dict | None) -> bool:
    """Whether ``logs_dir`` is among ``folder.parents``; from its parent's answer when a cache
    is given (a job folder's campaign folder is asked once, not once per job)."""
    if cache is None:
        return logs_dir in folder.parents
    key = ("below", folder, logs_dir)
    if key not in cache:
        parent = folder.parent
        cache[key] = parent != folder and (parent == logs_dir or _below(parent, logs_dir, cache))
    return cache[key]


def _folder_sidecars(folder: Path, logs_dir: Path, cache: dict | None) -> tuple[Path, ...]:
    """The folders whose ``run.yaml`` counts for the logs of ``folder``: ``folder`` and each
    folder above it up to ``logs_dir``, weakest (outermost) first; once per folder when a cache
    is given (its logs share them), from its parent's when that was asked already."""
    key = ("folder_sidecars", folder, logs_dir)
    if cache is not None and key in cache:
        return cache[key]
    if folder == logs_dir or folder == folder.parent or not _below(folder, logs_dir, cache):
        found: tuple[Path, ...] = (folder,)
    else:
        found = (*_folder_sidecars(folder.parent, logs_dir, cache), folder)
    if cache is not None:
        cache[key] = found
    return found


def sidecar_paths(log_path: Path, logs_dir: Path, cache: dict | None = None) -> list[Path]:
    """Existing sidecar files for ``log_path``, weakest first (see module docstring)."""
    log_path, logs_dir = Path(log_path), Path(logs_dir)
    here = log_path.parent
    candidates = [(folder, "run.yaml") for folder in _folder_sidecars(here, logs_dir, cache)]
    candidates += [(here, log_path.stem + ".run.yaml"), (here, log_path.name + ".yaml")]
    found = []
    for folder, name in candidates:
        listing = _entries_in(folder, cache)
        if listing is not None and name not in listing[0] and name not in listing[1]:
            continue  # not in the folder at all: nothing to stat
        path = folder / name
        if (name in listing[0]) if listing is not None else path.is_file():
            found.append(path)
            continue
        if (kind := special_kind(path, directories=True)) is not None:
            # Never opened (a FIFO would block), never skipped: the log's metadata is unknown.
            raise SidecarError("special_file", f"sidecar {path.name} is a {kind}, not a file: "
                                               "the log's metadata cannot be read")
        if path.is_symlink():
            raise SidecarError("bad_link", f"sidecar {path.name} is a symlink to no readable "
                                           "file")
    return found


def _check(key: str, value: Any, where: str) -> Any:
    """One sidecar value (the scalar's text, or None) checked and typed for ``key``."""
    if key in MEASURE_KEYS:
        raise SidecarError("bad_value", f"sidecar {where}: '{key}' is measured, so it comes "
                                        "from the log, not from a sidecar")
    if key not in ALLOWED_KEYS:
        raise SidecarError("bad_value", f"sidecar {where}: unknown key '{key}' (keys are "
                                        "format-v1 column names, see data/raw/logs/README.md)")
    if value is None:
        return None
    try:
        if key in INT_KEYS:
            return parse_count(value, key, 0)
        if key in FLOAT_KEYS:
            return parse_number(value, key, 0.0)
    except NumberError as exc:
        kind = "integer" if key in INT_KEYS else "number"
        raise SidecarError("bad_value", f"sidecar {where}: '{key}' must be a non-negative "
                                        f"{kind}, got {short(value)} ({exc})") from None
    text = str(value).strip().lower()
    if key in BOOL_KEYS:
        # YAML 1.2 core booleans only (no yes/no/on/off): the value is kept as written.
        if text not in ("true", "false"):
            raise SidecarError("bad_value", f"sidecar {where}: '{key}' must be true or false, "
                                            f"got {short(value)}")
        return text == "true"
    if key == "recompute":
        if text not in RECOMPUTE_MODES:
            raise SidecarError("bad_value", f"sidecar {where}: 'recompute' must be one of "
                                            f"{', '.join(RECOMPUTE_MODES)}, got {short(value)}")
        return text
    return value


def _compose(text: str) -> Any:
    """The YAML node tree of one sidecar's text (composed, nothing constructed)."""
    loader = _SidecarLoader(text)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


def _parse(text: str, cache: dict | None) -> Any:
    """The composed YAML of one sidecar; with a cache, each distinct text is composed once (a
    fleet's job folders hold a few distinct sidecars many times over: pure-Python YAML costs
    ~0.5 ms each). The node tree is only read afterwards (``_scalars`` builds new values)."""
    if cache is None:
        return _compose(text)
    key = ("yaml", text)
    if key not in cache:
        cache[key] = _compose(text)
    return cache[key]


def _scalars(node: Any, where: str) -> dict[str, str | None]:
    """The top-level mapping of a composed sidecar as {key: text as written, or None}."""
    if node is None:
        return {}
    if not isinstance(node, yaml.MappingNode):
        kind = {yaml.SequenceNode: "list", yaml.ScalarNode: "str"}.get(type(node), "value")
        raise SidecarError("malformed_row", f"sidecar {where}: must be a mapping of column "
                                            f"names to values, got {kind}")
    duplicate = first_duplicate(node)
    if duplicate is not None:
        raise SidecarError("malformed_row", f"sidecar {where}: {duplicate}")
    values: dict[str, str | None] = {}
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            raise SidecarError("bad_value", f"sidecar {where}: a key must be a column name "
                                            f"(line {key_node.start_mark.line + 1})")
        key = str(key_node.value)
        for tagged in (key_node, value_node):  # nothing is constructed, so say what PyYAML would
            if tagged.tag not in _SidecarLoader.yaml_constructors:
                raise SidecarError("malformed_row", f"sidecar {where}: not valid YAML (could not "
                                                    f"determine a constructor for the tag "
                                                    f"{short(tagged.tag, 200)})")
        if not isinstance(value_node, yaml.ScalarNode):
            if key in MEASURE_KEYS or key not in ALLOWED_KEYS:
                _check(key, None, where)
            raise SidecarError("bad_value", f"sidecar {where}: '{key}' must be a single value "
                                            f"(line {value_node.start_mark.line + 1})")
        plain = value_node.style is None
        values[key] = None if plain and CORE_NULL.match(value_node.value) else value_node.value
    return values


def read_sidecar(path: Path, cache: dict[Path, dict[str, Any]] | None = None) -> dict[str, Any]:
    """One sidecar file as a checked mapping; raises SidecarError naming the file."""
    if cache is not None and path in cache:
        return cache[path]
    try:
        if path.stat().st_size > MAX_SIDECAR_BYTES:
            raise SidecarError("malformed_row", f"sidecar {path}: over {MAX_SIDECAR_BYTES} "
                                                "bytes; a sidecar is a short mapping")
        text = path.read_text(encoding="utf-8")
        if cache is not None and ("checked", text) in cache:
            # The same text checks the same wherever it lies (only errors name the file).
            cache[path] = cache[("checked", text)]
            return cache[path]
        node = _parse(text, cache)
    except (OSError, UnicodeDecodeError) as exc:
        raise SidecarError("unreadable", f"sidecar {path}: {short(exc, 200)}") from exc
    except yaml.YAMLError as exc:
        raise SidecarError("malformed_row", f"sidecar {path}: not valid YAML "
                                            f"({cap(str(exc).splitlines()[0], 200)})") from exc
    except (RecursionError, MemoryError) as exc:
        raise SidecarError("malformed_row", f"sidecar {path}: nested too deeply to read "
                                            f"({type(exc).__name__})") from exc
    checked = {k: _check(k, v, str(path)) for k, v in _scalars(node, str(path)).items()}
    checked = {k: v for k, v in checked.items() if v is not None}
    if cache is not None:
        cache[path] = cache[("checked", text)] = checked
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
