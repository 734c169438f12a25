"""calibrate.scores.table: per-group n, median and p90 APE and coverage, bit for bit the numbers
of the pandas ``groupby().apply`` it replaces (a fleet's ~10^5 groups took minutes that way),
on the shipped predictions and on fuzzed frames: NaN APEs, groups without an interval, groups
of one row."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.calibrate.scores import table
from tests.workspace import shipped_mark

PREDICTIONS = Path(__file__).resolve().parents[1] / "data" / "processed" / "predictions.parquet"


def _by_apply(pred: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """The definition: one Series of statistics per group."""
    def agg(g: pd.DataFrame) -> pd.Series:
        with_pi = g["pi_low"].notna()
        return pd.Series(dict(n=int(len(g)), median_ape=float(g["ape"].median()),
                              p90_ape=float(g["ape"].quantile(0.9)),
                              coverage=float(g.loc[with_pi, "covered"].mean()) if with_pi.any()
                              else np.nan))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # the median of an all-NaN group
        return pred.groupby(by).apply(agg, include_groups=False).reset_index()


@st.composite
def _frames(draw) -> pd.DataFrame:
    n = draw(st.integers(1, 60))
    values = st.one_of(st.floats(0, 50, allow_nan=False), st.just(np.nan),
                       st.floats(1e-9, 1e-6))
    return pd.DataFrame({
        "holdout": draw(st.lists(st.sampled_from(["largest_k1", "source"]), min_size=n,
                                 max_size=n)),
        "predictor": draw(st.lists(st.sampled_from(["calibrated", "naive_linear", "selected"]),
                                   min_size=n, max_size=n)),
        "source": draw(st.lists(st.sampled_from([f"logs/c{i}" for i in range(7)]),
                                min_size=n, max_size=n)),
        "ape": draw(st.lists(values, min_size=n, max_size=n)),
        "pi_low": draw(st.lists(st.one_of(st.just(np.nan), st.floats(0, 1)), min_size=n,
                                max_size=n)),
        "covered": draw(st.lists(st.booleans(), min_size=n, max_size=n))})


@settings(max_examples=150, deadline=None)
@given(_frames())
def test_table_is_the_per_group_apply_bit_for_bit(pred: pd.DataFrame) -> None:
    for by in (["holdout", "predictor", "source"], ["holdout", "predictor"], ["source"]):
        pd.testing.assert_frame_equal(table(pred, by), _by_apply(pred, by), check_exact=True)


@shipped_mark("data/processed/predictions.parquet")
def test_table_on_the_shipped_predictions() -> None:
    pred = pd.read_parquet(PREDICTIONS)
    for by in (["holdout", "predictor", "source"], ["holdout", "predictor"]):
        got = table(pred, by)
        assert len(got) > 10
        pd.testing.assert_frame_equal(got, _by_apply(pred, by), check_exact=True)
