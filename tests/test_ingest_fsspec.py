"""Step-log roots given as fsspec URLs (pipeline/ingest/sources/steplogs/remote.py,
pipeline/ingest/roots.py), against fsspec's own ``memory://`` filesystem (and a ``zip://``
archive in test_processes_dask.py): the same logs give the same records, runs and rejects as
from a local folder, with the URL where the local path was; the root is listed once per
folder; a protocol whose package is missing stops the stage naming the package."""

from __future__ import annotations

import uuid
from pathlib import Path

import fsspec
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from pipeline.__main__ import app
from pipeline.config import load_params
from pipeline.ingest.roots import logs_root
from pipeline.ingest.sources.common import shown_path
from pipeline.ingest.sources.steplogs.reader import is_listed, is_log_name, read_logs
from pipeline.ingest.sources.steplogs.remote import RemoteRoot

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "logs"
CATALOG = Path(__file__).resolve().parents[1] / "data" / "catalog"
LOGS = {"warmup_steps": "auto", "max_warmup_fraction": 0.5, "min_steady_steps": 3}


@pytest.fixture
def memory_logs():
    """The fixture logs copied to a fresh ``memory://`` folder: (its URL, the local folder)."""
    fs = fsspec.filesystem("memory")
    folder = f"/logs-{uuid.uuid4().hex[:8]}"
    fs.put(str(FIXTURES), folder, recursive=True)
    yield f"memory://{folder.lstrip('/')}", FIXTURES
    fs.rm(folder, recursive=True)


def _renamed(value, old: str, new: str):
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {k: _renamed(v, old, new) for k, v in value.items()}
    return value


def _seen(records, old: str = "", new: str = "") -> list:
    return [(r.source, _renamed(r.path, old, new), r.line,
             _renamed(r.fields or r.reason, old, new), dict(r.meta)) for r in records]


@pytest.mark.parametrize("workers", [1, 2])
def test_memory_root_gives_the_local_records_with_urls(memory_logs, workers) -> None:
    url, local = memory_logs
    params = {"ingest": {"logs": {**LOGS, "workers": workers}}}
    root = logs_root(url, "--logs")
    assert isinstance(root, RemoteRoot)
    remote, steps_remote = read_logs(root, params)
    here, steps_here = read_logs(local, params)
    prefix = shown_path(local / "x")[:-1]
    assert len(here) == 42 and sum(r.reason is None for r in here) > 20
    assert _seen(remote) == _seen(here, prefix, url + "/")
    assert all(r.path.startswith(url + "/") for r in remote)
    rejects = [r for r in remote if r.reason is not None]
    assert {r.reason.split(":", 1)[0] for r in rejects} >= {"binary_file", "truncated_log"}
    assert steps_remote.assign(path=steps_remote.path.str.replace(url + "/", prefix)).equals(
        steps_here)


def test_the_root_is_listed_once_per_folder(memory_logs, monkeypatch) -> None:
    url, local = memory_logs
    calls: list[str] = []
    cls = type(fsspec.filesystem("memory"))
    ls = cls.ls

    def counted(self, path, detail=True, **kwargs):
        calls.append(path)
        return ls(self, path, detail=detail, **kwargs)

    for name in ("info", "size", "isfile", "exists"):  # no request per file
        monkeypatch.setattr(cls, name, lambda *a, **k: pytest.fail(f"{name} per file"))
    monkeypatch.setattr(cls, "ls", counted)
    paths, sizes, _ = logs_root(url, "--logs").list(lambda name: is_log_name(name) or is_listed(name))
    folders = sum(1 for p in local.rglob("*") if p.is_dir()) + 1
    assert len(calls) == folders and len(set(calls)) == folders
    assert len(paths) == 42 and sizes[0] == (local / paths[0].split("/", 2)[2]).stat().st_size


def test_a_log_that_cannot_be_fetched_is_a_reject_naming_its_url(memory_logs,
                                                                 monkeypatch) -> None:
    url, _ = memory_logs
    cls = type(fsspec.filesystem("memory"))
    cat_file = cls.cat_file

    def failing(self, path, *args, **kwargs):
        if path.endswith("gpt_n64.log"):
            raise PermissionError(13, "Access Denied")
        return cat_file(self, path, *args, **kwargs)

    monkeypatch.setattr(cls, "cat_file", failing)
    records, _ = read_logs(logs_root(url, "--logs"), {"ingest": {"logs": {**LOGS, "workers": 1}}})
    [bad] = [r for r in records if r.path.endswith("gpt_n64.log")]
    assert bad.path == f"{url}/megatron/gpt_n64.log"
    assert bad.reason.startswith("unreadable: ") and bad.path in bad.reason


def _ingest(tmp_path: Path, logs: list[str], out: str):
    params = load_params()
    params["ingest"]["mlperf_roots"] = []
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    (tmp_path / "published").mkdir(exist_ok=True)
    args = ["ingest", "--published", str(tmp_path / "published"), "--catalog", str(CATALOG),
            "--out", str(tmp_path / out), "--metrics", str(tmp_path / out / "ingest.json"),
            "--params", str(tmp_path / "params.yaml")]
    for root in logs:
        args += ["--logs", root]
    return CliRunner().invoke(app, args)


def _frame(path: Path, old: str, new: str) -> pd.DataFrame:
    df = pd.read_parquet(path).drop(columns=["run_id"], errors="ignore")
    for name in df.columns:
        if df[name].dtype == object:
            df[name] = df[name].map(lambda v: v.replace(old, new) if isinstance(v, str) else v)
    sort = [c for c in ("path", "citation", "provenance", "reason") if c in df.columns]
    return df.sort_values(sort).reset_index(drop=True)


def test_the_stage_reads_a_memory_root_as_the_local_folder(tmp_path: Path, memory_logs) -> None:
    """Runs and rejects the same but for the path shown (and the run ids, which hash a log's
    path: the same log at another place is another file)."""
    url, local = memory_logs
    here, remote = _ingest(tmp_path, [str(local)], "a"), _ingest(tmp_path, [url], "b")
    assert here.exit_code == 0 and remote.exit_code == 0, remote.output
    prefix = shown_path(local / "x")[:-1]
    for name in ("runs.parquet", "rejects.parquet"):
        a, b = _frame(tmp_path / "a" / name, "", ""), _frame(tmp_path / "b" / name, url + "/",
                                                            prefix)
        pd.testing.assert_frame_equal(a, b)
    assert (pd.read_parquet(tmp_path / "b" / "rejects.parquet").path.str.startswith(url)).all()


def test_two_roots_are_read_one_after_the_other(tmp_path: Path, memory_logs) -> None:
    url, local = memory_logs
    both = _ingest(tmp_path, [str(local / "megatron"), url + "/nasty"], "c")
    assert both.exit_code == 0, both.output
    rejects = pd.read_parquet(tmp_path / "c" / "rejects.parquet")
    runs = pd.read_parquet(tmp_path / "c" / "runs.parquet")
    assert (rejects.path.str.startswith(url + "/nasty/")).all() and len(rejects) > 3
    assert set(runs.citation.str.split("/").str[-1]) >= {"gpt_n64.log", "gpt_n128.log"}


@pytest.mark.parametrize(("url", "package"), [("s3://fleet-logs/2026/", "s3fs"),
                                              ("gs://fleet-logs/2026/", "gcsfs")])
def test_a_store_without_its_package_stops_the_stage_naming_it(tmp_path: Path, url: str,
                                                               package: str) -> None:
    try:
        fsspec.get_filesystem_class(url.split(":")[0])
        pytest.skip(f"{package} is installed here")
    except ImportError:
        pass
    result = _ingest(tmp_path, [url], "a")
    assert result.exit_code == 2
    assert "--logs" in result.output and package in result.output and url in result.output
    assert not (tmp_path / "a" / "runs.parquet").exists()


def test_a_log_named_like_a_pattern_is_fetched_as_named(memory_logs) -> None:
    url, local = memory_logs
    fs = fsspec.filesystem("memory")
    root = logs_root(url, "--logs")
    fs.pipe(f"{root.path}/megatron/gpt[n64].log", (local / "megatron" / "gpt_n64.log").read_bytes())
    records, _ = read_logs(root, {"ingest": {"logs": {**LOGS, "workers": 1}}})
    [odd] = [r for r in records if r.path.endswith("gpt[n64].log")]
    assert odd.path == f"{url}/megatron/gpt[n64].log"
    assert odd.reason is None or not odd.reason.startswith("unreadable"), odd.reason


def test_without_room_in_dev_shm_a_batch_goes_to_tmpdir(memory_logs, monkeypatch,
                                                        tmp_path: Path) -> None:
    from pipeline.ingest.sources.steplogs import remote

    url, _ = memory_logs
    params = {"ingest": {"logs": {**LOGS, "workers": 1}}}
    made: list[str | None] = []
    mkdtemp = remote.tempfile.mkdtemp

    def recorded(suffix=None, prefix=None, dir=None):  # noqa: A002 - mkdtemp's own name
        made.append(dir)
        return mkdtemp(suffix, prefix, dir)

    monkeypatch.setattr(remote.tempfile, "mkdtemp", recorded)
    in_shm, _ = read_logs(logs_root(url, "--logs"), params)
    assert set(made) == {remote.SHM}
    made.clear()
    monkeypatch.setattr(remote, "SHM", str(tmp_path / "absent"))
    in_tmp, _ = read_logs(logs_root(url, "--logs"), params)
    assert made and set(made) == {None}  # TMPDIR
    assert _seen(in_tmp) == _seen(in_shm)
