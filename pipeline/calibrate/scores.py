"""Summaries of ``predictions.parquet`` for calibrate.json and the report: per holdout scheme and
predictor (overall and per source) the median and p90 APE and the interval coverage, on the
cases every compared predictor predicted."""

from __future__ import annotations

import numpy as np
import pandas as pd

NAIVE = ("naive_linear", "naive_loglinear")
KEY = ["holdout", "series_id", "run_id"]


def common_cases(pred: pd.DataFrame, predictors: list[str]) -> pd.DataFrame:
    """Rows of ``predictors`` restricted to the cases (holdout, series, run) all of them predicted."""
    mine = pred[pred["predictor"].isin(predictors) & pred["predicted"].notna()]
    counts = mine.groupby(KEY)["predictor"].nunique()
    full = counts[counts == len(predictors)].index
    return mine.set_index(KEY).loc[lambda f: f.index.isin(full)].reset_index()


def table(pred: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """n, median_ape, p90_ape, coverage (of rows with an interval) per group, groups in sorted
    order. The statistics are numpy's on each group's values (NaN APEs left out, as pandas'
    ``median`` and ``quantile`` do): the numbers of a pandas ``groupby().apply`` per group, bit
    for bit, without a frame and a Series per group (a fleet's thousands of sources made
    ~10^5 groups: minutes)."""
    columns = by + ["n", "median_ape", "p90_ape", "coverage"]
    if pred.empty:
        return pd.DataFrame(columns=columns)
    grouped = pred.groupby(by, sort=True)
    code = grouped.ngroup().to_numpy()
    keys = grouped.size().index   # group number i is keys[i]
    valid = code >= 0             # rows with a missing key belong to no group (as apply)
    order = np.flatnonzero(valid)[np.argsort(code[valid], kind="stable")]
    bounds = np.cumsum(np.bincount(code[valid], minlength=len(keys)))[:-1]
    ape = pred["ape"].to_numpy(float)
    with_pi = pred["pi_low"].notna().to_numpy()
    covered = pred["covered"].to_numpy(float)
    stats = np.full((len(keys), 4), np.nan)
    for g, rows in enumerate(np.split(order, bounds)):
        values = ape[rows]
        values = values[~np.isnan(values)]
        hit = covered[rows[with_pi[rows]]]
        hit = hit[~np.isnan(hit)]
        stats[g] = (rows.size, np.median(values) if values.size else np.nan,
                    np.percentile(values, 90.0) if values.size else np.nan,
                    hit.sum(dtype=float) / hit.size if hit.size else np.nan)
    out = keys.to_frame(index=False) if isinstance(keys, pd.MultiIndex) else \
        pd.DataFrame({by[0]: keys.to_numpy()})
    return out.assign(**{name: stats[:, j] for j, name in enumerate(columns[len(by):])})


def predictor_table(pred: pd.DataFrame) -> pd.DataFrame:
    """Per holdout and predictor, overall (source = 'all') and per source, on common cases:
    in largest_k the cases the naive rules, calibrated and selected all predicted; in source
    the cases calibrated and family_median predicted. Laws are scored on their own cases."""
    parts = []
    largest = pred[pred["holdout"].str.startswith("largest_k")]
    source = pred[pred["holdout"] == "source"]
    core = common_cases(largest, [*NAIVE, "calibrated", "selected"])
    laws = largest[~largest["predictor"].isin([*NAIVE, "calibrated", "selected"])
                   & largest["predicted"].notna()]
    src = common_cases(source, ["calibrated", "family_median", "selected"])
    for frame in (core, laws, src):
        if frame.empty:
            continue
        overall = table(frame, ["holdout", "predictor"]).assign(source="all")
        parts += [overall, table(frame, ["holdout", "predictor", "source"])]
    out = pd.concat(parts, ignore_index=True) if parts else table(pred, ["holdout", "predictor"])
    return out.sort_values(["holdout", "source", "predictor"]).reset_index(drop=True)


def ratio_ci(pred: pd.DataFrame, holdout: str, seed: int, n_boot: int = 2000,
             level: float = 0.95) -> list[float] | None:
    """Bootstrap interval of median APE(selected) / median APE(better naive rule) in ``holdout``,
    resampling whole series (a series' held-out points share its errors, so cases are not
    independent); the better naive rule is chosen again in each resample. None without cases."""
    core = common_cases(pred[pred["holdout"] == holdout], [*NAIVE, "selected"])
    if core.empty:
        return None
    wide = core.pivot_table(index=["series_id", "run_id"], columns="predictor", values="ape")
    groups = [g.to_numpy() for _, g in wide[["selected", *NAIVE]].groupby(level="series_id")]
    rng = np.random.default_rng(seed)
    ratios = []
    for _ in range(n_boot):
        sample = np.concatenate([groups[i] for i in rng.integers(0, len(groups), len(groups))])
        medians = np.median(sample, axis=0)
        best = medians[1:].min()
        ratios.append(medians[0] / best if best > 0 else np.inf)
    tail = (1 - level) / 2
    return [float(q) for q in np.quantile(ratios, [tail, 1 - tail])]


def against_naive(tab: pd.DataFrame, min_cases: int = 5, pred: pd.DataFrame | None = None,
                  seed: int = 0) -> dict:
    """The predictions scored against the naive rules on the same cases: per largest_k scheme,
    selected's median APE over the better naive rule's (overall and per source with >=
    ``min_cases``; overall with a series-bootstrap interval of the ratio when ``pred`` is
    given); per held-out source, calibrated against the hardware family's median MFU; the
    coverage of the 95% intervals of selected and calibrated (nominal 0.95)."""
    out: dict = {"largest": {}, "source": {}, "coverage": {}}
    for (holdout, source), g in tab.groupby(["holdout", "source"]):
        by = g.set_index("predictor")
        if holdout.startswith("largest_k") and {"selected", *NAIVE} <= set(by.index):
            if source != "all" and by.loc["selected", "n"] < min_cases:
                continue
            best = min(by.loc[n, "median_ape"] for n in NAIVE)
            ratio = by.loc["selected", "median_ape"] / best if best > 0 else np.inf
            out["largest"].setdefault(holdout, {})[source] = dict(
                selected=by.loc["selected", "median_ape"], best_naive=best, ratio=ratio,
                beats_naive=bool(ratio < 1), n=int(by.loc["selected", "n"]))
            if source == "all" and pred is not None:
                out["largest"][holdout][source]["ratio_ci"] = ratio_ci(pred, holdout, seed)
        if holdout == "source" and source != "all" and "calibrated" in by.index:
            cal = by.loc["calibrated", "median_ape"]
            fam = by.loc["family_median", "median_ape"] if "family_median" in by.index else np.nan
            out["source"][source] = dict(calibrated=cal, family_median=fam,
                                         beats_family_median=bool(cal < fam))
        if source == "all":
            for p in ("selected", "calibrated"):
                if p in by.index:
                    cov = by.loc[p, "coverage"]
                    out["coverage"].setdefault(holdout, {})[p] = dict(coverage=cov)
    return out
