"""Compare stage: measured scaling against the theory's ceilings, per run and per series.

Inputs (``data/processed``): ``runs``, ``series``, ``fits``, ``fit_curves`` (each law on the
extrapolation grid, written by fit), ``bounds`` and ``theory_curves`` (each series' ceiling on the
same grid, written by theory), ``reports/metrics/fit.json`` and ``selected_targets.parquet``
(calibrate's recommended predictor at ``extrapolate_n``, which replaces the law's prediction and
interval on the ``target`` rows where it predicts them; ``predictor`` names which). It joins and
summarises them; it imports no fit, theory or calibrate code. Outputs:

* ``comparison.parquet``: one row per measured run: MFU, the theory's ``bound_mfu``, the fraction
  of the ceiling achieved, the measured step time split into the share the theory explains (by
  component, then its ``overhead``) and the ``residual`` it leaves unexplained, and the run's
  place on the frontier.
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

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
from tqdm import tqdm

from pipeline.config import CompareSettings, Settings
from pipeline.measures import (extrapolation_grid, finished, n_at_efficiency,
                               training_flop, y_column)
from pipeline.runner import Inputs, Result, run_stage
from pipeline.schema import empty_frame
from pipeline.vocab import SHARE_SLOTS

SECONDS_PER_DAY = 86_400.0
OVERLAPPED = ("hbm", "net_tp", "net_dp", "net_pp", "net_ep")
SHARES = SHARE_SLOTS


# -- per run -----------------------------------------------------------------------------------
def gap_shares(mfu: float, bound: pd.Series) -> dict[str, float]:
    """One run's ``gap_share_columns`` (``bound``: its row of ceiling times), as a dict."""
    cols = gap_share_columns(np.array([mfu], float), bound.to_frame().T)
    return {k: float(v[0]) for k, v in cols.items()}


def _py_max(x: np.ndarray, floor: float) -> np.ndarray:
    """Python's ``max(x, floor)`` elementwise: ``x`` unless ``floor`` is larger (NaN stays)."""
    return np.where(floor > x, floor, x)


def _times(bound: pd.DataFrame, name: str, missing: float) -> np.ndarray:
    """A column of ``bound`` as floats: ``missing`` where the column is absent; a null in a
    column of objects counts as ``missing`` too."""
    if name not in bound.columns:
        return np.full(len(bound), missing)
    values = bound[name]
    if values.dtype == object:
        return np.array([missing if v is None else float(v) for v in values], float)
    return values.to_numpy(float)


def gap_share_columns(mfu: np.ndarray, bound: pd.DataFrame) -> dict[str, np.ndarray]:
    """Split each run's measured step time into what the theory explains and what it does not.

    Times are put on one basis through the ideal arithmetic time t_ideal (FLOP at peak):
    the theory's step time is t_ideal / bound_mfu and the measured one t_ideal / mfu (the
    definitions of MFU and of the bound). Of the theory's overhead, the bubble and latency add
    to the step (Erdil & Schneider-Joseph 2024, theory.md §2.4: phases add); the remainder is the
    overlapped resources' excess over compute, split in proportion to each one's excess
    max(0, t_x - t_compute). ``bound`` has one row per run (``bound_mfu``, ``t_<x>_s``);
    returns, per share, fractions of the measured step time that sum to 1 per run (NaN where
    the run has no MFU or no ceiling); the ``residual`` share is negative when a run beats
    the ceiling.
    """
    b = _times(bound, "bound_mfu", np.nan)
    t_compute = _times(bound, "t_compute_s", np.nan)
    ok = np.isfinite(mfu) & (mfu > 0) & np.isfinite(b) & (b > 0) & np.isfinite(t_compute)
    # over: an overhead over a subnormal bubble + latency is inf, and its scale clips to 1
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        stated = _times(bound, "t_step_s", np.nan)
        t_step = np.where(np.isfinite(stated), stated, t_compute / b)
        t_ideal = b * t_step
        t_meas = t_ideal / mfu
        overhead = _py_max(t_step - t_ideal, 0.0)
        added = {k: _py_max(_times(bound, f"t_{k}_s", 0.0), 0.0) for k in ("bubble", "latency")}
        total_added = 0.0 + added["bubble"] + added["latency"]
        ratio = overhead / total_added
        scale = np.where(total_added > 0, np.where(ratio < 1.0, ratio, 1.0), 0.0)
        added = {k: v * scale for k, v in added.items()}
        rest = overhead - (0.0 + added["bubble"] + added["latency"])
        excess = {k: _py_max(_times(bound, f"t_{k}_s", 0.0) - t_compute, 0.0) for k in OVERLAPPED}
        total_excess = 0.0
        for v in excess.values():
            total_excess = total_excess + np.where(np.isfinite(v), v, 0.0)
        spread = total_excess > 0
        out = {k: np.zeros(len(b)) for k in SHARES}
        out["compute"] = t_ideal / t_meas
        for k, v in excess.items():
            out[k] = np.where(spread, rest * v / total_excess / t_meas, 0.0)
        out["overhead"] = np.where(spread, 0.0, rest / t_meas)
        out.update({k: v / t_meas for k, v in added.items()})
        out["residual"] = (t_meas - t_step) / t_meas
    return {k: np.where(ok, v, np.nan) for k, v in out.items()}


def _training_flop(df: pd.DataFrame, duration_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Each run's place on the frontier: C = 6 N_act D from its training tokens, else its
    throughput times its time to train, else its throughput over ``duration_s``; with the
    basis named (None where nothing gives it)."""
    def col(name: str) -> np.ndarray:
        return df[name].to_numpy(float) if name in df.columns else np.full(len(df), np.nan)

    tokens, active = col("training_tokens"), col("active_params")
    ttt, rate = col("time_to_train_s"), col("model_flops_per_s")
    by_tokens = np.isfinite(tokens) & np.isfinite(active)
    by_time = ~by_tokens & np.isfinite(ttt) & np.isfinite(rate)
    by_rate = ~by_tokens & ~by_time & np.isfinite(rate)
    flop = np.where(by_tokens, training_flop(active, tokens),
                    np.where(by_time, rate * ttt, np.where(by_rate, rate * duration_s, np.nan)))
    basis = np.full(len(df), None, dtype=object)
    basis[by_tokens], basis[by_time], basis[by_rate] = "tokens", "time_to_train", \
        "duration_at_throughput"
    return flop, basis


def compare_runs(runs: pd.DataFrame, bounds: pd.DataFrame, duration_s: float) -> pd.DataFrame:
    """One row per measured run: MFU against its ceiling, gap shares, place on the frontier."""
    ok = finished(runs).copy()
    keep = ["run_id", "source", "source_kind", "citation", "model", "accelerator",
            "accelerator_family", "n_accelerators", "strategy_family", "scaling", "series_id",
            "precision", "active_params", "mfu", "hfu", "model_flops_per_s", "tokens_per_s",
            "tokens_per_s_per_accelerator", "peak_flops_per_s_per_accelerator",
            "power_w_per_accelerator", "energy_j_per_token", "time_to_train_s"]
    keep += [c for c in ("training_tokens", "flops_per_hbm_byte") if c in ok.columns]
    df = ok[keep].merge(bounds, on="run_id", how="left")
    df["fraction_of_ceiling"] = df["mfu"] / df["bound_mfu"]
    df["exceeds_bound"] = df["fraction_of_ceiling"] > 1.0
    shares = gap_share_columns(df["mfu"].to_numpy(float), df)
    for k in SHARES:
        df[f"share_{k}"] = shares[k]
    df["tokens_per_accelerator_hour"] = df["tokens_per_s_per_accelerator"] * 3600.0
    df["training_flop"], df["training_flop_basis"] = _training_flop(df, duration_s)
    return df.sort_values("run_id").reset_index(drop=True)


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


class _Grouped:
    """A frame's rows grouped by key columns, stably sorted by ``key + [order]``: each key's
    rows as a slice of the sorted columns (what a groupby, then a sort per group, gives),
    found once for all groups."""

    def __init__(self, frame: pd.DataFrame, key: list[str], order: str,
                 columns: list[str]) -> None:
        frame = frame.sort_values([*key, order], kind="mergesort")
        keys = [frame[k].to_numpy(object) for k in key]
        self.order = frame[order].to_numpy(float)
        self.columns = {c: frame[c].to_numpy(float) for c in columns}
        n = len(frame)
        change = np.zeros(n, bool)
        if n:
            change[0] = True
            for k in keys:
                change[1:] |= k[1:] != k[:-1]
        starts = np.flatnonzero(change)
        stops = np.r_[starts[1:], n].astype(int)
        labels = zip(*(k[starts] for k in keys)) if len(key) > 1 else keys[0][starts]
        self.slices = {label: slice(int(a), int(b)) for label, a, b in zip(labels, starts, stops)}

    def on(self, label: Any, grid: np.ndarray) -> dict[str, np.ndarray] | None:
        """The group's columns on ``grid``; None when the group is absent or was written on
        another grid."""
        at = self.slices.get(label)
        if at is None or not np.array_equal(self.order[at], grid):
            return None
        return {c: v[at] for c, v in self.columns.items()}


@dataclass
class _Points:
    """A series' measured points: median y and median ceiling per N (sorted), and the values
    its curve rows take from its first measured run."""

    ycol: str
    n: np.ndarray
    y: np.ndarray
    bound: np.ndarray
    accelerator_family: Any
    peak: float
    y_per_flop: float


def _measured_points(runs: pd.DataFrame, series: pd.DataFrame,
                     bound_of: pd.Series) -> dict[str, _Points]:
    """Every series' measured points (``series_runs``: its finished runs with a finite positive
    y), grouped in one pass over all runs per y column: per N the median y and the median of
    the runs' ceilings; a series with no such run is absent."""
    done = finished(runs)
    ycols = {sid: y_column(runs, y) for sid, y in zip(series["series_id"], series["y_metric"])}
    out: dict[str, _Points] = {}
    for ycol in sorted(set(ycols.values())):
        wanted = {sid for sid, c in ycols.items() if c == ycol}
        g = done[done["series_id"].isin(wanted)]
        g = g[np.isfinite(g[ycol].astype(float)) & (g[ycol] > 0)]
        g = g.assign(_b=g["run_id"].map(bound_of))
        med = g.groupby(["series_id", "n_accelerators"])[[ycol, "_b"]].median()
        sid = med.index.get_level_values(0).to_numpy(object)
        n = med.index.get_level_values(1).to_numpy(float)
        y, b = med[ycol].to_numpy(float), med["_b"].to_numpy(float)
        first = g[~g["series_id"].duplicated()]
        family = dict(zip(first["series_id"], first["accelerator_family"]))
        peak = dict(zip(first["series_id"],
                        first["peak_flops_per_s_per_accelerator"].astype(float)))
        ratio = None
        if ycol != "model_flops_per_s":
            ratio = {k: r for k, r in (g[ycol] / g["model_flops_per_s"]).groupby(
                g["series_id"], sort=False)}
        starts = np.flatnonzero(np.r_[True, sid[1:] != sid[:-1]]) if len(sid) else []
        for a, z in zip(starts, np.r_[starts[1:], len(sid)].astype(int)):
            key = sid[a]
            if ratio is None:
                per_flop = 1.0
            else:
                r = ratio[key].dropna()
                per_flop = float(r.median()) if len(r) else np.nan
            out[key] = _Points(ycol, n[a:z], y[a:z], b[a:z], family[key], float(peak[key]),
                               per_flop)
    return out


def compare_series(runs: pd.DataFrame, series: pd.DataFrame, per_run: pd.DataFrame,
                   fits: pd.DataFrame, law_order: list[str], cfg: CompareSettings,
                   fit_curves: pd.DataFrame, theory_curves: pd.DataFrame
                   ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Measured, fitted and theoretical efficiency curves per series, and their summaries.

    The series are those the fit stage fitted; each is drawn with its law (the default law,
    or the next in ranking where the default could not be fitted: ``usable_laws``) from the
    curve the fit stage wrote on the extrapolation grid (``fit_curves.parquet``: predictions
    and intervals), and with the ceiling curve the theory stage wrote on the same grid
    (``theory_curves.parquet``; its efficiency is relative to the ceiling at the series'
    smallest N). Nothing is refitted or recomputed here. The grouping (medians per series
    and N, each series' curves) is done once over all series; the loop per series handles
    arrays of a few dozen values.
    """
    default_law = law_order[0]
    laws_of = usable_laws(fits, law_order)
    bound_of = per_run.set_index("run_id")["bound_mfu"]
    series = series[series["series_id"].isin(set(fits["series_id"]))] if len(fits) else series
    series = series.sort_values("series_id")
    points = _measured_points(runs, series, bound_of)
    law_curve = _Grouped(fit_curves, ["series_id", "law"], "n_accelerators",
                         ["predicted", "pi_low", "pi_high"])
    theory_curve = _Grouped(theory_curves, ["series_id"], "n_accelerators", ["bound_mfu"])
    # N at the threshold efficiency of each fitted law: the fit stage's root (one answer)
    law_n_at_threshold = dict(zip(zip(fits["series_id"], fits["law"]),
                                  fits["n_at_threshold"].astype(float))) if len(fits) else {}
    rows = _Rows()
    summary = []
    grids: dict[float, np.ndarray] = {}  # the grid depends on the smallest N alone
    # progress on a terminal only (tqdm disable=None)
    for s in tqdm(list(series.itertuples()), desc="compare", unit="series", file=sys.stderr,
                  disable=None, delay=1.0):
        p = points.get(s.series_id)
        if p is None or len(p.n) < 2:
            continue
        law = laws_of.get(s.series_id, (None, None))[0]
        summary.append(_draw_series(s, p, law, default_law, law_curve, theory_curve, cfg,
                                    law_n_at_threshold.get((s.series_id, law), np.nan),
                                    rows, grids))
    if not summary:  # no series: the contract's columns, no rows
        return empty_frame("comparison_curves.parquet"), empty_frame("comparison_series.parquet")
    curves = rows.frame()
    curves = curves.sort_values(["series_id", "kind", "n_accelerators"]).reset_index(drop=True)
    return curves, pd.DataFrame(summary)


_BASE = ("series_id", "source", "model", "scaling", "strategy_family", "accelerator",
         "accelerator_family", "y_metric", "law", "law_is_default")
_MEASURED = ("y", "efficiency", "efficiency_theory")
_GRID = ("predicted", "pi_low", "pi_high", "efficiency_law", "efficiency_law_low",
         "efficiency_law_high", "bound_mfu", "y_ceiling")


class _Rows:
    """compare's curve rows, gathered as column blocks (a series' measured points, then its
    grid) and made into one frame with the columns in the order the rows name them."""

    def __init__(self) -> None:
        self.base: list[tuple] = []
        self.counts: list[int] = []
        self.kind: list[np.ndarray] = []
        self.values: dict[str, list[np.ndarray]] = {c: [] for c in
                                                   ("n_accelerators", *_MEASURED, *_GRID)}

    def add(self, base: tuple, kind: np.ndarray, **values: np.ndarray) -> None:
        size = len(kind)
        self.base.append(base)
        self.counts.append(size)
        self.kind.append(kind)
        for c, blocks in self.values.items():
            blocks.append(values[c] if c in values else np.full(size, np.nan))

    def frame(self) -> pd.DataFrame:
        counts = np.asarray(self.counts)
        base = np.empty((len(self.base), len(_BASE)), dtype=object)
        base[:] = self.base
        out = {c: np.repeat(base[:, i], counts) for i, c in enumerate(_BASE)}
        out["law_is_default"] = out["law_is_default"].astype(bool)
        out["kind"] = np.concatenate(self.kind)
        out.update({c: np.concatenate(v) for c, v in self.values.items()})
        return pd.DataFrame(out)


def _draw_series(s: Any, p: _Points, law: str | None, default_law: str, law_curve: _Grouped,
                 theory_curve: _Grouped, cfg: CompareSettings, n_at_threshold_law: float,
                 rows: _Rows, grids: dict[float, np.ndarray]) -> dict[str, Any]:
    """One series' curve rows (measured points, then the grid, added to ``rows``) and its
    summary row, from its measured points ``p`` (at least two N).
    ``n_at_threshold_law`` is the fit stage's N at the threshold efficiency for the series'
    law, quoted when it lies within the grid (up to the largest target)."""
    n_obs, y_obs, theory_obs = p.n, p.y, p.bound
    n0, per0 = n_obs[0], y_obs[0] / n_obs[0]
    targets = sorted(cfg.extrapolate_n)
    grid = grids.get(n0)
    if grid is None:
        grid = grids[n0] = extrapolation_grid(float(n0), targets, cfg.curve_points)
    base = (s.series_id, s.source, s.model, s.scaling, s.strategy_family, s.accelerator,
            p.accelerator_family, p.ycol, law, law == default_law)
    rows.add(base, np.full(len(n_obs), "measured", dtype=object), n_accelerators=n_obs,
             y=y_obs, efficiency=(y_obs / n_obs) / per0,
             efficiency_theory=theory_obs / theory_obs[0])
    nan = np.full(len(grid), np.nan)
    pred = {"predicted": nan, "pi_low": nan, "pi_high": nan}
    note = "" if law else "no law could be fitted by the fit stage"
    if law:
        drawn = law_curve.on((s.series_id, law), grid)
        if drawn is None:
            note = f"fit failed: the fit stage wrote no {law} curve on this grid"
        else:
            pred = drawn
    pred0 = float(pred["predicted"][0]) / n0
    ceiling = theory_curve.on(s.series_id, grid)
    th = ceiling["bound_mfu"] if ceiling is not None else nan
    eff_theory = th / th[0] if th[0] > 0 else nan
    rows.add(base, np.where(np.isin(grid, targets), "target", "curve").astype(object),
             n_accelerators=grid, y=nan, efficiency=nan, **pred,
             efficiency_law=pred["predicted"] / grid / pred0,
             efficiency_law_low=pred["pi_low"] / grid / pred0,
             efficiency_law_high=pred["pi_high"] / grid / pred0,
             bound_mfu=th, efficiency_theory=eff_theory,
             y_ceiling=th * p.peak * grid * p.y_per_flop)
    eff_obs = (y_obs / n_obs) / per0
    threshold = cfg.efficiency_threshold
    return {**dict(zip(_BASE, base)), "n_min": n0, "n_max": n_obs[-1], "n_distinct": len(n_obs),
            "efficiency_at_n_max": eff_obs[-1],
            "theory_efficiency_at_n_max": theory_obs[-1] / theory_obs[0],
            "n_at_threshold_law": (n_at_threshold_law if law and np.isfinite(pred0)
                                   and n_at_threshold_law <= grid[-1] else np.nan),
            "n_at_threshold_theory": n_at_efficiency(grid, eff_theory, threshold),
            "n_at_threshold_measured": n_at_efficiency(n_obs, eff_obs, threshold),
            "theory_curve": bool(np.isfinite(th).any()), "note": note}


def apply_selected(curves: pd.DataFrame, selected: pd.DataFrame) -> pd.DataFrame:
    """compare's curves with the ``target`` rows (extrapolate_n) predicted by ``selected``
    where it has a prediction for that series and N: predicted and interval replaced, the
    efficiencies relative to the measured per-accelerator y at the series' smallest N, and
    ``predictor`` naming what predicted each target row (the law otherwise)."""
    if curves.empty:
        return curves
    out = curves.copy()
    out["predictor"] = out.get("law")
    if selected.empty:
        return out
    sel = selected.set_index(["series_id", "n_accelerators"])
    measured = out[out["kind"] == "measured"].sort_values("n_accelerators")
    first = measured.drop_duplicates("series_id")  # each series' smallest N
    per0 = pd.Series((first["y"] / first["n_accelerators"]).to_numpy(),
                     index=first["series_id"].to_numpy())
    target = out["kind"] == "target"
    keys = list(zip(out.loc[target, "series_id"], out.loc[target, "n_accelerators"].astype(float)))
    hit = np.array([k in sel.index for k in keys], bool)
    rows = out.index[target][hit]
    chosen = sel.loc[[k for k, h in zip(keys, hit) if h]]
    n = out.loc[rows, "n_accelerators"].to_numpy(float)
    base = out.loc[rows, "series_id"].map(per0).to_numpy(float) * n
    for col, eff in (("predicted", "efficiency_law"), ("pi_low", "efficiency_law_low"),
                     ("pi_high", "efficiency_law_high")):
        out.loc[rows, col] = chosen[col].to_numpy(float)
        if eff in out:
            out.loc[rows, eff] = chosen[col].to_numpy(float) / base
    out.loc[rows, "predictor"] = chosen["predictor"].to_numpy(object)
    return out


# -- stage -------------------------------------------------------------------------------------
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
             s: Settings, default_law: str) -> dict[str, Any]:
    """Headline figures for compare.json (printed by ``dvc metrics show``)."""
    targets = sorted(s.compare.extrapolate_n)
    frac = per_run["fraction_of_ceiling"].dropna()
    out: dict[str, Any] = {
        "n_runs": int(len(per_run)), "n_runs_with_bound": int(len(frac)),
        "median_fraction_of_ceiling": float(frac.median()) if len(frac) else None,
        "n_runs_exceeding_bound": int((frac > 1).sum()), "default_law": default_law,
        "n_series": int(len(summ)),
        "efficiency_threshold": s.compare.efficiency_threshold, "extrapolate_n": targets,
        "interval": s.fit.interval, "frontier_duration_days": s.theory.duration_days,
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
        for n in targets:
            strong = t[(t["n_accelerators"] == n) & (t["scaling"] == "strong")]
            out[f"strong_median_efficiency_law_at_{n}"] = median(strong["efficiency_law"])
            out[f"strong_median_efficiency_theory_at_{n}"] = median(strong["efficiency_theory"])
    return out


def compute(inputs: Inputs, s: Settings) -> Result:
    """The compare stage (declared in pipeline/compare/contract.py): runs against their
    ceilings, series against their laws and ceilings, targets from calibrate's ``selected``."""
    runs, fits = inputs["runs.parquet"], inputs["fits.parquet"]
    law_order = law_order_of(inputs.metrics["fit"], fits)
    default_law = law_order[0]
    per_run = compare_runs(runs, inputs["bounds.parquet"], s.theory.duration_days * SECONDS_PER_DAY)
    curves, summ = compare_series(runs, inputs["series.parquet"], per_run, fits, law_order,
                                  s.compare, inputs["fit_curves.parquet"],
                                  inputs["theory_curves.parquet"])
    # Extrapolations to extrapolate_n: the calibrate stage's `selected` where it predicts them.
    curves = apply_selected(curves, inputs["selected_targets.parquet"])
    measured = curves[curves["kind"] == "measured"] if len(curves) else pd.DataFrame(
        columns=["series_id", "n_accelerators", "efficiency", "efficiency_theory"])
    plots = {
        "compare_efficiency.csv": measured[["series_id", "n_accelerators", "efficiency",
                                            "efficiency_theory"]],
        "compare_frontier_runs.csv": per_run[["run_id", "accelerator_family", "training_flop",
                                              "mfu", "bound_mfu"]].dropna(
                                                  subset=["training_flop"]),
    }
    return Result(frames={"comparison.parquet": per_run, "comparison_curves.parquet": curves,
                          "comparison_series.parquet": summ},
                  metrics=headline(per_run, summ, curves, s, default_law), plots=plots)


def run(params: Mapping[str, Any], **paths: Path) -> dict[str, Any]:
    """Run the compare stage through the runner (``processed_dir``, ``out_dir``,
    ``metrics_path``, ``plots_dir``, ``metrics_dir``); returns its metrics."""
    return run_stage("compare", params, **paths)
