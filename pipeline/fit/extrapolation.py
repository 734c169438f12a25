"""Extrapolation validation: refit each law without a series' largest N and predict them.

For ``k`` in ``holdout_k`` the runs at the ``k`` largest distinct N form the test fold of a
scikit-learn ``PredefinedSplit`` (everything else trains); each held-out run is scored by its
absolute percentage error (``sklearn.metrics.mean_absolute_percentage_error`` per point) and by
whether the law's prediction interval for one new run covers it. A fit that fails or does not
converge predicts nothing (``predicted`` NaN, ``note`` says why) and counts as a failure.

The default law is chosen on the cases every eligible law predicted (so the laws are compared on
the same points): lowest mean over k of the median APE, among laws that predicted at least
``min_success`` of the cases some law could predict. Coverage is reported next to it, not traded against it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from sklearn.metrics import mean_absolute_percentage_error
from sklearn.model_selection import PredefinedSplit

from pipeline.fit.base import LawFitError
from pipeline.fit.nls import fit_law
from pipeline.fit.series import SeriesPoints
from pipeline.fit.laws import get_law

COLUMNS = ("series_id", "source", "law", "k", "n_train_max", "n_target", "y_metric", "run_id",
           "actual", "predicted", "pi_low", "pi_high", "ape", "covered", "converged", "note")


def holdout_split(n: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of (train, test): test is every point at one of the ``k`` largest distinct N."""
    held = np.unique(n)[-k:]
    fold = np.where(np.isin(n, held), 0, -1)
    train, test = next(PredefinedSplit(fold).split())
    return train, test


def point_ape(actual: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """Per-point absolute percentage error, as fractions (0.1 = 10%)."""
    if actual.size == 0:
        return np.zeros(0)
    return mean_absolute_percentage_error(actual[None, :], predicted[None, :],
                                          multioutput="raw_values")


def extrapolate_series(points: SeriesPoints, source: str, laws: Sequence[str],
                       ks: Sequence[int], *, scale: str, interval: float) -> list[dict]:
    """Holdout rows for one series (empty when it has too few distinct N for any k)."""
    rows: list[dict] = []
    run_ids = (points.runs["run_id"].astype(str).to_numpy() if "run_id" in points.runs
               else np.array([""] * points.n.size))
    for k in ks:
        if points.n_distinct - k < 2:
            continue
        train, test = holdout_split(points.n, k)
        n_train, y_train, n_test = points.n[train], points.y[train], points.n[test]
        n_train_max = float(n_train.max())
        actual = points.y[test]
        targets = [(int(points.n[idx]), run_ids[idx], float(actual[i]))
                   for i, idx in enumerate(test)]
        nan = np.full(test.size, np.nan)
        for law in laws:
            base = dict(series_id=points.series_id, source=source, law=law, k=int(k),
                        n_train_max=int(n_train_max), y_metric=points.y_metric)
            predicted, lo, hi = nan, nan, nan
            note, converged = "", False
            try:
                res = fit_law(get_law(law), n_train, y_train, scale=scale, ctx=points.ctx)
                converged, note = res.converged, res.note
                if converged:
                    pred = res.prediction_arrays(n_test, interval=interval)
                    predicted, lo, hi = pred["predicted"], pred["pi_low"], pred["pi_high"]
            except LawFitError as exc:
                note = str(exc)
            # APE is filled for all rows at once by the stage (pipeline.fit.stage._score)
            for i, (n_target, run_id, y_actual) in enumerate(targets):
                rows.append(dict(base, n_target=n_target, run_id=run_id, actual=y_actual,
                                 predicted=float(predicted[i]), pi_low=float(lo[i]),
                                 pi_high=float(hi[i]), ape=np.nan,
                                 covered=bool(lo[i] <= actual[i] <= hi[i]),
                                 converged=bool(converged), note=note))
    return rows


def summarise(extra: pd.DataFrame, laws: Sequence[str], ks: Sequence[int],
              min_success: float) -> dict:
    """Per-law median/p90 APE and coverage per k, and the default law with the rule used."""
    summary: dict = {"laws": {}, "default_law": None}
    if extra.empty:
        summary["default_law_reason"] = "no series with enough distinct N for extrapolation"
        return summary
    key = ["series_id", "k", "run_id", "n_target"]
    # A case counts when at least one law could predict it: a 2-point training set defeats
    # every law, and is no evidence against any of them.
    predicted = extra[np.isfinite(extra["predicted"])]
    n_cases = len(predicted.drop_duplicates(key))
    success = {}
    for law in laws:
        mine = extra[extra["law"] == law]
        ok = mine[np.isfinite(mine["predicted"])]
        success[law] = len(ok) / n_cases if n_cases else 0.0
        per_k = {}
        for k in ks:
            at_k = ok[ok["k"] == k]
            per_k[f"k{k}"] = {
                "n_predicted": int(len(at_k)),
                "n_failed": int((mine["k"] == k).sum() - len(at_k)),
                "median_ape": float(at_k["ape"].median()) if len(at_k) else None,
                "p90_ape": float(at_k["ape"].quantile(0.9)) if len(at_k) else None,
                "coverage": float(at_k["covered"].mean()) if len(at_k) else None,
            }
        by_source = {str(src): {f"k{k}": {"median_ape": float(g.loc[g["k"] == k, "ape"].median()),
                                          "coverage": float(g.loc[g["k"] == k, "covered"].mean()),
                                          "n": int((g["k"] == k).sum())}
                                for k in ks if (g["k"] == k).any()}
                     for src, g in ok.groupby("source")}
        summary["laws"][law] = {"success_rate": success[law], **per_k, "by_source": by_source}
    summary["all_laws_common"] = _common_scores(extra, list(laws), ks, key)
    eligible = [law for law in laws if success[law] >= min_success]
    if not eligible:
        summary["default_law_reason"] = f"no law predicted >= {min_success:.0%} of the cases"
        return summary
    common = _common_scores(extra, eligible, ks, key)
    scores = common["mean_median_ape"]
    best = min(sorted(scores), key=lambda law: scores[law])
    summary["common_cases"] = common["n_cases"]
    summary["common_mean_median_ape"] = scores
    summary["default_law"] = best if np.isfinite(scores[best]) else None
    summary["default_law_reason"] = (
        f"lowest mean over k={list(ks)} of the median APE on the {common['n_cases']} held-out "
        f"runs every law with >= {min_success:.0%} successful predictions predicted "
        f"(eligible: {', '.join(eligible)})")
    return summary


def _common_scores(extra: pd.DataFrame, laws: list[str], ks: Sequence[int],
                   key: list[str]) -> dict:
    """Mean over k of each law's median APE on the cases every one of ``laws`` predicted."""
    wide = extra[extra["law"].isin(laws)].pivot_table(index=key, columns="law", values="ape",
                                                      aggfunc="first")
    common = wide.reindex(columns=laws).dropna()
    scores = {}
    for law in laws:
        per_k = [common[law][common.index.get_level_values("k") == k].median() for k in ks]
        per_k = [v for v in per_k if np.isfinite(v)]
        scores[law] = float(np.mean(per_k)) if per_k else np.inf
    return {"n_cases": int(len(common)), "mean_median_ape": scores}
