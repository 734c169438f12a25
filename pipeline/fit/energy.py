"""Energy laws: energy per token and power per accelerator against N, from MLPerf power runs.

Input: ``power.parquet`` (ingest; one row per power measurement, so a run measured at the wall
(AC) and after the power supplies (DC) is in both an AC and a DC series). An energy series is
the measurements of one (model, accelerator, AC/DC, submitter family, round) that differ in N;
the submitter family drops an ``-ac-power``/``-dc-power`` suffix, so SMC's AC and DC
submissions are two series of the same runs.

* **Per series** with at least ``min_distinct_n`` distinct N: the power law
  ``y = a N^b`` (``pipeline.fit.power``, OLS on log y, every run a point) for ``y`` =
  ``energy_j_per_token``, ``power_w_per_accelerator`` and ``energy_j`` (energy to train). One
  doubling of N multiplies y by ``2^b``; the interval is ``2^`` of b's Student-t interval.
  Repeated runs at each N give a lack-of-fit F test (Draper & Smith, *Applied Regression
  Analysis*, 3rd ed., §2.1: lack-of-fit against pure-error sums of squares on log y): a small
  ``lack_of_fit_p`` says the law misses the shape, and b's interval (from run-to-run scatter)
  understates the uncertainty of the trend.
* **Across series**: ``log2 y = c_series + b log2 N``, one slope b shared by every series with
  two or more distinct N (statsmodels OLS with a fixed effect per series): the change per
  doubling, ``2^b``, with its interval. An AC and a DC series of the same runs are not
  independent evidence: the interval assumes they are, so it is narrower than the data allow
  (a note says so).
* Per (series, N): median, min and max of each quantity, and the interconnect's share of the
  energy, for the report.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import stats

from pipeline.fit.laws import LawFitError, fit
from pipeline.fit.contract import ENERGY_QUANTITIES, ENERGY_SERIES_KEY
from pipeline.schema import output_column_names

QUANTITIES = ENERGY_QUANTITIES
FIT_COLUMNS = tuple(output_column_names("energy_fits.parquet"))
POINT_COLUMNS = tuple(output_column_names("energy_points.parquet"))
_POWER_SUFFIX = re.compile(r"[-_](ac|dc)[-_]power$", re.IGNORECASE)


def submitter_family(submitter: str) -> str:
    """``smc-ac-power`` -> ``smc``: the AC and DC submissions of one submitter."""
    return _POWER_SUFFIX.sub("", submitter or "")


def energy_series(power: pd.DataFrame) -> pd.DataFrame:
    """The usable measurements with a ``series_id`` column (sorted, deterministic)."""
    ok = power[(power["status"] == "ok") & power["power_measurement"].notna()].copy()
    ok["family"] = ok["submitter"].map(submitter_family)
    series_id = pd.Series("energy", index=ok.index, dtype=object)
    for column in ENERGY_SERIES_KEY:
        series_id = series_id + "|" + ok[column].fillna("").astype(str)
    ok["series_id"] = series_id
    return ok.sort_values(["series_id", "n_accelerators", "run_id"]).reset_index(drop=True)


def _law_row(sid: str, group: pd.DataFrame, quantity: str, interval: float,
             min_distinct_n: int) -> dict[str, Any]:
    first = group.iloc[0]
    data = group[np.isfinite(group[quantity].astype(float))]
    n = data["n_accelerators"].to_numpy(float)
    y = data[quantity].to_numpy(float)
    row: dict[str, Any] = {c: None for c in FIT_COLUMNS}
    row.update(series_id=sid, model=first["model"], accelerator=first["accelerator"],
               power_measurement=first["power_measurement"], submitter=first["family"],
               mlperf_version=first["mlperf_version"], quantity=quantity, n_runs=len(y),
               n_distinct=len(np.unique(n)), n_min=int(n.min()) if len(n) else None,
               n_max=int(n.max()) if len(n) else None, converged=False)
    if row["n_distinct"] < min_distinct_n:
        row["note"] = f"{row['n_distinct']} distinct N < {min_distinct_n}: not fitted"
        return row
    try:
        res = fit(n, y, law="power", scale="log")
    except LawFitError as exc:
        row["note"] = f"power law failed: {exc}"
        return row
    ci = res.conf_int(1.0 - interval).loc["b"]
    b = res.params["b"]
    lof_p = lack_of_fit_p(n, y, res.params["a"], b)
    note = []
    if lof_p is not None and lof_p < 1.0 - interval:
        note.append(f"lack of fit (p = {lof_p:.2g}): the power law misses the shape; the "
                    "interval of b understates the trend's uncertainty")
    row.update(b=b, b_low=float(ci["low"]), b_high=float(ci["high"]), doubling_factor=2.0 ** b,
               doubling_low=2.0 ** float(ci["low"]), doubling_high=2.0 ** float(ci["high"]),
               r2=getattr(res, "r2", None), lack_of_fit_p=lof_p,
               converged=bool(res.converged), note="; ".join(note))
    return row


def lack_of_fit_p(n: np.ndarray, y: np.ndarray, a: float, b: float) -> float | None:
    """p-value of the lack-of-fit F test of ``log y = log a + b log N`` (None without
    replicates or with fewer than 3 distinct N)."""
    log_y = np.log(y)
    levels = np.unique(n)
    df_pe = len(y) - len(levels)
    df_lof = len(levels) - 2
    if df_pe <= 0 or df_lof <= 0:
        return None
    ss_resid = float(np.sum((log_y - (math.log(a) + b * np.log(n))) ** 2))
    ss_pe = float(sum(np.sum((log_y[n == k] - log_y[n == k].mean()) ** 2) for k in levels))
    if ss_pe <= 0:
        return None
    f = ((ss_resid - ss_pe) / df_lof) / (ss_pe / df_pe)
    return float(stats.f.sf(max(f, 0.0), df_lof, df_pe))


def _points(df: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (sid, n), g in df.groupby(["series_id", "n_accelerators"], sort=True):
        first = g.iloc[0]
        e_int = g["energy_j_interconnect"].astype(float)
        share = (e_int / g["energy_j"].astype(float)).median() if e_int.notna().any() else None
        row = {"series_id": sid, "model": first["model"], "accelerator": first["accelerator"],
               "power_measurement": first["power_measurement"], "n_accelerators": int(n),
               "n_runs": len(g), "energy_j_median": float(g["energy_j"].median()),
               "time_to_train_s_median": float(g["time_to_train_s"].median()),
               "interconnect_share": None if share is None or math.isnan(share) else share}
        for q in QUANTITIES:
            v = g[q].astype(float)
            row[f"{q}_median"] = float(v.median()) if v.notna().any() else None
            row[f"{q}_min"] = float(v.min()) if v.notna().any() else None
            row[f"{q}_max"] = float(v.max()) if v.notna().any() else None
        rows.append(row)
    return pd.DataFrame(rows, columns=list(POINT_COLUMNS))


def cross_series_doubling(df: pd.DataFrame, quantity: str, interval: float) -> dict[str, Any]:
    """Shared slope of log2 y on log2 N with a fixed effect per series (>= 2 distinct N)."""
    data = df[np.isfinite(df[quantity].astype(float))]
    keep = [s for s, g in data.groupby("series_id") if g["n_accelerators"].nunique() >= 2]
    data = data[data["series_id"].isin(keep)]
    out: dict[str, Any] = {"quantity": quantity, "series": keep, "n_runs": len(data)}
    if not keep or len(data) <= len(keep) + 1:
        out["note"] = "no series with two or more distinct N"
        return out
    x = pd.get_dummies(data["series_id"], dtype=float)
    x["log2_n"] = np.log2(data["n_accelerators"].astype(float))
    model = sm.OLS(np.log2(data[quantity].astype(float)), x).fit()
    b, se = float(model.params["log2_n"]), float(model.bse["log2_n"])
    q = stats.t.ppf(0.5 + interval / 2.0, model.df_resid)
    # The same slope on the per-(series, N) means: the interval that N-level scatter allows
    # (wide with few distinct N, but it does not lean on run-to-run scatter alone).
    means = data.assign(log2_y=np.log2(data[quantity].astype(float)),
                        log2_n=np.log2(data["n_accelerators"].astype(float))
                        ).groupby(["series_id", "log2_n"], as_index=False)["log2_y"].mean()
    xm = pd.get_dummies(means["series_id"], dtype=float)
    xm["log2_n"] = means["log2_n"]
    n_level: dict[str, Any] = {}
    if len(means) > xm.shape[1]:
        mm = sm.OLS(means["log2_y"], xm).fit()
        bm, sem = float(mm.params["log2_n"]), float(mm.bse["log2_n"])
        qm = stats.t.ppf(0.5 + interval / 2.0, mm.df_resid)
        n_level = {"n_level_doubling_factor": 2.0 ** bm,
                   "n_level_doubling_low": 2.0 ** (bm - qm * sem),
                   "n_level_doubling_high": 2.0 ** (bm + qm * sem),
                   "n_level_df_resid": mm.df_resid}
    out.update(n_level)
    out.update(b=b, b_stderr=se, doubling_factor=2.0 ** b, doubling_low=2.0 ** (b - q * se),
               doubling_high=2.0 ** (b + q * se), interval=interval, df_resid=model.df_resid,
               note="series of the same runs measured AC and DC are not independent: the "
                    "interval treats them as if they were" if len(keep) > 1 else "")
    return out


def energy_laws(power: pd.DataFrame, interval: float = 0.95, min_distinct_n: int = 3
                ) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """(fits, per-(series, N) points, headline metrics) of the energy laws."""
    df = energy_series(power)
    fit_rows = [_law_row(sid, g, q, interval, min_distinct_n)
                for sid, g in df.groupby("series_id", sort=True) for q in QUANTITIES]
    fits = pd.DataFrame(fit_rows, columns=list(FIT_COLUMNS))
    points = _points(df)
    cross = {q: cross_series_doubling(df, q, interval) for q in QUANTITIES}
    metrics = {"measurements": int(len(df)), "series": int(df["series_id"].nunique()),
               "series_fitted": int(fits.loc[fits["converged"], "series_id"].nunique()),
               "cross_series": cross}
    return fits, points, metrics
