"""Medians and quartiles of one log's few steps: numpy's numbers, without numpy's set-up.

``np.median`` and ``np.nanpercentile`` spend ~50-200 us per call checking axes, keepdims and
methods before they partition; a 30-step log's reduction calls them several times, more than
parsing the log costs. These give the same float64 bits by the same arithmetic on a sorted
copy: the order statistics of a sort and of ``np.partition`` are the same values. One
exception: a median of finite values is never inf (``median_of``).
"""

from __future__ import annotations

import math

import numpy as np


def median_of(x: np.ndarray) -> float:
    """``float(np.median(x))`` for an ``x`` holding no NaN: the middle value, or the two middle
    ones' sum halved, as ``np.median`` takes their mean. Where two finite middle values sum
    past the largest double (numpy: inf), their halves summed: a median of finite values is
    finite, so a printed rate near 1.8e308 reaches the range checks instead of vanishing."""
    s = np.sort(x)
    n = len(s)
    if n % 2:
        return float(s[n // 2])
    a, b = float(s[n // 2 - 1]), float(s[n // 2])
    mid = (a + b) / 2  # the same IEEE sum and halving as numpy's mean of the two
    if math.isinf(mid) and math.isfinite(a) and math.isfinite(b):
        return a / 2 + b / 2
    return mid


def median_finite(x: np.ndarray) -> float:
    """``np.median`` of the finite values of ``x`` (NaN: none)."""
    x = x[np.isfinite(x)]
    return median_of(x) if len(x) else math.nan


def quartiles(x: np.ndarray) -> tuple[float, float, float]:
    """``np.nanpercentile(x, [25, 50, 75])`` (method ``linear``) for an ``x`` holding at least
    one value that is not NaN.

    numpy's steps, one quantile q at a time: virtual index v = (n - 1) q on the sorted values
    s, i = floor(v) (both neighbours the last value when v >= n - 1), g = v - i, then its
    ``_lerp``: s[i] + (s[i+1] - s[i]) g, or s[i+1] - (s[i+1] - s[i]) (1 - g) where g >= 0.5.
    """
    s = np.sort(x[~np.isnan(x)])
    n = len(s)
    out = []
    for q in (0.25, 0.5, 0.75):
        v = (n - 1) * q
        if v >= n - 1:
            i, j, g = n - 1, n - 1, v - (-1)  # numpy's index -1, the gamma it then computes
        else:
            i = math.floor(v)
            j, g = i + 1, v - i
        a, b = float(s[i]), float(s[j])
        d = b - a
        out.append(b - d * (1 - g) if g >= 0.5 else a + d * g)
    return out[0], out[1], out[2]
