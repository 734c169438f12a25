"""calibrate on a fleet's step logs: many sources, runs without a layout, a dense SVD that
fails. Each ends in a fit or in a message that says what the data lack, never a traceback."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline.calibrate import fitting as ft
from pipeline.calibrate.estimate import bare_model, load_data
from pipeline.calibrate.simulate import simulate_runs
from pipeline.calibrate.stage import check_fittable
from pipeline.contracts import InsufficientData

CATALOG = Path(__file__).resolve().parents[1] / "data" / "catalog"
LATENCY = {"kernel_latency_s": 3e-6, "scaleup_latency_s": 2e-6}


@pytest.fixture(scope="module")
def base(catalog):
    return bare_model(catalog, CATALOG, LATENCY, True, 128.0)


def test_runs_without_a_layout_stop_calibrate_saying_what_they_lack(base) -> None:
    runs = simulate_runs(3, base, n_runs=40, n_sources=4)
    check_fittable(load_data(runs, base))                 # these can be fitted: no error
    runs[["tp", "pp"]] = np.nan                           # a fleet's logs, no sidecar layout
    runs.loc[runs.index < 5, "status"] = "failed"
    with pytest.raises(InsufficientData) as err:
        check_fittable(load_data(runs, base))
    text = str(err.value)
    assert "of the 40 runs, 0 state a layout (tp or pp), 40 have a measured MFU" in text
    assert "35 have status ok, and 0 have all three" in text
    assert "sidecars (tp, pp" in text


def test_a_failed_svd_is_solved_again_with_the_jacobians_scaling(base, monkeypatch,
                                                                   capsys) -> None:
    """LAPACK's gesdd failing inside scipy's step is simulated; the retry reaches the optimum
    of the unhindered solve."""
    runs = simulate_runs(5, base, n_runs=120, n_sources=6, sigma_u=0.1)
    data = load_data(runs, base)
    rows, log_t = data.subset(data.fit), data.log_t[data.fit]
    plain = ft.fit_group(rows, log_t, playbook=False, em_rounds=2)
    solve, scales = ft.least_squares, []

    def failing(fun, x0, **kw):
        scales.append(kw["x_scale"])
        if kw["x_scale"] == 1.0:
            raise np.linalg.LinAlgError("SVD did not converge")
        return solve(fun, x0, **kw)

    monkeypatch.setattr(ft, "least_squares", failing)
    retried = ft.fit_group(rows, log_t, playbook=False, em_rounds=2)
    assert scales == [1.0, "jac", 1.0, "jac"]             # each EM round failed, then retried
    assert "SVD did not converge" in capsys.readouterr().err
    np.testing.assert_allclose(retried.population, plain.population, rtol=1e-3, atol=1e-6)
    assert retried.loglik == pytest.approx(plain.loglik, rel=1e-5)
    assert retried.u == pytest.approx(plain.u, abs=1e-4)


def test_thousands_of_sources_are_indexed_in_linear_time(base) -> None:
    """The sources' positions and runs come from a dict and one sort (list.index over
    thousands of campaigns cost runs x sources): each source's count is its runs'."""
    runs = simulate_runs(7, base, n_runs=90, n_sources=30, sigma_u=0.1)
    data = load_data(runs, base)
    rows, log_t = data.subset(data.fit), data.log_t[data.fit]
    g = ft.fit_group(rows, log_t, playbook=False, em_rounds=1)
    assert g.sources == sorted(set(rows.source.tolist())) and len(g.sources) == 30
    assert sum(g.n_runs_source.values()) == log_t.size
    for s, n in g.n_runs_source.items():
        assert n == int((rows.source == s).sum())
