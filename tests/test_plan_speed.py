"""The planner's speed work keeps its answers: pipeline/calibrate/hardware.py's nnls (scipy's
compiled kernel loaded without the scipy.optimize package, so `plan` does not import it) gives
scipy.optimize.nnls's result bit for bit, its fallback too, and the planner's command does not
load scipy.optimize at all."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy.optimize import nnls as scipy_nnls

from pipeline.calibrate import hardware
from pipeline.calibrate.hardware import nnls
from pipeline.config import PROJ_ROOT


def _random_problems() -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(20261206)
    out = []
    for m, n in [(1, 1), (3, 2), (6, 3), (18, 4), (30, 6), (8, 8)]:
        for _ in range(25):
            a = rng.normal(size=(m, n)) * 10.0 ** rng.uniform(-6, 3, size=n)
            out.append((a, rng.normal(size=m)))
    return out


def _ring_problem() -> tuple[np.ndarray, np.ndarray]:
    """A ring fit's shape: an alpha column k (p - 1) and per-collective columns of seconds
    per byte-scaled message, with one collective whose coefficient the bound holds at 0."""
    p = np.array([16.0, 32, 64, 128, 256, 512] * 3)
    cols = np.zeros((18, 4))
    cols[:, 0] = 2.0 * (p - 1.0)
    for j in range(3):
        cols[6 * j:6 * j + 6, 1 + j] = np.logspace(-3, 0.5, 6) * (j + 1)
    truth = np.array([2e-5, 6.6, 0.0, 6.5])
    b = cols @ truth + np.r_[np.zeros(12), -0.01 * np.ones(6)]
    b[6:12] -= 0.05
    return cols, b


@pytest.mark.parametrize("problem", [*_random_problems(), _ring_problem()])
def test_nnls_is_scipys_bit_for_bit(problem):
    a, b = problem
    x, rnorm = nnls(a, b)
    y, rnorm_ref = scipy_nnls(a, b)
    assert (x >= 0).all()
    assert np.array_equal(x, y) and rnorm == rnorm_ref


def test_nnls_fallback_is_the_public_function(monkeypatch):
    monkeypatch.setattr(hardware, "_nnls_kernel", lambda: None)
    a, b = _ring_problem()
    x, rnorm = hardware.nnls(a, b)
    y, rnorm_ref = scipy_nnls(a, b)
    assert np.array_equal(x, y) and rnorm == rnorm_ref


def test_nnls_solves_the_problem():
    """A known answer, not only scipy's: the bound holds the third coefficient at 0."""
    a, b = _ring_problem()
    x, _ = nnls(a, b)
    assert x[2] == 0.0 and x[1] == pytest.approx(6.6, rel=0.05)
    assert x[0] >= 0 and x[3] > 0


def test_nnls_all_negative_gradient_is_zero():
    x, rnorm = nnls(np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), np.array([-1.0, -1, -1]))
    assert (x == 0).all() and rnorm == pytest.approx(np.sqrt(3.0))


@pytest.mark.skipif(not (PROJ_ROOT / "data/processed/calibration.parquet").exists(),
                    reason="pipeline outputs absent (run dvc repro)")
def test_plan_command_does_not_import_scipy_optimize():
    code = ("import contextlib, io, runpy, sys\n"
            "sys.argv = ['pipeline', 'plan', 'mixtral-8x7b', 'H100', '--n', '64', '--json']\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n        runpy.run_module('pipeline', run_name='__main__')\n"
            "    except SystemExit:\n        pass\n"
            "print('pipeline.calibrate.hardware' in sys.modules, 'scipy.optimize' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJ_ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out[-2:] == ["True", "False"]


def _mixed_column(rng: np.random.Generator, n: int) -> np.ndarray:
    """Values that compare or hash equal but differ in type or spelling (True, 1, 1.0; None,
    NaN, pd.NA; "true", "True"; np.True_), as a hostile layout table may hold."""
    import pandas as pd
    pool = [True, 1, 1.0, np.True_, False, 0, 0.0, None, np.nan, float("nan"), pd.NA, "true",
            "True", "deepep", "DeepEP", "hybridep", "", "x", 2.5]
    return np.array([pool[i] for i in rng.integers(0, len(pool), n)], dtype=object)


def test_distinct_rows_keeps_types_apart():
    from pipeline.calibrate.families import distinct_rows
    rng = np.random.default_rng(7)
    a, b = _mixed_column(rng, 500), rng.choice([1.0, np.nan, 2.0], 500)
    key, first = distinct_rows(a, b)
    assert (key[first] == np.arange(len(first))).all()  # each key's first row has that key
    for i in range(500):
        j = first[key[i]]
        assert type(a[i]) is type(a[j]) and (a[i] is a[j] or a[i] == a[j]
                                             or (a[i] != a[i] and a[j] != a[j]))
        assert b[i] == b[j] or (np.isnan(b[i]) and np.isnan(b[j]))
    assert distinct_rows(np.array([], dtype=object))[0].size == 0


def test_per_distinct_columns_are_the_per_row_ones():
    """The step function's inputs computed once per distinct value (families.kernels,
    schedule, cluster_of; step._moe_columns) equal the per-row rule on every row."""
    import pandas as pd

    from pipeline.calibrate import families as fam
    from pipeline.calibrate.step import DEDUP_DISPATCHERS, _moe_columns
    from pipeline.frameworks import family_of
    rng = np.random.default_rng(11)
    n = 400
    frame = pd.DataFrame({c: _mixed_column(rng, n) for c in (
        "fused_attention", "tp_comm_overlap", "dp_comm_overlap", "sequence_parallel",
        "moe_a2a_overlap", "moe_dispatcher", "cluster")})
    frame["recompute"] = rng.choice(np.array(["none", "full", "selective", None, "x"],
                                             dtype=object), n)
    frame["framework"] = rng.choice(np.array(["Megatron-LM", "NeMo", "Megatron-DeepSpeed",
                                              None], dtype=object), n)
    fused, tp_ov, dp_ov, _ = fam.kernels(frame)
    stack = {"framework": frame["framework"].to_numpy(), "family": family_of(frame)}
    for got, name in ((fused, "fused_attention"), (tp_ov, "tp_comm_overlap"),
                      (dp_ov, "dp_comm_overlap")):
        raw = frame[name].to_numpy()
        off = [any(stack[col][i] == value and name in names
                   for col, value, _, names in fam.OVERLAPS_OFF_BY_DEFAULT) for i in range(n)]
        want = [bool(x) if isinstance(x, (bool, np.bool_)) else (fam.KERNEL_DEFAULTS[name]
                                                                 and not o)
                for x, o in zip(raw, off)]
        assert got.tolist() == want
    # both stacks are drawn: each rule is exercised, not only the defaults
    assert not dp_ov[frame["framework"].eq("Megatron-DeepSpeed").to_numpy()
                     & frame["dp_comm_overlap"].isna().to_numpy()].any()
    family = rng.choice(np.array(["megatron", "fsdp"], dtype=object), n)
    tp = rng.choice([1.0, 2.0], n)
    rec, _, sp, _ = fam.schedule(frame, family, tp)
    assert rec.tolist() == [fam.RECOMPUTE_CODE.get(r, 0) if isinstance(r, str) else 0
                            for r in frame["recompute"]]
    assert sp.tolist() == [bool(x) if isinstance(x, (bool, np.bool_)) else bool(f == "megatron"
                                                                                and t > 1)
                           for x, f, t in zip(frame["sequence_parallel"], family, tp)]
    cluster, _ = fam.cluster_of(frame, ("x",))
    assert cluster.tolist() == ["x" if isinstance(c, str) and c == "x" else
                                fam.DEFAULT_CLUSTER for c in frame["cluster"]]
    moe = _moe_columns(frame, type("C", (), {"models": pd.DataFrame()})(), np.ones(n))
    assert moe["moe_a2a_overlap"].tolist() == [o is True or str(o).lower() == "true"
                                               for o in frame["moe_a2a_overlap"]]
    assert moe["moe_dispatch_dedup"].tolist() == [str(x).lower() in DEDUP_DISPATCHERS
                                                  for x in frame["moe_dispatcher"]]
