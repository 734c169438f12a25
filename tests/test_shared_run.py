"""``once_per_session``: a shared run is built once for all xdist workers of a session."""

from __future__ import annotations

from pathlib import Path

import shared_run


class _Factory:
    """A worker's ``tmp_path_factory``: its basetemp is ``<session>/popen-gwN``."""

    def __init__(self, session: Path, worker: str) -> None:
        self.base = session / f"popen-{worker}"
        self.base.mkdir(parents=True, exist_ok=True)

    def getbasetemp(self) -> Path:
        return self.base

    def mktemp(self, name: str) -> Path:
        path = self.base / name
        path.mkdir()
        return path


def test_two_workers_share_one_build(tmp_path: Path, monkeypatch) -> None:
    built: list[Path] = []

    def build(folder: Path) -> dict[str, Path]:
        built.append(folder)
        (folder / "out.txt").write_text("x")
        return {"out": folder / "out.txt"}

    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    monkeypatch.setattr(shared_run, "_IN_PROCESS", {})
    first = shared_run.once_per_session(_Factory(tmp_path, "gw0"), "run", build)
    # the other worker is another process: nothing in memory, the files and the pickle on disk
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setattr(shared_run, "_IN_PROCESS", {})
    second = shared_run.once_per_session(_Factory(tmp_path, "gw1"), "run", build)
    assert built == [tmp_path / "run"] and first == second == {"out": tmp_path / "run" / "out.txt"}
    # a second session (another basetemp) builds its own
    monkeypatch.setattr(shared_run, "_IN_PROCESS", {})
    shared_run.once_per_session(_Factory(tmp_path / "next", "gw0"), "run", build)
    assert built[-1] == tmp_path / "next" / "run"


def test_without_xdist_it_is_an_in_process_cache(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.setattr(shared_run, "_IN_PROCESS", {})
    calls: list[Path] = []
    factory = _Factory(tmp_path, "none")
    for _ in range(2):
        shared_run.once_per_session(factory, "run", lambda folder: calls.append(folder) or 1)
    assert calls == [tmp_path / "popen-none" / "run"]
