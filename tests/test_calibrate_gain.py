"""The gain of `selected` over the naive rules, with a series-bootstrap interval (calibrate.json
against_naive, the report's calibration headline)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline.calibrate.scores import against_naive, predictor_table, ratio_ci
from pipeline.report.calibration import _gain_caveat


def _pred(selected_factor: float, n_series: int = 30, seed: int = 0) -> pd.DataFrame:
    """Two held-out runs per series; naive errors drawn per series, selected = factor x naive_linear."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_series):
        base = rng.uniform(0.05, 1.0)
        for r in range(2):
            ape = {"naive_linear": base * (1 + 0.1 * r), "naive_loglinear": base * 1.5}
            ape["selected"] = ape["naive_linear"] * selected_factor
            ape["calibrated"] = ape["selected"]
            for predictor, e in ape.items():
                rows.append(dict(holdout="largest_k1", series_id=f"s{s}", run_id=f"s{s}r{r}",
                                 source="a" if s % 2 else "b", predictor=predictor,
                                 predicted=1.0 + e, actual=1.0, ape=e, pi_low=0.0, pi_high=3.0,
                                 covered=True))
    return pd.DataFrame(rows)


def test_a_consistent_gain_has_an_interval_below_one() -> None:
    lo, hi = ratio_ci(_pred(0.5), "largest_k1", seed=1)
    assert lo == hi == 0.5  # every resample gives the same ratio: selected = 0.5 x the best


def test_no_gain_has_an_interval_around_one_and_is_called_noise() -> None:
    pred = _pred(1.0)
    # selected equals naive_linear case by case but the better naive rule is picked per resample
    lo, hi = ratio_ci(pred, "largest_k1", seed=1)
    assert lo == hi == 1.0
    # selected's errors are naive_linear's of another series: the same medians over all cases,
    # but no gain case by case, so resampling series moves the ratio both ways
    noisy = pred.copy()
    sel = noisy["predictor"] == "selected"
    lin = noisy.loc[noisy["predictor"] == "naive_linear", "ape"].to_numpy()
    noisy.loc[sel, "ape"] = np.roll(lin, 2)
    lo, hi = ratio_ci(noisy, "largest_k1", seed=1)
    assert lo < 1 < hi
    t = against_naive(predictor_table(noisy), pred=noisy, seed=1)["largest"]
    assert t["largest_k1"]["all"]["ratio_ci"] == [lo, hi]
    assert "the gain is within the noise" in _gain_caveat(t)


def test_caveat_names_the_sources_where_a_naive_rule_wins() -> None:
    largest = {"largest_k1": {"all": {"ratio": 0.9, "ratio_ci": [0.7, 0.95]},
                              "dgxc": {"ratio": 2.5}, "playbook": {"ratio": 0.7}}}
    text = _gain_caveat(largest)
    assert "0.70-0.95." in text and "within the noise" not in text
    assert "A naive rule predicts better on dgxc; the gain comes from playbook." in text
    assert ratio_ci(_pred(1.0).iloc[0:0], "largest_k1", seed=0) is None


def test_caveat_leaves_out_an_undefined_ratio_interval() -> None:
    """A ratio is null where the naive rule's median error is 0 (a fleet's logs that all print
    the same numbers): that holdout's interval is left out, the other one is still quoted."""
    largest = {"largest_k1": {"all": {"ratio": None, "ratio_ci": [None, None]},
                              "logs/c1": {"ratio": None}, "dgxc": {"ratio": 1.4}},
               "largest_k2": {"all": {"ratio": 0.9, "ratio_ci": [0.8, 1.1]}}}
    text = _gain_caveat(largest)
    assert "k=2 0.80-1.10: the gain is within the noise." in text and "k=1" not in text
    assert "A naive rule predicts better on dgxc." in text and "logs/c1" not in text
    assert _gain_caveat({"largest_k1": {"all": {"ratio_ci": [None, None]}}}) == ""
