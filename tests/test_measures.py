"""pipeline/measures.py: the one home of each derived measure."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pipeline.measures import (extrapolation_grid, finished, flop_per_token, n_at_efficiency,
                               series_runs, training_flop)


def test_flop_per_token_and_training_compute():
    # GPT-3 175B shape (L=96, d=12288, T=2048): 6N + 12 L d T
    assert flop_per_token(175e9, 96, 12288, 2048) == (6 * 175e9 + 12 * 96 * 12288 * 2048, True)
    assert flop_per_token(175e9, 96, None, 2048) == (6 * 175e9, False)
    assert training_flop(70e9, 1.4e12) == pytest.approx(5.88e23, rel=1e-12)  # Chinchilla 70B


def test_finished_runs_and_series_points():
    runs = pd.DataFrame({"series_id": ["a"] * 5 + ["b"],
                         "status": ["ok", None, "oom", "ok", "aborted", "ok"],
                         "y": [1.0, 2.0, 3.0, np.nan, 5.0, 6.0]})
    assert finished(runs).index.tolist() == [0, 1, 3, 5]  # missing status counts as ok
    assert series_runs(runs, "a", "y").index.tolist() == [0, 1]  # and a positive y
    assert finished(runs.drop(columns="status")).equals(runs.drop(columns="status"))


def test_extrapolation_grid_holds_n_min_and_every_target():
    grid = extrapolation_grid(8.0, [10000, 100000], 48)
    assert grid[0] == 8.0 and grid[-1] == 100000.0 and 10000.0 in grid
    assert len(grid) == 49 and np.all(np.diff(grid) > 0)  # 100000 is a log point too


def test_n_at_efficiency_interpolates_or_finds_the_root():
    n = np.array([100.0, 1000.0])
    assert n_at_efficiency(n, np.array([0.9, 0.1]), 0.5) == pytest.approx(math.sqrt(1e5))
    assert math.isnan(n_at_efficiency(n, np.array([0.9, 0.8]), 0.5))
    assert n_at_efficiency(n, np.array([0.4, 0.3]), 0.5) == 100.0
    # with the continuous curve E = 1 / (1 + N / 500): E = 0.5 exactly at N = 500
    grid = np.geomspace(10, 1e5, 9)
    eff = 1 / (1 + grid / 500)
    exact = n_at_efficiency(grid, eff, 0.5, efficiency_of=lambda x: 1 / (1 + x / 500))
    assert exact == pytest.approx(500.0, rel=1e-9)
    assert n_at_efficiency(grid, eff, 0.5) != pytest.approx(500.0, rel=1e-3)  # the grid's own
