"""The step-log reduction's medians and quartiles are numpy's, bit for bit; a median of finite
values is finite where numpy's overflows."""

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
@example([1.7e308, 1.7e308])
@example([math.inf, -math.inf])  # NaN in both (seed 74)
def test_median_of_is_np_median(xs: list[float]) -> None:
    x = np.array(xs)
    _assert_numpy_median(median_of(x), x)


def _assert_numpy_median(got: float, x: np.ndarray) -> None:
    """``got`` is np.median(x) bit for bit, except where two finite middle values overflow
    their sum: then finite, their halves summed."""
    with np.errstate(over="ignore", invalid="ignore"):  # numpy's own inf sums ([inf, -inf])
        expected = float(np.median(x)) if len(x) else math.nan
    s = np.sort(x)
    n = len(s)
    pair = n > 0 and n % 2 == 0 and bool(np.isfinite(s[n // 2 - 1: n // 2 + 1]).all())
    if pair and math.isinf(expected):
        assert got == float(s[n // 2 - 1]) / 2 + float(s[n // 2]) / 2
        assert math.isfinite(got)
    else:
        assert _bits(got) == _bits(expected)


@settings(max_examples=600, deadline=None)
@given(st.lists(with_nan, max_size=80))
@example([8.988465674311579e+307, 8.98846567431158e+307])
def test_median_finite_is_np_median_of_the_finite(xs: list[float]) -> None:
    x = np.array(xs, dtype=np.float64)
    _assert_numpy_median(median_finite(x), x[np.isfinite(x)])


def test_a_median_of_finite_values_is_finite() -> None:
    """numpy's mean of the two middle values overflows to inf; the log's printed rate must
    stay a number for the range checks (an inf was taken for 'not printed')."""
    assert median_of(np.array([1.7e308, 1.7e308])) == 1.7e308
    assert median_finite(np.array([1.7e308, math.inf, 1.7e308])) == 1.7e308
    assert median_of(np.array([-1.7e308, -1.7e308])) == -1.7e308


@settings(max_examples=800, deadline=None)
@given(st.lists(with_nan, min_size=1, max_size=80).filter(
    lambda xs: any(not math.isnan(v) for v in xs)))
@example([2.5])
@example([1.0, 2.0])
@example([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
@example([0.1, 0.7, 0.3, math.nan, 1e-300])
@example([math.inf, 1.0, 2.0])
@example([1.7976931348623157e+308, -9.9792015476736e+291])  # hypothesis seed 159
def test_quartiles_are_np_nanpercentile(xs: list[float]) -> None:
    x = np.array(xs, dtype=np.float64)
    ours = quartiles(x.copy())
    # inf - inf: NaN in both; a difference past the largest double (values of both signs near
    # it, never two step times): inf in both, by the same arithmetic
    with np.errstate(invalid="ignore", over="ignore"):
        theirs = np.nanpercentile(x, [25, 50, 75])
    assert [_bits(v) for v in ours] == [_bits(v) for v in theirs]
    assert [f"{v:.6g}" for v in ours] == [f"{v:.6g}" for v in theirs]
