"""The calibrate fits' cost-saving paths give the numbers of the plain ones, bit for bit: the
source effects' Jacobian columns (written from the rows they move) against scipy's forward
differences, and the leave-group-out conformal quantiles (one sort) against the definition."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize._numdiff import approx_derivative

from pipeline.calibrate import fitting as ft
from pipeline.calibrate import intervals as iv
from pipeline.calibrate.critical_path import PARAMETERS
from pipeline.calibrate.estimate import bare_model, load_data
from pipeline.calibrate.simulate import simulate_runs

CATALOG = Path(__file__).resolve().parents[1] / "data" / "catalog"
LATENCY = {"kernel_latency_s": 3e-6, "scaleup_latency_s": 2e-6}


@pytest.mark.parametrize("families", [1, 3])
def test_jacobian_columns_are_scipys_forward_differences(catalog, monkeypatch, families) -> None:
    """At every solve's start (cold and warm, every EM round), fit_group's Jacobian is the one
    scipy's 2-point differences give, bit for bit, so the solver takes the same path: the
    source effects' columns, the family values' (one stacked step-function call; with three
    families, the deviations' columns move only their family's runs) and the held parameter's."""
    base = bare_model(catalog, CATALOG, LATENCY, True, 128.0)
    runs = simulate_runs(1, base, n_runs=120, n_sources=6, sigma_u=0.1)
    if families == 3:
        runs.loc[runs.index % 3 == 1, "strategy"] = "deepspeed"
        runs.loc[runs.index % 3 == 2, "strategy"] = "fsdp"
    data = load_data(runs, base)
    checked = []
    solve = ft.least_squares

    def compare(fun, x0, **kw):
        x = np.asarray(x0, float) + 0.01 * np.arange(x0.size)   # off the start, u != 0
        ours = kw["jac"](x)
        theirs = approx_derivative(fun, x, method="2-point", f0=fun(x))
        checked.append((ours.shape, np.array_equal(ours, theirs)))
        return solve(fun, x0, **kw)

    monkeypatch.setattr(ft, "least_squares", compare)
    free = tuple(p for p in PARAMETERS if p != "attention_efficiency")
    g = ft.fit_group(data.subset(data.fit), data.log_t[data.fit], playbook=False, free=free,
                     em_rounds=2)
    ft.fit_group(data.subset(data.fit), data.log_t[data.fit], playbook=False, free=free,
                 start=g, fixed_sigma=g)
    assert len(g.sources) == 6 and len(checked) == 3 and len(g.families) == families
    assert all(shape[1] > len(PARAMETERS) + 5 for shape, _ in checked)  # source columns there
    assert all(same for _, same in checked)


def _by_definition(scores: np.ndarray, groups: np.ndarray, level: float) -> np.ndarray:
    ok = np.isfinite(scores)
    out = np.full(scores.size, np.nan)
    for g in np.unique(groups.astype(str)):
        mine = groups.astype(str) == g
        out[mine] = iv.conformal_quantile(scores[ok & ~mine], level)
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 0.1, 0.2, 0.5, 1.0, 3.0, np.nan, np.inf]),
                          st.integers(0, 6)), min_size=1, max_size=40),
       st.sampled_from([0.5, 0.8, 0.9, 0.95]))
def test_leave_group_out_quantile_is_the_definition(cases, level) -> None:
    """Ties, NaN and infinite scores, groups of any size: the same order statistic as sorting
    the other groups' finite scores case by case."""
    scores = np.array([s for s, _ in cases], float)
    groups = np.array([g for _, g in cases], dtype=object)
    assert np.array_equal(iv.leave_group_out_quantile(scores, groups, level),
                          _by_definition(scores, groups, level), equal_nan=True)
