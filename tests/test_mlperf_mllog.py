"""The ``:::MLLOG`` line parser: prefixes, noise, corrupt and interleaved lines, latin-1,
truncation, binary input; agreement with the reference parser; hypothesis fuzzing."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.ingest.sources.mlperf import mllog
from pipeline.ingest.sources.mlperf.tree import read_tree
from pipeline.ingest.records import REJECT_CODES

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "mlperf" / "rounds"
T0 = 1_700_000_000_000


def ev(t: float, key: str, value=None, **meta) -> str:
    return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME",
                                     "key": key, "value": value, "metadata": meta})


def parse(text: str, keys=mllog.DEFAULT_KEYS) -> mllog.ParsedLog:
    return mllog.parse_bytes(text.encode("latin-1"), keys)


@pytest.mark.parametrize("prefix", ["", "0: ", "  12: ", "[0] ", "[1,0]<stdout>: ", "junk :::"])
def test_prefixes(prefix: str) -> None:
    log = parse(f"{prefix}{ev(T0, 'run_start')}\n{prefix}{ev(T0 + 5, 'run_stop', status='success')}\n")
    assert [(e.key, e.time_ms, e.lineno) for e in log.events] == [
        ("run_start", T0, 1), ("run_stop", T0 + 5, 2)]
    assert log.events[1].metadata == {"status": "success"}


def test_noise_quoting_a_key_is_not_an_event() -> None:
    log = parse('echo "key": "run_start"\n' + ev(T0, "seed", 3) + "\n")
    assert [e.key for e in log.events] == ["seed"]


def test_unrequested_keys_are_counted_not_decoded() -> None:
    text = "".join(ev(T0 + i, "init_start") + "\n" for i in range(1000)) + ev(T0, "run_start") + "\n"
    log = parse(text)
    assert (log.n_event_lines, log.n_skipped, len(log.events)) == (1001, 1000, 1)
    assert len(parse(text, keys=None).events) == 1001


def test_corrupt_requested_line_is_counted_and_skipped() -> None:
    text = "\n".join([ev(T0, "run_start"), ':::MLLOG {"key": "run_stop", "time_ms": 1',
                      ev(T0 + 9, "run_stop"), "tail"]) + "\n"
    for keys in (mllog.DEFAULT_KEYS, None):
        log = parse(text, keys)
        assert [e.time_ms for e in log.events] == [T0, T0 + 9]
        assert log.n_bad == 1 and log.bad_examples[0][0] == 2
        assert not log.truncated


def test_lines_without_metadata_are_counted_over_all_lines() -> None:
    text = "\n".join([ev(T0, "init_start")[:40], ev(T0, "init_start"), ev(T0, "init_start")[:70]
                      + ev(T0 + 1, "init_start"), ev(T0 + 2, "run_start")]) + "\n"
    log = parse(text)
    assert log.n_without_metadata == 2 and log.n_event_lines == 5 and log.n_skipped == 4
    assert parse(ev(T0, "run_start") + "\n").n_without_metadata == 0


def test_interleaved_line_keeps_the_last_event_like_the_reference() -> None:
    line = ev(T0, "run_start")[:50] + ev(T0 + 1, "seed", 5)
    for keys in (mllog.DEFAULT_KEYS, None):
        log = parse(line + "\n" + ev(T0 + 2, "run_stop") + "\n", keys)
        assert [e.key for e in log.events] == ["seed", "run_stop"]
        assert log.n_interleaved == 1


@pytest.mark.parametrize("body", [
    '{"key": "run_start", "time_ms": "1.2.3"}', '{"key": 5, "time_ms": 1}',
    '{"key": "run_start", "time_ms": true}', '{"key": "run_start", "time_ms": 1e400}',
    '{"key": "run_start", "time_ms": ' + "9" * 400 + "}", '["key", "run_start"]',
    '{"key": "run_start", "time_ms": NaN}', '{"key": "run_start"}', "{" * 5000 + '"key": "run_start"',
])
def test_wrong_types_are_bad_lines(body: str) -> None:
    full = parse(":::MLLOG " + body + "\n", keys=None)
    assert full.events == [] and full.n_bad == 1
    # the fast mode decodes only lines that name a requested key; the rest are counted skipped
    fast = parse(":::MLLOG " + body + "\n")
    assert fast.events == [] and fast.n_bad + fast.n_skipped == 1


def test_latin1_bytes_decode_like_the_reference() -> None:
    raw = ev(T0, "submission_benchmark", "X").encode().replace(b'"X"', b'"caf\xe9"') + b"\n\xff\xfe noise\n"
    log = mllog.parse_bytes(raw)
    assert log.events[0].value == "caf\xe9" and not log.is_binary


def test_sysjson_and_hints() -> None:
    text = (':::SYSJSON {"number_of_nodes": "64"}\n  tensor_model_parallel_size: 4\n'
            "virtual_pipeline_model_parallel_size=7 pipeline_model_parallel_size=2\n"
            "val_micro_batch_size: 9\nexpert_tensor_parallel_size: 3\n")
    log = parse(text)
    assert log.sysjson == {"number_of_nodes": "64"}
    assert log.hints == {"tensor_model_parallel_size": {4}, "pipeline_model_parallel_size": {2}}


def test_truncation_and_clean_end_without_newline() -> None:
    cut = parse(ev(T0, "run_start") + "\n" + ev(T0 + 1, "tracked_stats")[:40])
    assert cut.truncated and cut.ends_mid_line
    clean = parse(ev(T0, "run_start") + "\n" + ev(T0 + 1, "run_stop"))
    assert clean.ends_mid_line and not clean.truncated and len(clean.events) == 2


def test_binary_file_in_chunks(tmp_path) -> None:
    p = tmp_path / "bin.txt"
    p.write_bytes(b"\x00" * 5000 + ev(T0, "run_start").encode() + b"\n")
    log = mllog.parse_file(p, chunk_bytes=1024, sha1=True)
    assert log.is_binary and log.events == [] and log.n_bytes == p.stat().st_size
    assert log.sha1 == hashlib.sha1(p.read_bytes()).hexdigest()


def test_binary() -> None:
    # One sniff rule for every reader (common.looks_binary): over 10 % junk bytes is binary;
    # three stray bytes before an event line are garbage in a text log.
    assert mllog.parse_bytes(b"\x00\x01\x02" * 10 + ev(T0, "run_start").encode()).is_binary
    assert not mllog.parse_bytes(b"\x00\x01\x02" + ev(T0, "run_start").encode()).is_binary
    assert mllog.parse_bytes(bytes(range(1, 32)) * 100).is_binary
    assert not mllog.parse_bytes(b"").is_binary


def test_chunked_file_parse_equals_whole(tmp_path) -> None:
    text = "".join(f"{i % 3}: noise {i}\n{i % 3}: {ev(T0 + i, 'tracked_stats', {'throughput': i})}\n"
                   for i in range(300)) + ev(T0 + 999, "run_stop")[:30]
    p = tmp_path / "log.txt"
    p.write_text(text, encoding="latin-1")
    whole = mllog.parse_file(p, sha1=True)
    assert whole.sha1 == hashlib.sha1(p.read_bytes()).hexdigest()
    for chunk in (64, 1000, 4096):
        part = mllog.parse_file(p, chunk_bytes=chunk, sha1=True)
        assert part.events == whole.events and part.sha1 == whole.sha1
        assert (part.n_event_lines, part.n_bad, part.truncated) == (
            whole.n_event_lines, whole.n_bad, whole.truncated) == (301, 0, True)


def _reference(path: Path) -> tuple[list[tuple[float, str, object]], int]:
    from mlperf_logging.compliance_checker.mlp_parser import parse_file
    lines, errors = parse_file(str(path), ruleset="5.0.0")
    return [(ll.timestamp, ll.key, ll.value["value"]) for ll in lines], len(errors)


def _text_fixtures() -> list[Path]:
    return [p for p in sorted(FIXTURES.rglob("*.txt")) if b"\x00" not in p.read_bytes()]


@pytest.mark.parametrize("path", _text_fixtures(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_agrees_with_reference_parser_on_synthetic_fixtures(path: Path) -> None:
    ref, ref_errors = _reference(path)
    log = mllog.parse_file(path, keys=None)
    assert [(e.time_ms, e.key, e.value) for e in log.events] == ref
    assert log.n_bad == ref_errors
    fast = mllog.parse_file(path)
    wanted = [r for r in ref if r[1] in mllog.DEFAULT_KEYS]
    assert [(e.time_ms, e.key, e.value) for e in fast.events] == wanted


@pytest.mark.slow
def test_agrees_with_reference_parser_on_real_traces(mlperf_traces: Path) -> None:
    files = sorted(mlperf_traces.glob("v*/*/results/**/*.txt"))
    assert len(files) == 21
    for path in files:
        ref, ref_errors = _reference(path)
        log = mllog.parse_file(path, keys=None)
        assert [(e.time_ms, e.key, e.value) for e in log.events] == ref, path
        assert log.n_bad == ref_errors == 0
        fast = mllog.parse_file(path)
        assert [(e.time_ms, e.key) for e in fast.events] == [
            (t, k) for t, k, _ in ref if k in mllog.DEFAULT_KEYS], path


# --- fuzzing ----------------------------------------------------------------------------------

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-10**30, max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10)
_keys = st.sampled_from(sorted(mllog.DEFAULT_KEYS) + ["init_start", "train_loss", "weird key"])
_prefixes = st.sampled_from(["", "0: ", "[3] ", "[1,0]<stdout>: ", "  7: "])
_noise = st.text(st.characters(min_codepoint=32, max_codepoint=255, blacklist_characters="\r"),
                 max_size=40).filter(lambda s: ":::MLLOG" not in s)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_prefixes, _keys, st.integers(0, 10**13), _json_values, _noise),
                max_size=12))
def test_fuzz_valid_events_among_noise_are_recovered(items) -> None:
    lines, expected = [], []
    for prefix, key, t, value, noise in items:
        lines += [noise, prefix + ev(t, key, value)]
        expected.append((float(t), key, value))
    text = "\n".join(lines) + "\n"
    data = text.encode("latin-1", "replace")
    full = mllog.parse_bytes(data, keys=None)
    got = [(e.time_ms, e.key, e.value) for e in full.events]
    assert got == [(t, k, json.loads(json.dumps(v))) for t, k, v in expected]
    fast = mllog.parse_bytes(data)
    assert [e.key for e in fast.events] == [k for _, k, _ in expected if k in mllog.DEFAULT_KEYS]
    assert full.n_bad == fast.n_bad == 0


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000), st.integers(0, 3000), st.sampled_from([None, mllog.DEFAULT_KEYS]))
def test_fuzz_random_bytes_and_cuts_never_raise(noise: bytes, cut: int, keys) -> None:
    good = ("0: " + ev(T0, "run_start") + "\n" + ev(T0 + 1, "tracked_stats", {"throughput": 1e308})
            + "\n" + ev(T0 + 2, "run_stop") + "\n").encode()
    good_keys = ["run_start", "tracked_stats", "run_stop"]  # at T0, T0 + 1, T0 + 2
    for i, data in enumerate((noise, good[:cut] + noise, noise + good[: cut % len(good)],
                              good.replace(b"1700000000000", noise[:20].replace(b"\n", b"")),
                              noise.replace(b"\n", b"\n:::MLLOG "))):
        log = mllog.parse_bytes(data, keys)
        assert log.n_bad + len(log.events) <= log.n_event_lines
        assert log.n_bytes == len(data)
        assert all(isinstance(e.time_ms, float) and math.isfinite(e.time_ms) for e in log.events)
        assert keys is None or all(e.key in keys for e in log.events)
        lines = [e.lineno for e in log.events]  # file order, real lines
        assert lines == sorted(lines) and all(1 <= n <= data.count(b"\n") + 1 for n in lines)
        if i == 1 and not log.is_binary:
            # every complete line of the good log before the cut is read, whatever follows
            want = [k for k in good_keys[:good[:cut].count(b"\n")] if keys is None or k in keys]
            got = [(e.key, e.time_ms) for e in log.events][:len(want)]
            assert got == [(k, float(T0 + good_keys.index(k))) for k in want]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=3000), st.integers(0, 600))
def test_fuzz_whole_tree_yields_one_record_per_file(tmp_path_factory, noise: bytes, cut: int) -> None:
    rnd = tmp_path_factory.mktemp("fuzz") / "v1.0"
    folder = rnd / "S" / "results" / "sys" / "gpt3"
    folder.mkdir(parents=True)
    (rnd / "S" / "systems").mkdir()
    (rnd / "S" / "systems" / "sys.json").write_text('{"number_of_nodes": "1", '
                                                     '"accelerators_per_node": "8", '
                                                     '"accelerator_model_name": "H100"}')
    good = (ev(T0, "run_start") + "\n" + ev(T0 + 1000, "run_stop", status="success") + "\n").encode()
    (folder / "result_0.txt").write_bytes(noise)
    (folder / "result_1.txt").write_bytes(good[:cut] + noise)
    (folder / "result_2.txt").write_bytes(good + noise)
    (folder / "scaling.json").write_bytes(noise)
    recs = list(read_tree(rnd))
    assert [Path(r.path).name for r in recs] == ["result_0.txt", "result_1.txt", "result_2.txt"]
    for rec in recs:
        assert (rec.fields is None) != (rec.reason is None)
        if rec.fields is not None:  # the system description is applied to every run
            assert (rec.fields["n_accelerators"], rec.fields["accelerator"]) == (8, "H100")
            assert rec.fields.get("time_to_train_s", 1.0) == 1.0  # run_stop 1000 ms after start
        else:
            assert rec.reason.split(":")[0] in REJECT_CODES
    assert recs[0].fields is None  # noise alone is never a run
    # the complete log followed by noise is either rejected whole (binary) or read exactly
    assert recs[2].fields is None or (recs[2].fields["status"], recs[2].fields["time_to_train_s"]) \
        == ("ok", 1.0)
