"""Compare stage: measured scaling against the theory's ceilings, per run and per series.

Inputs (``data/processed``): ``runs``, ``series``, ``fits``, ``extrapolation``, ``bounds``,
``frontier`` parquet files and ``reports/metrics/{fit,theory}.json``. Outputs:

* ``comparison.parquet``: one row per measured run: MFU, the theory's ``bound_mfu``, the fraction
  of the ceiling achieved, the measured step time split into the share the theory explains (by
  component) and the share it leaves unexplained, and the run's place on the frontier.
* ``comparison_curves.parquet``: per series and N, the measured scaling efficiency, the default
  law's fitted/extrapolated throughput with its prediction interval, and the theory's efficiency
  (``kind`` = ``measured`` | ``curve`` | ``target``; ``target`` rows are the ``extrapolate_n``).
* ``comparison_series.parquet``: one row per series: efficiency at its largest N, and the N at
  which the fitted law, the theory's ceiling and the measurements fall below
  ``compare.efficiency_threshold`` (``n_at_threshold_law`` etc.; 0.5 by default).
* ``reports/metrics/compare.json``: headline figures; ``reports/plots/compare_*.csv`` for
  ``dvc plots``.

Definitions. Scaling efficiency at N is per-accelerator throughput relative to the smallest N of
the series, eff(N) = (y(N)/N) / (y(N0)/N0) (Fernandez et al. 2024, arXiv:2411.13055, use the same
per-device ratio). The theory's efficiency for the same family is bound_mfu(N)/bound_mfu(N0).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
from tqdm import tqdm

from pipeline.config import CATALOG_DIR, ConfigError, get
from pipeline.io import write_csv, write_json, write_parquet

SECONDS_PER_DAY = 86_400.0
OVERLAPPED = ("hbm", "net_tp", "net_dp", "net_pp", "net_ep")
SHARES = ("compute",) + OVERLAPPED + ("bubble", "latency", "other", "unexplained")


# -- settings ----------------------------------------------------------------------------------
def settings(params: dict[str, Any]) -> dict[str, Any]:
    """Read and check the ``compare`` section of params.yaml (ConfigError names the field)."""
    targets = get(params, "compare.extrapolate_n", list)
    if not targets or any(isinstance(t, bool) or not isinstance(t, int) or t < 2 for t in targets):
        raise ConfigError("params: field 'compare.extrapolate_n' must be a list of integers >= 2")
    interval = get(params, "compare.interval", float)
    if not 0.0 < interval < 1.0:
        raise ConfigError("params: field 'compare.interval' must lie in (0, 1)")
    days = get(params, "compare.frontier_duration_days", float, default=90.0)
    if days <= 0:
        raise ConfigError("params: field 'compare.frontier_duration_days' must be > 0")
    half = get(params, "compare.efficiency_threshold", float, default=0.5)
    if not 0.0 < half < 1.0:
        raise ConfigError("params: field 'compare.efficiency_threshold' must lie in (0, 1)")
    points = get(params, "compare.curve_points", int, default=48)
    if points < 4:
        raise ConfigError("params: field 'compare.curve_points' must be >= 4")
    return {"targets": sorted(targets), "interval": interval, "duration_s": days * SECONDS_PER_DAY,
            "threshold": half, "curve_points": points}


# -- per run -----------------------------------------------------------------------------------
def gap_shares(mfu: float, bound: pd.Series) -> dict[str, float]:
    """Split a run's measured step time into what the theory explains and what it does not.

    Times are put on one basis through the ideal arithmetic time t_ideal (FLOP at peak):
    the theory's step time is t_ideal / bound_mfu and the measured one t_ideal / mfu (the
    definitions of MFU and of the bound). Of the theory's overhead, the bubble and latency add
    to the step (Erdil & Schneider-Joseph 2024, theory.md §2.4: phases add); the remainder is the
    overlapped resources' excess over compute, split in proportion to each one's excess
    max(0, t_x - t_compute). Returns fractions of the measured step time that sum to 1; the
    ``unexplained`` share is negative when a run beats the ceiling.
    """
    out = dict.fromkeys(SHARES, np.nan)
    b = float(bound.get("bound_mfu", np.nan))
    t_compute = float(bound.get("t_compute_s", np.nan))
    if not (np.isfinite(mfu) and mfu > 0 and np.isfinite(b) and b > 0 and np.isfinite(t_compute)):
        return out
    t_step = float(bound["t_step_s"]) if np.isfinite(bound.get("t_step_s", np.nan)) else t_compute / b
    t_ideal = b * t_step
    t_meas = t_ideal / mfu
    overhead = max(t_step - t_ideal, 0.0)
    added = {k: max(float(bound.get(f"t_{k}_s", 0.0) or 0.0), 0.0) for k in ("bubble", "latency")}
    scale = min(1.0, overhead / sum(added.values())) if sum(added.values()) > 0 else 0.0
    added = {k: v * scale for k, v in added.items()}
    rest = overhead - sum(added.values())
    excess = {k: max(float(bound.get(f"t_{k}_s", 0.0) or 0.0) - t_compute, 0.0) for k in OVERLAPPED}
    total_excess = sum(v for v in excess.values() if np.isfinite(v))
    out.update({k: 0.0 for k in SHARES})
    out["compute"] = t_ideal / t_meas
    for k, v in excess.items():
        out[k] = rest * v / total_excess / t_meas if total_excess > 0 else 0.0
    out["other"] = 0.0 if total_excess > 0 else rest / t_meas
    out.update({k: v / t_meas for k, v in added.items()})
    out["unexplained"] = (t_meas - t_step) / t_meas
    return out


def compare_runs(runs: pd.DataFrame, bounds: pd.DataFrame, duration_s: float) -> pd.DataFrame:
    """One row per measured run: MFU against its ceiling, gap shares, place on the frontier."""
    ok = runs[runs["status"].fillna("ok") == "ok"].copy()
    keep = ["run_id", "source", "source_kind", "citation", "model", "accelerator",
            "accelerator_family", "n_accelerators", "strategy_family", "scaling", "series_id",
            "precision", "active_params", "mfu", "hfu", "model_flops_per_s", "tokens_per_s",
            "tokens_per_s_per_accelerator", "peak_flops_per_s_per_accelerator",
            "power_w_per_accelerator", "energy_j_per_token", "time_to_train_s"]
    keep += [c for c in ("training_tokens", "flops_per_hbm_byte") if c in ok.columns]
    df = ok[keep].merge(bounds, on="run_id", how="left")
    df["fraction_of_ceiling"] = df["mfu"] / df["bound_mfu"]
    df["exceeds_bound"] = df["fraction_of_ceiling"] > 1.0
    shares = [gap_shares(m, b) for m, (_, b) in zip(df["mfu"], df.iterrows())]
    for k in SHARES:
        df[f"share_{k}"] = [s[k] for s in shares]
    df["tokens_per_accelerator_hour"] = df["tokens_per_s_per_accelerator"] * 3600.0
    flop, basis = [], []
    for r in df.itertuples():
        tokens = getattr(r, "training_tokens", np.nan)
        if np.isfinite(tokens if tokens is not None else np.nan) and np.isfinite(r.active_params):
            flop.append(6.0 * r.active_params * tokens), basis.append("tokens")
        elif np.isfinite(r.time_to_train_s) and np.isfinite(r.model_flops_per_s):
            flop.append(r.model_flops_per_s * r.time_to_train_s), basis.append("time_to_train")
        elif np.isfinite(r.model_flops_per_s):
            flop.append(r.model_flops_per_s * duration_s), basis.append("duration_at_throughput")
        else:
            flop.append(np.nan), basis.append(None)
    df["training_flop"], df["training_flop_basis"] = flop, basis
    return df.sort_values("run_id").reset_index(drop=True)


# -- laws and theory adapters ------------------------------------------------------------------
def predict_frame(result: Any, n: np.ndarray, interval: float) -> pd.DataFrame:
    """A ``pipeline.laws`` fit's predictions at ``n``: columns predicted, pi_low, pi_high (the
    interval for one new measurement at that N)."""
    pred = result.predict(np.asarray(n, float), interval=interval)
    return pred[["predicted", "pi_low", "pi_high"]].reset_index(drop=True)


def theory_ceilings(refs: list[tuple[str, dict, np.ndarray]], catalog: Any,
                    params: dict[str, Any]) -> tuple[dict[str, np.ndarray], str]:
    """The theory's ceiling (bound_mfu) for each series' configuration family moved to other N.

    ``refs`` holds (series_id, reference run, N grid). The reference run (the series' largest N)
    keeps its model, accelerator and tp/pp/cp/ep degrees; data parallelism absorbs the change
    of N (dp = N / (tp pp cp)); under weak scaling the global batch grows in proportion to N,
    under strong scaling it stays fixed. All points are evaluated in one vectorised call of
    ``pipeline.theory.bounds.compute_bounds`` with the ``theory`` section of params.yaml.
    Returns ({series_id: bound_mfu per grid N}, note); {} when the theory is unavailable.
    """
    if not refs or catalog is None:
        return {}, "no catalog or no series"
    try:
        from pipeline.theory.bounds import compute_bounds
    except ImportError as exc:
        return {}, f"theory unavailable: {exc}"
    rows = []
    for sid, ref, grid in refs:
        n_ref = float(ref["n_accelerators"])
        for i, n in enumerate(grid):
            row = dict(ref, n_accelerators=float(n), dp=np.nan, run_id=f"{sid}|{i:04d}")
            if ref.get("scaling") == "weak" and np.isfinite(ref.get("global_batch_tokens") or np.nan):
                row["global_batch_tokens"] = float(ref["global_batch_tokens"]) * n / n_ref
            rows.append(row)
    try:
        bounds = compute_bounds(pd.DataFrame(rows), catalog, params).set_index("run_id")["bound_mfu"]
    except Exception as exc:  # a theory failure leaves the measured comparison intact
        return {}, f"theory failed: {type(exc).__name__}: {exc}"[:200]
    return ({sid: bounds.reindex([f"{sid}|{i:04d}" for i in range(len(grid))]).to_numpy(float)
             for sid, _, grid in refs}, "")


def _half_n(n: np.ndarray, eff: np.ndarray, threshold: float) -> float:
    """Smallest N at which eff first falls below threshold, log-linearly interpolated."""
    below = np.flatnonzero(np.isfinite(eff) & (eff < threshold))
    if not len(below):
        return np.nan
    i = below[0]
    if i == 0:
        return float(n[0])
    x0, x1, e0, e1 = np.log(n[i - 1]), np.log(n[i]), eff[i - 1], eff[i]
    return float(np.exp(x0 + (threshold - e0) * (x1 - x0) / (e1 - e0)))


# -- per series --------------------------------------------------------------------------------
def usable_laws(fits: pd.DataFrame, law_order: list[str]) -> dict[str, tuple[str, str | None]]:
    """Per series, the first law of ``law_order`` that the fit stage fitted (converged), with
    its ``scale``. A series whose default law cannot be fitted (a 3-parameter law on 3 points)
    falls back to the next law in the fit stage's held-out ranking."""
    if fits.empty:
        return {}
    ok = fits[fits["converged"].fillna(False).astype(bool)] if "converged" in fits else fits
    rank = {law: i for i, law in enumerate(law_order)}
    ok = ok.assign(_rank=ok["law"].map(lambda x: rank.get(x, len(rank)))).sort_values(
        ["series_id", "_rank", "law"])
    first = ok.groupby("series_id").head(1)
    scale = first["scale"] if "scale" in first else pd.Series(None, index=first.index)
    return {r: (law, sc if isinstance(sc, str) else None)
            for r, law, sc in zip(first["series_id"], first["law"], scale)}


def compare_series(runs: pd.DataFrame, series: pd.DataFrame, per_run: pd.DataFrame,
                   fits: pd.DataFrame, law_order: list[str], cfg: dict[str, Any],
                   catalog: Any = None, params: dict[str, Any] | None = None
                   ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Measured, fitted and theoretical efficiency curves per series, and their summaries.

    The series are those the fit stage fitted; each is refitted here with its law (the default
    law, or the next in ranking where the default could not be fitted: ``usable_laws``) on the
    fit stage's own points and context (``pipeline.laws.series.series_points``) and scale, so
    the curve is the fit in fits.parquet, with predictions and intervals at any N (fits.parquet
    keeps no covariance to predict from). The theory's
    curve comes from ``theory_ceilings`` (its efficiency is relative to the ceiling at the
    series' smallest N).
    """
    from pipeline.laws import get_law
    from pipeline.laws.nls import fit_law
    from pipeline.laws.series import series_points

    default_law = law_order[0]
    laws_of = usable_laws(fits, law_order)
    bound_of = per_run.set_index("run_id")["bound_mfu"]
    series = series[series["series_id"].isin(set(fits["series_id"]))] if len(fits) else series
    prepared = []
    for s in series.sort_values("series_id").itertuples():
        ycol = s.y_metric if s.y_metric in runs.columns else "model_flops_per_s"
        g = runs[(runs["series_id"] == s.series_id) & (runs["status"].fillna("ok") == "ok")]
        g = g[np.isfinite(g[ycol].astype(float)) & (g[ycol] > 0)]
        by_n = g.groupby("n_accelerators")[ycol].median().sort_index()
        if len(by_n) < 2:
            continue
        n0 = float(by_n.index[0])
        grid = np.unique(np.concatenate([
            [n0], np.geomspace(n0, max(cfg["targets"]), cfg["curve_points"]), cfg["targets"]]))
        ref = g.loc[g["n_accelerators"].idxmax()].to_dict()
        prepared.append((s, ycol, g, by_n, grid, ref))
    # A series whose model grows with N (Megatron's weak-scaling table) has no single
    # configuration family to move along N: no theory curve for it.
    one_model = [p for p in prepared if p[2]["params"].nunique(dropna=False) <= 1]
    theory, theory_note = theory_ceilings(
        [(p[0].series_id, p[5], p[4]) for p in one_model], catalog, params or {})
    rows, summary = [], []
    # progress on a terminal only (tqdm disable=None): refitting every series takes seconds
    for s, ycol, g, by_n, grid, ref in tqdm(prepared, desc="compare", unit="series",
                                           file=sys.stderr, disable=None, delay=1.0):
        n_obs, y_obs = by_n.index.to_numpy(float), by_n.to_numpy(float)
        n0, per0 = n_obs[0], y_obs[0] / n_obs[0]
        theory_obs = g.assign(b=g["run_id"].map(bound_of)).groupby("n_accelerators")["b"].median()
        theory_obs = theory_obs.reindex(by_n.index).to_numpy(float)
        law, scale = laws_of.get(s.series_id, (None, None))
        base = dict(series_id=s.series_id, source=s.source, model=s.model, scaling=s.scaling,
                    strategy_family=s.strategy_family, accelerator=s.accelerator,
                    accelerator_family=g["accelerator_family"].iloc[0], y_metric=ycol, law=law,
                    law_is_default=law == default_law)
        for n, y, tb in zip(n_obs, y_obs, theory_obs):
            rows.append({**base, "kind": "measured", "n_accelerators": n, "y": y,
                         "efficiency": (y / n) / per0, "efficiency_theory": tb / theory_obs[0]})
        pred = pd.DataFrame(np.nan, index=range(len(grid)), columns=["predicted", "pi_low", "pi_high"])
        note = "" if law else "no law could be fitted by the fit stage"
        if law:
            points = series_points(runs[runs["series_id"] == s.series_id], pd.Series(s._asdict()))
            try:
                result = fit_law(get_law(law), points.n, points.y, scale=scale or "linear",
                                 ctx=points.ctx)
                pred = predict_frame(result, grid, cfg["interval"])
            except Exception as exc:  # reported per series, the stage goes on
                note = f"fit failed: {type(exc).__name__}: {exc}"[:200]
        pred0 = float(pred["predicted"].iloc[0]) / n0
        th = theory.get(s.series_id, np.full(len(grid), np.nan))
        eff_law = pred["predicted"].to_numpy() / grid / pred0
        eff_theory = th / th[0] if th[0] > 0 else np.full(len(grid), np.nan)
        peak = float(g["peak_flops_per_s_per_accelerator"].iloc[0])
        ratio = (g[ycol] / g["model_flops_per_s"]).dropna()
        y_per_flop = 1.0 if ycol == "model_flops_per_s" else (
            float(ratio.median()) if len(ratio) else np.nan)
        for i, n in enumerate(grid):
            rows.append({**base, "kind": "target" if n in cfg["targets"] else "curve",
                         "n_accelerators": n, "y": np.nan, "efficiency": np.nan,
                         "predicted": pred["predicted"].iloc[i], "pi_low": pred["pi_low"].iloc[i],
                         "pi_high": pred["pi_high"].iloc[i], "efficiency_law": eff_law[i],
                         "efficiency_law_low": pred["pi_low"].iloc[i] / n / pred0,
                         "efficiency_law_high": pred["pi_high"].iloc[i] / n / pred0,
                         "bound_mfu": th[i], "efficiency_theory": eff_theory[i],
                         "y_ceiling": th[i] * peak * n * y_per_flop})
        eff_obs = (y_obs / n_obs) / per0
        summary.append({**base, "n_min": n0, "n_max": n_obs[-1], "n_distinct": len(n_obs),
                        "efficiency_at_n_max": eff_obs[-1],
                        "theory_efficiency_at_n_max": theory_obs[-1] / theory_obs[0],
                        "n_at_threshold_law": _half_n(grid, eff_law, cfg["threshold"]),
                        "n_at_threshold_theory": _half_n(grid, eff_theory, cfg["threshold"]),
                        "n_at_threshold_measured": _half_n(n_obs, eff_obs, cfg["threshold"]),
                        "theory_curve": bool(np.isfinite(th).any()),
                        "note": "; ".join(x for x in (note, theory_note) if x)})
    curves = pd.DataFrame(rows)
    if len(curves):
        curves = curves.sort_values(["series_id", "kind", "n_accelerators"]).reset_index(drop=True)
    return curves, pd.DataFrame(summary)


# -- stage -------------------------------------------------------------------------------------
def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def law_order_of(fit_metrics: dict[str, Any], fits: pd.DataFrame) -> list[str]:
    """The fit stage's default law first, then the others by its held-out scores
    (``default_law_scores``, lower is better), then any remaining law by name."""
    scores = fit_metrics.get("default_law_scores") or {}
    ranked = sorted((v, k) for k, v in scores.items() if isinstance(v, (int, float)))
    order = [k for _, k in ranked]
    law = fit_metrics.get("default_law")
    if not (isinstance(law, str) and law):
        finite = fits[np.isfinite(fits["aicc"].astype(float))] if len(fits) else fits
        law = str(finite.groupby("law")["aicc"].median().idxmin()) if len(finite) else "power"
    rest = sorted(set(fits["law"]) if len(fits) else set()) + ["power"]
    return list(dict.fromkeys([law] + order + rest))


def headline(per_run: pd.DataFrame, summ: pd.DataFrame, curves: pd.DataFrame,
             cfg: dict[str, Any], default_law: str) -> dict[str, Any]:
    """Headline figures for compare.json (printed by ``dvc metrics show``)."""
    frac = per_run["fraction_of_ceiling"].dropna()
    out: dict[str, Any] = {
        "n_runs": int(len(per_run)), "n_runs_with_bound": int(len(frac)),
        "median_fraction_of_ceiling": float(frac.median()) if len(frac) else None,
        "n_runs_exceeding_bound": int((frac > 1).sum()), "default_law": default_law,
        "n_series": int(len(summ)),
        "efficiency_threshold": cfg["threshold"], "extrapolate_n": cfg["targets"],
        "interval": cfg["interval"], "frontier_duration_days": cfg["duration_s"] / SECONDS_PER_DAY,
    }
    def median(values: pd.Series) -> float | None:
        values = values.dropna()
        return float(values.median()) if len(values) else None

    for scaling in ("strong", "weak"):
        s = summ[summ["scaling"] == scaling] if len(summ) else pd.DataFrame(
            columns=["efficiency_at_n_max", "n_at_threshold_law"])
        out[f"{scaling}_median_efficiency_at_n_max"] = median(s["efficiency_at_n_max"])
        out[f"{scaling}_median_n_at_threshold_law"] = median(s["n_at_threshold_law"])
    if len(curves):
        t = curves[curves["kind"] == "target"]
        for n in cfg["targets"]:
            strong = t[(t["n_accelerators"] == n) & (t["scaling"] == "strong")]
            out[f"strong_median_efficiency_law_at_{n}"] = median(strong["efficiency_law"])
            out[f"strong_median_efficiency_theory_at_{n}"] = median(strong["efficiency_theory"])
    return out


def run(params: dict[str, Any], *, processed_dir: Path, metrics_dir: Path, out_dir: Path,
        metrics_path: Path, plots_dir: Path, catalog_dir: Path | None = None) -> dict[str, Any]:
    """Run the compare stage; returns the metrics written to ``metrics_path``.

    ``catalog_dir`` (default ``data/catalog``) gives the theory the hardware of each series'
    configuration family moved to other N (``theory_ceilings``).
    """
    cfg = settings(params)
    processed_dir, metrics_dir = Path(processed_dir), Path(metrics_dir)
    runs = pd.read_parquet(processed_dir / "runs.parquet")
    series = pd.read_parquet(processed_dir / "series.parquet")
    fits = pd.read_parquet(processed_dir / "fits.parquet")
    bounds_path = processed_dir / "bounds.parquet"
    # Without the theory stage's bounds the measured side is still compared (NaN ceilings).
    bounds = pd.read_parquet(bounds_path) if bounds_path.exists() else pd.DataFrame(
        columns=["run_id", "bound_mfu", "t_compute_s", "binding"]).astype({"bound_mfu": float,
                                                                           "t_compute_s": float})
    law_order = law_order_of(_read_json(metrics_dir / "fit.json"), fits)
    default_law = law_order[0]
    from pipeline.catalog import load_catalog
    catalog = load_catalog(catalog_dir or CATALOG_DIR)
    per_run = compare_runs(runs, bounds, cfg["duration_s"])
    curves, summ = compare_series(runs, series, per_run, fits, law_order, cfg, catalog, params)
    write_parquet(per_run, Path(out_dir) / "comparison.parquet")
    write_parquet(curves, Path(out_dir) / "comparison_curves.parquet")
    write_parquet(summ, Path(out_dir) / "comparison_series.parquet")
    metrics = headline(per_run, summ, curves, cfg, default_law)
    write_json(metrics, metrics_path)
    plots_dir = Path(plots_dir)
    if len(curves):
        m = curves[curves["kind"] == "measured"]
        write_csv(m[["series_id", "n_accelerators", "efficiency", "efficiency_theory"]],
                  plots_dir / "compare_efficiency.csv", significant=6)
    write_csv(per_run[["run_id", "accelerator_family", "training_flop", "mfu", "bound_mfu"]]
              .dropna(subset=["training_flop"]), plots_dir / "compare_frontier_runs.csv",
              significant=6)
    return metrics
