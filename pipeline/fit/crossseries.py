"""Cross-series regressions of MFU on the whole dataset (statsmodels formulas).

``doubling``: ``mfu_points ~ C(scaling) + C(scaling):log2_n + C(accelerator_family) +
C(strategy_family) + log10_params``, OLS with cluster-robust (by ``source``) standard errors:
the ``C(scaling)[s]:log2_n`` slope is the MFU points gained (negative: lost) per doubling of N
under strong and weak scaling, holding hardware, strategy and model size fixed.

``hardware_hbm`` / ``hardware_scaleout`` (every run with MFU, single configurations
included): ``mfu_points ~ log2_flops_per_<hbm|scaleout>_byte + log2_n + C(scaling) +
log10_params``, with runs.parquet's ``flops_per_<hbm|scaleout>_byte`` (peak FLOP/s over the
catalog's bytes/s, derived by the ingest). Fernandez et al. 2024 (arXiv 2411.13055) argue that
faster chips expose communication, i.e. MFU falls as peak FLOP/s outgrows the bytes/s that feed it. The
ratios vary only between accelerator types, so there is no accelerator term here, and the slope
is a comparison of a few chip types (and of the software each ran). Each (source, model,
accelerator family, N) counts once, with its best MFU (``pipeline.measures.best_per_point``, the
report's rule): a grid search of thousands of layouts on one chip would otherwise outweigh every
other chip, and its worst layouts would stand for the chip.

Cluster-robust errors with few clusters are optimistic (Cameron & Miller 2015); each model
reports its cluster count and uses t(G-1) intervals (statsmodels' default for clusters).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import statsmodels.formula.api as smf

from pipeline.measures import best_per_point, finished

COLUMNS = ("model", "term", "estimate", "stderr", "ci_low", "ci_high", "p_value", "n_obs",
           "n_clusters", "cov_type", "formula")


def mfu_frame(runs: pd.DataFrame, scalings: tuple[str, ...] | None = ("strong", "weak")
              ) -> pd.DataFrame:
    """Finished runs with a valid MFU in (0, 1] (and the given scalings), plus model columns."""
    df = finished(runs)
    if scalings is not None:
        df = df[df["scaling"].isin(scalings)]
    df = df[pd.to_numeric(df["mfu"], errors="coerce").between(0, 1, inclusive="right")]
    df = df[pd.to_numeric(df["n_accelerators"], errors="coerce") >= 1].copy()
    df["mfu_points"] = 100.0 * df["mfu"].astype(float)
    df["log2_n"] = np.log2(df["n_accelerators"].astype(float))
    params = pd.to_numeric(df["params"], errors="coerce")
    df["log10_params"] = np.log10(params.where(params > 0))
    for col in ("accelerator_family", "strategy_family", "source", "scaling"):
        df[col] = df[col].fillna("unknown").astype(str)
    return df.dropna(subset=["log10_params"]).sort_values(["source", "n_accelerators", "run_id"])


def _fit(name: str, formula: str, df: pd.DataFrame, alpha: float) -> tuple[list[dict], Any]:
    groups = pd.factorize(df["source"], sort=True)[0]
    n_clusters = int(np.unique(groups).size)
    model = smf.ols(formula, data=df)
    if n_clusters >= 2:
        res = model.fit(cov_type="cluster", cov_kwds={"groups": groups}, use_t=True)
        cov_type = "cluster(source)"
    else:  # one source: clustering is undefined, fall back to heteroskedasticity-robust
        res = model.fit(cov_type="HC1", use_t=True)
        cov_type = "HC1"
    ci = res.conf_int(alpha)
    rows = [dict(model=name, term=term, estimate=float(res.params[term]),
                 stderr=float(res.bse[term]), ci_low=float(ci.loc[term, 0]),
                 ci_high=float(ci.loc[term, 1]), p_value=float(res.pvalues[term]),
                 n_obs=int(res.nobs), n_clusters=n_clusters, cov_type=cov_type, formula=formula)
            for term in res.params.index]
    return rows, res


def _terms(df: pd.DataFrame, candidates: list[str]) -> list[str]:
    """Keep categorical terms with at least two levels (one level is the intercept)."""
    keep = []
    for term in candidates:
        categorical = term.startswith("C(") and term.endswith(")") and ":" not in term
        if not categorical or df[term[2:-1]].nunique() >= 2:
            keep.append(term)
    return keep


def doubling_model(df: pd.DataFrame, alpha: float) -> tuple[list[dict], dict]:
    """MFU points per doubling of N, by scaling mode."""
    if len(df) < 8:
        return [], {"note": f"only {len(df)} runs with MFU and strong/weak scaling"}
    scalings = sorted(df["scaling"].unique())
    slope = "C(scaling):log2_n" if len(scalings) > 1 else "log2_n"
    rhs = _terms(df, ["C(scaling)", slope, "C(accelerator_family)", "C(strategy_family)",
                      "log10_params"])
    formula = "mfu_points ~ " + " + ".join(rhs)
    rows, res = _fit("doubling", formula, df, alpha)
    headline: dict[str, Any] = {"formula": formula, "n_obs": int(res.nobs),
                                "n_clusters": rows[0]["n_clusters"], "cov_type": rows[0]["cov_type"]}
    for s in scalings:
        term = f"C(scaling)[{s}]:log2_n" if len(scalings) > 1 else "log2_n"
        row = next(r for r in rows if r["term"] == term)
        # "costs x points": the loss per doubling is minus the slope
        headline[s] = {"mfu_points_per_doubling": row["estimate"], "ci_low": row["ci_low"],
                       "ci_high": row["ci_high"], "n_obs": int((df["scaling"] == s).sum())}
    return rows, headline


def hardware_ratios(df: pd.DataFrame) -> pd.DataFrame:
    """Add log2 of the chips' peak FLOP/s per HBM byte/s and per scale-out byte/s (the ingest
    derives both from the hardware catalog: runs.parquet ``flops_per_*_byte``)."""
    df = df.copy()
    for column in ("flops_per_hbm_byte", "flops_per_scaleout_byte"):
        ratio = pd.to_numeric(df[column], errors="coerce") if column in df else np.nan
        df[f"log2_{column}"] = np.log2(ratio)
    return df


RATIOS = {"hbm": "log2_flops_per_hbm_byte", "scaleout": "log2_flops_per_scaleout_byte"}


def hardware_models(df: pd.DataFrame, alpha: float) -> tuple[list[dict], dict]:
    """MFU against each compute-to-bandwidth ratio, one model per ratio.

    One model per ratio, not both in one: the catalog lacks a scale-out bandwidth for some
    accelerators (TPU v3/v4 have no separate scale-out network), and with a handful of
    accelerator types the two ratios are nearly collinear.
    """
    df = hardware_ratios(df)
    rows: list[dict] = []
    headline: dict[str, Any] = {}
    for key, ratio in RATIOS.items():
        mine = best_per_point(df.replace([np.inf, -np.inf], np.nan).dropna(subset=[ratio]),
                              "mfu_points")
        n_types = int(mine["accelerator"].nunique())
        if len(mine) < 8 or n_types < 3:
            headline[key] = {"note": f"{len(mine)} runs on {n_types} accelerator type(s) with a "
                                     f"catalog {key} bandwidth: too few to estimate a slope"}
            continue
        rhs = _terms(mine, [ratio, "log2_n", "C(scaling)", "log10_params"])
        formula = "mfu_points ~ " + " + ".join(rhs)
        model_rows, res = _fit(f"hardware_{key}", formula, mine, alpha)
        rows += model_rows
        row = next(r for r in model_rows if r["term"] == ratio)
        headline[key] = {"formula": formula, "n_obs": int(res.nobs),
                         "n_accelerator_types": n_types, "n_clusters": row["n_clusters"],
                         "mfu_points_per_doubling_of_ratio": row["estimate"],
                         "ci_low": row["ci_low"], "ci_high": row["ci_high"]}
    return rows, headline


def cross_series(runs: pd.DataFrame, interval: float) -> tuple[pd.DataFrame, dict]:
    """Both models: a tidy coefficient table and the headline figures for fit.json."""
    alpha = 1.0 - interval
    scaling_runs = mfu_frame(runs)
    # Single-configuration runs (PaLM, BLOOM...) add accelerator types to the hardware model.
    all_runs = mfu_frame(runs, scalings=None)
    rows: list[dict] = []
    headlines: dict[str, Any] = {}
    for name, fn in (("doubling", lambda: doubling_model(scaling_runs, alpha)),
                     ("hardware", lambda: hardware_models(all_runs, alpha))):
        try:
            model_rows, headline = fn()
        except (ValueError, np.linalg.LinAlgError) as exc:  # singular design and the like
            model_rows, headline = [], {"note": f"{type(exc).__name__}: {exc}"}
        rows += model_rows
        headlines[name] = headline
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    return table.sort_values(["model", "term"]).reset_index(drop=True), headlines
