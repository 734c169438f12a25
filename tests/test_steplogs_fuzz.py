"""Hypothesis fuzzing of every step-log parser, of format detection and of the file reader.

Properties: arbitrary text or bytes never raise and keep the per-step columns aligned; a step
line written from random numbers in a framework's layout parses back to those numbers.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.ingest.sources.steplogs.base import ParseState, floats
from pipeline.ingest.sources.steplogs.bulk import _DECIMAL_CHARS, _arrow_parse, float_col, int_col
from pipeline.config import LogsSettings
from pipeline.ingest.sources.steplogs.reader import FORMATS, detect_format, read_one

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "logs"
SAMPLES = sorted(p for p in FIXTURES.rglob("*") if p.suffix in (".log", ".jsonl")
                 and p.stat().st_size and "binary" not in p.name)
FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
SETTINGS = LogsSettings()  # auto warm-up, fraction 0.5, 3 steady steps, tolerance 0.05

text_lines = st.lists(st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\n"),
                              max_size=200), max_size=30).map(lambda ls: "\n".join(ls) + "\n")


def _aligned(state: ParseState, n_lines: int | None = None) -> None:
    n = len(state.step)
    assert len(state.line) == len(state.rank) == len(state.flags) == n
    assert all(len(col) == n for col in state.cols.values())
    # each step points at a real line of the input, in file order
    lines = list(state.line)
    assert lines == sorted(lines)
    if n_lines is not None:
        assert all(1 <= ln <= n_lines for ln in lines), (lines, n_lines)


def _parse(fmt: str, text: str) -> ParseState:
    state = ParseState(fmt=fmt)
    parser = FORMATS[fmt].Parser(state)
    parser.feed_chunk(text, 1, True)
    parser.finish()
    return state


def _run_invariants(result: dict) -> None:
    """A log read as a run keeps the sidecar's chip and count (a log that disagreed is a
    ``conflict`` reject) and only positive, finite measures."""
    assert result["n_accelerators"] == 8 and result["accelerator"] == "H100", result
    for key in ("step_time_s", "tokens_per_s", "tflops_per_accelerator"):
        value = result.get(key, 1.0)
        assert value > 0 and math.isfinite(value), (key, value)
    assert 0 < result.get("mfu", 0.5) <= 1


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@FUZZ
@given(text=text_lines)
def test_parsers_survive_random_text(fmt, text):
    _aligned(_parse(fmt, text), text.count("\n"))


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@FUZZ
@given(data=st.data())
def test_parsers_survive_mutated_real_lines(fmt, data):
    """Real fixture lines with bytes flipped, cut or duplicated never break a parser, and
    damage to one line loses no step that another line carried."""
    path = data.draw(st.sampled_from(SAMPLES))
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    before = _parse(fmt, "\n".join(lines))
    i = data.draw(st.integers(0, len(lines) - 1))
    line = lines[i]
    cut = data.draw(st.integers(0, len(line)))
    junk = data.draw(st.text(max_size=20))
    lines[i] = line[:cut] + junk + line[cut:] if data.draw(st.booleans()) else line[:cut]
    text = "\n".join(lines)
    state = _parse(fmt, text)
    _aligned(state, text.count("\n") + 1)
    if "\n" in junk:  # the junk split the line: later line numbers moved
        return
    damaged = {i + 1}
    if fmt == "composer":  # a Composer step is a block (a header and its ``Train`` lines) filed
        # at its header line: damage to any of its lines may change it (its time/batch line
        # gone, the header's batch number stands in: 5 for time/batch 4 in mpt30b_two_nodes)
        damaged.add(max((ln for ln in before.line if ln <= i + 1), default=i + 1))
    kept = {(ln, step) for ln, step in zip(before.line, before.step) if ln not in damaged}
    if fmt == "hf_trainer":  # the Trainer prints no step number: steps are counted, so only
        kept = {(ln, None) for ln, _ in kept}  # the lines read as steps must survive
        got = {(ln, None) for ln in state.line}
    else:
        got = set(zip(state.line, state.step))
    assert kept <= got, sorted(kept - got)


def test_garbled_mesh_line_is_ignored_not_fatal():
    lines = (FIXTURES / "nasty" / "clock_jump.log").read_text(encoding="utf-8").split("\n")
    clean = _parse("torchtitan", "\n".join(lines))
    assert "[4, 2]" in lines[1] and len(clean.step) > 3
    lines[1] = lines[1].replace("[4, 2]", "[4, 4 2]")
    damaged = _parse("torchtitan", "\n".join(lines))
    assert list(damaged.step) == list(clean.step)


DETECTED = [("megatron/gpt_n64.log", "megatron"), ("torchtitan/llama3_8b.log", "torchtitan"),
            ("nemo/nemo2.log", "nemo"), ("nemo/nemo1_tqdm.log", "nemo"),
            ("deepspeed/ds.log", "deepspeed"), ("nanotron/nanotron.log", "nanotron"),
            ("hf_trainer/trainer.log", "hf_trainer"), ("jsonl/steps.jsonl", "jsonl")]


@FUZZ
@given(text=text_lines, sample=st.sampled_from(DETECTED))
def test_detection_returns_a_known_format_or_none(text, sample):
    assert detect_format(text) in (None, *FORMATS)
    # random lines before or after a real log do not change the format it is read as
    name, fmt = sample
    real = (FIXTURES / name).read_text(encoding="utf-8")
    assert detect_format(text + real) == fmt and detect_format(real + text) == fmt


@FUZZ
@given(blob=st.binary(max_size=3000), name=st.sampled_from(["a.log", "b.jsonl", "c.out"]))
def test_read_one_turns_any_bytes_into_a_run_or_a_reject(blob, name):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(blob)
        (Path(tmp) / "run.yaml").write_text("accelerator: H100\nn_accelerators: 8\n")
        result, _ = read_one(path, Path(tmp), SETTINGS, {})
        assert isinstance(result, dict) or result[0] in (
            "binary_file", "truncated_log", "too_few_steps", "not_a_run", "bad_value")
        if isinstance(result, dict):
            _run_invariants(result)
        else:
            assert result[1].strip()  # a reject always says why


finite = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False)


@FUZZ
@given(step=st.integers(1, 10**7), ms=finite, tflops=finite, loss=finite,
       gbs=st.integers(1, 10**5), rank=st.sampled_from(["", "[default3]:", "12: "]))
def test_megatron_line_round_trip(step, ms, tflops, loss, gbs, rank):
    line = (f"{rank} [2025-08-01 07:19:50] iteration {step:8d}/{10**8:8d} | consumed samples: "
            f"{step * gbs:12d} | elapsed time per iteration (ms): {ms:.1f} | throughput per GPU "
            f"(TFLOP/s/GPU): {tflops:.1f} | learning rate: {1e-4:.6E} | global batch size: "
            f"{gbs:5d} | lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: 1.000 | number of "
            f"skipped iterations:   0 | number of nan iterations:   0 |\n")
    state = ParseState(fmt="megatron")
    FORMATS["megatron"].Parser(state).feed_chunk(line, 1, False)
    assert list(state.step) == [step]
    assert state.cols["step_time_s"][0] == pytest.approx(float(f"{ms:.1f}") / 1000)
    assert state.cols["tflops_per_accelerator"][0] == pytest.approx(float(f"{tflops:.1f}"))
    assert state.cols["loss"][0] == pytest.approx(float(f"{loss:.6E}"))
    assert state.cols["batch_samples"][0] == gbs
    assert state.rank[0] == (3 if "3" in rank else 12 if rank else -1)


@FUZZ
@given(step=st.integers(1, 10**7), loss=finite, tps=st.integers(0, 10**9), tflops=finite,
       mfu=st.floats(0, 100), color=st.booleans())
def test_torchtitan_line_round_trip(step, loss, tps, tflops, mfu, color):
    c = ("\033[31m", "\033[32m", "\033[34m", "\033[36m", "\033[35m", "\033[39m") if color \
        else ("",) * 6
    line = (f"[rank0]:[titan] 2025-03-01 12:00:00,000 - root - INFO - {c[0]}step: {step:2}  "
            f"{c[1]}loss: {loss:7.4f}  memory: 40.12GiB(50.00%)  {c[2]}tps: {tps:,}  "
            f"{c[3]}tflops: {tflops:,.2f}  {c[4]}mfu: {mfu:.2f}%{c[5]}\n")
    state = ParseState(fmt="torchtitan")
    FORMATS["torchtitan"].Parser(state).feed_chunk(line, 1, False)
    assert list(state.step) == [step]
    assert state.cols["tokens_per_s_per_accelerator"][0] == tps
    assert state.cols["loss"][0] == pytest.approx(float(f"{loss:7.4f}"))
    assert state.cols["tflops_per_accelerator"][0] == pytest.approx(float(f"{tflops:.2f}"))
    assert state.cols["mfu"][0] == pytest.approx(float(f"{mfu:.2f}") / 100)


@FUZZ
@given(rows=st.lists(st.fixed_dictionaries({
    "step": st.integers(0, 10**9),
    "step_time_s": st.one_of(st.none(), finite),
    "loss": st.one_of(st.none(), st.floats(allow_infinity=True, allow_nan=True)),
    "mfu": st.one_of(st.none(), st.floats(0, 1))}), min_size=1, max_size=20))
def test_jsonl_round_trip(rows):
    text = "".join(json.dumps(r) + "\n" for r in rows)
    state = ParseState(fmt="jsonl")
    FORMATS["jsonl"].Parser(state).feed_chunk(text, 1, False)
    assert list(state.step) == [r["step"] for r in rows]
    for i, r in enumerate(rows):
        t = state.cols["step_time_s"][i]
        assert (math.isnan(t) if r["step_time_s"] is None else t == r["step_time_s"])
        loss = r["loss"]
        assert bool(state.flags[i]) == (loss is not None and not math.isfinite(loss))


printed_number = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda x: f"{x:.6E}"),
    st.floats(0, 1e7).map(lambda x: f"{x:.1f}"), st.integers(0, 10**25).map(str))
decimal_text = st.one_of(printed_number, st.text(alphabet="0123456789.eE+-", max_size=12))


@pytest.mark.slow
@FUZZ
@given(plain=st.lists(printed_number, min_size=64, max_size=90),
       odd=st.lists(decimal_text, min_size=64, max_size=90))
def test_bulk_number_columns_parse_as_python_does(plain, odd):
    """Columns of printed numbers (Arrow's parser for plain decimals, numpy otherwise) give
    bit for bit what ``float()`` gives (NaN where it refuses); integers what ``int()`` gives."""
    assert _arrow_parse(plain, _DECIMAL_CHARS, pa.float64()) is not None  # the fast path
    for texts in (plain, odd):
        got = float_col(texts)
        assert [repr(x) for x in got.tolist()] == [repr(x) for x in floats(texts)]
    digits = [t for t in plain + odd if t.isdigit() and len(t) < 19] * 64
    if digits:
        assert int_col(digits).tolist() == [int(t) for t in digits]


json_number = st.one_of(st.none(), st.integers(-10**20, 10**20),
                        st.floats(allow_nan=False, allow_infinity=False))
json_extra = st.one_of(st.text(max_size=12), st.booleans(), st.lists(st.integers(), max_size=3))


@pytest.mark.slow
@FUZZ
@given(rows=st.lists(st.tuples(
    st.integers(-10**12, 10**12),
    st.dictionaries(st.sampled_from(["step_time_s", "tokens_per_s", "loss", "mfu", "time",
                                     "samples_per_s", "batch_samples"]), json_number),
    st.dictionaries(st.sampled_from(["lr", "note", "grad_norm"]), json_extra),
    st.randoms()), min_size=2, max_size=15))
def test_jsonl_chunk_paths_agree_with_line_by_line(rows):
    """The C++ JSON reader path (and the json.loads path it falls back to) read a chunk of
    step objects, keys in any order, numbers of any size, exactly as Python reads each line."""
    lines = []
    for step, numbers, extra, rnd in rows:
        items = [("step", step), *numbers.items(), *extra.items()]
        rnd.shuffle(items)
        lines.append(json.dumps(dict(items)))
    text = "\n".join(lines) + "\n"
    one = ParseState(fmt="jsonl")
    single = FORMATS["jsonl"].Parser(one)
    with mock.patch.object(FORMATS["jsonl"], "ARROW_MIN_CHARS", 1 << 40):  # never C++
        for n, line in enumerate(lines, 1):
            single.feed_chunk(line + "\n", n, False)
    # A chunk this small takes the json.loads path; with no size floor, the C++ reader's.
    for floor in (FORMATS["jsonl"].ARROW_MIN_CHARS, 0):
        whole = ParseState(fmt="jsonl")
        with mock.patch.object(FORMATS["jsonl"], "ARROW_MIN_CHARS", floor):
            FORMATS["jsonl"].Parser(whole).feed_chunk(text, 1, False)
        assert _columns(whole) == _columns(one)


def _columns(state: ParseState) -> dict:
    out = {"step": list(state.step), "line": list(state.line), "rank": list(state.rank),
           "flags": list(state.flags)}
    out.update({k: [repr(v) for v in col] for k, col in state.cols.items()})
    return out


BULK_FORMATS = ("megatron", "torchtitan", "nanotron", "nemo", "deepspeed", "jsonl")


@pytest.mark.parametrize("fmt", BULK_FORMATS)
@FUZZ
@given(data=st.data())
def test_bulk_path_agrees_with_line_by_line(fmt, data):
    """A chunk of step lines parsed at once (bulk regex path) gives exactly what the same lines
    give one at a time (the line-by-line path), whatever their order and numbers."""
    from benchmarks.bench_steplogs import WRITERS
    writer = {"megatron": "megatron.log", "torchtitan": "torchtitan.log",
              "nanotron": "nanotron.log", "nemo": "nemo.log", "deepspeed": "deepspeed.log",
              "jsonl": "generic.jsonl"}[fmt]
    steps = data.draw(st.lists(st.integers(1, 10**6), min_size=2, max_size=12))
    lines = [WRITERS[writer](i).rstrip("\n") for i in steps]
    if data.draw(st.booleans()):  # damage one line: the whole chunk must fall back cleanly
        i = data.draw(st.integers(0, len(lines) - 1))
        lines[i] = lines[i][:data.draw(st.integers(0, len(lines[i])))]
    text = "\n".join(lines) + "\n"
    whole = ParseState(fmt=fmt)
    parser = FORMATS[fmt].Parser(whole)
    parser.feed_chunk(text, 1, False)
    one = ParseState(fmt=fmt)
    single = FORMATS[fmt].Parser(one)
    for n, line in enumerate(lines, 1):
        single.feed_chunk(line + "\n", n, False)
    assert _columns(whole) == _columns(one)


def test_nemo_line_cut_after_its_timing_label_reads_the_same_both_ways():
    from benchmarks.bench_steplogs import WRITERS
    lines = [WRITERS["nemo.log"](i).rstrip("\n") for i in (100000, 1)]
    cut = lines[0].index("train_step_timing in s: ") + len("train_step_timing in s: ")
    lines[0] = lines[0][:cut]
    whole = ParseState(fmt="nemo")
    FORMATS["nemo"].Parser(whole).feed_chunk("\n".join(lines) + "\n", 1, False)
    one = ParseState(fmt="nemo")
    single = FORMATS["nemo"].Parser(one)
    for n, line in enumerate(lines, 1):
        single.feed_chunk(line + "\n", n, False)
    assert _columns(whole) == _columns(one)


@FUZZ
@given(data=st.data())
def test_read_one_survives_damaged_real_logs(data):
    """Real fixture logs cut at any byte, with random bytes spliced in or a block repeated
    (a restart), still end as one run or one reject, never an exception."""
    src = data.draw(st.sampled_from(SAMPLES))
    blob = src.read_bytes()
    cut = data.draw(st.integers(0, len(blob)))
    action = data.draw(st.sampled_from(["cut", "splice", "repeat"]))
    if action == "cut":
        blob = blob[:cut]
    elif action == "splice":
        blob = blob[:cut] + data.draw(st.binary(min_size=1, max_size=300)) + blob[cut:]
    else:
        blob = blob[:cut] + blob[data.draw(st.integers(0, cut)):]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / src.name
        path.write_bytes(blob)
        (Path(tmp) / "run.yaml").write_text("accelerator: H100\nn_accelerators: 8\n")
        result, steps = read_one(path, Path(tmp), SETTINGS, {})
        # A repeated block can restate the start-up facts (conflict/gpt.log: tp 128, then the
        # repeat's tp 2 at line 22): a phase_change reject, as for a real restart that reshapes.
        assert isinstance(result, dict) or result[0] in (
            "binary_file", "truncated_log", "too_few_steps", "not_a_run", "conflict",
            "phase_change")
        if isinstance(result, dict):
            _run_invariants(result)
        else:
            assert result[1].strip()  # a reject always says why
