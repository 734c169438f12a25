"""Tables as one Parquet file or a folder of parts (pipeline/io_parts.py): up to the row
threshold the file is the bytes one ParquetWriter writes; past it a folder of parts of that many
rows, the same bytes on a rerun; every reader of runs/steps gets the single file's frame."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.config import load_params
from pipeline.fit.contract import STAGE as FIT
from pipeline.ingest import stage as ingest_stage
from pipeline.io import PARQUET_OPTIONS
from pipeline.io_parts import PartsWriter, part_files, prefix_digits, read_frame, read_schema
from pipeline.plan.coverage import _read_columns
from pipeline.runner import read_inputs

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "logs"
CATALOG = Path(__file__).resolve().parents[1] / "data" / "catalog"


IDS = sorted(hashlib.sha1(str(i).encode()).hexdigest()[:16] for i in range(40))


def _table(n: int, start: int = 0) -> pa.Table:
    return pa.Table.from_pandas(pd.DataFrame({"run_id": IDS[start:start + n],
                                              "x": pd.array(range(n), dtype="Int64")}),
                                preserve_index=False)


def _write(path: Path, max_rows: int, slices: list[pa.Table]) -> None:
    rows = sum(t.num_rows for t in slices)
    with PartsWriter(path, max_rows, slices[0].schema, rows=rows) as writer:
        for t in slices:
            writer.write_table(t)


def test_prefix_digits() -> None:
    assert [prefix_digits(rows, 10) for rows in (0, 10, 11, 160, 161, 2560, 2561)] == [
        0, 0, 1, 1, 2, 2, 3]


def test_up_to_the_threshold_one_file_as_one_writer_writes_it(tmp_path: Path) -> None:
    slices = [_table(5), _table(5, 5)]
    _write(tmp_path / "a.parquet", 10, slices)
    with pq.ParquetWriter(tmp_path / "b.parquet", slices[0].schema, **PARQUET_OPTIONS) as w:
        for t in slices:
            w.write_table(t)
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.parquet", "b.parquet"]


def test_past_the_threshold_a_part_per_run_id_prefix_read_as_the_file(tmp_path: Path) -> None:
    slices = [_table(15), _table(20, 15), _table(5, 35)]
    _write(tmp_path / "one.parquet", 100, slices)
    _write(tmp_path / "t.parquet", 4, slices)  # 40 rows > 4: one hex digit (16 parts at most)
    parts = part_files(tmp_path / "t.parquet")
    assert [p.name for p in parts] == [f"part-{c}.parquet"
                                       for c in sorted({i[0] for i in IDS})]
    for part in parts:
        ids = pq.read_table(part).column("run_id").to_pylist()
        assert {i[0] for i in ids} == {part.name[5]}
    single = pd.read_parquet(tmp_path / "one.parquet")
    pd.testing.assert_frame_equal(read_frame(tmp_path / "t.parquet"), single)
    pd.testing.assert_frame_equal(read_frame(tmp_path / "t.parquet", columns=["x"]),
                                  single[["x"]])
    assert read_schema(tmp_path / "t.parquet") == read_schema(tmp_path / "one.parquet")
    _write(tmp_path / "t.parquet", 100, slices)  # back to one file: the folder is replaced
    assert (tmp_path / "t.parquet").read_bytes() == (tmp_path / "one.parquet").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.parquet", "t.parquet"]


def test_a_run_added_changes_its_own_part_only(tmp_path: Path) -> None:
    _write(tmp_path / "a.parquet", 4, [_table(39)])
    _write(tmp_path / "b.parquet", 4, [_table(40)])  # IDS[39] added
    a, b = digests(tmp_path / "a.parquet"), digests(tmp_path / "b.parquet")
    assert [k for k in b if a.get(k) != b[k]] == [f"part-{IDS[39][0]}.parquet"]


def test_rows_out_of_key_order_are_a_bug(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="not sorted"):
        _write(tmp_path / "t.parquet", 2, [_table(3, 30), _table(3)])
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_the_old_output(tmp_path: Path) -> None:
    _write(tmp_path / "t.parquet", 100, [_table(3)])
    before = (tmp_path / "t.parquet").read_bytes()
    with pytest.raises(RuntimeError), PartsWriter(tmp_path / "t.parquet", 2,
                                                  _table(0).schema, rows=5) as writer:
        writer.write_table(_table(5))
        raise RuntimeError("stopped")
    assert (tmp_path / "t.parquet").read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]



def _dead_pid() -> int:
    """A pid no process runs under (``pipeline.io.pid_alive`` says so)."""
    from pipeline.io import pid_alive
    return next(pid for pid in range(4_000_000, 4_100_000) if not pid_alive(pid))


def test_partials_of_killed_writers_are_removed_a_live_ones_kept(tmp_path: Path) -> None:
    """A killed writer's partial file, folder of parts and moved-aside old output are removed
    the next time the table is written (``io.remove_stale_partials``); a running writer's are
    kept, and ``atomic_path`` removes only its own name's partial files."""
    import os
    from pipeline.io import PARTIAL_PREFIX, write_parquet
    dead, live = _dead_pid(), os.getppid()
    stale = [tmp_path / f"{PARTIAL_PREFIX}{dead}-t.parquet",
             tmp_path / f"{PARTIAL_PREFIX}{dead}-t.parquet.d",
             tmp_path / f"{PARTIAL_PREFIX}{dead}-old-t.parquet"]
    stale[0].write_bytes(b"cut")
    stale[1].mkdir()
    (stale[1] / "part-0.parquet").write_bytes(b"cut")
    stale[2].mkdir()
    running = tmp_path / f"{PARTIAL_PREFIX}{live}-t.parquet.d"
    running.mkdir()
    other = tmp_path / f"{PARTIAL_PREFIX}{dead}-u.parquet.d"
    other.mkdir()
    _write(tmp_path / "t.parquet", 2, [_table(5)])
    assert not any(p.exists() for p in stale) and running.is_dir() and other.is_dir()
    write_parquet(pd.DataFrame({"x": [1]}), tmp_path / "u.parquet")
    assert other.is_dir()  # a file's writer removes files of its name only, no suffix
    (tmp_path / f"{PARTIAL_PREFIX}{dead}-u.parquet").write_bytes(b"cut")
    write_parquet(pd.DataFrame({"x": [1]}), tmp_path / "u.parquet")
    assert not (tmp_path / f"{PARTIAL_PREFIX}{dead}-u.parquet").exists()

def _ingest(out: Path, partition_rows: int | None = None) -> Path:
    params = load_params()
    params["ingest"]["mlperf_roots"] = []
    if partition_rows:
        params["ingest"]["partition_rows"] = partition_rows
    ingest_stage.run(params, published_dir=out / "none", logs_dir=FIXTURES,
                     catalog_dir=CATALOG, out_dir=out, metrics_path=out / "ingest.json")
    return out


def digests(out: Path) -> dict[str, str]:
    """md5 of every file under ``out`` (parts included), by path below it."""
    return {p.relative_to(out).as_posix(): hashlib.md5(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("*")) if p.is_file()}


def test_a_small_threshold_partitions_runs_and_steps_the_same_bytes_each_run(
        tmp_path: Path) -> None:
    one = _ingest(tmp_path / "one")
    parts, again = _ingest(tmp_path / "parts", 3), _ingest(tmp_path / "again", 3)
    for name in ("runs.parquet", "steps.parquet"):
        assert (one / name).is_file() and (parts / name).is_dir()
        assert len(part_files(parts / name)) > 2
        for part in part_files(parts / name):  # one part per first hex digit of run_id
            assert set(pq.read_table(part).column("run_id").to_pylist()) == {
                i for i in pd.read_parquet(one / name).run_id if i[0] == part.name[5]}
        pd.testing.assert_frame_equal(read_frame(parts / name), pd.read_parquet(one / name))
    assert digests(parts) == digests(again)
    for name in ("rejects.parquet", "series.parquet", "power.parquet"):
        assert (one / name).read_bytes() == (parts / name).read_bytes()
    # the stages' reader (fit reads runs.parquet) and the planner's give the single file's frame
    frames = [read_inputs(FIT, out, out, None).frames["runs.parquet"] for out in (one, parts)]
    pd.testing.assert_frame_equal(*frames)
    pd.testing.assert_frame_equal(_read_columns(parts / "runs.parquet", ("run_id", "model")),
                                  _read_columns(one / "runs.parquet", ("run_id", "model")))
