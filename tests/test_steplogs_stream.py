"""``stream_logs``: the Records of ``read_logs``, the same and in the same order, yielded as the
workers finish their batches (the ingest core normalizes them while the reading goes on)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest.sources.common import shown_path
from pipeline.ingest.sources.steplogs import reader
from pipeline.ingest.sources.steplogs.reader import find_logs, read_logs, stream_logs

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "logs"
LOGS = {"warmup_steps": "auto", "max_warmup_fraction": 0.5, "min_steady_steps": 3}


def _params(workers: int) -> dict:
    return {"ingest": {"logs": {**LOGS, "workers": workers}}}


def _seen(records) -> list:
    return [(r.source, r.path, r.line, r.fields or r.reason, dict(r.meta)) for r in records]


@pytest.mark.parametrize("workers", [1, 2])
def test_the_stream_is_read_logs_record_for_record(tmp_path, workers, monkeypatch):
    """Small batches (3 logs) and a low 'large log' bar, so that batches finish out of path
    order and large logs are read first: the stream still comes in path order, equal to
    read_logs' list, steps files included."""
    monkeypatch.setattr(reader, "BATCH_FILES", 3)
    monkeypatch.setattr(reader, "BIG_LOG_BYTES", 2_000)
    listed, _ = read_logs(FIXTURES, _params(workers), steps_dir=tmp_path / "a")
    streamed = list(stream_logs(FIXTURES, _params(workers), tmp_path / "b"))
    assert _seen(streamed) == _seen(listed)
    # ... and in path order, as one process reading the logs one after another gives them
    # (read_logs shares the streaming code: this is what pins the order)
    assert [r.path for r in streamed] == [shown_path(p) for p in find_logs(FIXTURES)]
    one_by_one, _ = read_logs(FIXTURES, _params(1))
    assert [s[:4] for s in _seen(streamed)] == [s[:4] for s in _seen(one_by_one)]
    assert len(streamed) == len(find_logs(FIXTURES)) == 42
    sizes = [p.stat().st_size for p in find_logs(FIXTURES)]
    assert sum(s >= 2_000 for s in sizes) >= 3  # some logs were handed out ahead of path order
    assert sorted(p.name for p in (tmp_path / "b").glob("*.arrow")) == sorted(
        p.name for p in (tmp_path / "a").glob("*.arrow"))


def test_the_reading_starts_before_the_first_record_is_asked_for(tmp_path, monkeypatch):
    """The batches are handed out when ``stream_logs`` returns: the steps files appear while
    nobody has taken a record yet (that is what lets the reading overlap other work)."""
    import time

    monkeypatch.setattr(reader, "BATCH_FILES", 4)
    stream = stream_logs(FIXTURES, _params(2), tmp_path)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob("*.arrow")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(tmp_path.glob("*.arrow"))
    assert len(list(stream)) == len(find_logs(FIXTURES)) == 42


def test_closing_the_stream_early_stops_the_workers(tmp_path, monkeypatch):
    """A stage that stops (an error downstream) closes the stream: the pool shuts down without
    reading the batches still queued, and the stream yields nothing more."""
    monkeypatch.setattr(reader, "BATCH_FILES", 1)
    stream = stream_logs(FIXTURES, _params(2), tmp_path)
    first = next(stream)
    assert first.path.endswith(find_logs(FIXTURES)[0].name)
    stream.close()
    assert list(stream) == []


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a", "a.b", "a-b", "a0", "B", "a b", "é"]),
                         min_size=1, max_size=3), min_size=1, max_size=12))
def test_find_logs_lists_in_path_order(tmp_path_factory, folders) -> None:
    """The logs come in the order of sorted Paths (component by component: ``a/x.log`` before
    ``a-b/x.log`` and ``a.b/x.log``, though '-' and '.' sort before '/' as text), from the
    texts of the listing."""
    root = tmp_path_factory.mktemp("order")
    made = set()
    for parts in folders:
        folder = root.joinpath(*parts)
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("x.log", "y.txt.gz", "README.md", "run.yaml"):
            (folder / name).write_bytes(b"")
        made.update({folder / "x.log", folder / "y.txt.gz"})
    got = find_logs(root)
    assert got == sorted(made) and all(isinstance(p, Path) for p in got)
