"""One quote cannot break the published tables' accounting (issue 13, item 2).

Every shipped table, with one ``"`` inserted at a random place of a random data line, still
gives exactly one record per data line, and every line other than the damaged one gives the
record it gave before (the same fields, or the same reject).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pipeline.ingest.sources.published import MAX_RECORD_LINES, read_file

ROOT = Path(__file__).resolve().parents[2]
TABLES = sorted((ROOT / "data" / "raw" / "published").glob("*.csv"))


def _records(path: Path) -> dict[int, tuple]:
    out = {}
    for r in read_file(path, root=path.parent):
        assert r.line not in out, f"two records start on line {r.line}"
        out[r.line] = (dict(r.fields) if r.fields is not None else None, r.reason)
    return out


def _data_lines(text: str) -> list[int]:
    lines = text.splitlines()
    numbers = [i + 1 for i, line in enumerate(lines) if line.strip()]
    return numbers[1:]  # the first non-blank line is the header


@pytest.mark.parametrize("table", TABLES, ids=lambda p: p.name)
def test_shipped_table_one_record_per_data_line(table: Path) -> None:
    assert sorted(_records(table)) == _data_lines(table.read_text(encoding="utf-8-sig"))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("table", TABLES, ids=lambda p: p.name)
def test_random_quote_costs_one_line(table: Path, seed: int, tmp_path: Path) -> None:
    text = table.read_text(encoding="utf-8-sig")
    before = _records(table)
    rng = random.Random(f"{table.name}:{seed}")
    lines = text.splitlines(keepends=True)
    k = rng.choice(_data_lines(text))
    line = lines[k - 1]
    # Half the time at the start of a field (opens a quoted field), else anywhere.
    starts = [0] + [i + 1 for i, ch in enumerate(line) if ch == ","]
    pos = rng.choice(starts) if seed % 2 == 0 else rng.randrange(len(line.rstrip("\r\n")) + 1)
    lines[k - 1] = line[:pos] + '"' + line[pos:]
    damaged = tmp_path / table.name
    damaged.write_text("".join(lines), encoding="utf-8")
    after = _records(damaged)
    assert sorted(after) == _data_lines("".join(lines))  # runs + rejects = data lines
    for number, record in before.items():
        if number != k:
            assert after[number] == record, f"line {number} changed by a quote on line {k}"


def test_unbalanced_quote_at_the_top_rejects_one_line_per_span(tmp_path: Path) -> None:
    header = "source,citation,model,params_b,accelerator,n_accelerators,mfu\n"
    rows = [f"s,c{i},m,1,H100,{8 * (i + 1)},0.4\n" for i in range(3 * MAX_RECORD_LINES)]
    rows[2] = 's,"c2,m,1,H100,24,0.4\n'  # opens a quoted field that never closes
    path = tmp_path / "t.csv"
    path.write_text(header + "".join(rows), encoding="utf-8")
    records = list(read_file(path, root=tmp_path))
    assert len(records) == len(rows)
    rejects = [r for r in records if r.reason]
    assert [(r.line, r.reason.split(":")[0]) for r in rejects] == [(4, "malformed_row")]
    assert "unbalanced quote" in rejects[0].reason or "runs past" in rejects[0].reason


def test_semicolon_table_says_so(tmp_path: Path) -> None:
    path = tmp_path / "semi.csv"
    path.write_text("source;citation;model;params_b;accelerator;n_accelerators;mfu\n"
                    "s;c;m;1;H100;8;0.4\n", encoding="utf-8")
    records = list(read_file(path, root=tmp_path))
    assert [r.reason for r in records] == [
        "malformed_row: header: one column only, with ';' in it: the table looks "
        "semicolon-delimited; format v1 is comma-separated",
        "malformed_row: the file has no usable header"]
