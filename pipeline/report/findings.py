"""The numbers behind every sentence and table of the report, computed from the stage outputs.

Templates only format what is computed here; no figure in the report is typed by hand. Each
function returns plain dicts and lists (``None`` where the data cannot say).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pipeline.config import ReportSettings
from pipeline.measures import finished
from pipeline.report import calibration
from pipeline.measures import best_per_point
from pipeline.report.data import ReportData, finite_or_none, rank_within_source
from pipeline.report.energy import energy_section
from pipeline.report.render import band
from pipeline.report.your_runs import your_runs_section

# An extrapolation band whose upper end is more than this factor above its lower end is reported
# as uninformative rather than quoted as if it constrained anything (the figures' rule too).
from pipeline.report.style import BAND_SPAN  # noqa: E402
# Accelerator families with fewer (best-per-point) MFU values are listed, not ranked.
MIN_POINTS = 3


_f = finite_or_none


def _median(values: pd.Series) -> float | None:
    """Median of the finite values; None when there are none."""
    finite = values.dropna()
    return _f(finite.median()) if len(finite) else None


_ok = finished


def data_section(d: ReportData) -> dict[str, Any]:
    """Sources, runs, accelerators, series and rejects by reason."""
    runs, rej, ser = d.runs, d.rejects, d.series
    out: dict[str, Any] = {"n_runs": len(runs), "n_ok": len(_ok(runs)) if len(runs) else 0,
                           "n_rejects": len(rej), "n_series": len(ser), "sources": [],
                           "rejects": [], "families": []}
    if runs.empty:
        return out
    out["n_sources"] = int(runs["source"].nunique())
    listed = set(ser["series_id"]) if not ser.empty else set()
    out["families"] = sorted(runs["accelerator_family"].dropna().unique())
    for src, g in runs.groupby("source", sort=True):
        cites = sorted(g["citation"].dropna().unique())
        out["sources"].append({
            "source": src, "kind": g["source_kind"].dropna().iloc[0] if g["source_kind"].notna().any() else "",
            # listed series only (two N or more), as in "Your runs": a lone run's own
            # series_id is no series
            "runs": len(g), "ok": len(_ok(g)),
            "series": int(g.loc[g["series_id"].isin(listed), "series_id"].nunique()),
            "accelerators": ", ".join(sorted(g["accelerator_family"].dropna().unique())),
            "n_max": int(g["n_accelerators"].max()) if g["n_accelerators"].notna().any() else None,
            "citation": "; ".join(c if len(c) <= 70 else c[:69] + "…" for c in cites[:2])
            + (f"; and {len(cites) - 2} more" if len(cites) > 2 else ""),
        })
    if not rej.empty:
        code = rej["reason"].fillna("unknown").str.split(":", n=1).str[0].str.strip()
        for (c, src), g in rej.assign(code=code).groupby(["code", "source"], sort=True):
            out["rejects"].append({"code": c, "source": src, "count": len(g),
                                   "example": str(g["reason"].iloc[0])[:120]})
        out["reject_codes"] = int(code.nunique())
    status = runs["status"].fillna("ok").value_counts()
    out["status"] = [{"status": k, "count": int(v)} for k, v in sorted(status.items())]
    out["scalings"] = [{"scaling": k, "count": int(v)} for k, v in
                       sorted(runs["scaling"].fillna("unknown").value_counts().items())]
    return out


def scaling_section(d: ReportData, table_per_source: int = 6) -> dict[str, Any]:
    """Efficiency at the largest measured N, the 50% crossings, and the extrapolations.

    The series table lists, per source, the ``table_per_source`` series that span the widest
    range of N (a sweep such as the Playbook's has hundreds; all are in comparison_series).
    """
    summ, curves, m = d.comparison_series, d.comparison_curves, d.metrics["compare"]
    out: dict[str, Any] = {"threshold": m.get("efficiency_threshold", 0.5),
                           "interval": m.get("interval", 0.95), "law": m.get("default_law"),
                           "kinds": {}, "targets": [],
                           "table": [], "n_at_threshold_law_count": 0, "table_total": 0}
    if summ.empty:
        return out
    fastest = fastest_at_n_max(summ, curves)
    runs = _ok(d.runs) if not d.runs.empty else d.runs
    growing = (set(runs.groupby("series_id")["params"].nunique().loc[lambda x: x > 1].index)
               if "params" in runs else set())
    for kind, g in summ.groupby("scaling", sort=True):
        out["kinds"][kind] = _kind_summary(g, fastest, growing, out["threshold"])
    out["targets"] = _target_rows(curves)
    out["first_target"] = min((r["n"] for r in out["targets"]), default=None)
    ranked = rank_within_source(summ) if len(summ) else summ
    shown = ranked[ranked["turn"] < table_per_source] if len(summ) else summ
    out["table_total"], out["table_shown"] = len(summ), len(shown)
    for r in shown.sort_values(["scaling", "series_id"]).itertuples():
        out["table"].append({
            "series_id": r.series_id, "scaling": r.scaling, "strategy": r.strategy_family,
            "family": r.accelerator_family, "n_min": int(r.n_min), "n_max": int(r.n_max),
            "eff": _f(r.efficiency_at_n_max), "eff_theory": _f(r.theory_efficiency_at_n_max),
            "n_at_threshold_law": _f(r.n_at_threshold_law), "n_at_threshold_theory": _f(r.n_at_threshold_theory)})
    crossed = summ["n_at_threshold_law"].dropna()
    out["n_at_threshold_law_median"] = _f(crossed.median()) if len(crossed) else None
    out["n_at_threshold_law_count"] = len(crossed)
    out["n_at_threshold_theory_count"] = int(summ["n_at_threshold_theory"].notna().sum())
    out["theory_curves"] = bool(summ["theory_curve"].any()) if "theory_curve" in summ else False
    return out


def _kind_summary(g: pd.DataFrame, fastest: set, growing: set, threshold: float
                  ) -> dict[str, Any]:
    """One scaling kind's series: efficiency at the largest N by source, its spread, the
    series above 100% (and whether their model grows with N), and the steepest loss."""
    # The steepest loss among configurations that were the fastest of their model at their
    # largest N: a sweep's deliberately poor layouts (pp=32 for an 8B model) do not qualify.
    pool = g[g["series_id"].isin(fastest)]
    worst = (pool if len(pool) else g).sort_values(["efficiency_at_n_max", "series_id"]).iloc[0]
    above = g[g["efficiency_at_n_max"] > 1.0]
    grows = above["series_id"].isin(growing)
    dominant = g["source"].value_counts()
    by_source = []
    for src, h in g.groupby("source", sort=True):
        by_source.append({"source": src, "n_series": len(h),
                          "median_eff": _f(h["efficiency_at_n_max"].median()),
                          "q25": _f(h["efficiency_at_n_max"].quantile(0.25)),
                          "q75": _f(h["efficiency_at_n_max"].quantile(0.75)),
                          "n_max": int(h["n_max"].max())})
    return {
        "by_source": sorted(by_source, key=lambda r: (-r["n_series"], r["source"])),
        "n_series": len(g), "median_eff": _f(g["efficiency_at_n_max"].median()),
        "min_eff": _f(g["efficiency_at_n_max"].min()), "max_eff": _f(g["efficiency_at_n_max"].max()),
        "median_span": _f((g["n_max"] / g["n_min"]).median()),
        "q25": _f(g["efficiency_at_n_max"].quantile(0.25)),
        "q75": _f(g["efficiency_at_n_max"].quantile(0.75)),
        "n_sources": int(g["source"].nunique()),
        "n_below": int((g["efficiency_at_n_max"] < threshold).sum()),
        "n_above_one": len(above),
        "above_sources": sorted(above["source"].unique()),
        "above_growing": int(grows.sum()),
        # one source holding most series (a configuration sweep) sets the overall median
        "dominant": ({"source": dominant.index[0], "n_series": int(dominant.iloc[0])}
                     if len(dominant) > 1 and dominant.iloc[0] > len(g) / 2 else None),
        "worst": {"series_id": worst["series_id"], "eff": _f(worst["efficiency_at_n_max"]),
                  "n_min": int(worst["n_min"]), "n_max": int(worst["n_max"]),
                  "model": worst["model"], "strategy": worst["strategy_family"],
                  "source": worst["source"], "family": worst["accelerator_family"],
                  "fastest": bool(len(pool))},
    }


def _target_rows(curves: pd.DataFrame) -> list[dict[str, Any]]:
    """Per extrapolation target, scaling kind and source: the law's median efficiency with
    its band and the ceiling's, and whether the band says anything."""
    targets: list[dict[str, Any]] = []
    t = curves[curves["kind"] == "target"] if not curves.empty else curves
    n_max = (curves[curves["kind"] == "measured"].groupby("series_id")["n_accelerators"].max()
             .to_dict() if len(t) else {})
    for (n, kind, src), h in (t.groupby(["n_accelerators", "scaling", "source"], sort=True)
                              if len(t) else []):
        e = h["efficiency_law"].dropna()
        if not len(e):
            continue
        th = h["efficiency_theory"].dropna()
        targets.append({
            "n": int(n), "scaling": kind, "source": src, "n_series": len(e),
            # a band may be absent at a target (calibrate's selected without enough held-out
            # cases for a conformal interval): no median of nothing
            "median_eff": _f(e.median()), "median_low": _median(h["efficiency_law_low"]),
            "median_high": _median(h["efficiency_law_high"]),
            "median_theory": _f(th.median()) if len(th) else None,
            # how far past its data each series' law is asked: target N over largest measured N
            "stretch": _f(np.median([n / n_max[sid] for sid in h["series_id"] if sid in n_max]))
            if n_max else None})
        low, high = targets[-1]["median_low"], targets[-1]["median_high"]
        # a band wider than a factor BAND_SPAN (or reaching above 100% under strong scaling)
        # says the law is unconstrained there; the prose says so instead of quoting it bare
        t = targets[-1]
        t["informative"] = bool(
            low and high and high / low <= BAND_SPAN and not (kind == "strong" and high > 1.0))
        why = f"the law is asked for {t['stretch']:.1f}x its largest measured N" \
            if t["stretch"] else ""
        t["band_text"] = band(low, high, why=why)
        if not t["informative"] and t["band_text"][:1].isdigit():
            t["band_text"] = (f"not constrained by the data ({why}; the band passes 100%, "
                              "more than linear scaling)")
    return targets


def fastest_at_n_max(summ: pd.DataFrame, curves: pd.DataFrame, tolerance: float = 0.95
                     ) -> set[str]:
    """Series whose measured throughput at their largest N is within ``tolerance`` of the
    fastest series of the same source, model, accelerator family and metric at that N."""
    if curves.empty or summ.empty:
        return set()
    m = curves[curves["kind"] == "measured"]
    key = ["source", "model", "accelerator_family", "y_metric", "n_accelerators"]
    best = m.groupby(key, dropna=False)["y"].transform("max")
    top = m[m["y"] >= tolerance * best][["series_id", "n_accelerators"]]
    at_max = summ[["series_id", "n_max"]].rename(columns={"n_max": "n_accelerators"})
    return set(at_max.merge(top, on=["series_id", "n_accelerators"])["series_id"])


def laws_section(d: ReportData, min_success: float = 0.8) -> dict[str, Any]:
    """Per law: fits that converged, how often best by AICc, median ΔAICc, and on held-out
    points per k the scores the fit stage wrote to fit.json (median and p90 absolute
    percentage error, prediction-interval coverage, cases predicted and failed).
    ``min_success`` is ``fit.default_law_min_success``."""
    fits, ex, fm = d.fits, d.extrapolation, d.metrics["fit"]
    scores = fm.get("extrapolation") or {}
    ks = sorted(int(k) for k in (fm.get("holdout_k") or [])) if len(ex) and scores else []
    out: dict[str, Any] = {"table": [], "default_law": fm.get("default_law") or d.metrics["compare"].get("default_law"),
                           "n_series_fitted": int(fits["series_id"].nunique()) if len(fits) else 0,
                           "n_holdout": len(ex), "holdout_k": ks,
                           "interval": fm.get("interval", d.metrics["compare"].get("interval", 0.95)),
                           "default": None, "best_ape": None, "common": None, "dropped": [],
                           "aicc_ranked": [], "n_aicc": 0, "min_success": min_success}
    if fits.empty:
        return out
    conv = fits["converged"].fillna(False).astype(bool) if "converged" in fits else True
    f = fits[conv & np.isfinite(fits["aicc"].astype(float))].copy()
    f["delta"] = f["aicc"] - f.groupby("series_id")["aicc"].transform("min")
    best = f.loc[f.groupby("series_id")["aicc"].idxmin(), "law"].value_counts() if len(f) else {}
    for law in sorted(fits["law"].unique()):
        row: dict[str, Any] = {"law": law, "n_fits": int((fits["law"] == law).sum()),
                               "converged": int((conv & (fits["law"] == law)).sum()),
                               "best": int(best.get(law, 0)),
                               "median_delta_aicc": _f(f.loc[f["law"] == law, "delta"].median())}
        apes = []
        for k in ks:
            s = (scores.get(law) or {}).get(f"k{k}") or {}
            row[f"k{k}"] = {"median_ape": _f(s.get("median_ape")), "p90_ape": _f(s.get("p90_ape")),
                            "coverage": _f(s.get("coverage")),
                            "n": int(s.get("n_predicted") or 0), "failed": int(s.get("n_failed") or 0)}
            apes.append(row[f"k{k}"]["median_ape"])
        row["mean_median_ape"] = _f(np.mean(apes)) if apes and None not in apes else None
        out["table"].append(row)
    for row in out["table"]:
        tried = sum(row[f"k{k}"]["n"] + row[f"k{k}"]["failed"] for k in ks)
        row["success"] = _f(sum(row[f"k{k}"]["n"] for k in ks) / tried) if tried else None
    # Medians over each law's own successes compare different cases: a law that predicts only
    # the easy third of them looks best. Rank only laws that predict most cases (the fit
    # stage's own rule, ``fit.default_law_min_success``, whose eligible laws are the keys of
    # ``default_law_scores``; without them, a law's share of predictions made here).
    eligible = set(fm.get("default_law_scores") or {}) or {
        r["law"] for r in out["table"] if (r["success"] or 0) >= min_success}
    scored = [r for r in out["table"] if r["mean_median_ape"] is not None and r["law"] in eligible]
    out["best_ape"] = min(scored, key=lambda r: (r["mean_median_ape"], r["law"])) if scored else None
    out["default"] = next((r for r in out["table"] if r["law"] == out["default_law"]), None)
    out["dropped"] = [r for r in out["table"] if r["mean_median_ape"] is not None
                      and r["law"] not in eligible]
    ranked = sorted(out["table"], key=lambda r: (-r["best"], r["law"]))
    out["best_aicc"], out["aicc_ranked"] = ranked[0], ranked
    out["n_aicc"] = sum(r["best"] for r in out["table"])
    out["common"] = None
    common = fm.get("all_laws_common") or {}
    apes = {k: v for k, v in (common.get("mean_median_ape") or {}).items() if _f(v) is not None}
    if apes:
        law = min(apes, key=lambda k: (apes[k], k))
        out["common"] = {"n_cases": common.get("n_cases"), "law": law, "ape": _f(apes[law])}
    return out


def strategy_runs(runs: pd.DataFrame, source: str, models: list[str] | None) -> pd.DataFrame:
    """Best utilization per (model, strategy family, N) of one source, strong scaling and
    sweeps only; MFU where published, else HFU (``metric`` says which)."""
    g = _ok(runs)
    g = g[(g["source"] == source) & g["scaling"].isin(("strong", "sweep"))]
    if models:
        g = g[g["model"].isin(models)]
    g = g.assign(util=g["mfu"].fillna(g["hfu"]), metric=np.where(g["mfu"].notna(), "MFU", "HFU"))
    g = g.dropna(subset=["util"])
    best = g.groupby(["model", "strategy_family", "n_accelerators"], sort=True).agg(
        util=("util", "max"), configs=("util", "size"), metric=("metric", "first"),
        accelerator_family=("accelerator_family", "first")).reset_index()
    return best


def strategy_section(d: ReportData, sources: list[str], models: dict[str, list[str]]
                     ) -> list[dict[str, Any]]:
    """Per source and model: how much of its best utilization each strategy family keeps
    from its smallest to its largest N; the families that keep least and most."""
    out: list[dict[str, Any]] = []
    if d.runs.empty:
        return out
    for src in sources:
        best = strategy_runs(d.runs, src, models.get(src))
        for model, g in best.groupby("model", sort=True):
            fams = []
            for fam, h in g.groupby("strategy_family", sort=True):
                if len(h) < 2:
                    continue
                fams.append({"family": fam, "n_min": int(h["n_accelerators"].iloc[0]),
                             "n_max": int(h["n_accelerators"].iloc[-1]),
                             "u_min": _f(h["util"].iloc[0]), "u_max": _f(h["util"].iloc[-1]),
                             "kept": _f(h["util"].iloc[-1] / h["util"].iloc[0]),
                             "configs_at_max": int(h["configs"].iloc[-1])})
            if fams:
                out.append({"source": src, "model": model, "families": fams,
                            "metric": "/".join(sorted(g["metric"].unique())),
                            "worst": min(fams, key=lambda r: (r["kept"], r["family"])),
                            "best": max(fams, key=lambda r: (r["kept"], r["family"]))})
    return out


def hardware_regression(fit_metrics: dict[str, Any]) -> dict[str, Any] | None:
    """The fit stage's regression of MFU on the compute-to-HBM-bandwidth ratio, normalised to
    a slope per doubling of the ratio (as a fraction, not points) with its 95% interval."""
    node = (fit_metrics.get("cross_series") or {}).get("hardware") or {}
    hbm = node.get("hbm") if isinstance(node, dict) else None
    if not isinstance(hbm, dict) or "mfu_points_per_doubling_of_ratio" not in hbm:
        return None
    scale = 0.01  # MFU points -> fraction
    return {"slope_per_doubling": hbm["mfu_points_per_doubling_of_ratio"] * scale,
            "ci_low": _f(hbm.get("ci_low")) * scale if _f(hbm.get("ci_low")) is not None else None,
            "ci_high": _f(hbm.get("ci_high")) * scale if _f(hbm.get("ci_high")) is not None else None,
            "n_obs": hbm.get("n_obs"), "n_types": hbm.get("n_accelerator_types"),
            "formula": hbm.get("formula")}


def hardware_section(d: ReportData) -> dict[str, Any]:
    c = _ok(d.comparison) if not d.comparison.empty else d.comparison
    out: dict[str, Any] = {"table": [], "regression": hardware_regression(d.metrics["fit"])}
    if c.empty:
        return out
    best = best_per_point(c, "mfu")
    for fam, g in best.groupby("accelerator_family", sort=True):
        ratio = g["flops_per_hbm_byte"].median() if "flops_per_hbm_byte" in g else np.nan
        out["table"].append({"family": fam, "runs": len(g), "median_mfu": _f(g["mfu"].median()),
                             "max_mfu": _f(g["mfu"].max()), "flop_per_byte": _f(ratio)})
    # a family's median is only ranked when it rests on a few points, not on one paper's run
    out["ranked"] = sorted((r for r in out["table"] if r["runs"] >= MIN_POINTS),
                           key=lambda r: (r["median_mfu"], r["family"]))
    out["thin"] = [r for r in out["table"] if r["runs"] < MIN_POINTS]
    out["min_points"] = MIN_POINTS
    measured = {r["family"] for r in out["table"]}
    out["no_mfu"] = sorted(set(_ok(d.runs)["accelerator_family"].dropna()) - measured) \
        if not d.runs.empty else []
    return out


def power_section(d: ReportData) -> dict[str, Any]:
    c = d.comparison
    out: dict[str, Any] = {"n_energy": 0, "series": []}
    if c.empty:
        return out
    e = c.dropna(subset=["energy_j_per_token"])
    out["n_energy"] = len(e)
    for sid, g in e.dropna(subset=["series_id"]).groupby("series_id", sort=True):
        g = g.sort_values("n_accelerators")
        if g["n_accelerators"].nunique() < 2:
            continue
        out["series"].append({"series_id": sid, "n_min": int(g["n_accelerators"].iloc[0]),
                              "n_max": int(g["n_accelerators"].iloc[-1]),
                              "ratio": _f(g["energy_j_per_token"].iloc[-1] / g["energy_j_per_token"].iloc[0])})
    tph = c.dropna(subset=["tokens_per_accelerator_hour"])
    out["n_tph"] = len(tph)
    return out


def theory_section(d: ReportData, baseline: str) -> dict[str, Any]:
    c, th = d.comparison, d.metrics["theory"]
    scen = [{"scenario": k, "knee": _f(v.get("knee_flop")), "wall": _f(v.get("wall_flop")),
             "accelerator": v.get("accelerator"), "precision": v.get("precision"),
             "plateau": _f(v.get("plateau_utilization")),
             "wall_beyond_grid": bool(v.get("wall_beyond_grid", False))}
            for k, v in sorted(th.items()) if isinstance(v, dict) and "knee_flop" in v]
    base = next((s for s in scen if s["scenario"] == baseline), None) or next(
        (s for s in scen if "baseline" in s["scenario"]), scen[0] if scen else None)
    out: dict[str, Any] = {"scenarios": scen, "baseline": base,
                           "duration_days": d.metrics["compare"].get("frontier_duration_days"),
                           "n_bound": 0, "binding": [], "dominant": None}
    if c.empty or "fraction_of_ceiling" not in c:
        return out
    frac = c["fraction_of_ceiling"].dropna()
    out.update(dominant=None, n_bound=len(frac), median_frac=_f(frac.median()), q25=_f(frac.quantile(0.25)),
               q75=_f(frac.quantile(0.75)), n_exceeds=int((frac > 1).sum()),
               median_residual=_f(c["share_residual"].dropna().median()))
    by_source = []
    for src, g in c.dropna(subset=["fraction_of_ceiling"]).groupby("source", sort=True):
        f = g["fraction_of_ceiling"]
        bind = g["binding"].dropna().value_counts()
        by_source.append({"source": src, "runs": len(g), "median": _f(f.median()),
                          "q25": _f(f.quantile(0.25)), "q75": _f(f.quantile(0.75)),
                          "exceeds": int((f > 1).sum()),
                          "median_bound": _f(g["bound_mfu"].median()),
                          "median_mfu": _f(g["mfu"].median()),
                          "binding": bind.index[0] if len(bind) else None})
    out["by_source"] = sorted(by_source, key=lambda r: (-r["runs"], r["source"]))
    top = out["by_source"][0] if by_source else None
    if top and len(by_source) > 1 and top["runs"] > len(frac) / 2:
        # one sweep holds most runs; the other sources' runs are quoted apart
        rest = c[c["source"] != top["source"]]["fraction_of_ceiling"].dropna()
        out["dominant"] = {"source": top["source"], "runs": top["runs"], "median": top["median"],
                           "rest_runs": len(rest), "rest_median": _f(rest.median()),
                           "rest_q25": _f(rest.quantile(0.25)), "rest_q75": _f(rest.quantile(0.75))}
    # counted over the runs with a measured MFU, the same runs as the fractions above
    binding = (c.loc[c["fraction_of_ceiling"].notna(), "binding"].dropna().value_counts()
               if "binding" in c else pd.Series(dtype=int))
    out["binding"] = [{"binding": k, "count": int(v)} for k, v in sorted(binding.items())]
    out["n_binding"] = int(binding.sum())
    placed = c.dropna(subset=["training_flop"])
    if len(placed):
        top = placed.sort_values(["training_flop", "run_id"]).iloc[-1]
        out["largest"] = {"model": top["model"], "source": top["source"],
                          "flop": _f(top["training_flop"]), "basis": top["training_flop_basis"],
                          "n": int(top["n_accelerators"]), "family": top["accelerator_family"]}
        if base and base["knee"]:
            out["largest"]["knee_ratio"] = base["knee"] / top["training_flop"]
        out["basis"] = [{"basis": k, "count": int(v)} for k, v in
                        sorted(placed["training_flop_basis"].value_counts().items())]
    return out


def build(d: ReportData, cfg: ReportSettings, min_success: float) -> dict[str, Any]:
    """The sections' contexts; ``min_success`` is ``fit.default_law_min_success`` (laws are
    ranked by held-out error only among those the fit stage's rule keeps)."""
    return {"data": data_section(d), "scaling": scaling_section(d, cfg.series_table_per_source),
            "laws": laws_section(d, min_success),
            "strategy": strategy_section(d, cfg.strategy_sources, cfg.strategy_models),
            "hardware": hardware_section(d), "power": power_section(d),
            "energy": energy_section(d, cfg.baseline_scenario),
            "theory": theory_section(d, cfg.baseline_scenario), "compare": d.metrics["compare"],
            "calibration": calibration.section(d),
            "missing": d.missing,
            "mine": your_runs_section(d, cfg.focus, cfg.series_shown, cfg.runs_shown)}
