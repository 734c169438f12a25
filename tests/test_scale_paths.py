"""The shortcuts that keep cost linear in the data give the results of the plain way.

Small step logs are read in batches (one steps file per batch, folder listings, resolved
folders and sidecar texts memoized); the theory's candidate layouts are evaluated in chunks;
the fit stage may map its series over processes. Each must change nothing but the cost.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from pipeline.ingest.sources.common import shown_path
from pipeline.ingest.sources.steplogs.reader import read_logs
from tests.workspace import require_shipped

PARAMS = {"ingest": {"logs": {"warmup_steps": "auto", "max_warmup_fraction": 0.5,
                              "min_steady_steps": 3, "workers": 1}}}
LOG = "".join(f'{{"step": {i}, "step_time_s": {2.0 + (i % 3) / 100}, "tokens_per_s": 1000}}\n'
              for i in range(1, 13))


def _job(folder: Path, sidecar: str, log: str = LOG) -> Path:
    folder.mkdir(parents=True)
    (folder / "run.yaml").write_text(sidecar, encoding="utf-8")
    (folder / "train.jsonl").write_text(log, encoding="utf-8")
    return folder / "train.jsonl"


def test_a_sidecar_text_seen_before_is_checked_and_named_per_file(tmp_path: Path) -> None:
    """Identical sidecar texts are parsed once, but each log's reject names its own file."""
    bad = "accelerator: H100-SXM5-80GB\nn_accelerators: 8\ntokens_per_s: 5\n"
    good = "accelerator: H100-SXM5-80GB\nn_accelerators: 8\n"
    for name, text in (("a", bad), ("b", good), ("c", bad), ("d", good)):
        _job(tmp_path / "logs" / name, text)
    records, _ = read_logs(tmp_path / "logs", PARAMS)
    by_folder = {Path(r.path).parent.name: r for r in records}
    for name in ("a", "c"):
        assert by_folder[name].reason.startswith("bad_value")
        assert f"{name}/run.yaml" in by_folder[name].reason
    assert by_folder["b"].fields["n_accelerators"] == by_folder["d"].fields["n_accelerators"] == 8


def test_batched_workers_give_the_records_and_rows_of_one_process(tmp_path: Path) -> None:
    """200 logs in batches over 2 workers, rows streamed to files: the records and step rows
    of the one-process in-memory read."""
    for i in range(200):
        _job(tmp_path / "logs" / f"n{i}", f"accelerator: H100-SXM5-80GB\nn_accelerators: {i + 1}\n")
    one, rows = read_logs(tmp_path / "logs", PARAMS)
    params = {"ingest": {"logs": {**PARAMS["ingest"]["logs"], "workers": 2}}}
    two, _ = read_logs(tmp_path / "logs", params, steps_dir=tmp_path / "steps")
    assert [r.fields or r.reason for r in one] == [r.fields or r.reason for r in two]
    files = {r.meta["steps_file"] for r in two}
    assert 1 < len(files) < 200  # batched: fewer files than logs
    import pyarrow.dataset as ds
    back = ds.dataset(sorted((tmp_path / "steps").glob("*.arrow")), format="arrow").to_table()
    back = back.to_pandas()
    for c in ("path", "format"):
        back[c] = back[c].astype(object)
    keys = ["path", "step", "segment", "rank", "line"]
    assert len(rows) == 200 * 12
    pd.testing.assert_frame_equal(back.sort_values(keys, ignore_index=True),
                                  rows.sort_values(keys, ignore_index=True))


def test_memoized_shown_path_is_the_plain_one(tmp_path: Path) -> None:
    """Folders resolved once and reused give the names ``project_relative`` gives, through a
    symlinked folder and a ``..`` too."""
    real = tmp_path / "real" / "deep"
    real.mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    memo: dict = {}
    for path in (real / "a.log", tmp_path / "link" / "deep" / "b.log",
                 tmp_path / "link" / ".." / "real" / "c.log", Path("data/raw/x.log"),
                 Path(os.sep) / "d.log"):
        assert shown_path(path, folders=memo) == shown_path(path)
        assert shown_path(path, folders=memo) == shown_path(path)  # from the memo


def test_bounds_in_chunks_equal_bounds_at_once(params, catalog, monkeypatch) -> None:
    """The runs x layouts grid cut into chunks of a few candidates gives the same rows."""
    from pipeline.theory import bounds as module
    from tests.test_theory_bounds import _runs

    runs = pd.concat([_runs()] * 7, ignore_index=True)
    runs["run_id"] = [f"{r}-{i}" for i, r in enumerate(runs["run_id"])]
    whole = module.compute_bounds(runs, catalog, params)
    calls = []
    plain = module._candidates
    monkeypatch.setattr(module, "_candidates", lambda *a: calls.append(1) or plain(*a))
    monkeypatch.setattr(module, "CANDIDATES_PER_CHUNK", 50)
    pd.testing.assert_frame_equal(module.compute_bounds(runs, catalog, params), whole)
    assert len(calls) > 3


@pytest.mark.slow
def test_fit_over_worker_processes_writes_the_same_bytes(tmp_path: Path, monkeypatch) -> None:
    """``fit.workers`` processes (the pool used even for few series) write what one does."""
    from pipeline.fit import workers
    from tests.test_laws_stage import PARAMS as FIT_PARAMS
    from tests.test_laws_stage import _run

    _run(tmp_path, FIT_PARAMS, "one")
    monkeypatch.delenv("SCALEWALL_WORKERS", raising=False)   # the pool, even under xdist
    monkeypatch.setattr(workers, "MIN_PARALLEL", 1)
    _run(tmp_path, {**FIT_PARAMS, "fit": {**FIT_PARAMS["fit"], "workers": 2}}, "two")
    for name in ("fits.parquet", "extrapolation.parquet", "fit_curves.parquet", "fit.json",
                 "plots/fit_efficiency.csv"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


@pytest.mark.slow
def test_calibrate_over_worker_processes_writes_the_same_bytes(tmp_path: Path,
                                                               monkeypatch) -> None:
    """``calibrate.workers`` processes (the forms' fits, held-out refits and frontier draws,
    the pool used even for few runs) write what one process does."""
    from pipeline.calibrate import estimate
    from tests.test_calibrate_stage import _run
    from synthetic_upstream import downstream_params

    params = downstream_params()
    one = _run(tmp_path / "one", {**params, "calibrate": {**params["calibrate"], "workers": 1}})
    monkeypatch.delenv("SCALEWALL_WORKERS", raising=False)   # the pool, even under xdist
    monkeypatch.setattr(estimate, "MIN_PARALLEL_RUNS", 1)
    two = _run(tmp_path / "two", {**params, "calibrate": {**params["calibrate"], "workers": 2}})
    names = ("calibration", "calibrated", "calibrated_forms", "calibrated_frontier",
             "predictions", "selected_targets")
    for name in names:
        assert (one / f"{name}.parquet").read_bytes() == (two / f"{name}.parquet").read_bytes()
    assert ((tmp_path / "one/metrics/calibrate.json").read_bytes()
            == (tmp_path / "two/metrics/calibrate.json").read_bytes())


@pytest.mark.slow
def test_report_figures_over_worker_processes_are_the_same_bytes(tmp_path: Path,
                                                                monkeypatch) -> None:
    """``report.workers`` processes draw every figure (PNG and its audit) byte for byte as one
    process does, on the shipped pipeline outputs."""
    from pipeline.config import PROJ_ROOT, load_params
    from pipeline.report import figures
    from pipeline.report.data import load
    from pipeline.report.stage import report_settings

    processed = PROJ_ROOT / "data/processed"
    require_shipped("data/processed/comparison_curves.parquet")
    data = load(processed, PROJ_ROOT / "reports/metrics")
    cfg = report_settings(load_params())
    drawn = {}
    for workers in (1, 2):
        monkeypatch.delenv("SCALEWALL_WORKERS", raising=False)   # the pool, even under xdist
        paths = figures.make_all(data, tmp_path / str(workers),
                                 cfg.model_copy(update={"workers": workers}))
        drawn[workers] = {name: (Path(p).read_bytes(), _audit_bytes(p)) for name, p in
                          paths.items()}
    assert list(drawn[1]) == list(drawn[2]) and len(drawn[1]) >= 12
    assert drawn[1] == drawn[2]


def _audit_bytes(png: Path) -> bytes:
    from pipeline.report.style import audit_path
    return audit_path(Path(png)).read_bytes()
