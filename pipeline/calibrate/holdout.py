"""Out-of-sample scoring: ``predictions.parquet`` (pipeline/calibrate/contract.py).

Two schemes:
- ``largest_k<k>``: every series with >= ``min_distinct_n`` distinct N, without the runs at its
  ``k`` largest N (pipeline.fit.extrapolation.holdout_split, the fit stage's split), predicted
  by the naive rules, the laws (rows of the fit stage's ``extrapolation.parquet``) and the
  calibrated model, refitted without the held-out runs and anchored on the series' own training
  runs (a series-level offset: mean log ratio of measured to modelled y at the training N).
- ``source``: each source with >= ``min_source_runs`` fitted runs left out of the calibration
  entirely, its runs predicted from layout and hardware alone (population values, with the
  between-source spread in the interval), beside the hardware family's median MFU of the
  other sources' runs (``family_median``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm

from pipeline.calibrate import intervals as iv
from pipeline.calibrate.features import x_matrix
from pipeline.calibrate.forms import fit_frame
from pipeline.calibrate.model import Calibration
from pipeline.calibrate.settings import CalibrateRun
from pipeline.fit.extrapolation import holdout_split
from pipeline.fit.series import series_points

COLUMNS = ("run_id", "series_id", "source", "holdout", "predictor", "metric", "n_train_max",
           "n_target", "actual", "predicted", "pi_low", "pi_high", "ape", "covered",
           "interval_method", "assumed_layout")


@dataclass
class Case:
    series_id: str
    source: str
    k: int
    metric: str
    n_train: np.ndarray
    y_train: np.ndarray
    run_train: np.ndarray
    n_test: np.ndarray
    y_test: np.ndarray
    run_test: np.ndarray


def series_cases(runs: pd.DataFrame, series: pd.DataFrame, ks: tuple[int, ...],
                 min_distinct_n: int) -> list[Case]:
    """The largest-k holdout cases, series by series (fit stage's points and split)."""
    cases = []
    by_series = {sid: g for sid, g in runs.groupby("series_id", sort=False)}
    for _, row in series.sort_values("series_id").iterrows():
        mine = by_series.get(row["series_id"])
        if mine is None:
            continue
        pts = series_points(mine, row)
        if not pts.y_metric or pts.n_distinct < min_distinct_n:
            continue
        ids = pts.runs["run_id"].astype(str).to_numpy()
        for k in ks:
            if pts.n_distinct - k < 2:
                continue
            train, test = holdout_split(pts.n, k)
            cases.append(Case(pts.series_id, str(row["source"]), int(k), pts.y_metric,
                              pts.n[train], pts.y[train], ids[train], pts.n[test], pts.y[test],
                              ids[test]))
    return cases


def _rows(case: Case, predictor: str, predicted: np.ndarray, sd: np.ndarray,
          assumed: bool) -> list[dict]:
    n_max = float(case.n_train.max())
    return [dict(run_id=case.run_test[i], series_id=case.series_id, source=case.source,
                 holdout=f"largest_k{case.k}", predictor=predictor, metric=case.metric,
                 n_train_max=n_max, n_target=float(case.n_test[i]), actual=float(case.y_test[i]),
                 predicted=float(predicted[i]), sd_log=float(sd[i]), assumed_layout=assumed)
            for i in range(case.n_test.size)]


def within_series_sd(cal: Calibration, frame: pd.DataFrame) -> float:
    """Pooled sd of the fit's log residuals about each series' mean residual: the spread a
    series-anchored prediction has around the truth."""
    mean, _ = cal.predict_log_time(x_matrix(frame, cal.all_terms), frame["source"].to_numpy(object))
    resid = np.log(1.0 / frame["measured_mfu"].to_numpy(float)) - mean
    g = frame["series_id"].astype(str).to_numpy()
    dev = resid - pd.Series(resid).groupby(g).transform("mean").to_numpy()
    sizes = pd.Series(g).map(pd.Series(g).value_counts()).to_numpy()
    dof = float(np.sum(sizes > 1) - np.unique(g[sizes > 1]).size)
    return float(np.sqrt(np.sum(dev ** 2) / max(dof, 1.0)))


def calibrated_case(case: Case, cal: Calibration, design: pd.DataFrame, sd_within: float
                    ) -> tuple[np.ndarray, np.ndarray, bool]:
    """Series-anchored calibrated prediction of the case's held-out y (NaN where no bound)."""
    rows = design.reindex(np.concatenate([case.run_train, case.run_test]))
    x = x_matrix(rows, cal.all_terms)
    mean, _ = cal.predict_log_time(x, rows["source"].to_numpy(object))
    # modelled y up to a series constant: MFU x N x peak (= model FLOP/s; the constant absorbs
    # FLOP per token and, for time to train, the work to the target).
    y_model = np.exp(-mean) * rows["n_accelerators"].to_numpy(float) * rows["peak"].to_numpy(float)
    n_tr = case.run_train.size
    tr, te = y_model[:n_tr], y_model[n_tr:]
    ok = np.isfinite(tr) & (tr > 0)
    assumed = not bool(rows["has_layout"].fillna(False).all())
    if not ok.any():
        nan = np.full(te.size, np.nan)
        return nan, nan, assumed
    offset = float(np.mean(np.log(case.y_train[ok]) - np.log(tr[ok])))
    sd = np.full(te.size, sd_within * np.sqrt(1.0 + 1.0 / ok.sum()))
    return te * np.exp(offset), sd, assumed


def largest_k_predictions(cases: list[Case], design: pd.DataFrame, fit_set: pd.DataFrame,
                          cal: Calibration, cfg: CalibrateRun) -> pd.DataFrame:
    """Rows of the naive and calibrated predictors for every largest-k case (no intervals yet)."""
    rows: list[dict] = []
    sd_within = within_series_sd(cal, fit_set)
    in_fit = set(fit_set["run_id"])
    sigma_fixed = (cal.sigma_source, cal.sigma_u)
    for case in cases:
        ones = np.ones(case.n_test.size)
        rows += _rows(case, "naive_linear",
                      iv.naive_linear(case.n_train, case.y_train, case.n_test), ones, False)
        rows += _rows(case, "naive_loglinear",
                      iv.naive_loglinear(case.n_train, case.y_train, case.n_test), ones, False)
        held = [r for r in case.run_test if r in in_fit]
        refit = cal
        if held:  # refit without the held-out runs (warm start, variances as in the full fit)
            refit = fit_frame(fit_set[~fit_set["run_id"].isin(held)], cal.all_terms,
                              balance=cfg.balance, em_rounds=1, start=cal.start,
                              sigma_fixed=sigma_fixed)
        pred, sd, assumed = calibrated_case(case, refit, design, sd_within)
        rows += _rows(case, "calibrated", pred, sd, assumed)
    return pd.DataFrame(rows)


def source_predictions(fit_set: pd.DataFrame, cal: Calibration, cfg: CalibrateRun
                       ) -> pd.DataFrame:
    """Leave-one-source-out: calibrated (population) and family_median rows, metric mfu."""
    counts = fit_set["source"].value_counts()
    rows = []
    for source in sorted(counts[counts >= cfg.min_source_runs].index):
        test = fit_set[fit_set["source"] == source]
        train = fit_set[fit_set["source"] != source]
        refit = fit_frame(train, cal.all_terms, balance=cfg.balance, em_rounds=cfg.em_rounds,
                          start=cal.start)
        mfu, lo, hi, sd = refit.predict_mfu(x_matrix(test, refit.all_terms),
                                            test["source"].to_numpy(object), cfg.interval,
                                            population=True)
        fam = train.groupby("accelerator_family")["measured_mfu"].median()
        base = test["accelerator_family"].map(fam).fillna(train["measured_mfu"].median())
        for name, pred, low, high, s in (("calibrated", mfu, lo, hi, sd),
                                         ("family_median", base.to_numpy(float), None, None, None)):
            rows.append(pd.DataFrame(dict(
                run_id=test["run_id"].to_numpy(), series_id=test["series_id"].astype(str).to_numpy(),
                source=source, holdout="source", predictor=name, metric="mfu",
                n_train_max=np.nan, n_target=test["n_accelerators"].to_numpy(float),
                actual=test["measured_mfu"].to_numpy(float), predicted=pred,
                pi_low=np.nan if low is None else low, pi_high=np.nan if high is None else high,
                sd_log=np.nan if s is None else s, assumed_layout=False)))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=COLUMNS)


def add_intervals(frame: pd.DataFrame, cfg: CalibrateRun) -> pd.DataFrame:
    """Fill pi_low/pi_high: conformal for the largest-k rows (leave-one-series-out, per
    predictor, pooled over k) when ``interval_method.largest`` is conformal; analytic ones
    (already set) elsewhere. Keeps both coverages: ``covered_analytic`` for reference."""
    frame = frame.copy()
    z = float(norm.ppf(0.5 + cfg.interval / 2))
    largest = frame["holdout"].str.startswith("largest_k")
    sd = frame["sd_log"].to_numpy(float)
    analytic_lo = frame["predicted"] * np.exp(-z * sd)
    analytic_hi = frame["predicted"] * np.exp(z * sd)
    has_sd = largest & (frame["predictor"] == "calibrated")
    frame.loc[has_sd, "pi_low"] = analytic_lo[has_sd]
    frame.loc[has_sd, "pi_high"] = analytic_hi[has_sd]
    frame["interval_method"] = np.where(frame["pi_low"].notna(), "analytic", "")
    if cfg.interval_method.largest == "conformal":
        for predictor, g in frame[largest].groupby("predictor"):
            scale = iv.distance_scale(g["sd_log"].to_numpy(float), g["n_target"].to_numpy(float),
                                      g["n_train_max"].to_numpy(float))
            score = np.abs(np.log(g["actual"] / g["predicted"]).to_numpy(float)) / scale
            q = iv.leave_group_out_quantile(score, g["series_id"].to_numpy(object), cfg.interval)
            lo, hi = iv.conformal_interval(g["predicted"].to_numpy(float), scale, q)
            frame.loc[g.index, "pi_low"] = lo
            frame.loc[g.index, "pi_high"] = hi
            frame.loc[g.index, "interval_method"] = "conformal"
    return frame


def score(frame: pd.DataFrame) -> pd.DataFrame:
    """ape and covered for every row (covered False where there is no interval)."""
    frame = frame.copy()
    frame["ape"] = np.abs(frame["predicted"] - frame["actual"]) / frame["actual"]
    lo, hi = frame["pi_low"].to_numpy(float), frame["pi_high"].to_numpy(float)
    act = frame["actual"].to_numpy(float)
    frame["covered"] = np.isfinite(lo) & (lo <= act) & (act <= hi)
    return frame


def selected_rows(frame: pd.DataFrame, cfg: CalibrateRun) -> pd.DataFrame:
    """The ``selected`` predictor: a copy of the rows of the predictor its fixed rule names.

    largest_k: ``selected.largest`` for series that state their layout, ``selected.assumed_layout``
    for series whose layout the theory had to assume (MLPerf), ``selected.fallback`` where the
    first has no prediction; source holdout: ``selected.source``.
    """
    key = ["holdout", "series_id", "run_id"]
    largest = frame[frame["holdout"].str.startswith("largest_k")]
    cal = largest[largest["predictor"] == "calibrated"]
    assumed = set(map(tuple, cal.loc[cal["assumed_layout"], key].to_numpy()))
    rule = largest.apply(lambda r: cfg.selected.assumed_layout
                         if tuple(r[key]) in assumed else cfg.selected.largest, axis=1)
    first = largest[(largest["predictor"] == rule) & largest["predicted"].notna()]
    fallback = largest[largest["predictor"] == cfg.selected.fallback]
    fallback = fallback.merge(first[key], on=key, how="left", indicator=True)
    fallback = fallback[fallback["_merge"] == "left_only"].drop(columns="_merge")
    source = frame[(frame["holdout"] == "source") & (frame["predictor"] == cfg.selected.source)]
    chosen = pd.concat([first, fallback, source], ignore_index=True)
    chosen["predictor"] = "selected"
    return chosen


def law_rows(extrapolation: pd.DataFrame) -> pd.DataFrame:
    """The fit stage's held-out law predictions as predictions rows (their own intervals)."""
    e = extrapolation
    # run_id is not part of the extrapolation contract (pipeline/fit/contract.py); the fit stage adds it
    run_ids = e["run_id"].astype(str) if "run_id" in e else pd.Series("", index=e.index)
    return pd.DataFrame(dict(
        run_id=run_ids, series_id=e["series_id"].astype(str), source=e["source"],
        holdout="largest_k" + e["k"].astype(int).astype(str), predictor=e["law"],
        metric=e["y_metric"], n_train_max=e["n_train_max"].astype(float),
        n_target=e["n_target"].astype(float), actual=e["actual"], predicted=e["predicted"],
        pi_low=e["pi_low"], pi_high=e["pi_high"], sd_log=np.nan,
        interval_method="law", assumed_layout=False))
