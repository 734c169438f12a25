"""Run rows as the ingest stage holds them between normalization and writing.

A ``RunRow`` holds only its given values (a column it lacks reads as None): a row of all
``RUN_COLUMNS`` (~70, most of them empty) as a plain dict costs ~4.7 kB. The values a row shares
with the other rows of its table (its file, source, model and shape, chip and peak, notes) sit
in one shared ``base`` dict (``compact``), and the row holds the rest (its id, provenance, N,
measures) as a tuple whose names are a layout shared by the rows of the same names
(``_Layout``): 8 bytes a value, where a dict of its own took ~460 bytes for ~15 values.

A RunRow reads as one mapping (its own values over its base's) through every dict method the
stage and its callers use: ``[]``, ``get``, ``in``, iteration, ``items``, ``keys``, ``values``,
``len``, ``==``, ``copy``, ``dict(row)``; a value set on it (``row[name] = value``) is its own.
C code that reads a dict's own table (``json.dumps``) sees an empty dict: give it
``dict(row)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import chain
from operator import attrgetter, itemgetter
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
BASE_COLUMN_SET = frozenset(BASE_COLUMNS)  # the same names, for look-ups


class _Layout:
    """The names of some rows' own values, in order, and each name's place: one object shared
    by every row that holds the same names (most rows of a source), so that a row holds its
    own values as a tuple (8 bytes a value) and not as a dict of its own (~460 bytes for the
    ~15 values of a step log's run)."""

    __slots__ = ("names", "index", "grown")

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self.index = {name: i for i, name in enumerate(names)}
        self.grown: dict[str, _Layout] = {}

    def plus(self, name: str) -> _Layout:
        """The layout of these names and then ``name``."""
        layout = self.grown.get(name)
        if layout is None:
            layout = self.grown[name] = layout_of((*self.names, name))
        return layout


_LAYOUTS: dict[tuple[str, ...], _Layout] = {}


def layout_of(names: tuple[str, ...]) -> _Layout:
    """The one ``_Layout`` of ``names`` (in that order)."""
    layout = _LAYOUTS.get(names)
    if layout is None:
        layout = _LAYOUTS[names] = _Layout(names)
    return layout


class RunRow(dict):
    """A run row: its own values over a shared ``base`` (see the module docstring). The dict
    itself stays empty: the own values are a tuple in the order of a shared ``_Layout``."""

    __slots__ = ("base", "_layout", "_values")

    def __init__(self, values: Any = (), base: dict[str, Any] | None = None) -> None:
        super().__init__()
        own = dict(values)
        self._layout, self._values = layout_of(tuple(own)), tuple(own.values())
        self.base = _EMPTY if base is None else base

    def __getitem__(self, key: str) -> Any:
        i = self._layout.index.get(key)
        return self.base.get(key) if i is None else self._values[i]

    def get(self, key: str, default: Any = None) -> Any:
        i = self._layout.index.get(key)
        return self.base.get(key, default) if i is None else self._values[i]

    def __setitem__(self, key: str, value: Any) -> None:
        i = self._layout.index.get(key)
        if i is None:
            self._layout, self._values = self._layout.plus(key), (*self._values, value)
        else:
            self._values = (*self._values[:i], value, *self._values[i + 1:])

    def _refused(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a RunRow's values are set one at a time (row[name] = value)")

    update = setdefault = pop = popitem = clear = __delitem__ = _refused

    def __contains__(self, key: object) -> bool:
        return key in self._layout.index or key in self.base

    def own(self) -> dict[str, Any]:
        """The row's own values (not its base's)."""
        return dict(self.own_pairs())

    def own_pairs(self) -> Iterator[tuple[str, Any]]:
        """(column, value) of the row's own values (not its base's), in their layout's order."""
        return zip(self._layout.names, self._values)

    def _merged(self) -> dict[str, Any]:
        return self.plain()

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
        return RunRow(self.own(), self.base)

    def __repr__(self) -> str:
        return f"RunRow({self._merged()!r})"

    def __reduce__(self) -> Any:
        return (RunRow, (self._merged(),))

    def plain(self) -> dict[str, Any]:
        """The row as a plain dict (its own values over its base's), built by C loops: for
        reading many columns of it (``map(plain.get, names)``) without a Python call each."""
        out = dict(self.base)
        out.update(zip(self._layout.names, self._values))
        return out

    def pairs(self) -> Iterator[tuple[str, Any]]:
        """(column, value) of the base, then of the row's own values (the later wins)."""
        return chain(self.base.items(), zip(self._layout.names, self._values))


def row_maker(names: tuple[str, ...]) -> Callable[[tuple[Any, ...], dict[str, Any]], RunRow]:
    """A function (values, base) -> the RunRow of own values ``values`` (in the order of
    ``names``) over ``base``: ``RunRow(dict(zip(names, values)), base)`` without the dict, for
    many rows of the same names (the names' layout found once)."""
    layout = layout_of(tuple(names))
    new = dict.__new__

    def make(values: tuple[Any, ...], base: dict[str, Any]) -> RunRow:
        row = new(RunRow)
        row._layout, row._values, row.base = layout, values, base
        return row
    return make


def columns_getter(names: tuple[str, ...]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """A function row -> the tuple of its values of ``names`` (None where it has none), as
    ``tuple(map(row.get, names))``: for a RunRow by one C look-up (``itemgetter``) on its own
    values and its base's, planned once for each (base, layout) it meets (the plans hold
    their bases: keep the function no longer than the rows; a base is never changed once a
    row stands on it)."""
    names = tuple(names)
    plans: dict[tuple[int, int], tuple[dict[str, Any], _Layout, Callable[..., Any]]] = {}

    def get(row: dict[str, Any]) -> tuple[Any, ...]:
        if type(row) is not RunRow:
            return tuple(map(row.get, names))
        base, layout = row.base, row._layout
        plan = plans.get((id(base), id(layout)))
        if plan is None or plan[0] is not base or plan[1] is not layout:
            plan = plans[(id(base), id(layout))] = (base, layout, _plan(names, base, layout))
        return plan[2](row._values)
    return get


def _plan(names: tuple[str, ...], base: dict[str, Any], layout: _Layout
          ) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """values -> the values of ``names`` of a row of ``layout`` over ``base`` (its own value
    first, then its base's)."""
    fixed = tuple(base.get(name) for name in names if name not in layout.index)
    at, j = [], len(layout.names)
    for name in names:
        if name in layout.index:
            at.append(layout.index[name])
        else:
            at.append(j)
            j += 1
    if len(at) < 2:  # itemgetter of one index gives the value, not a tuple
        return lambda values: tuple((values + fixed)[i] for i in at)
    pick = itemgetter(*at)
    return lambda values: pick(values + fixed)


# A RunRow's own values, read by C code over many rows (``map(own_names, rows)``): the names
# (one tuple object shared by every row of the same names: rows group by its identity) and
# the values (a tuple in the names' order).
own_names = attrgetter("_layout.names")
own_values = attrgetter("_values")
base_of = attrgetter("base")


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
    own = {k: v for k, v in row.items() if v is not None and k not in BASE_COLUMN_SET}
    if row.get("source_kind") == "log":
        # a citation that is the path (the usual log's) is that one text, not a copy of it
        own.update((k, path if v == path else v) for k, v in zip(BASE_COLUMNS, values)
                   if k in FILE_COLUMNS and v is not None)
        values = tuple(None if k is None else v for k, v in zip(_LOG_KEY, values))
    key = (values, tuple(map(type, values)))
    base = bases.get(key)
    if base is None:
        base = bases[key] = {k: shared.setdefault(v, v) if isinstance(v, str) else v
                             for k, v in zip(BASE_COLUMNS, values) if v is not None}
    return RunRow(own, base)
