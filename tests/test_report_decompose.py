"""report.decompose.series_ends: per series, the median MFU and lost shares at its smallest
and largest N, from hand-worked values."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline.report.decompose import LOST, series_ends


def _runs(rows: list[tuple[str, str, int, float, float]]) -> pd.DataFrame:
    """(source, series, N, measured MFU, share_hbm): compute share 0.6, the rest 0.1 or 0."""
    frame = pd.DataFrame(rows, columns=["source", "series_id", "n_accelerators", "measured_mfu",
                                        "share_hbm"])
    for c in LOST:
        if c != "hbm":
            frame[f"share_{c}"] = 0.6 if c == "compute" else 0.0
    return frame


def test_ends_are_medians_at_the_smallest_and_largest_n() -> None:
    runs = _runs([("b", "b1", 8, 0.5, 0.1),
                  ("a", "a1", 64, 0.2, 0.3), ("a", "a1", 8, 0.4, 0.1), ("a", "a1", 8, 0.3, 0.2),
                  ("a", "a1", 16, 0.9, 0.9), ("a", "a1", 64, 0.1, 0.4),
                  ("a", "a1", 64, 0.15, np.nan),
                  ("a", "a2", 4, 0.0, 0.5),      # no measured MFU: not a point
                  ("a", "a2", 4, 0.25, 0.05), ("a", "a2", 32, 0.2, 0.1)])
    ends = series_ends(runs)
    assert list(ends.columns[:4]) == ["source", "series_id", "end", "n_accelerators"]
    assert ends[["source", "series_id", "end"]].values.tolist() == [
        ["a", "a1", "small"], ["a", "a1", "large"], ["a", "a2", "small"], ["a", "a2", "large"]]
    assert ends["n_accelerators"].tolist() == [8.0, 64.0, 4.0, 32.0]
    # N=8: MFU 0.4, 0.3 -> 0.35; N=64: 0.2, 0.1, 0.15 -> 0.15; hbm skips the missing value
    np.testing.assert_allclose(ends["measured_mfu"], [0.35, 0.15, 0.25, 0.2])
    np.testing.assert_allclose(ends["lost_hbm"], [0.15, 0.35, 0.05, 0.1])
    np.testing.assert_allclose(ends["lost_compute"], [0.25, 0.45, 0.35, 0.4])  # 0.6 - MFU


def test_no_series_with_two_n_gives_an_empty_frame() -> None:
    assert series_ends(_runs([("a", "a1", 8, 0.5, 0.1), ("a", "a1", 8, 0.4, 0.1)])).empty
    assert series_ends(_runs([])).empty
