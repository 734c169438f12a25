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

from pipeline.folds import group_folds
from pipeline.calibrate import fitting as ft
from pipeline.calibrate import intervals as iv
from pipeline.calibrate.classes import class_chain
from pipeline.calibrate.estimate import Data, Fitted, fit_groups, parallel_workers
from pipeline.config import CalibrateSettings
from pipeline.fit.extrapolation import holdout_split
from pipeline.fit.series import SeriesPoints, point_columns, series_points
from pipeline.processes import map_in_order

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


def series_table(runs: pd.DataFrame, series: pd.DataFrame
                 ) -> list[tuple[pd.Series, SeriesPoints]]:
    """Every series that has runs, in series_id order, with the fit stage's points: worked out
    once for the holdout cases and the targets beyond the data."""
    # the columns the points read: a series' runs are a take of these, not of every column
    narrow = point_columns(runs, series.get("y_metric", pd.Series(dtype=object)).unique())
    positions = narrow.groupby("series_id", sort=False).indices
    out = []
    for _, row in series.sort_values("series_id").iterrows():
        at = positions.get(row["series_id"])
        if at is not None:
            out.append((row, series_points(narrow.iloc[at], row)))
    return out


def series_cases(runs: pd.DataFrame, series: pd.DataFrame, ks: tuple[int, ...],
                 min_distinct_n: int,
                 points: list[tuple[pd.Series, SeriesPoints]] | None = None) -> list[Case]:
    """The largest-k holdout cases, series by series (fit stage's points and split);
    ``points``: :func:`series_table` of the same runs and series, where already at hand."""
    cases = []
    for row, pts in (series_table(runs, series) if points is None else points):
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


def predicted_log_time(data: Data, fitted: Fitted, mask: np.ndarray,
                       with_source: bool = True) -> np.ndarray:
    """Calibrated log step time of the rows of ``mask`` (NaN elsewhere) at ``fitted``'s family
    values, with each seen source's effect (``with_source``)."""
    out = np.full(mask.size, np.nan)
    if not mask.any():
        return out
    sub = data.subset(mask)
    lt = ft.log_step_time(sub, fitted.theta_rows(sub.family))
    if with_source:
        lt = lt + fitted.source_effect(sub.source, sub.family)
    out[mask] = lt
    return out


def within_series_sd(data: Data, log_pred: np.ndarray) -> float:
    """Pooled sd of the fit's log residuals about each series' mean residual: the spread a
    series-anchored prediction has around the truth."""
    fit = data.fit & np.isfinite(log_pred)
    resid = data.log_t[fit] - log_pred[fit]
    g = data.runs["series_id"].astype(str).to_numpy()[fit]
    dev = resid - pd.Series(resid).groupby(g).transform("mean").to_numpy()
    sizes = pd.Series(g).map(pd.Series(g).value_counts()).to_numpy()
    dof = float(np.sum(sizes > 1) - np.unique(g[sizes > 1]).size)
    return float(np.sqrt(np.sum(dev ** 2) / max(dof, 1.0)))


def calibrated_case(case: Case, index: pd.Series, y_model: np.ndarray, has_layout: np.ndarray,
                    sd_within: float) -> tuple[np.ndarray, np.ndarray, bool]:
    """Series-anchored calibrated prediction of the case's held-out y (NaN where no model)."""
    ids = np.concatenate([case.run_train, case.run_test])
    pos = index.reindex(ids).to_numpy()
    known = np.isfinite(pos)
    y = np.full(ids.size, np.nan)
    lay = np.zeros(ids.size, bool)
    y[known] = y_model[pos[known].astype(int)]
    lay[known] = has_layout[pos[known].astype(int)]
    n_tr = case.run_train.size
    tr, te = y[:n_tr], y[n_tr:]
    ok = np.isfinite(tr) & (tr > 0)
    assumed = not bool(lay.all())
    if not ok.any():
        nan = np.full(te.size, np.nan)
        return nan, nan, assumed
    offset = float(np.mean(np.log(case.y_train[ok]) - np.log(tr[ok])))
    sd = np.full(te.size, sd_within * np.sqrt(1.0 + 1.0 / ok.sum()))
    return te * np.exp(offset), sd, assumed


def largest_k_predictions(cases: list[Case], data: Data, fitted: Fitted, cfg: CalibrateSettings
                          ) -> pd.DataFrame:
    """Rows of the naive and calibrated predictors for every largest-k case (no intervals yet).

    The model is refitted once per (source, k) without the held-out runs of every case of that
    source at that k (warm start, residual sds of the full fit), then each case is anchored on
    its own training runs: y_model = MFU x N x peak, up to a series constant. Past
    ``max_holdout_folds`` sources at one k, the sources share refits
    (``pipeline.folds.group_folds``).
    """
    rows: list[dict] = []
    sd_within = within_series_sd(data, predicted_log_time(data, fitted, data.fit))
    index = pd.Series(np.arange(len(data.runs)), index=data.runs["run_id"].astype(str))
    flop = data.rows.peak_flops_per_s * data.rows.n_accelerators
    by_key: dict[tuple[str, int], list[Case]] = {}
    for case in cases:
        by_key.setdefault((case.source, case.k), []).append(case)
    groups: dict[tuple[str, int], list[Case]] = {}
    for k in sorted({k for _, k in by_key}):
        sources = sorted(s for s, kk in by_key if kk == k)
        for fold in group_folds(sources, cfg.max_holdout_folds):
            groups[(fold[0], k)] = [c for s in fold for c in by_key[(s, k)]]
    run_ids = data.runs["run_id"].astype(str)
    keeps = []
    for _, mine in sorted(groups.items()):
        held = set().union(*(set(c.run_test) for c in mine))
        keeps.append(data.fit & ~run_ids.isin(held).to_numpy())
    todo = [keep for keep in keeps if (data.fit & ~keep).any()]
    done = iter(refits(data, fitted, cfg, [(keep, dict(em_rounds=1, fixed_sigma=True))
                                           for keep in todo]))
    for ((source, k), mine), keep in zip(sorted(groups.items()), keeps):
        refit = next(done) if (data.fit & ~keep).any() else fitted
        lt = predicted_log_time(data, refit, data.has_layout)
        # modelled throughput up to a series constant: model FLOP/s = MFU x N x peak
        y_model = np.exp(-lt) * flop * _mfu_factor(data)
        for case in mine:
            ones = np.ones(case.n_test.size)
            rows += _rows(case, "naive_linear",
                          iv.naive_linear(case.n_train, case.y_train, case.n_test), ones, False)
            rows += _rows(case, "naive_loglinear",
                          iv.naive_loglinear(case.n_train, case.y_train, case.n_test), ones,
                          False)
            pred, sd, assumed = calibrated_case(case, index, y_model, data.has_layout,
                                                sd_within)
            rows += _rows(case, "calibrated", pred, sd, assumed)
    return pd.DataFrame(rows)


def _refit(data: Data, start: Fitted, balance: float, task: tuple[np.ndarray, dict]) -> Fitted:
    """The model refitted on the runs of ``keep``, warm-started at ``start``."""
    keep, kw = task
    prod, pb = fit_groups(data, keep, tuple(start.production.free), balance=balance,
                          start=start, **kw)
    return Fitted(production=prod, playbook=pb, form=start.form, forms=start.forms)


def refits(data: Data, fitted: Fitted, cfg: CalibrateSettings,
           tasks: list[tuple[np.ndarray, dict]]) -> list[Fitted]:
    """One refit per (runs kept, ``fit_groups`` options), in order: each is a function of its
    task and the shared data, so they run over ``calibrate.workers`` processes once there
    are enough fitted runs (``estimate.parallel_workers``)."""
    return map_in_order(_refit, tasks, parallel_workers(data, cfg.workers),
                        shared=(data, fitted, cfg.balance))


def _mfu_factor(data: Data) -> np.ndarray:
    """MFU = model FLOP per rank / (peak t): exp(-log t) times this is the predicted MFU."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return data.flop_per_rank / data.rows.peak_flops_per_s


def config_keys(data: Data) -> np.ndarray:
    """One key per distinct configuration as the step model sees it: source, family, chip,
    model shape, layout, batch and schedule (rows that repeat a configuration, e.g. one
    layout measured on several software releases, share a key)."""
    r, c = data.rows, data.rows.config
    parts = [r.source.astype(str), r.family.astype(str),
             np.asarray(r.machine.accelerator, dtype=object).astype(str)]
    for x in (c.params, c.active_params, c.n_layers, c.d_model, r.n_accelerators, c.tp, c.pp,
              c.cp, c.ep, c.dp, c.microbatch_tokens, c.batch_tokens, c.zero_stage, c.recompute,
              c.virtual_pipeline, r.peak_flops_per_s):
        parts.append(np.char.mod("%.6g", np.asarray(x, float)))
    return np.array(["|".join(p) for p in zip(*parts)], dtype=object)


def class_intervals(data: Data, scores: np.ndarray, production: np.ndarray, level: float
                    ) -> tuple[np.ndarray, dict[str, float]]:
    """Mondrian split-conformal half-widths on the leave-source-out scores (module
    ``pipeline.calibrate.intervals``, cells of ``pipeline.calibrate.classes``): per row, its
    class's quantile over the OTHER sources' distinct configurations; and per class key over
    every production source (the planner's)."""
    cells = (data.rows.interval_class if data.rows.interval_class is not None
             else np.full(scores.size, "?/dense_bf16", dtype=object))
    return iv.mondrian_half_widths(scores, config_keys(data), data.rows.source, cells,
                                   production, class_chain, level)


def source_predictions(data: Data, fitted: Fitted, cfg: CalibrateSettings, interval: float
                       ) -> tuple[pd.DataFrame, dict[str, float]]:
    """Leave-one-source-out: every source with >= ``min_source_runs`` fitted runs is left out of
    the fit (one refit each; past ``max_holdout_folds`` sources, one per fold of sources), its runs predicted from layout and hardware at its family's values
    from the other sources (the production population where none of its family remain), with
    no source effect. Intervals: Mondrian split conformal per class on the leave-source-out
    scores of the other sources (``class_intervals``), the fast end clipped at the ideal step
    time. Returns the rows (calibrated and family_median) and the conformal half-widths per
    class key and 'production' (over every production source: the planner's)."""
    source = data.rows.source
    counts = pd.Series(source[data.fit]).value_counts()
    held_out = sorted(counts[counts >= cfg.min_source_runs].index)
    log_pred = np.full(source.size, np.nan)
    folds = [np.isin(source, fold) for fold in group_folds(held_out, cfg.max_holdout_folds)]
    fold_fits = refits(data, fitted, cfg, [(data.fit & ~out_of_fold, dict(em_rounds=2))
                                           for out_of_fold in folds])
    for out_of_fold, refit in zip(folds, fold_fits):
        test = data.fit & out_of_fold
        log_pred[test] = predicted_log_time(data, refit, test, with_source=False)[test]
    tested = data.fit & np.isfinite(log_pred)
    scores = np.abs(data.log_t - log_pred)
    production = tested & ~data.playbook
    half, q = class_intervals(data, np.where(tested, scores, np.nan), production, interval)
    ideal = data.log_ideal
    mfu = np.exp(-log_pred) * _mfu_factor(data)
    low = np.exp(-(log_pred + half)) * _mfu_factor(data)
    high = np.exp(-np.maximum(log_pred - half, ideal)) * _mfu_factor(data)
    mfu = np.minimum(mfu, np.exp(-ideal) * _mfu_factor(data))
    frame = pd.DataFrame({"run_id": data.runs["run_id"].astype(str), "source": source,
                          "series_id": data.runs["series_id"].astype(str),
                          "family": data.accelerator_family,
                          "n": data.rows.n_accelerators, "actual": data.measured_mfu,
                          "predicted": mfu, "pi_low": low, "pi_high": high,
                          "sd_log": half})[tested]
    out = []
    for s in held_out:
        test = frame[frame["source"] == s]
        train = frame[frame["source"] != s]
        fam = train.groupby("family")["actual"].median()
        base = test["family"].map(fam).fillna(train["actual"].median())
        for name, pred, lo, hi, sd in (
                ("calibrated", test["predicted"], test["pi_low"], test["pi_high"], test["sd_log"]),
                ("family_median", base, np.nan, np.nan, np.nan)):
            out.append(pd.DataFrame(dict(
                run_id=test["run_id"].to_numpy(), series_id=test["series_id"].to_numpy(),
                source=s, holdout="source", predictor=name, metric="mfu", n_train_max=np.nan,
                n_target=test["n"].to_numpy(float), actual=test["actual"].to_numpy(float),
                predicted=np.asarray(pred, float), pi_low=lo, pi_high=hi, sd_log=sd,
                interval_method="conformal" if name == "calibrated" else "",
                assumed_layout=False)))
    rows = pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=COLUMNS)
    return rows, q


def add_intervals(frame: pd.DataFrame, cfg: CalibrateSettings, interval: float) -> pd.DataFrame:
    """Fill pi_low/pi_high: conformal for the largest-k rows (leave-one-series-out, per
    predictor, pooled over k) when ``interval_method.largest`` is conformal; analytic ones
    (already set) elsewhere. Keeps both coverages: ``covered_analytic`` for reference."""
    frame = frame.copy()
    z = float(norm.ppf(0.5 + interval / 2))
    largest = frame["holdout"].str.startswith("largest_k")
    sd = frame["sd_log"].to_numpy(float)
    analytic_lo = frame["predicted"] * np.exp(-z * sd)
    analytic_hi = frame["predicted"] * np.exp(z * sd)
    has_sd = largest & (frame["predictor"] == "calibrated")
    frame.loc[has_sd, "pi_low"] = analytic_lo[has_sd]
    frame.loc[has_sd, "pi_high"] = analytic_hi[has_sd]
    stated = (frame["interval_method"].fillna("").astype(str) if "interval_method" in frame
              else pd.Series("", index=frame.index))
    frame["interval_method"] = np.where(frame["pi_low"].notna(),
                                        np.where(stated != "", stated, "analytic"), "")
    if cfg.interval_method.largest == "conformal":
        for predictor, g in frame[largest].groupby("predictor"):
            scale = iv.distance_scale(g["sd_log"].to_numpy(float), g["n_target"].to_numpy(float),
                                      g["n_train_max"].to_numpy(float))
            score = np.abs(np.log(g["actual"] / g["predicted"]).to_numpy(float)) / scale
            q = iv.leave_group_out_quantile(score, g["series_id"].to_numpy(object), interval)
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


def selected_rows(frame: pd.DataFrame, cfg: CalibrateSettings) -> pd.DataFrame:
    """The ``selected`` predictor: a copy of the rows of the predictor its fixed rule names.

    largest_k: ``selected.largest`` for series that state their layout, ``selected.assumed_layout``
    for series whose layout the theory had to assume (MLPerf), ``selected.fallback`` where the
    first has no prediction; source holdout: ``selected.source``.
    """
    key = ["holdout", "series_id", "run_id"]
    largest = frame[frame["holdout"].str.startswith("largest_k")]
    cal = largest[largest["predictor"] == "calibrated"]
    assumed = pd.MultiIndex.from_frame(largest[key]).isin(
        pd.MultiIndex.from_frame(cal.loc[cal["assumed_layout"].astype(bool), key]))
    rule = np.where(assumed, cfg.selected.assumed_layout, cfg.selected.largest)
    first = largest[(largest["predictor"].to_numpy() == rule) & largest["predicted"].notna()]
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
