"""The rows calibrate costs beyond the data (``pipeline.calibrate.targets``): each series' own
runs, then its largest run at each target N, cut from the runs table in one take."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipeline.calibrate.targets import _costed_rows, _scaled_runs
from pipeline.fit.series import series_points


def _runs() -> pd.DataFrame:
    return pd.DataFrame({
        "run_id": ["a1", "a2", "a3", "b1", "b2"],
        "series_id": ["A", "A", "A", "B", "B"],
        "status": ["ok"] * 5,
        "n_accelerators": [8, 64, 16, 32, 128],
        "dp": [1.0, 8.0, 2.0, 4.0, 16.0],
        "global_batch_tokens": [1e6, 8e6, 2e6, 4e6, 4e6],
        "model_flops_per_s": [1.0, 7.0, 2.0, 3.0, 10.0],
        "mfu": [0.5, 0.4, 0.45, 0.5, 0.3], "hfu": [0.6, 0.5, 0.55, 0.6, 0.4]})


def _points(runs: pd.DataFrame):
    rows = [pd.Series({"series_id": s, "y_metric": "model_flops_per_s"}) for s in ("A", "B")]
    return [series_points(runs[runs["series_id"] == r["series_id"]], r) for r in rows]


def test_scaled_runs_grow_dp_with_n_and_the_batch_only_under_weak_scaling():
    largest = _runs().iloc[[1, 4]]          # a2 (64) and b2 (128)
    out = _scaled_runs(largest, [np.array([1024.0]), np.array([1024.0, 4096.0])],
                       np.array([True, False]))
    assert out["run_id"].tolist() == ["a2@1024", "b2@1024", "b2@4096"]
    assert out["n_accelerators"].tolist() == [1024.0, 1024.0, 4096.0]
    assert out["dp"].tolist() == [8.0 * 16, 16.0 * 8, 16.0 * 32]
    # weak (A): the batch grows with N; strong (B): kept
    assert out["global_batch_tokens"].tolist() == [8e6 * 16, 4e6, 4e6]
    assert out[["mfu", "hfu"]].isna().all().all()


def test_costed_rows_interleave_each_series_runs_and_its_targets_in_order():
    runs = _runs()
    a, b = _points(runs)
    out = _costed_rows(runs, [(a, np.array([1024.0]), False),
                              (b, np.array([1024.0, 4096.0]), False)])
    # own runs sorted by N (the points' order), then the largest run scaled to each target
    assert out["run_id"].tolist() == ["a1", "a3", "a2", "a2@1024", "b1", "b2", "b2@1024",
                                      "b2@4096"]
    assert out["dp"].tolist() == [1.0, 2.0, 8.0, 128.0, 4.0, 16.0, 128.0, 512.0]


def test_costed_rows_refuse_points_that_are_not_rows_of_the_runs():
    runs = _runs()
    a, _ = _points(runs)
    other = runs.assign(run_id=runs["run_id"] + "x")
    with pytest.raises(ValueError, match="not rows of these runs"):
        _costed_rows(other, [(a, np.array([1024.0]), False)])
    with pytest.raises(ValueError, match="unique index"):
        _costed_rows(pd.concat([runs, runs]), [(a, np.array([1024.0]), False)])
