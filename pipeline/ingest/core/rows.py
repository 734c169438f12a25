"""Run rows as the ingest stage holds them between normalization and writing.

A ``RunRow`` holds only its given values (a column it lacks reads as None): a row of all
``RUN_COLUMNS`` (~70, most of them empty) as a plain dict costs ~4.7 kB. The values a row shares
with the other rows of its table (its file, source, model and shape, chip and peak, notes) sit
in one shared ``base`` dict (``compact``), and the row's own dict holds the rest (its id,
provenance, N, measures): a dict of ~28 keys takes a 64-slot table (~830 bytes), one of <= 10
keys a 16-slot table (~360 bytes), which keeps a 10^6-row table's runs under 1 GB.

A RunRow reads as one mapping (its own values over its base's) through every dict method the
stage and its callers use: ``[]``, ``get``, ``in``, iteration, ``items``, ``keys``, ``values``,
``len``, ``==``, ``copy``, ``dict(row)``; a value set on it goes to its own dict.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import Any

_EMPTY: dict[str, Any] = {}
_ABSENT = object()

# Columns whose values the runs of one table (one file) usually share: the ``base`` of a row.
BASE_COLUMNS = ("_path", "source", "source_kind", "citation", "model", "model_id", "status",
                "derived", "notes", "precision", "peak_precision", "strategy",
                "strategy_family", "framework", "cluster", "system", "submitter", "benchmark",
                "mlperf_version", "scaling", "accelerator", "accelerator_family", "params",
                "active_params", "n_layers", "d_model", "seq_len",
                "peak_flops_per_s_per_accelerator", "flops_per_hbm_byte",
                "flops_per_scaleout_byte")
_BASE = frozenset(BASE_COLUMNS)


class RunRow(dict):
    """A run row: its own values over a shared ``base`` (see the module docstring)."""

    __slots__ = ("base",)

    def __init__(self, values: Any = (), base: dict[str, Any] | None = None) -> None:
        super().__init__(values)
        self.base = _EMPTY if base is None else base

    def __missing__(self, key: str) -> Any:
        return self.base.get(key)

    def get(self, key: str, default: Any = None) -> Any:
        value = dict.get(self, key, _ABSENT)
        return self.base.get(key, default) if value is _ABSENT else value

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or key in self.base

    def _merged(self) -> dict[str, Any]:
        return {**self.base, **dict(dict.items(self))} if self.base else dict(dict.items(self))

    def items(self) -> Any:
        return self._merged().items()

    def keys(self) -> Any:
        return self._merged().keys()

    def values(self) -> Any:
        return self._merged().values()

    def __iter__(self) -> Iterator[str]:
        return iter(self._merged())

    def __len__(self) -> int:
        return len(self._merged())

    def __eq__(self, other: object) -> bool:
        return self._merged() == (other._merged() if isinstance(other, RunRow) else other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]  # a mutable mapping, as dict

    def copy(self) -> RunRow:
        return RunRow(dict(dict.items(self)), self.base)

    def __repr__(self) -> str:
        return f"RunRow({self._merged()!r})"

    def __reduce__(self) -> Any:
        return (RunRow, (self._merged(),))

    def plain(self) -> dict[str, Any]:
        """The row as a plain dict (its own values over its base's), built by C loops: for
        reading many columns of it (``map(plain.get, names)``) without a Python call each."""
        out = dict(self.base)
        out.update(dict.items(self))
        return out

    def pairs(self) -> Iterator[tuple[str, Any]]:
        """(column, value) of the base, then of the row's own values (the later wins)."""
        return chain(self.base.items(), dict.items(self))


# Columns that differ from file to file: in a source whose every file is one run (a step log,
# ``source_kind == "log"``) they are the row's own, so the logs of a campaign share one base
# (a base per log, with its key, cost ~1.2 kB a log: most of a 10^6-log ingest's memory).
FILE_COLUMNS = ("_path", "citation")
_LOG_KEY = tuple(None if c in FILE_COLUMNS else c for c in BASE_COLUMNS)


def compact(row: dict[str, Any], path: str, shared: dict[Any, Any],
            bases: dict[tuple[Any, ...], dict[str, Any]]) -> RunRow:
    """``row`` (a normalized run, read from ``path``) as a RunRow: its ``BASE_COLUMNS`` values
    become a base shared with every earlier row of the same values (``bases``), its other given
    values its own; a value of a ``shared`` column equal to one seen before is that earlier
    object (a table holds its model name once). A step log's ``FILE_COLUMNS`` are its own
    values, not its base's. Bases are keyed by (type, value) of each column: 8 and 8.0 are
    equal in Python but not one value of a column."""
    values = (path, *map(row.get, BASE_COLUMNS[1:]))
    own = {k: v for k, v in row.items() if v is not None and k not in _BASE}
    if row.get("source_kind") == "log":
        own.update((k, v) for k, v in zip(BASE_COLUMNS, values)
                   if k in FILE_COLUMNS and v is not None)
        values = tuple(None if k is None else v for k, v in zip(_LOG_KEY, values))
    key = (values, tuple(map(type, values)))
    base = bases.get(key)
    if base is None:
        base = bases[key] = {k: shared.setdefault(v, v) if isinstance(v, str) else v
                             for k, v in zip(BASE_COLUMNS, values) if v is not None}
    return RunRow(own, base)
