"""Energy from MLPerf power logs against MLCommons' own computation (``mlperf_logging``'s result
summarizer: ``_compute_power_node``, ``_compute_power_sw``), on every shipped power run and on
fuzzed logs; and the rules where that code has no answer (pipeline/ingest/sources/mlperf/power.py).
"""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mlperf_logging.compliance_checker.mlp_parser.ruleset_400 import parse_generator
from mlperf_logging.result_summarizer.result_summarizer import (_compute_power_node,
                                                                 _compute_power_sw)

from pipeline.ingest.sources.mlperf import mllog, power

ROOT = Path(__file__).resolve().parents[1] / "data" / "raw" / "mlperf"
RESULTS = sorted(ROOT.glob("v*/*/results/*/*/result_*.txt.gz"))


def _loglines(path: Path) -> list:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="latin-1") as fh:
        lines, failed = parse_generator(fh)
    assert not failed
    return lines


def _run_window(result: Path) -> tuple[float, float]:
    log = mllog.parse_file(result)
    return log.first("run_start").time_ms, log.first("run_stop").time_ms


def _reference(folder: Path, start: float, stop: float, fix_window: bool = False) -> float:
    """``_compute_total_power`` on gzipped files; ``fix_window`` moves a degenerate window's
    markers to the run's bounds (the rule power.py follows where the reference divides by 0)."""
    total = 0.0
    for node in sorted(folder.glob("node_*")):
        lines = _loglines(node)
        if fix_window:
            for ll in lines:
                if ll.key == "power_measurement_start":
                    ll.timestamp = start
                elif ll.key == "power_measurement_stop":
                    ll.timestamp = stop
        total += _compute_power_node(lines, stop - start)
    for sw in sorted(folder.glob("sw_*")):
        total += _compute_power_sw(_loglines(sw), stop - start)
    return total


def test_the_shipped_power_runs_are_all_there() -> None:
    assert len(RESULTS) == 2 * (10 + 10 + 10 + 3) + 10
    assert all((r.parent / "power" / r.name[:-7]).is_dir() for r in RESULTS)


# slow: MLCommons' own code re-parses every node log of all 76 results (about 25 s).
@pytest.mark.slow
@pytest.mark.parametrize("result", RESULTS, ids=lambda p: "/".join(p.parts[-5:]))
def test_energy_equals_mlcommons_within_0_1_percent(result: Path) -> None:
    start, stop = _run_window(result)
    folder = result.parent / "power" / result.name[: -len(".txt.gz")]
    m = power.measure(folder, start, stop, None, (result.parts[-5],))
    assert m.ok, m.problems
    degenerate = any("not after start" in n for n in m.notes)
    if degenerate:
        # The 8-H100 v4.0 SMC files: start == stop; the reference divides by zero.
        with pytest.raises(ZeroDivisionError):
            _reference(folder, start, stop)
        ref = _reference(folder, start, stop, fix_window=True)
    else:
        ref = _reference(folder, start, stop)
    assert m.energy_j == pytest.approx(ref, rel=1e-3)
    if not any("dropped" in n for n in m.notes):
        assert m.energy_j == pytest.approx(ref, rel=1e-9)  # same arithmetic, not just close


def test_golden_energies() -> None:
    """Three runs, one per kind of file, to 6 digits (the MLCommons figures above)."""
    cases = {
        # 8 H100, degenerate window: over [run_start, run_stop]
        "v4.0/smc-ac-power/results/1xSMC-H100-SXM-80GB/llama2_70b_lora/"
        "result_4951-240509201759121728742_1": 12114344.788,
        # 512 H100 with a switch estimate
        "v4.0/smc-ac-power/results/64xSMC-H100-SXM-80GB/gpt3/"
        "result_5848-240517221859825376616_2": 1699128223.357,
        # 8 B200, conversion efficiency 0.94 logged, AC
        "v5.0/Lenovo/results/SR780aV3-8xB200_SXM_180GB/llama2_70b_lora/result_0": 5901931.397,
    }
    for rel, energy_j in cases.items():
        result = ROOT / (rel + ".txt.gz")
        bench = result.parent
        folder = bench / "power" / result.name[: -len(".txt.gz")]
        m = power.measure(folder, *_run_window(result), None, (result.parts[-5],))
        assert m.energy_j == pytest.approx(energy_j, rel=1e-6), rel
    assert m.measurement == "AC" and m.energy_j_interconnect is None


def test_dropouts_are_dropped_not_counted_as_0_w() -> None:
    folders = sorted(ROOT.glob("v4.0/smc-dc-power/results/64xSMC-H100-SXM-80GB/"
                               "llama2_70b_lora/power/result_*"))
    dropped = 0
    for folder in folders:
        result = folder.parent.parent / (folder.name + ".txt.gz")
        start, stop = _run_window(result)
        m = power.measure(folder, start, stop, 64, ("smc-dc-power",))
        if not any("dropped" in n for n in m.notes):
            continue
        dropped += 1
        # = the reference on the same logs less the 0 W readings
        total = 0.0
        for node in sorted(folder.glob("node_*")):
            lines = [ll for ll in _loglines(node)
                     if not (ll.key == "power_reading" and ll.value["value"] <= 0)]
            total += _compute_power_node(lines, stop - start)
        for sw in sorted(folder.glob("sw_*")):
            total += _compute_power_sw(_loglines(sw), stop - start)
        assert m.energy_j == pytest.approx(total, rel=1e-9)
        assert m.energy_j > _reference(folder, start, stop)  # 0 W counted lowers it
    assert dropped == 4


# --- bad power data: a note or "not used" with the reason, never a crash ---------------------

T0 = 1_700_000_000_000


def _line(t: float, key: str, value, metadata="", spaces: bool = True) -> str:
    sep = (", ", ": ") if spaces else (",", ":")
    body = json.dumps({"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME", "key": key,
                       "value": value, "metadata": metadata}, separators=sep)
    return ":::MLLOG " + body + "\n"


def _node(readings: list[tuple[float, float]], start=T0, stop=None) -> str:
    text = _line(start, "power_measurement_start", None)
    text += "".join(_line(t, "power_reading", v) for t, v in readings)
    if stop is not None:
        text += _line(stop, "power_measurement_stop", None)
    return text


def _write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        if name.endswith(".gz"):
            (folder / name).write_bytes(gzip.compress(text.encode(), mtime=0))
        else:
            (folder / name).write_text(text)
    return folder


STEADY = [(T0 + 2000 * i, 1000.0) for i in range(1, 51)]  # 100 s at 1 kW


def test_clean_synthetic_node_and_switch(tmp_path: Path) -> None:
    folder = _write(tmp_path / "r", {
        "node_0.txt.gz": _node(STEADY, stop=T0 + 100_000),
        "node_1.txt": _node(STEADY, stop=T0 + 100_000),
        "sw_0.txt": _line(T0, "interconnect_power_est", 200, {"switch_id": "sw_01"}),
    })
    m = power.measure(folder, T0, T0 + 100_000, 2, ("x-dc-power",))
    assert m.ok and m.measurement == "DC"
    assert m.energy_j_nodes == pytest.approx(2 * 1000 * 100)
    assert m.energy_j_interconnect == pytest.approx(200 * 100)
    fields, _ = power.energy_fields(m, n_accelerators=16, ttt_s=100.0, tokens=1e6)
    assert fields["power_w_per_accelerator"] == pytest.approx(2000 / 16)
    assert fields["energy_j_per_token"] == pytest.approx(220_000 / 1e6)


@pytest.mark.parametrize("files,n_nodes,window,reason", [
    ({"node_0.txt": _node(STEADY, stop=T0 + 100_000)}, 2, (T0, T0 + 100_000),
     "missing_file: 1 node power log(s) for the system's 2 nodes"),
    ({"node_0.txt": _node(STEADY[:10] + STEADY[-5:], stop=T0 + 100_000)}, 1,
     (T0, T0 + 100_000), "s without a power reading (limit 60 s)"),
    ({"node_0.txt": _node(STEADY[:25], stop=T0 + 50_000)}, 1, (T0, T0 + 100_000),
     "covers 50% of the run"),
    ({"node_0.txt": "".join(_line(t, "power_reading", v) for t, v in STEADY)}, 1,
     (T0, T0 + 100_000), "missing_required: node_0.txt has no power_measurement_start"),
    ({"node_0.txt": _node([], stop=T0 + 100_000)}, 1, (T0, T0 + 100_000),
     "no_measure: node_0.txt has no power_reading"),
    ({"node_0.txt.gz": "x"}, 1, (T0, T0 + 100_000), "unreadable: node_0.txt"),
    ({"sw_0.txt": "x"}, 1, (T0, T0 + 100_000), "missing_file: no node_*.txt"),
])
def test_bad_power_data_is_not_used_and_says_why(tmp_path, files, n_nodes, window,
                                                 reason) -> None:
    folder = tmp_path / "r"
    folder.mkdir()
    for name, text in files.items():
        data = text.encode()
        if name.endswith(".gz") and text != "x":
            data = gzip.compress(data)
        (folder / name).write_bytes(data)
    m = power.measure(folder, *window, n_nodes, ())
    assert not m.ok and m.energy_j is None
    assert any(reason in p for p in m.problems), m.problems
    fields, notes = power.energy_fields(m, 8, 100.0, None)
    assert fields == {} and notes[0].startswith("power (unknown) not used: ")


def test_binary_node_file_is_not_used(tmp_path: Path) -> None:
    folder = _write(tmp_path / "r", {})
    (folder / "node_0.txt").write_bytes(bytes(range(256)) * 100)
    m = power.measure(folder, T0, T0 + 1000, 1, ())
    assert m.problems == ["binary_file: node_0.txt is not text"]


def test_measurement_type_from_logs_and_names() -> None:
    assert power.measurement_type_from_names("smc-ac-power") == "AC"
    assert power.measurement_type_from_names("SMC-H100-DC-Power") == "DC"
    assert power.measurement_type_from_names("Lenovo", "SR780aV3-8xB200") is None
    pf = power.parse_power_bytes(_line(T0, "conversion_eff", 0.9,
                                       {"measurement_type": "dc"}).encode())
    assert pf.measurement_type == "DC"


# --- fuzz: the parser and the arithmetic against mlperf_logging -----------------------------

_event = st.one_of(
    st.tuples(st.just("power_reading"), st.integers(0, 500),
              st.one_of(st.integers(1, 20000), st.floats(0.5, 2e4, allow_nan=False))),
    st.tuples(st.sampled_from(["power_measurement_start", "power_measurement_stop"]),
              st.integers(0, 500), st.none()),
    st.tuples(st.just("conversion_eff"), st.integers(0, 500), st.floats(0.5, 1.0)),
    st.tuples(st.just("noise"), st.integers(0, 500), st.none()),
)


@settings(max_examples=300, deadline=None)
@given(events=st.lists(_event, min_size=1, max_size=60), spaces=st.booleans(),
       prefix=st.sampled_from(["", "0: ", "[1,0]<stdout>: "]), ttt_ms=st.integers(1, 10**7))
def test_fuzz_node_energy_equals_mlperf_logging(events, spaces, prefix, ttt_ms) -> None:
    text = ""
    for key, dt, value in events:
        if key == "noise":
            text += "some framework output, power_reading mentioned\n"
            continue
        text += prefix + _line(T0 + dt * 1000, key, value, spaces=spaces)
    ref_lines, failed = parse_generator(text.splitlines(keepends=True))
    assert not failed
    pf = power.parse_power_bytes(text.encode())
    agg, start, stop, eff, _ = power.reference_sum(*power._sorted(pf))
    has_start = any(k == "power_measurement_start" for k, _, _ in events)
    if not has_start:
        with pytest.raises(ValueError):
            _compute_power_node(copy.deepcopy(ref_lines), ttt_ms)
        assert start is None
        return
    if stop == start:
        with pytest.raises(ZeroDivisionError):
            _compute_power_node(copy.deepcopy(ref_lines), ttt_ms)
        return
    ref = _compute_power_node(copy.deepcopy(ref_lines), ttt_ms)
    ours = eff * agg * ttt_ms / (stop - start) / 1000
    assert ours == pytest.approx(ref, rel=1e-9, abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=3000), st.booleans())
def test_fuzz_garbage_never_crashes(data: bytes, with_event: bool) -> None:
    if with_event:
        data = _node(STEADY[:3], stop=T0 + 6000).encode() + data
    pf = power.parse_power_bytes(data)
    ne = power.node_energy(pf, T0, T0 + 6000)
    assert ne.energy_j is None or np.isfinite(ne.energy_j)


def test_power_logs_that_are_bad_links_void_the_measurement(tmp_path: Path) -> None:
    """A node log symlinked inside the root is read; one that dangles or leaves the root is a
    ``bad_link`` problem and the measurement is not used (issue 13)."""
    import shutil

    folder = sorted(ROOT.glob("v4.0/smc-ac-power/results/8xSMC-H100-SXM-80GB/"
                              "llama2_70b_lora/power/result_*"))[0]
    result = folder.parent.parent / (folder.name + ".txt.gz")
    start, stop = _run_window(result)
    root = tmp_path / "root"
    copy_dir = root / "power" / folder.name
    shutil.copytree(folder, copy_dir)
    node = sorted(copy_dir.glob("node_*"))[0]
    plain = power.measure(copy_dir, start, stop, 1, ("smc-ac-power",), root=root)
    assert plain.ok
    kept = root / "kept" / node.name
    kept.parent.mkdir()
    node.rename(kept)
    node.symlink_to(kept)  # inside the root: read as before
    linked = power.measure(copy_dir, start, stop, 1, ("smc-ac-power",), root=root)
    assert linked.ok and linked.energy_j == plain.energy_j
    kept.rename(tmp_path / node.name)  # the link now dangles
    m = power.measure(copy_dir, start, stop, 1, ("smc-ac-power",), root=root)
    assert not m.ok
    assert f"bad_link: dangling symlink {node.name} -> {kept}" in m.problems
    node.unlink()
    node.symlink_to(tmp_path / node.name)  # outside the root
    m = power.measure(copy_dir, start, stop, 1, ("smc-ac-power",), root=root)
    assert not m.ok and any("points outside the data folder root/" in p for p in m.problems)


def test_power_logs_read_by_worker_processes_give_the_same_records(tmp_path: Path,
                                                                   monkeypatch) -> None:
    """``read_tree(workers=2)`` reads the power folders over a process pool: the records
    (fields, energy, notes, power rows) are those of one process, in the same order. Two
    systems of the shipped AC round (20 results, each with its power logs)."""
    import shutil

    from pipeline.ingest.sources.mlperf.tree import read_tree

    monkeypatch.delenv("SCALEWALL_WORKERS", raising=False)  # the pool, even under xdist
    sub = ROOT / "v4.0" / "smc-ac-power"
    dst = tmp_path / "v4.0" / "smc-ac-power"
    shutil.copytree(sub / "systems", dst / "systems")
    for system in ("1xSMC-H100-SXM-80GB", "8xSMC-H100-SXM-80GB"):
        shutil.copytree(sub / "results" / system, dst / "results" / system)
    one, two = (list(read_tree(tmp_path, workers=w)) for w in (1, 2))
    assert [(r.path, r.fields, r.reason, r.meta) for r in two] == [
        (r.path, r.fields, r.reason, r.meta) for r in one]
    powered = [r for r in one if r.meta.get("power")]
    assert len(powered) == 20 and all(r.fields["energy_j"] > 0 for r in powered)


_PIECES = st.sampled_from([b'"key": ', b'"key":', b'"key":  ', b" ", b"\n", b'"', b"x",
                           b"y_key\":", *(b'"' + k.encode() + b'"' for k in power.CONTROL_KEYS)])


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=40))
def test_control_keys_are_found_where_key_stands_before_them(pieces) -> None:
    # the pattern the finder stands for: "key": ?"<control key>" (one space at most)
    import re
    pattern = re.compile(rb'"key": ?"(' + b"|".join(k.encode() for k in power.CONTROL_KEYS)
                         + rb')"')
    data = b"".join(pieces)
    expected = [(m.start(), m.end(), m.group(1).decode()) for m in pattern.finditer(data)]
    assert power._control_keys(data) == expected  # noqa: SLF001
