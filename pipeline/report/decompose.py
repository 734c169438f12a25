"""What limits measured scaling: the calibrated decomposition of the efficiency lost.

For a run with measured MFU u, 1 - u of its step time is lost against ideal arithmetic. The
calibrated shares of ``calibrated.parquet`` split it: compute inefficiency (``share_compute - u``,
the arithmetic's time above its ideal), HBM, each network axis, bubble, latency, overhead and the
residual the model leaves unexplained. Per series, the runs at its smallest and at its largest N
are compared (median over runs at that N); per source, the median over its series. Reads
``calibrated.parquet`` only (the report imports no calibrate code).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline.vocab import SHARE_SLOTS

LOST = SHARE_SLOTS  # compute (inefficiency), hbm, net_*, bubble, latency, overhead, residual


def lost_shares(cal_runs: pd.DataFrame) -> pd.DataFrame:
    """``lost_<component>`` per run with a measured MFU (summing to 1 - MFU)."""
    runs = cal_runs[cal_runs["measured_mfu"] > 0].copy()
    for c in LOST:
        runs[f"lost_{c}"] = runs[f"share_{c}"]
    runs["lost_compute"] = runs["share_compute"] - runs["measured_mfu"]
    return runs


def series_ends(cal_runs: pd.DataFrame) -> pd.DataFrame:
    """Per series with >= 2 distinct N: MFU and lost shares at its smallest and largest N."""
    runs = lost_shares(cal_runs)
    cols = ["measured_mfu"] + [f"lost_{c}" for c in LOST]
    # the median per (series, N) in one grouped pass, not one frame lookup per series and end
    med = (runs.groupby(["source", "series_id", "n_accelerators"], sort=True)[cols].median()
           .reset_index())
    if med.empty:
        return pd.DataFrame()
    by = med.groupby(["source", "series_id"], sort=True)["n_accelerators"]
    n = med["n_accelerators"]
    several = by.transform("size") >= 2
    ends = pd.concat([med[several & (n == by.transform("min"))].assign(end="small", order=0),
                      med[several & (n == by.transform("max"))].assign(end="large", order=1)])
    ends = ends.sort_values(["source", "series_id", "order"], kind="mergesort")
    ends["n_accelerators"] = ends["n_accelerators"].astype(float)
    return ends[["source", "series_id", "end", "n_accelerators", *cols]].reset_index(drop=True)


def by_source(cal_runs: pd.DataFrame) -> pd.DataFrame:
    """Per source and end (small, large): series count, median N, MFU and lost shares; and per
    source the change from small to large (``end`` = 'change') with the two components whose
    lost share grew most (``top1``, ``top2``)."""
    ends = series_ends(cal_runs)
    if ends.empty:
        return pd.DataFrame()
    cols = ["n_accelerators", "measured_mfu"] + [f"lost_{c}" for c in LOST]
    rows = []
    for source, g in ends.groupby("source", sort=True):
        med = {end: g[g["end"] == end][cols].median() for end in ("small", "large")}
        n_series = int(g["series_id"].nunique())
        for end in ("small", "large"):
            rows.append(dict(source=source, end=end, n_series=n_series, **med[end].to_dict()))
        change = med["large"] - med["small"]
        growth = {c: float(change[f"lost_{c}"]) for c in LOST}
        top = sorted(growth, key=lambda c: -growth[c])[:2]
        rows.append(dict(source=source, end="change", n_series=n_series, **change.to_dict(),
                         top1=top[0], top2=top[1]))
    return pd.DataFrame(rows)
