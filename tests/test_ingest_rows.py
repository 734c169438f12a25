"""Run rows with a shared base (pipeline/ingest/core/rows.py): one mapping to every reader."""

from __future__ import annotations

import copy
import json
import pickle

from pipeline.ingest.core.rows import BASE_COLUMNS, RunRow, compact


def _row() -> RunRow:
    return RunRow({"run_id": "r1", "n_accelerators": 8, "notes": "own"},
                  {"_path": "t.csv", "model": "m", "notes": "base"})


def test_a_row_reads_as_its_own_values_over_its_base() -> None:
    row = _row()
    merged = {"_path": "t.csv", "model": "m", "notes": "own", "run_id": "r1",
              "n_accelerators": 8}
    assert row["model"] == "m" and row["notes"] == "own" and row["tp"] is None
    assert row.get("model") == "m" and row.get("tp", 0) == 0 and row.get("notes") == "own"
    assert "model" in row and "run_id" in row and "tp" not in row
    assert row == merged and merged == row and not row != merged
    assert dict(row) == merged and {**row} == merged and len(row) == 5
    assert sorted(row) == sorted(merged) and dict(row.items()) == merged
    assert row.plain() == merged and dict(row.pairs()) == merged
    assert json.loads(json.dumps(dict(row), sort_keys=True)) == merged  # json sees {}
    assert pickle.loads(pickle.dumps(row)) == merged and copy.copy(row) == merged
    assert RunRow(row) == merged and RunRow(row).base == {}


def test_a_value_set_on_a_row_is_its_own() -> None:
    row = _row()
    row["model"] = "changed"
    row["scaling"] = "weak"
    assert row["model"] == "changed" and row.base["model"] == "m" and row["scaling"] == "weak"
    row["notes"] = None  # an own None hides the base's value
    assert row["notes"] is None and row.get("notes", "x") is None


def test_compact_shares_the_base_of_equal_values_only() -> None:
    def normalized(n: int, params: object) -> dict[str, object]:
        return {**dict.fromkeys(BASE_COLUMNS[1:]), "run_id": f"r{n}", "n_accelerators": n,
                "model": "m", "params": params, "tp": None}

    bases: dict = {}
    a = compact(normalized(8, 7e9), "t.csv", {}, bases)
    b = compact(normalized(16, 7e9), "t.csv", {}, bases)
    c = compact(normalized(32, 7e9), "u.csv", {}, bases)
    d = compact(normalized(64, 7), "t.csv", {}, bases)  # 7 is not 7.0e9, nor 7.0
    e = compact(normalized(64, 7.0), "t.csv", {}, bases)  # 7.0 == 7, but another type
    assert a.base is b.base and a.base is not c.base and len(bases) == 4
    assert type(e["params"]) is float and type(d["params"]) is int
    assert a.own().keys() == {"run_id", "n_accelerators"}  # the rest is shared, Nones dropped
    assert a == {"_path": "t.csv", "model": "m", "params": 7e9, "run_id": "r8",
                 "n_accelerators": 8}


def test_the_logs_of_a_campaign_share_one_base_their_files_their_own() -> None:
    """A step log is one run per file: its path and citation are its own values, so the logs
    of one campaign share a base (one base per log cost most of a 10^6-log ingest's memory)."""
    def log(n: int) -> dict[str, object]:
        return {**dict.fromkeys(BASE_COLUMNS[1:]), "source": "logs/c", "source_kind": "log",
                "model": "m", "citation": f"logs/c/n{n}/train.log", "run_id": f"r{n}",
                "n_accelerators": n}

    bases: dict = {}
    rows = [compact(log(n), f"logs/c/n{n}/train.log", {}, bases) for n in (8, 16)]
    table = compact({**log(32), "source_kind": "table"}, "t.csv", {}, bases)
    assert rows[0].base is rows[1].base and len(bases) == 2
    assert "_path" not in rows[0].base and "citation" not in rows[0].base
    assert rows[1].own().keys() == {"run_id", "n_accelerators", "_path", "citation"}
    assert rows[1] == {"source": "logs/c", "source_kind": "log", "model": "m",
                       "_path": "logs/c/n16/train.log", "citation": "logs/c/n16/train.log",
                       "run_id": "r16", "n_accelerators": 16}
    assert table.base["_path"] == "t.csv" and table.base["citation"] == "logs/c/n32/train.log"


def test_row_maker_rows_are_the_rows_of_their_dicts() -> None:
    from pipeline.ingest.core.rows import own_names, own_values, row_maker
    base = {"source": "s", "model": "m"}
    make = row_maker(("run_id", "tokens_per_s"))
    row = make(("a1", 2.0), base)
    assert row == RunRow({"run_id": "a1", "tokens_per_s": 2.0}, base)
    assert row.base is base and own_values(row) == ("a1", 2.0)
    assert own_names(row) is own_names(make(("b2", 3.0), base))  # one layout for the maker
    row["mfu"] = 0.4
    assert dict(row) == {"source": "s", "model": "m", "run_id": "a1", "tokens_per_s": 2.0,
                         "mfu": 0.4}


def test_columns_getter_reads_what_get_reads_on_any_row() -> None:
    from pipeline.ingest.core.rows import columns_getter
    names = ("run_id", "model", "notes", "tp", "mfu")
    get, one, none = columns_getter(names), columns_getter(("notes",)), columns_getter(())
    base = {"_path": "t.csv", "model": "m", "notes": "base"}
    rows = [_row(), RunRow({"run_id": "r2"}, base), RunRow({"run_id": "r3", "notes": "own"}, base),
            {"run_id": "d", "model": "x"}, RunRow({}, {})]
    rows[1]["mfu"] = 0.5  # a grown layout over the same base
    rows.append(compact({"run_id": "c", "source": "s", "model": "m", "tp": 2}, "p", {}, {}))
    for _ in range(2):  # planned, then from the plan
        for row in rows:
            assert get(row) == tuple(map(row.get, names)), row
            assert one(row) == (row.get("notes"),) and none(row) == ()
    rows[2]["notes"] = "changed"  # a value set later is read
    assert get(rows[2])[2] == "changed"
