"""The step-log reduction's medians and quartiles are numpy's, bit for bit."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipeline.ingest.sources.steplogs.order_stats import median_finite, median_of, quartiles

# Step times, rates and their deviations: any double, inf included (not NaN where the function
# takes none). Zeros of one sign only: numpy's partition and a sort may place +0.0 and -0.0 in
# either order, and the reduction never sees a zero step time (it is left out as <= 0).
values = st.floats(allow_nan=False, allow_subnormal=True).filter(
    lambda v: not (v == 0 and math.copysign(1, v) < 0))
with_nan = st.one_of(values, st.just(math.nan))


def _bits(v: float) -> bytes:
    return np.float64(v).tobytes()


@settings(max_examples=600, deadline=None)
@given(st.lists(values, min_size=1, max_size=80))
@example([1.0, 2.0])
@example([2.4, 2.41, 2.39, 12.9])
@example([1e308, -1e308])
def test_median_of_is_np_median(xs: list[float]) -> None:
    x = np.array(xs)
    with np.errstate(over="ignore"):  # two huge middle values: inf in both, by the same sum
        assert _bits(median_of(x)) == _bits(float(np.median(x)))


@settings(max_examples=600, deadline=None)
@given(st.lists(with_nan, max_size=80))
def test_median_finite_is_np_median_of_the_finite(xs: list[float]) -> None:
    x = np.array(xs, dtype=np.float64)
    finite = x[np.isfinite(x)]
    expected = float(np.median(finite)) if len(finite) else math.nan
    assert _bits(median_finite(x)) == _bits(expected)


@settings(max_examples=800, deadline=None)
@given(st.lists(with_nan, min_size=1, max_size=80).filter(
    lambda xs: any(not math.isnan(v) for v in xs)))
@example([2.5])
@example([1.0, 2.0])
@example([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
@example([0.1, 0.7, 0.3, math.nan, 1e-300])
@example([math.inf, 1.0, 2.0])
def test_quartiles_are_np_nanpercentile(xs: list[float]) -> None:
    x = np.array(xs, dtype=np.float64)
    ours = quartiles(x.copy())
    with np.errstate(invalid="ignore"):  # inf - inf: NaN in both, by the same arithmetic
        theirs = np.nanpercentile(x, [25, 50, 75])
    assert [_bits(v) for v in ours] == [_bits(v) for v in theirs]
    assert [f"{v:.6g}" for v in ours] == [f"{v:.6g}" for v in theirs]
