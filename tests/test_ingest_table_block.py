"""Column-wise normalization of plain table rows (``pipeline.ingest.core.table_block``) against
the per-row path: random published tables (valid rows and rows with every kind of defect the
per-row path rejects) give the same runs and the same rejects, with the same reasons, through
both; and plain rows do take the column-wise path."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.catalog import load_catalog
from pipeline.config import PROJ_ROOT, load_params
from pipeline.ingest.core.normalize import CatalogCache
from pipeline.ingest.core.rows import RunRow, compact
from pipeline.ingest.core.table_block import _numbers, normalize_block, plain_record
from pipeline.ingest.sources.published import _records
from pipeline.ingest.stage import convert, read_options

CATALOG = load_catalog(PROJ_ROOT / "data" / "catalog")
OPTIONS, _ = read_options(dict(load_params(), ingest=dict(load_params()["ingest"],
                                                          mlperf_roots=[])))
COLUMNS = ("source", "citation", "model", "params_b", "accelerator", "precision",
           "n_accelerators", "tokens_per_s", "tokens_per_s_per_accelerator",
           "global_batch_tokens", "step_time_s", "strategy", "mfu", "tp")

# Values of each column, valid ones first; "" is a missing field. Defects: missing field,
# unit slip (an MFU in percent), non-numeric or non-ASCII text, out of range (0, negative, not
# an integer, too many chips, a step time beyond physics, a derived MFU above 1 or above the
# plausibility limit), throughputs that disagree, and (by repeating rows) duplicates and
# conflicting measurements of one configuration.
VALUES: dict[str, list[str]] = {
    "source": ["lab", "lab", "other", ""],
    "citation": ["Table 1", "Table 1", "Table 2", "", "Table\u200b 3"],
    "model": ["llama-3-8b", "llama-3-8b", "gpt3-175b", "mixtral-8x7b", "mystery", ""],
    "params_b": ["", "", "", "8", "7e5", "abc"],
    "accelerator": ["H100-SXM5-80GB", "H100-SXM5-80GB", "A100-SXM4-80GB", "V100-SXM2-32GB",
                    "A100", "no-such-chip", ""],
    "precision": ["", "", "bf16", "fp8", "fp16", "fp4x"],
    "n_accelerators": ["8", "16", "64", "512", "8.0", "8.5", "0", "-8", "abc", "１２", "1_024",
                       "1e20", "", "3", "20000000"],
    "tokens_per_s": ["30000", "62500.5", "1.2e5", "4e6", "9e9", "0", "-5", "inf", "nan",
                     "1,000", "", "", "1e400", "7"],
    # "=": tokens_per_s / n_accelerators (when both are numbers), the consistent per-chip figure
    "tokens_per_s_per_accelerator": ["", "", "", "=", "=", "3750", "100", "-1", "x"],
    "global_batch_tokens": ["", "", "4194304", "1048576.5", "0", "big"],
    "step_time_s": ["", "", "", "2.5", "1e-9", "2e6", "0.5"],
    "strategy": ["", "", "", "TP8 PP2", "fsdp", "ddp"],
    "mfu": ["", "", "", "", "0.41", "43", "1.7"],
    "tp": ["", "", "", "", "", "8", "3"],
}
ROW = st.fixed_dictionaries({c: st.sampled_from(v) for c, v in VALUES.items()})


def _per_chip(row: dict[str, str]) -> str:
    if row["tokens_per_s_per_accelerator"] != "=":
        return row["tokens_per_s_per_accelerator"]
    try:
        return repr(float(row["tokens_per_s"]) / float(row["n_accelerators"]))
    except (ValueError, ZeroDivisionError):
        return ""


def _table(rows: list[dict[str, str]]) -> str:
    rows = [dict(row, tokens_per_s_per_accelerator=_per_chip(row)) for row in rows]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows([[row[c] for c in COLUMNS] for row in rows])
    return out.getvalue()


def _convert(text: str, block_rows: int) -> tuple[list[Any], list[dict[str, Any]]]:
    records = _records(io.StringIO(text, newline=""), "t", "data/raw/published/t.csv")
    runs, rejects, read = convert(records, CATALOG, OPTIONS, block_rows=block_rows)
    shown = [sorted((k, type(v).__name__, v) for k, v in row.items()) for row in runs]
    return shown, rejects


def _check_same(rows: list[dict[str, str]], block_rows: int) -> None:
    text = _table(rows)
    runs_one, rejects_one = _convert(text, 0)
    runs_block, rejects_block = _convert(text, block_rows)
    assert runs_block == runs_one
    assert rejects_block == rejects_one


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(ROW, min_size=1, max_size=40), repeats=st.lists(
    st.tuples(st.integers(0, 39), st.sampled_from(["", "31000", "30000.0"])), max_size=6),
       block_rows=st.sampled_from([1, 3, 16, 16_384]))
def test_random_tables_give_the_same_runs_and_rejects(rows: list[dict[str, str]],
                                                      repeats: list[tuple[int, str]],
                                                      block_rows: int) -> None:
    # a repeated row is a duplicate; with another throughput, a conflicting measurement
    for at, throughput in repeats:
        again = dict(rows[at % len(rows)])
        if throughput:
            again["tokens_per_s"] = throughput
        rows.append(again)
    _check_same(rows, block_rows)


# Valid values only: a group's shared values that its template accepts.
VALID = {"source": ["lab", "other"], "citation": ["Table 1", "Table\u200b 3"],
         "model": ["llama-3-8b", "gpt3-175b", "mixtral-8x7b"],
         "accelerator": ["H100-SXM5-80GB", "A100-SXM4-80GB", "V100-SXM2-32GB"],
         "precision": ["", "bf16", "fp8", "fp16"], "strategy": ["", "TP8 PP2", "fsdp"]}
VALID_ROW = st.fixed_dictionaries({c: st.sampled_from(v) for c, v in VALID.items()})
NUMBERS = ("n_accelerators", "tokens_per_s", "tokens_per_s_per_accelerator",
           "global_batch_tokens", "step_time_s")
# Numbers a run accepts (drawn three times as often as the defective ones of VALUES).
GOOD = {"n_accelerators": ["8", "16", "64", "512", "8.0", "3", "1024", "24"],
        "tokens_per_s": ["30000", "62500.5", "1.2e5", "7", "2.5e4", "123456.789", "2e6", "300",
                         "1500.25"],
        "tokens_per_s_per_accelerator": ["=", "="],
        "global_batch_tokens": ["4194304", "1048576", "2e6"],
        "step_time_s": ["2.5", "0.5", "10"]}
NUMBER_ROW = st.fixed_dictionaries({c: st.sampled_from(GOOD[c] * 3 + [v for v in VALUES[c] if v])
                                    for c in NUMBERS})


@settings(max_examples=100, deadline=None)
@given(fixed=VALID_ROW, present=st.sets(st.sampled_from(NUMBERS[2:]), max_size=2),
       numbers=st.lists(NUMBER_ROW, min_size=8, max_size=60))
def test_one_table_of_shared_values_with_defective_numbers(
        fixed: dict[str, str], present: set[str], numbers: list[dict[str, str]]) -> None:
    """Large groups (every row shares its static values, each its own numbers, some of them
    defective): the case the block path is for."""
    rows = [dict(fixed, params_b="", mfu="", tp="", **{c: v if c in present or c in NUMBERS[:2]
                                                      else "" for c, v in row.items()})
            for row in numbers]
    _check_same(rows, 16_384)


def _plain_table(rows: int) -> str:
    return "source,citation,model,accelerator,n_accelerators,tokens_per_s\n" + "".join(
        f"big,t1,llama-3-8b,H100-SXM5-80GB,{n},{n * 8000}\n" for n in range(1, rows + 1))


def test_plain_rows_take_the_column_wise_path() -> None:
    records = list(_records(io.StringIO(_plain_table(50), newline=""), "t", "t.csv"))
    assert all(map(plain_record, records))
    cache = CatalogCache(CATALOG)
    results = normalize_block(records, cache, OPTIONS,
                              lambda row, path: compact(row, path, {}, {}).base)
    assert all(type(r) is RunRow for r in results)
    assert [r["n_accelerators"] for r in results] == list(range(1, 51))
    assert len({r["run_id"] for r in results}) == 50


def test_flagged_rows_keep_their_reason() -> None:
    text = _plain_table(5) + "big,t1,llama-3-8b,H100-SXM5-80GB,8.5,1000\n" \
                             "big,t1,llama-3-8b,H100-SXM5-80GB,9,1_000\n" \
                             "big,t1,llama-3-8b,H100-SXM5-80GB,10,0\n"
    runs, rejects = _convert(text, 16_384)
    assert len(runs) == 5
    reasons = [r["reason"] for r in rejects]
    assert reasons[0] == "out_of_range: n_accelerators='8.5' is not an integer >= 1"
    assert reasons[1].startswith("bad_value: tokens_per_s='1_000' is not a number")
    assert reasons[2] == "out_of_range: tokens_per_s='0' must be > 0"


@pytest.mark.parametrize("name", ["mfu", "tp", "log_sha1"])
def test_records_with_other_fields_are_not_plain(name: str) -> None:
    text = "source,citation,model,accelerator,n_accelerators,tokens_per_s," + name + \
           "\nbig,t1,llama-3-8b,H100-SXM5-80GB,8,64000,8\n"
    records = list(_records(io.StringIO(text, newline=""), "t", "t.csv"))
    assert not plain_record(records[0])


def test_shipped_tables_are_the_same_through_both_paths() -> None:
    for path in sorted((PROJ_ROOT / "data" / "raw" / "published").glob("*.csv"))[:40]:
        text = path.read_text(encoding="utf-8-sig")
        assert _convert(text, 16_384) == _convert(text, 0), path.name


def test_a_column_whose_last_text_is_no_number_is_read_in_linear_time() -> None:
    """The column regex matches each text one way only: a column of long digit runs whose last
    text fails ends at once (an ambiguous pattern backtracked through every split of every run
    of digits: minutes at 10 rows, never at 40). A hang guard, not a timing: the alarm is
    10^5 times what the match takes."""
    import signal

    def hung(*_: Any) -> None:
        raise AssertionError("the column regex backtracks (catastrophically) on a bad text")

    texts = ["123456789012"] * 40 + ["12x"]
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    try:
        values, plain = _numbers(texts)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert plain.tolist() == [True] * 40 + [False]
    assert values[0] == 123456789012.0
