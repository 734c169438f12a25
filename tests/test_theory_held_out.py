"""The memory model's held-out-by-model predictions (pipeline/theory/memory_fit.py:
held_out_predictions) against the direct definition: for every group, the overhead fitted on
all rows of the other groups, unfitted rows and unseen families included."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline.config import load_params, settings
from pipeline.folds import group_folds
from pipeline.theory.memory_fit import _fit, fit_rows, held_out_predictions

GB = 1e9


def _rows(seed: int = 3) -> pd.DataFrame:
    """Peaks of three families over eight groups: some groups without any measured peak, one
    family (fsdp) only in unmeasured rows, a few rows with no predicted memory at all."""
    rng = np.random.default_rng(seed)
    n = 160
    group = rng.choice([f"src{i}:m{i}" for i in range(8)], n)
    family = np.where(rng.random(n) < 0.5, "playbook", "megatron").astype(object)
    fixed = rng.uniform(5, 40, n) * GB
    activations = rng.uniform(1, 20, n) * GB
    measured = (fixed + np.where(family == "playbook", 1.7, 1.0) * activations + 2 * GB) \
        * rng.lognormal(0, 0.05, n)
    silent = np.isin(group, ["src2:m2", "src5:m5"])  # groups that report no peak
    measured[silent] = np.nan
    family[silent & (rng.random(n) < 0.5)] = "fsdp"
    fixed[:3], activations[:3] = 0.0, 0.0  # nothing predicted: not fittable
    return pd.DataFrame({"group": group, "family": family, "fixed": fixed,
                         "activations": activations, "measured": measured})


def _direct(rows: pd.DataFrame, cfg) -> np.ndarray:
    """The definition: one fit per group on every row outside it."""
    fixed, act = rows["fixed"].to_numpy(float), rows["activations"].to_numpy(float)
    measured, family = rows["measured"].to_numpy(float), rows["family"].to_numpy(object)
    pred = np.full(len(rows), np.nan)
    for g in rows["group"].unique():
        mine = (rows["group"] == g).to_numpy()
        fit = _fit(fixed[~mine], act[~mine], measured[~mine], family[~mine], cfg)
        pred[mine] = fixed[mine] + fit.factors(family[mine]) * act[mine] \
            + fit.overhead.fixed_bytes
    return pred


def test_held_out_predictions_equal_one_fit_per_group_on_every_other_row() -> None:
    cfg = settings(load_params(), "theory").memory
    rows = _rows()
    args = (rows["group"], rows["fixed"].to_numpy(float), rows["activations"].to_numpy(float),
            rows["measured"].to_numpy(float), rows["family"].to_numpy(object), cfg)
    direct = _direct(rows, cfg)
    assert np.isfinite(direct[3:]).all()
    # bit for bit, in one process and over two (the fits do not depend on where they run)
    np.testing.assert_array_equal(held_out_predictions(*args), direct)
    np.testing.assert_array_equal(held_out_predictions(*args, workers=2), direct)
    # the held-out fits differ from the fit of all rows: a single pooled fit would not pass
    fixed, act, measured, family = args[1:5]
    pooled = _fit(fixed, act, measured, family, cfg)
    assert not np.array_equal(direct, fixed + pooled.factors(family) * act
                              + pooled.overhead.fixed_bytes)


def test_past_the_cap_each_fold_is_fitted_without_all_of_its_groups() -> None:
    """Six groups with measured peaks, three folds: each row predicted by the fit of the rows
    outside its fold; rows of groups without a measured peak by the fit of every fittable
    row. Linear cost (three fits, not six) and still no row predicted from its own group."""
    cfg = settings(load_params(), "theory").memory.model_copy(update={"max_holdout_folds": 3})
    rows = _rows()
    fixed, act = rows["fixed"].to_numpy(float), rows["activations"].to_numpy(float)
    measured, family = rows["measured"].to_numpy(float), rows["family"].to_numpy(object)
    code, _ = pd.factorize(rows["group"])
    fittable = fit_rows(fixed, act, measured)
    folds = group_folds(sorted(set(code[fittable].tolist())), 3)
    assert len(folds) == 3 and sum(map(len, folds)) == 6
    direct = np.full(len(rows), np.nan)
    everything = _fit(fixed[fittable], act[fittable], measured[fittable], family[fittable], cfg)
    for mine in (~np.isin(code, [g for fold in folds for g in fold]),
                 *(np.isin(code, fold) for fold in folds)):
        fit = everything if not np.isin(code[mine], [g for f in folds for g in f]).any() \
            else _fit(fixed[~mine & fittable], act[~mine & fittable],
                      measured[~mine & fittable], family[~mine & fittable], cfg)
        direct[mine] = fixed[mine] + fit.factors(family[mine]) * act[mine] \
            + fit.overhead.fixed_bytes
    pred = held_out_predictions(rows["group"], fixed, act, measured, family, cfg)
    np.testing.assert_array_equal(pred, direct)
    # not the one-group-out predictions: the folds are really in force
    assert not np.array_equal(pred, _direct(rows, cfg))
