"""Published-table reader: one Record per data row, malformed input rejected, never a crash."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.ingest.sources.published import looks_binary, read_file, read_published
from pipeline.ingest.records import REJECT_CODES, Record

HEADER = "source,citation,model,n_accelerators,tokens_per_s\n"
FIXTURES = Path(__file__).parent / "fixtures" / "published"


def _read(tmp_path: Path, content: bytes, name: str = "t.csv") -> list[Record]:
    path = tmp_path / name
    path.write_bytes(content)
    return list(read_file(path, root=tmp_path))


def test_rows_fields_lines_and_source(tmp_path: Path) -> None:
    text = (HEADER + "paper1,Table 1,GPT,8,100\n"
            + '\n'  # a blank line is not a record
            + 'paper1,"multi\nline cite",GPT,16,200\n'
            + ",Table 2,GPT,32,300\n")
    recs = _read(tmp_path, text.encode(), "mytable.csv")
    assert [r.line for r in recs] == [2, 4, 6]
    assert recs[0].fields == {"source": "paper1", "citation": "Table 1", "model": "GPT",
                              "n_accelerators": "8", "tokens_per_s": "100"}
    assert recs[1].fields["citation"] == "multi\nline cite"
    # an empty source column falls back to the file stem (normalize then rejects it)
    assert recs[2].source == "mytable" and "source" not in recs[2].fields
    assert all(r.path == "mytable.csv" for r in recs)


def _reason(recs: list[Record], line: int) -> str:
    (rec,) = [r for r in recs if r.line == line]
    assert rec.reason is not None, rec
    return rec.reason


def test_malformed_rows_are_rejected_and_reading_goes_on(tmp_path: Path) -> None:
    content = (HEADER.encode()
               + b"p,ok,GPT,8,100\n"                # 2 ok
               + b"p,short,GPT\n"                   # 3 too few fields
               + b"p,long,GPT,8,100,extra\n"        # 4 too many fields
               + b"p,nul\x00byte,GPT,8,100\n"       # 5 NUL byte
               + b"p,bad \xff\xfe bytes,GPT,8,1\n"  # 6 not UTF-8
               + b"p,ok2,GPT,16,200\n"              # 7 ok
               + b"p,truncated,GP")                 # 8 truncated last line
    recs = _read(tmp_path, content)
    assert [r.line for r in recs] == [2, 3, 4, 5, 6, 7, 8]
    assert recs[0].fields is not None and recs[5].fields is not None
    assert _reason(recs, 3) == "malformed_row: expected 5 fields, got 3"
    assert _reason(recs, 4) == "malformed_row: expected 5 fields, got 6"
    assert _reason(recs, 5) == "malformed_row: NUL byte"
    assert _reason(recs, 6) == "malformed_row: undecodable bytes (not UTF-8)"
    assert _reason(recs, 8).startswith("malformed_row: expected 5 fields, got 3")
    # reject text is printable UTF-8 (it goes into rejects.parquet)
    for r in recs:
        r.raw.encode("utf-8")
        assert "\x00" not in r.raw


def test_binary_file_is_one_reject(tmp_path: Path) -> None:
    (rec,) = _read(tmp_path, (FIXTURES / "synthetic_binary.csv").read_bytes())
    assert rec.reason.startswith("binary_file")
    assert looks_binary(bytes(range(256)) * 4)
    assert not looks_binary("naïve,café\n".encode() * 100)


def test_oversized_field_is_rejected(tmp_path: Path) -> None:
    content = HEADER.encode() + b"p," + b"x" * 200_000 + b",GPT,8,1\np,ok,GPT,8,1\n"
    recs = _read(tmp_path, content)
    assert recs[0].reason.startswith("malformed_row: field larger than field limit")
    assert recs[1].fields is not None and recs[1].line == 3


def test_header_only_and_empty_files(tmp_path: Path) -> None:
    assert _read(tmp_path, HEADER.encode()) == []
    assert _read(tmp_path, b"") == []


def test_duplicate_header_columns_reject_every_row(tmp_path: Path) -> None:
    recs = _read(tmp_path, b"source,model,model\np,a,b\n")
    assert [r.reason.split(":")[0] for r in recs] == ["malformed_row", "malformed_row"]


def test_read_published_sorted_over_fixture_dir() -> None:
    recs = list(read_published(FIXTURES))
    paths = [r.path for r in recs]
    assert paths == sorted(paths)
    assert {Path(p).name for p in paths} == {"synthetic_bad.csv", "synthetic_binary.csv",
                                             "synthetic_good.csv"}


def _check(recs: list[Record]) -> None:
    lines = [r.line for r in recs]
    assert lines == sorted(set(lines))  # one record per row, in file order
    for r in recs:
        assert isinstance(r, Record)
        assert r.path == "t.csv"
        if r.line == 0:  # a whole-file reject stands alone
            assert len(recs) == 1 and r.reason.startswith(("binary_file", "unreadable")), r
        elif r.line == 1:  # line 1 is the header: only a header problem is reported there
            assert r.reason.startswith("malformed_row: header"), r
        assert (r.fields is None) != (r.reason is None)
        if r.reason is not None:
            assert r.reason.split(":")[0] in REJECT_CODES
        r.raw.encode("utf-8")
        r.source.encode("utf-8")


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=400))
def test_fuzz_random_bytes_never_raise(tmp_path: Path, data: bytes) -> None:
    _check(_read(tmp_path, data))


_VALID = (FIXTURES / "synthetic_good.csv").read_bytes()
_GOOD = list(read_file(FIXTURES / "synthetic_good.csv", root=FIXTURES))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, len(_VALID)), junk=st.binary(max_size=40),
       at=st.integers(0, len(_VALID)))
def test_fuzz_truncated_and_corrupted_tables_never_raise(tmp_path: Path, cut: int, junk: bytes,
                                                         at: int) -> None:
    data = _VALID[:at] + junk + _VALID[at:cut] if at < cut else _VALID[:cut]
    recs = _read(tmp_path, data)
    _check(recs)
    # every row that ends before the damage is read exactly as in the intact file
    intact = _VALID[:min(at, cut)].count(b"\n")
    if not (len(recs) == 1 and recs[0].line == 0):
        want = [(r.line, r.fields, r.reason) for r in _GOOD if r.line <= intact]
        assert [(r.line, r.fields, r.reason) for r in recs if r.line <= intact] == want
    # never more records than physical lines (csv ends lines at \n, \r or \r\n)
    assert len(recs) <= data.count(b"\n") + data.count(b"\r") + 1


def test_excel_sep_line_and_header_spelling(tmp_path) -> None:
    """Excel's 'sep=,' first line is a directive, not a record; 'MODEL' and 'params_b ' are
    the format's columns; 'sep=;' names the real delimiter in the reject."""
    from pipeline.ingest.sources.published import read_published
    (tmp_path / "a.csv").write_text(
        "sep=,\nSOURCE,Citation,MODEL,params_b ,accelerator,n_accelerators,tokens_per_s\n"
        "lab,lab T1,m,7,H100-SXM5-80GB,8,1000\n")
    (tmp_path / "b.csv").write_text("sep=;\nsource;model\nlab;m\n")
    records = list(read_published(tmp_path))
    good = [r for r in records if r.path.endswith("a.csv")]
    assert len(good) == 1 and good[0].reason is None
    assert good[0].fields["model"] == "m" and good[0].fields["params_b"] == "7"
    bad = [r for r in records if r.path.endswith("b.csv")]
    assert bad[0].reason.startswith("malformed_row: header: Excel's 'sep=;' line: the table is "
                                    "delimited by ';'")


def test_an_unbalanced_quote_in_the_header_is_reported_as_the_headers(tmp_path: Path) -> None:
    """A quote at the very start makes the header swallow the next line: the reject on line 1
    names the header (as a header with a bad column does), and no row is read against it."""
    recs = _read(tmp_path, b'"' + _VALID)
    assert recs[0].line == 1
    assert recs[0].reason.startswith("malformed_row: header: unbalanced quote"), recs[0].reason
    _check(recs)
