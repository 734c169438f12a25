"""Compressed inputs (``.gz``, ``.zst``) read like plain ones by every reader, streamed; a
corrupt or cut stream is an ``unreadable`` reject with its reason; one binary sniff rule."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest.sources.common import (BINARY_FRACTION, existing, logical_name,
                                            looks_binary, open_binary)
from pipeline.ingest.sources.mlperf import mllog
from pipeline.ingest.sources.mlperf.tree import read_tree
from pipeline.ingest.sources.published import read_file, read_published
from pipeline.ingest.sources.steplogs.reader import find_logs, read_logs

FIXTURES = Path(__file__).resolve().parent / "fixtures"
PARAMS = {"ingest": {"logs": {"warmup_steps": "auto", "max_warmup_fraction": 0.5,
                              "min_steady_steps": 3}}}


def _gz(src: Path, dst: Path) -> Path:
    dst.write_bytes(gzip.compress(src.read_bytes(), mtime=0))
    return dst


def _zst(src: Path, dst: Path) -> Path:
    dst.write_bytes(zstandard.ZstdCompressor().compress(src.read_bytes()))
    return dst


def _cut(path: Path) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


# --- the one sniff rule -------------------------------------------------------------------------

def test_looks_binary_one_threshold() -> None:
    text = b"iteration 10 | elapsed time per iteration (ms): 2409.4\n" * 50
    n = len(text)
    assert not looks_binary(text)
    assert not looks_binary("naïve,café,Grüße\n".encode() * 100)  # UTF-8 text
    assert not looks_binary("caf\xe9 \r\x1b[2K\x08 ok\n".encode("latin-1") * 100)  # latin-1 log
    junk = int(BINARY_FRACTION * n)
    assert not looks_binary(b"\x00" * (junk - 1) + text[: n - junk + 1])  # at the threshold
    assert looks_binary(b"\x00" * (junk + 2) + text[: n - junk - 2])  # just over it
    assert looks_binary("a,b\n".encode("utf-16") * 100)
    assert looks_binary(bytes(range(256)) * 4)
    assert looks_binary(gzip.compress(text))  # a compressed file read raw is not text
    assert not looks_binary(b"")
    # a U+FFFD the text holds is text; only bytes that do not decode are junk
    assert not looks_binary("\ufffd\n".encode())
    assert not looks_binary("loss \ufffd 2.31\n".encode() * 100)
    assert looks_binary(b"\xff\xfe\xfd\n" * 100)
    assert looks_binary(b"\xef" + "\ufffd".encode() + b"\xff" * 40 + b"\n")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs")), max_size=2000))
def test_looks_binary_never_flags_printable_text(text: str) -> None:
    assert not looks_binary((text + "\n").encode("utf-8"))


def test_logical_names(tmp_path: Path) -> None:
    assert logical_name("a/result_0.txt.gz") == "result_0.txt"
    assert logical_name("run.LOG.zst") == "run.LOG"
    assert logical_name("table.csv") == "table.csv"
    (tmp_path / "scaling.json.gz").write_bytes(gzip.compress(b"{}"))
    assert existing(tmp_path / "scaling.json") == tmp_path / "scaling.json.gz"
    assert existing(tmp_path / "absent.json") is None


def test_open_binary_streams_gzip_and_zstd(tmp_path: Path) -> None:
    data = b"".join(b"line %d\n" % i for i in range(100_000))
    plain = tmp_path / "x.log"
    plain.write_bytes(data)
    for path in (_gz(plain, tmp_path / "x.log.gz"), _zst(plain, tmp_path / "x.log.zst")):
        with open_binary(path) as fh:
            first = fh.read(1000)
            assert first == data[:1000]
            assert first + fh.read() == data


# --- published tables ---------------------------------------------------------------------------

def test_published_csv_gz_reads_as_csv(tmp_path: Path) -> None:
    src = FIXTURES / "published" / "synthetic_good.csv"
    plain = list(read_file(src, tmp_path))
    for packed in (_gz(src, tmp_path / "good.csv.gz"), _zst(src, tmp_path / "good.csv.zst")):
        recs = list(read_file(packed, tmp_path))
        assert [(r.line, r.fields, r.reason, r.source) for r in recs] == \
               [(r.line, r.fields, r.reason, r.source) for r in plain]
    # the folder reader finds them by their logical suffix
    found = {r.path for r in read_published(tmp_path, tmp_path)}
    assert found == {"good.csv.gz", "good.csv.zst"}


def test_published_cut_gz_is_an_unreadable_reject_after_its_rows(tmp_path: Path) -> None:
    src = FIXTURES / "published" / "synthetic_good.csv"
    n_rows = sum(1 for r in read_file(src, tmp_path) if r.fields is not None)
    big = tmp_path / "big.csv"
    text = src.read_text()
    header, body = text.split("\n", 1)
    big.write_text(header + "\n" + body * 3000)
    cut = _cut(_gz(big, tmp_path / "big.csv.gz"))
    big.unlink()
    recs = list(read_file(cut, tmp_path))
    assert recs[-1].reason.startswith("unreadable: EOFError: compressed stream cut short")
    assert n_rows < sum(1 for r in recs if r.fields is not None) < 3000 * n_rows


def test_published_not_gzip_is_an_unreadable_reject(tmp_path: Path) -> None:
    bad = tmp_path / "t.csv.gz"
    bad.write_bytes(b"source,citation\nx,y\n")
    (rec,) = read_file(bad, tmp_path)
    assert rec.reason.startswith("unreadable: BadGzipFile: corrupt compressed stream")


# --- MLPerf result trees ------------------------------------------------------------------------

def test_mlperf_tree_gz_equals_plain(tmp_path: Path) -> None:
    src = FIXTURES / "mlperf" / "rounds" / "v9.0"
    plain = {Path(r.path).relative_to(src).as_posix(): r for r in read_tree(src)}
    dst = tmp_path / "v9.0"
    shutil.copytree(src, dst)
    for path in list(dst.rglob("*")):
        if path.is_file() and path.suffix in (".txt", ".json"):
            _gz(path, path.with_name(path.name + ".gz"))
            path.unlink()
    packed = {Path(r.path).relative_to(dst).as_posix()[:-3]: r for r in read_tree(dst)}
    assert set(packed) == set(plain)
    for key, rec in plain.items():
        other = packed[key]
        assert other.reason == rec.reason or (rec.reason and other.reason and
                                              rec.reason.split(":")[0] ==
                                              other.reason.split(":")[0])
        if rec.fields is not None:
            strip = {"provenance"}
            assert {k: v for k, v in other.fields.items() if k not in strip} == \
                   {k: v for k, v in rec.fields.items() if k not in strip}


def test_mllog_cut_gz_raises_a_read_error(tmp_path: Path) -> None:
    src = next((FIXTURES / "mlperf" / "rounds" / "v9.0").rglob("result_*.txt"))
    text = src.read_bytes() * 2000
    raw = tmp_path / "result_0.txt"
    raw.write_bytes(text)
    cut = _cut(_gz(raw, tmp_path / "result_1.txt.gz"))
    with pytest.raises(EOFError):
        mllog.parse_file(cut)


# --- step logs ----------------------------------------------------------------------------------

def test_step_logs_gz_and_zst_give_the_same_runs(tmp_path: Path) -> None:
    src = FIXTURES / "logs" / "megatron"
    plain = {Path(r.path).name: r for r in read_logs(src, PARAMS)[0]}
    dst = tmp_path / "megatron"
    shutil.copytree(src, dst)
    _gz(dst / "gpt_n64.log", dst / "gpt_n64.log.gz")
    _zst(dst / "gpt_n128.log", dst / "gpt_n128.log.zst")
    (dst / "gpt_n64.log").unlink()
    (dst / "gpt_n128.log").unlink()
    assert [p.name for p in find_logs(dst)] == ["gpt_n128.log.zst", "gpt_n64.log.gz"]
    records, steps = read_logs(dst, PARAMS)
    packed = {Path(r.path).name: r for r in records}
    for name, rec in plain.items():
        other = packed[name + (".gz" if "n64" in name else ".zst")]
        assert rec.reason is None and other.reason is None
        for key in ("n_accelerators", "step_time_s", "tokens_per_s", "source"):
            assert other.fields.get(key) == rec.fields.get(key), key
    assert len(steps) > 0


def test_cut_gz_step_log_is_an_unreadable_reject_not_a_skip(tmp_path: Path) -> None:
    src = FIXTURES / "logs" / "megatron"
    dst = tmp_path / "megatron"
    shutil.copytree(src, dst)
    big = dst / "gpt_n64.log"
    big.write_bytes(big.read_bytes() * 50)
    _cut(_gz(big, dst / "gpt_n64.log.gz"))
    big.unlink()
    packed = {Path(r.path).name: r for r in read_logs(dst, PARAMS)[0]}
    assert set(packed) == {"gpt_n128.log", "gpt_n64.log.gz"}
    assert packed["gpt_n64.log.gz"].reason.startswith("unreadable: ")
    assert "compressed stream cut short" in packed["gpt_n64.log.gz"].reason


def test_other_compressions_are_unreadable_rejects_not_skips(tmp_path: Path) -> None:
    src = FIXTURES / "logs" / "megatron"
    dst = tmp_path / "megatron"
    shutil.copytree(src, dst)
    (dst / "gpt_n64.log").rename(dst / "gpt_n64.log.bz2")
    recs = {Path(r.path).name: r for r in read_logs(dst, PARAMS)[0]}
    assert recs["gpt_n64.log.bz2"].reason.startswith(
        "unreadable: ") and ".bz2 compression is not read" in recs["gpt_n64.log.bz2"].reason
    table = tmp_path / "t" / "table.csv.xz"
    table.parent.mkdir()
    table.write_bytes(b"x")
    (rec,) = read_published(table.parent, tmp_path)
    assert rec.reason.startswith("unreadable: OSError: .xz compression is not read")
