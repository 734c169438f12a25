"""Energy to train from MLPerf Training power logs, by the MLCommons rules.

A result ``<benchmark>/result_<id>.txt`` with power measurement has a folder
``<benchmark>/power/result_<id>/`` holding one MLLOG file per node (``node_<k>.txt``) and per
interconnect switch (``sw_<k>.txt``), plain or compressed (``.gz``, ``.zst``). The energy is
what ``mlperf_logging.result_summarizer`` computes (``_compute_total_power``; the tests check
it to 0.1 % on every shipped run):

* per node (``_compute_power_node``): the events sorted by time (ties in file order); every
  ``power_reading`` after a ``power_measurement_start`` and before the first
  ``power_measurement_stop`` adds ``value x (t - t_prev)``, ``t_prev`` being the previous such
  reading or the latest start; the sum over ``stop - start`` is the window's mean power, and
  ``energy = conversion_eff x mean power x time_to_train``. ``stop`` is the last stop logged
  (the last counted reading when none is), ``start`` the last start; ``conversion_eff`` is the
  last one logged (1.0 when none is).
* per switch (``_compute_power_sw``): the file's first ``interconnect_power_est`` (W) times its
  ``conversion_eff`` times the time to train.

Where the MLCommons code has no answer the rule here is stated, and the run gets a note:

* **A window whose stop is not after its start** (the 8-H100 v4.0 SMC files log start, stop,
  start at one instant, then the readings, then stop at that same instant): the reference
  divides 0 by 0. The readings clearly span the run, so the window is taken to be the run's own
  ``[run_start, run_stop]``: the same sum over the readings inside it, over ``run_stop -
  run_start``, times the time to train. It is the reference formula with the markers moved to
  the run's bounds (the test computes it so with ``mlperf_logging``).
* **A reading <= 0 W** (or not a number) is a meter dropout, not a measurement (a running node
  never draws 0 W; four 512-H100 DC runs of v4.0 SMC have one or two on one node): it is dropped
  and the next reading covers its interval; a note counts them. The reference counts them as
  0 W; on the shipped runs the two differ by under 0.1 %.
* A measurement is **not used** (the run keeps its time to train, its energy columns stay empty,
  its notes and ``power.parquet`` say why) when: node files are fewer than the system's nodes;
  a node file has no start, or no reading in its window; the window leaves a gap of over
  ``MAX_GAP_S`` without a reading (dropouts included); the window covers less than
  ``MIN_COVERAGE`` of the run.

Parsing: the files are small MLLOG logs dominated by ``power_reading`` lines. One compiled
pattern pulls (time, value) from every reading line written in the MLLOG logger's layout, in
C; the few control lines (start, stop, efficiency, interconnect) are json-decoded. A file with
reading lines in any other layout is decoded line by line (``mllog``), with the same result.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.ingest.sources.common import (READ_ERRORS, logical_name, logical_stem,
                                            logical_suffix, looks_binary, open_binary, read_error)
from pipeline.ingest.sources.links import candidates, entry_problem
from pipeline.ingest.sources.mlperf import mllog

MAX_GAP_S = 60.0          # longest stretch of a window without a reading
MIN_COVERAGE = 0.95       # share of the run [run_start, run_stop] the window must cover
CONTROL_KEYS = ("power_measurement_start", "power_measurement_stop", "conversion_eff",
                "interconnect_power_est")
POWER_KEYS = frozenset(CONTROL_KEYS + ("power_reading",))
_READING = b'"power_reading"'
# A reading line as the MLLOG logger writes it (with or without spaces after separators). The
# quantifiers are possessive (``*+``, ``?+``): each class excludes the character that follows
# it, so giving back never matches more, and the engine does not try.
_READING_RE = re.compile(
    rb':::MLLOG \{"namespace": ?+"[^"\n]*+", ?+"time_ms": ?+(-?[0-9][0-9.eE+-]*+), ?+'
    rb'"event_type": ?+"POINT_IN_TIME", ?+"key": ?+"power_reading", ?+"value": ?+'
    rb'(-?[0-9][0-9.eE+-]*+), ?+"metadata"')
_CONTROL_NAMES = tuple(b'"' + k.encode() + b'"' for k in CONTROL_KEYS)
_KIND = {"power_reading": 0, "power_measurement_start": 1, "power_measurement_stop": 2,
         "conversion_eff": 3, "interconnect_power_est": 4}


@dataclass
class PowerFile:
    """The events of one node or switch power log, as arrays in file order."""

    path: str
    t_ms: np.ndarray = field(default_factory=lambda: np.empty(0))
    kind: np.ndarray = field(default_factory=lambda: np.empty(0, np.int8))
    value: np.ndarray = field(default_factory=lambda: np.empty(0))
    measurement_type: str | None = None   # "AC" / "DC" when the log says so
    n_bytes: int = 0
    n_bad: int = 0                        # power lines that did not decode as events
    is_binary: bool = False

    def of(self, kind: str) -> np.ndarray:
        return self.t_ms[self.kind == _KIND[kind]]


def _number(value: Any) -> float:
    if isinstance(value, dict):  # some loggers nest {"value": x}
        value = value.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return float("nan")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


def parse_power_bytes(data: bytes, path: str = "") -> PowerFile:
    """Events of one power log held in memory (see the module docstring)."""
    out = PowerFile(path=path, n_bytes=len(data))
    if looks_binary(data[:1 << 16]):
        out.is_binary = True
        return out
    pairs = _READING_RE.findall(data)
    n_readings = data.count(_READING)
    controls: list[tuple[float, int, float, float]] = []  # (t, kind, value, readings before)
    if len(pairs) == n_readings:
        t_r = np.array([p[0] for p in pairs], dtype=np.float64) if pairs else np.empty(0)
        v_r = np.array([p[1] for p in pairs], dtype=np.float64) if pairs else np.empty(0)
        for start, end, key in _control_keys(data):
            ls = data.rfind(b"\n", 0, start) + 1
            le = data.find(b"\n", end)
            line = data[ls:le if le >= 0 else len(data)]
            tok = line.rfind(mllog.TOKEN)
            ev = None if tok < 0 else mllog._decode_event(  # noqa: SLF001 - same decoder
                line[tok + len(mllog.TOKEN):].split(b"\r", 1)[0].strip(), 0)
            if ev is None or ev.key != key:
                out.n_bad += 1
                continue
            _control(out, ev, controls, data.count(_READING, 0, ls))
    else:  # reading lines in another layout: decode every power event line
        log = mllog.parse_bytes(data, keys=POWER_KEYS)
        out.n_bad = log.n_bad
        t_list, v_list = [], []
        for ev in log.events:
            if ev.key == "power_reading":
                t_list.append(ev.time_ms)
                v_list.append(_number(ev.value))
            else:
                _control(out, ev, controls, len(t_list))
        t_r, v_r = np.array(t_list, np.float64), np.array(v_list, np.float64)
    n = len(t_r)
    order = np.concatenate([np.arange(n, dtype=np.float64),
                            np.array([c[3] - 0.5 for c in controls], np.float64)])
    t_all = np.concatenate([t_r, np.array([c[0] for c in controls], np.float64)])
    kind = np.concatenate([np.zeros(n, np.int8), np.array([c[1] for c in controls], np.int8)])
    value = np.concatenate([v_r, np.array([c[2] for c in controls], np.float64)])
    idx = np.argsort(order, kind="stable")  # file order
    out.t_ms, out.kind, out.value = t_all[idx], kind[idx], value[idx]
    return out


def _control_keys(data: bytes) -> list[tuple[int, int, str]]:
    """(start, end, key) of every ``"key": "<control key>"`` in file order: each key's name
    found with ``bytes.find`` (in C, faster than one alternation over the file) and kept where
    ``"key":`` (with or without a space) stands before it."""
    found = []
    for name, key in zip(_CONTROL_NAMES, CONTROL_KEYS):
        i = data.find(name)
        while i >= 0:
            j = i - 1 if data[i - 1:i] == b" " else i
            if j >= 6 and data[j - 6:j] == b'"key":':
                found.append((j - 6, i + len(name), key))
            i = data.find(name, i + 1)
    return sorted(found)


def _control(out: PowerFile, ev: mllog.Event, controls: list, before: int) -> None:
    kind = _KIND[ev.key]
    controls.append((ev.time_ms, kind, _number(ev.value), float(before)))
    if kind == 3 and isinstance(ev.metadata, dict):
        mtype = ev.metadata.get("measurement_type")
        if isinstance(mtype, str) and mtype.upper() in ("AC", "DC"):
            out.measurement_type = mtype.upper()


def parse_power_file(path: str | Path) -> PowerFile:
    """Parse one power log, plain or compressed; raises one of ``common.READ_ERRORS``."""
    with open_binary(path) as fh:
        return parse_power_bytes(fh.read(), str(path))


# --- the MLCommons computation ----------------------------------------------------------------

@dataclass
class NodeEnergy:
    energy_j: float | None
    mean_power_w: float | None
    window_ms: tuple[float, float] | None
    problems: list[str] = field(default_factory=list)   # "<code>: <detail>": not usable
    notes: list[str] = field(default_factory=list)


def _sorted(pf: PowerFile) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Events sorted by time, ties in file order (the reference's stable ``sort``)."""
    idx = np.argsort(pf.t_ms, kind="stable")
    return pf.t_ms[idx], pf.kind[idx], pf.value[idx]


def reference_sum(t: np.ndarray, kind: np.ndarray, value: np.ndarray
                  ) -> tuple[float, float | None, float | None, float, int]:
    """``_compute_power_node``'s loop on time-sorted events: (sum of W x ms, start, stop,
    conversion efficiency, readings counted). ``start`` None: no start; ``stop`` as the
    reference takes it (the last counted reading when no stop is logged)."""
    starts = np.flatnonzero(kind == 1)
    if not len(starts):
        return 0.0, None, None, 1.0, 0
    stops = np.flatnonzero(kind == 2)
    first_stop = stops[0] if len(stops) else len(t)
    pos = np.arange(len(t))
    counted = (kind == 0) & (pos > starts[0]) & (pos < first_stop)
    last_start_t = np.maximum.accumulate(np.where(kind == 1, t, -np.inf))
    prev_read_t = np.maximum.accumulate(np.where(counted, t, -np.inf))
    prev_read_t = np.concatenate([[-np.inf], prev_read_t[:-1]])
    prev = np.maximum(last_start_t, prev_read_t)[counted]
    agg = float(np.sum(value[counted] * (t[counted] - prev)))
    effs = value[kind == 3]
    eff = float(effs[-1]) if len(effs) else 1.0
    start = float(t[starts[-1]])
    if len(stops):
        stop = float(t[stops[-1]])
    else:
        stop = float(t[counted].max()) if counted.any() else 0.0
    return agg, start, stop, eff, int(counted.sum())


def node_energy(pf: PowerFile, run_start_ms: float, run_stop_ms: float) -> NodeEnergy:
    """Energy of one node over the run (J), with the checks of the module docstring."""
    ttt_ms = run_stop_ms - run_start_ms
    name = logical_name(pf.path)
    if pf.is_binary:
        return NodeEnergy(None, None, None, [f"binary_file: {name} is not text"])
    t, kind, value = _sorted(pf)
    out = NodeEnergy(None, None, None)
    dropout = (kind == 0) & ~(np.isfinite(value) & (value > 0))
    if dropout.any():
        # A node that runs does not draw 0 W: such a reading is a meter dropout, not a value.
        # Dropped, the next reading covers its interval (the gap check below bounds that).
        out.notes.append(f"{name}: {int(dropout.sum())} power reading(s) <= 0 W or not a "
                         "number dropped as meter dropouts")
        t, kind, value = t[~dropout], kind[~dropout], value[~dropout]
    agg, start, stop, eff, n = reference_sum(t, kind, value)
    if start is None:
        out.problems.append(f"missing_required: {name} has no power_measurement_start")
        return out
    if not stop > start:
        # The reference divides by zero here; the run's own window is the one measured.
        out.notes.append(f"{name}: power window stop ({stop:.0f} ms) not after start "
                         f"({start:.0f} ms): energy over the run's [run_start, run_stop]")
        window = (run_start_ms, run_stop_ms)
        inside = (kind == 0) & (t >= window[0]) & (t <= window[1])
        wt, wv = t[inside], value[inside]
        prev = np.concatenate([[window[0]], wt[:-1]])
        agg, start, stop, n = float(np.sum(wv * (wt - prev))), window[0], window[1], len(wt)
        readings_t = wt
    else:
        readings_t = t[(kind == 0) & (t >= start) & (t <= stop)]
    if n == 0 or not len(readings_t):
        out.problems.append(f"no_measure: {name} has no power_reading in its window")
        return out
    edges = np.concatenate([[start], readings_t, [stop]])
    gap_s = float(np.max(np.diff(edges))) / 1000.0
    if gap_s > MAX_GAP_S:
        at = int(np.argmax(np.diff(edges)))
        out.problems.append(f"out_of_range: {name}: {gap_s:.0f} s without a power reading "
                            f"(limit {MAX_GAP_S:.0f} s) after {edges[at]:.0f} ms")
    overlap = min(stop, run_stop_ms) - max(start, run_start_ms)
    coverage = max(overlap, 0.0) / ttt_ms if ttt_ms > 0 else 0.0
    if coverage < MIN_COVERAGE:
        out.problems.append(f"out_of_range: {name}: power window [{start:.0f}, {stop:.0f}] ms "
                            f"covers {coverage:.0%} of the run (< {MIN_COVERAGE:.0%})")
    if not (np.isfinite(eff) and 0 < eff <= 1.5):
        out.problems.append(f"bad_value: {name}: conversion_eff {eff!r}")
    mean_w = agg / (stop - start)
    out.mean_power_w = eff * mean_w
    out.energy_j = eff * mean_w * ttt_ms / 1000.0
    out.window_ms = (start, stop)
    return out


def switch_energy(pf: PowerFile, ttt_ms: float) -> tuple[float | None, str | None]:
    """``_compute_power_sw``: (J, problem). The first estimate counts, as in the reference."""
    name = logical_name(pf.path)
    est = pf.value[pf.kind == 4]
    if not len(est):
        return 0.0, None  # the reference adds 0: a note, not a reason to drop the run
    # the reference reads the file in order and stops at the first estimate
    idx_est = np.flatnonzero(pf.kind == 4)[0]
    idx_eff = np.flatnonzero(pf.kind == 3)
    eff = float(pf.value[idx_eff[idx_eff < idx_est][-1]]) if (idx_eff < idx_est).any() else 1.0
    w = float(est[0])
    if not (np.isfinite(w) and w > 0):
        return None, f"out_of_range: {name}: interconnect_power_est {w!r} W"
    return eff * w * ttt_ms / 1000.0, None


# --- one result's measurement -----------------------------------------------------------------

@dataclass
class Measurement:
    """The power measurement of one result; ``problems`` empty when it is used."""

    folder: str
    measurement: str | None
    n_node_files: int = 0
    n_switch_files: int = 0
    energy_j_nodes: float | None = None
    energy_j_interconnect: float | None = None
    power_w_nodes: float | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    n_bytes: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems and self.energy_j_nodes is not None

    @property
    def energy_j(self) -> float | None:
        if not self.ok:
            return None
        return self.energy_j_nodes + (self.energy_j_interconnect or 0.0)


def _files(folder: Path, prefix: str) -> list[Path]:
    def index(p: Path) -> int:
        tail = logical_stem(p)[len(prefix):]
        return int(tail) if tail.isdigit() else 1 << 30
    # links too (a dangling one included): ``_parsed`` reads or refuses each
    return sorted((p for p in candidates(list(folder.iterdir())) if logical_suffix(p) == ".txt"
                   and logical_stem(p).startswith(prefix)), key=lambda p: (index(p), p.name))


def measurement_type_from_names(*names: str) -> str | None:
    """AC / DC from a submitter or system name (``smc-ac-power``, ``SMC-H100-DC-Power``)."""
    for name in names:
        m = re.search(r"(?:^|[-_])(ac|dc)(?:[-_]|$)", name.lower())
        if m:
            return m.group(1).upper()
    return None


def _parsed(paths: list[Path], out: Measurement, root: Path | None) -> Iterator[PowerFile]:
    """Each readable power log of ``paths``, parsed; an unreadable one, or a symlink that
    dangles, loops or leaves ``root``, is a problem of ``out`` (the measurement is then not
    used), and the bytes read are counted on ``out``."""
    for path in paths:
        problem = entry_problem(path, root) if root is not None else None
        if problem is not None:
            out.problems.append(": ".join(problem))
            continue
        try:
            pf = parse_power_file(path)
        except READ_ERRORS as exc:
            out.problems.append(f"unreadable: {logical_name(path)}: {read_error(exc)}")
            continue
        out.n_bytes += pf.n_bytes
        yield pf


def measure(folder: Path, run_start_ms: float, run_stop_ms: float, n_nodes: int | None,
            names: tuple[str, ...] = (), root: Path | None = None) -> Measurement:
    """The power measurement in ``folder`` (``power/result_<id>``) of a run; power logs that are
    symlinks must stay inside ``root`` (the MLPerf root read) when it is given."""
    ttt_ms = run_stop_ms - run_start_ms
    out = Measurement(folder=str(folder), measurement=None)
    try:
        nodes, switches = _files(folder, "node_"), _files(folder, "sw_")
    except OSError as exc:
        out.problems.append(f"unreadable: {folder}: {read_error(exc)}")
        return out
    out.n_node_files, out.n_switch_files = len(nodes), len(switches)
    if not nodes:
        out.problems.append("missing_file: no node_*.txt power log")
        return out
    if n_nodes is not None and len(nodes) < n_nodes:
        out.problems.append(f"missing_file: {len(nodes)} node power log(s) for the system's "
                            f"{n_nodes} nodes")
    types: set[str] = set()
    e_nodes, p_nodes = 0.0, 0.0
    for pf in _parsed(nodes, out, root):
        if pf.measurement_type:
            types.add(pf.measurement_type)
        ne = node_energy(pf, run_start_ms, run_stop_ms)
        out.problems += ne.problems
        out.notes += ne.notes
        if ne.energy_j is not None:
            e_nodes += ne.energy_j
            p_nodes += ne.mean_power_w or 0.0
    e_sw = 0.0
    for pf in _parsed(switches, out, root):
        e, problem = switch_energy(pf, ttt_ms)
        if problem:
            out.problems.append(problem)
        e_sw += e or 0.0
    if len(types) > 1:
        out.problems.append(f"conflict: node logs say {sorted(types)} measurement")
    named = measurement_type_from_names(*names)
    out.measurement = next(iter(types)) if len(types) == 1 else named
    if named and types and named not in types:
        out.notes.append(f"logs say {sorted(types)} measurement, the submission name {named}")
    if len(out.notes) > 3:  # the same note for every node: keep it short
        out.notes = out.notes[:1] + [f"(same for {len(out.notes) - 1} more node(s))"]
    out.energy_j_nodes = e_nodes
    out.energy_j_interconnect = e_sw if switches else None  # not estimated: not 0
    out.power_w_nodes = p_nodes
    if not switches:
        out.notes.append("no interconnect (sw_*.txt) power estimate")
    return out


# --- the run's energy columns -----------------------------------------------------------------

def energy_fields(m: Measurement, n_accelerators: int, ttt_s: float, tokens: float | None
                  ) -> tuple[dict[str, Any], list[str]]:
    """Run columns from a measurement (empty when it is not used) and the run's notes.

    ``power_w_per_accelerator`` = node energy / time to train / accelerators (the nodes' mean
    power, hosts included, per chip); ``energy_j_per_token`` = ``energy_j`` / ``tokens``.
    """
    label = m.measurement or "unknown"
    if not m.ok:
        return {}, [f"power ({label}) not used: " + "; ".join(m.problems[:3])]
    fields: dict[str, Any] = {
        "energy_j": m.energy_j, "energy_j_nodes": m.energy_j_nodes,
        "energy_j_interconnect": m.energy_j_interconnect, "power_measurement": m.measurement,
        "power_w_per_accelerator": m.energy_j_nodes / ttt_s / n_accelerators,
    }
    if tokens:
        fields["energy_j_per_token"] = m.energy_j / tokens
    notes = [f"energy: MLPerf power logs ({label}, {m.n_node_files} node(s), "
             f"{m.n_switch_files} switch estimate(s))"] + m.notes
    return fields, notes


def measurement_row(m: Measurement, fields: dict[str, Any], ttt_s: float,
                    tokens: float | None) -> dict[str, Any]:
    """One row of ``power.parquet`` (the run's identity is added by the ingest stage)."""
    return {"power_folder": m.folder, "power_measurement": m.measurement,
            "status": "ok" if m.ok else "; ".join(m.problems),
            "n_node_files": m.n_node_files, "n_switch_files": m.n_switch_files,
            "time_to_train_s": ttt_s, "tokens": tokens,
            "energy_j": fields.get("energy_j"), "energy_j_nodes": fields.get("energy_j_nodes"),
            "energy_j_interconnect": fields.get("energy_j_interconnect"),
            "power_w_per_accelerator": fields.get("power_w_per_accelerator"),
            "energy_j_per_token": fields.get("energy_j_per_token"),
            "notes": "; ".join(m.notes), "bytes": m.n_bytes}
