"""Report section "What limits measured scaling": data and figures from the calibrate stage's
outputs (calibration, calibrated, predictions parquet and calibrate.json) only.

``section`` returns the template context (tables as formatted rows); ``figures`` draws the
section's PNGs. Both degrade to an "absent" note when the calibrate outputs are missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline.frameworks import PLAYBOOK, SOURCE_FAMILY
from pipeline.report.data import ReportData, short_label
from pipeline.report.decompose import LOST, by_source
from pipeline.report.render import num, pct
from pipeline.report.style import (BAND_SPAN, COMPONENT_COLOURS, CONTEXT_GREY, MARKERS, MAX_SERIES,
                                   band, context, family_colour,
                                   new_figure, note, save, tag)

LOST_LABELS = {"compute": "compute inefficiency", "hbm": "HBM", "net_tp": "TP network",
               "net_dp": "DP network", "net_pp": "PP network", "net_ep": "EP network",
               "bubble": "pipeline bubble", "latency": "latency chain", "overhead": "overhead",
               "residual": "residual"}

PREDICTOR_ORDER = ("selected", "calibrated", "naive_linear", "naive_loglinear", "family_median",
                   "power", "amdahl", "usl", "comm")


def _predictor_rows(m: dict) -> list[list[str]]:
    tab = pd.DataFrame(m.get("predictors", []))
    if tab.empty:
        return []
    tab = tab[tab["source"] == "all"]
    rank = {p: i for i, p in enumerate(PREDICTOR_ORDER)}
    tab = tab.assign(r=tab["predictor"].map(rank).fillna(99)).sort_values(["holdout", "r"])
    return [[r.holdout, r.predictor, num(r.n), pct(r.median_ape, 1), pct(r.p90_ape, 0),
             pct(r.coverage) if np.isfinite(r.coverage) else "–"] for r in tab.itertuples()]


def _source_rows(m: dict) -> list[list[str]]:
    tab = pd.DataFrame(m.get("predictors", []))
    if tab.empty:
        return []
    tab = tab[(tab["source"] != "all") & tab["predictor"].isin(
        ["selected", "naive_linear", "naive_loglinear", "family_median"])]
    rows = []
    for (holdout, source), g in tab.groupby(["holdout", "source"], sort=True):
        by = g.set_index("predictor")
        cell = lambda p: pct(by.loc[p, "median_ape"], 1) if p in by.index else "–"  # noqa: E731
        rows.append([holdout, source, num(by["n"].max()), cell("selected"), cell("naive_linear"),
                     cell("naive_loglinear"), cell("family_median"),
                     pct(by.loc["selected", "coverage"]) if "selected" in by.index else "–"])
    return rows


def _decomposition(d: ReportData) -> tuple[list[list[str]], list[dict]]:
    t = by_source(d.calibrated) if not d.calibrated.empty else pd.DataFrame()
    if t.empty:
        return [], []
    rows, tops = [], []
    for r in t.itertuples():
        if r.end == "change":
            tops.append(dict(source=r.source, top1=LOST_LABELS[r.top1], top2=LOST_LABELS[r.top2],
                             d_mfu=r.measured_mfu, d1=getattr(r, f"lost_{r.top1}"),
                             d2=getattr(r, f"lost_{r.top2}")))
            continue
        rows.append([r.source, f"{r.end} N (median {num(r.n_accelerators)})", num(r.n_series),
                     pct(r.measured_mfu, 1)] + [pct(getattr(r, f"lost_{c}"), 1) for c in LOST])
    return rows, tops


def _parameter_rows(d: ReportData) -> list[list[str]]:
    c = d.calibration
    if c.empty:
        return []
    eff = c[c["group"].isin(["efficiency", "efficiency_fixed"])]
    rows = []
    for r in eff.itertuples():
        ci = (f"{num(r.ci_low)}–{num(r.ci_high)}" if np.isfinite(r.ci_low) else
              ("fixed at the ideal (no run exercises it)" if r.group == "efficiency_fixed"
               else "dropped (no effect)"))
        rows.append([r.parameter, num(r.estimate), ci, num(r.n_runs)])
    return rows



def _interval(ci: Any) -> tuple[float, float] | None:
    """A (low, high) pair of finite numbers, or None: a ratio is undefined (null) where the
    naive rule's median error is 0, as on logs that all print the same numbers."""
    if not ci or len(ci) != 2 or any(not isinstance(c, (int, float)) or not np.isfinite(c)
                                     for c in ci):
        return None
    return float(ci[0]), float(ci[1])


def _gain_caveat(largest: dict[str, Any]) -> str:
    """Whether the gain over the naive rules is more than noise (series-bootstrap interval of
    the ratio of median errors) and the sources on which the naive rule predicts better."""
    parts, intervals = [], []
    for holdout, label in (("largest_k1", "k=1"), ("largest_k2", "k=2")):
        ci = _interval(largest.get(holdout, {}).get("all", {}).get("ratio_ci"))
        if ci:
            parts.append(f"{label} {ci[0]:.2f}-{ci[1]:.2f}")
            intervals.append(ci)
    text = ""
    if parts:
        text += (" The ratio of its median error to the better naive rule's has a 95% interval"
                 f" (resampling series) of {' and '.join(parts)}")
        within = any(lo <= 1 <= hi for lo, hi in intervals)
        text += ": the gain is within the noise." if within else "."
    ratios = [(s, v.get("ratio")) for h in ("largest_k1", "largest_k2")
              for s, v in largest.get(h, {}).items() if s != "all"]
    ratios = [(s, r) for s, r in ratios if isinstance(r, (int, float)) and np.isfinite(r)]
    worse = {s for s, r in ratios if r > 1}
    better = sorted({s for s, r in ratios if r < 1} - worse)
    if worse:
        text += (" A naive rule predicts better on " + ", ".join(sorted(worse))
                 + (f"; the gain comes from {', '.join(better)}." if better else "."))
    return text

def _llama3_measured(runs: pd.DataFrame | None) -> str:
    """What Llama 3's own runs measured (runs.parquet, source llama3)."""
    mine = (runs[runs["source"] == "llama3"] if runs is not None and "source" in runs
            else pd.DataFrame())
    mfu = pd.to_numeric(mine.get("mfu", pd.Series(dtype=float)), errors="coerce").dropna()
    if mfu.empty:
        return "no Llama 3 run in the data"
    n = pd.to_numeric(mine["n_accelerators"], errors="coerce")
    return (f"Llama 3's runs measured MFU {pct(mfu.min())}-{pct(mfu.max())} on "
            f"{num(n.min())}-{num(n.max())} accelerators")


# The planner issue's ZeRO-3 target: GPT-3 175B on A100 with ZeRO-3 and no model parallelism,
# priced within 25 % of the measured MFU (the planner prices a layout as calibrate does, a test
# replans every fitted run: tests/test_plan_replan.py).
ZERO3_TARGET = {"model_id": "gpt3-175b", "accelerator_family": "A100", "within": 0.25}


# The planner issue's per-source targets: leave-source-out median APE at most 10 % on each
# production source with at least 5 runs, and the production intervals' coverage within
# 85-97 % with a median width (high/low) of at most 2.5. The layout sweeps (the Playbook's source, and a source's ``:sweep`` rows) are not
# production sources.
SOURCE_TARGET = {"median_ape": 0.10, "min_runs": 5, "coverage": (0.85, 0.97),
                 "max_width": 2.5}
LAYOUT_SWEEPS = tuple(s for s, f in SOURCE_FAMILY.items() if f == PLAYBOOK)
# ... and per class (calibrate.json scores.by_class): the same coverage, and median APE at most
# 12 % on the long-context (>= 16K tokens per sequence) and FP8 runs
CLASS_APE_TARGET = {"long_context": 0.12, "fp8": 0.12}


def _figure(v: dict, key: str) -> float | None:
    """v[key] as a finite float, or None (absent, NaN, not a number)."""
    x = v.get(key)
    return float(x) if isinstance(x, (int, float)) and np.isfinite(x) else None


def _source_target(source: str, v: dict) -> str:
    """'; the target ...: met|missed' for a production source with enough runs and a median
    APE, else ''."""
    t, ape = SOURCE_TARGET, _figure(v, "median_ape")
    if source in LAYOUT_SWEEPS or ":" in source or ape is None \
            or not (_figure(v, "n") or 0) >= t["min_runs"]:
        return ""
    return (f"; the target, at most {pct(t['median_ape'])} on a production source with at "
            f"least {t['min_runs']} runs: {'met' if ape <= t['median_ape'] else 'missed'}")


def _coverage_target(v: dict) -> str:
    """'; the target 85%-97%, median width at most 2.5: met|missed' (both must hold; without a
    width, the coverage alone), or '' without a coverage."""
    (low, high), cov = SOURCE_TARGET["coverage"], _figure(v, "coverage")
    if cov is None:
        return ""
    width, limit = _figure(v, "median_width"), SOURCE_TARGET["max_width"]
    ok = low <= cov <= high and (width is None or width <= limit)
    text = f"the target {pct(low)}-{pct(high)}" + (
        "" if width is None else f", median width at most {num(limit)}")
    return f"; {text}: {'met' if ok else 'missed'}"


def class_rows(by_class: dict) -> list[list[str]]:
    """[measure, measured, compared with] per class of the production runs (kind of run and
    accelerator family), source left out, each with its targets met or missed."""
    rows = []
    for key, v in sorted(by_class.items()):
        if not isinstance(v, dict):
            continue
        label = key.replace("accelerator_", "").replace("_", " ")
        ape, limit = _figure(v, "median_ape"), CLASS_APE_TARGET.get(key)
        target = ("" if limit is None or ape is None else
                  f"; median APE at most {pct(limit)}: {'met' if ape <= limit else 'missed'}")
        n = v.get("n")
        rows.append([f"leave-source-out median APE, {label} runs",
                     f"{pct(v.get('median_ape'), 1)} over {num(n)} run{'' if n == 1 else 's'}",
                     f"95% intervals cover {pct(v.get('coverage'), 1)}, median width (high/low) "
                     f"{num(v.get('median_width'), 3)}{_coverage_target(v)}{target}"])
    return rows


def zero3_target_rows(runs: pd.DataFrame | None, calibrated: pd.DataFrame | None
                      ) -> list[list[str]]:
    """[measure, measured, compared with] per ZeRO-3 run of the target's model and chip with no
    model parallelism: its calibrated MFU at its own layout beside the measured one, and
    whether the target is met."""
    need = {"run_id", "model_id", "accelerator_family", "zero_stage", "tp", "pp",
            "n_accelerators", "mfu", "source"}
    if runs is None or calibrated is None or calibrated.empty or not need <= set(runs.columns):
        return []
    t = ZERO3_TARGET
    num_ = {c: pd.to_numeric(runs[c], errors="coerce") for c in ("zero_stage", "tp", "pp")}
    mine = runs[(runs["model_id"] == t["model_id"]) & (runs["accelerator_family"] ==
                t["accelerator_family"]) & (num_["zero_stage"] >= 3) & (num_["tp"] == 1)
                & (num_["pp"] == 1)]
    mine = mine.merge(calibrated[["run_id", "predicted_mfu"]], on="run_id").sort_values(
        "n_accelerators", kind="mergesort")
    meas, pred = (pd.to_numeric(mine[c], errors="coerce").astype("float64").to_numpy()
                  for c in ("mfu", "predicted_mfu"))
    ok = (meas > 0) & np.isfinite(meas) & np.isfinite(pred)
    rows = []
    for r in mine[ok].itertuples():  # a run without both MFUs says nothing here
        off = float(r.predicted_mfu) / float(r.mfu) - 1.0
        met = "met" if abs(off) <= t["within"] else "missed"
        rows.append([f"GPT-3 175B, ZeRO-3 without model parallelism, {num(r.n_accelerators)} "
                     f"A100 ({r.source}): calibrated MFU at the run's layout",
                     pct(r.predicted_mfu, 1),
                     f"measured {pct(r.mfu, 1)} ({off:+.1%}); the planner target, within "
                     f"{pct(t['within'])}: {met}"])
    return rows


def score_rows(m: dict, runs: pd.DataFrame | None = None) -> list[list[str]]:
    """The step model's held-out scores as this run measures them, each beside what it is
    judged against (a naive rule, a baseline ranking, the nominal coverage, a measured run):
    [measure, measured, compared with]."""
    t = m.get("scores", {})
    rows = []
    src = t.get("source_holdout", {})
    family = m.get("against_naive", {}).get("source", {})
    for s, v in sorted(src.items()):
        if s == "production":
            continue
        naive = (f"the hardware family's median MFU as the prediction: "
                 f"{pct(family[s]['family_median'], 1)} APE; "
                 if family.get(s, {}).get("family_median") is not None else "")
        rows.append([f"leave-source-out median APE, {s}", f"{pct(v['median_ape'], 1)} over "
                     f"{num(v['n'])} run{'s' if v['n'] != 1 else ''}",
                     f"{naive}95% intervals cover {pct(v['coverage'])}, median width "
                     f"(high/low) {num(v['median_width'], 3)}{_source_target(s, v)}"])
    prod = src.get("production")
    if prod:
        rows.append(["leave-source-out 95% intervals, production sources",
                     f"coverage {pct(prod['coverage'])}, median width (high/low) "
                     f"{num(prod['median_width'], 3)}",
                     f"nominal coverage 95%{_coverage_target(prod)}"])
    rows += class_rows(t.get("by_class", {}))
    above = t.get("mfu_above_one", {})
    if above:
        n = above.get("calibrated", 0) + above.get("predictions", 0)
        rows.append(["MFU predictions or interval ends above 1", num(n),
                     "physically impossible: must be 0"])
    for holdout, v in sorted(t.get("largest_k", {}).items()):
        for source, x in sorted(v.get("by_source", {}).items()):
            rows.append([f"{holdout}, {source}: selected median APE",
                         f"{pct(x['selected'], 1)} over {num(x['n'])} cases",
                         f"better naive rule {pct(x['best_naive'], 1)}"])
        rows.append([f"{holdout}: macro mean over sources (pooled)",
                     f"{pct(v.get('macro_selected'), 1)} ({pct(v.get('pooled_selected'), 1)})",
                     f"better naive rule {pct(v.get('macro_best_naive'), 1)} "
                     f"({pct(v.get('pooled_best_naive'), 1)})"])
    r = t.get("ranking", {})
    if r.get("groups"):
        c = r["calibrated"]
        rows.append([f"Playbook layout ranking, {r['groups']} (model, N) groups: median "
                     "Spearman / regret", f"{num(c['median_spearman'], 2)} / "
                     f"{pct(c['median_regret'], 1)}",
                     f"ideal ceiling {num(r['ceiling']['median_spearman'], 2)} / "
                     f"{pct(r['ceiling']['median_regret'], 1)}; fewest PP then TP "
                     f"{num(r['fewest_pp_then_tp']['median_spearman'], 2)} / "
                     f"{pct(r['fewest_pp_then_tp']['median_regret'], 1)}"])
    base = m.get("frontier", {}).get("baseline", {}).get("llama3_compute")
    if base:
        rows.append([f"calibrated baseline frontier at {num(base['training_flop'], 2)} FLOP "
                     "(Llama 3 405B's compute)",
                     f"utilization {num(base['utilization'], 3)} on "
                     f"{num(base['layout']['n_accelerators'])} accelerators",
                     _llama3_measured(runs)])
    return rows


def section(d: ReportData) -> dict[str, Any]:
    m = d.metrics.get("calibrate", {})
    if not m or d.calibrated.empty:
        return {"available": False}
    decomp, tops = _decomposition(d)
    ins = m.get("in_sample", {})
    scored = m.get("against_naive", {})
    k1 = scored.get("largest", {}).get("largest_k1", {}).get("all", {})
    k2 = scored.get("largest", {}).get("largest_k2", {}).get("all", {})
    cov = scored.get("coverage", {})
    src = scored.get("source", {})
    frontier = [dict(scenario=s, knee=v.get("knee_flop"), knee_cal=v.get("knee_flop_calibrated"),
                     ci=v.get("knee_flop_calibrated_ci") or [None, None], wall=v.get("wall_flop"),
                     wall_cal=v.get("wall_flop_calibrated"),
                     unresolved=bool(v.get("plateau_at_grid_start")))
                for s, v in sorted(m.get("frontier", {}).items())]
    headline = (
        f"Calibrated to the measured runs ({num(m.get('fit_runs'))} runs with a layout), the "
        f"data-movement model predicts held-out largest-N points with median error "
        f"{pct(k1.get('selected'), 1)} (k=1) and {pct(k2.get('selected'), 1)} (k=2), against "
        f"{pct(k1.get('best_naive'), 1)} and {pct(k2.get('best_naive'), 1)} for the better naive "
        f"rule; its 95% intervals cover {pct(cov.get('largest_k1', {}).get('selected', {}).get('coverage'))}"
        f" and {pct(cov.get('largest_k2', {}).get('selected', {}).get('coverage'))} of those points."
        + _gain_caveat(scored.get("largest", {})))
    return {
        "available": True, "form": m.get("form"), "headline": headline,
        "in_sample": ins, "fit_runs": m.get("fit_runs"), "sigma_u": m.get("sigma_u"),
        "max_fit_n": float(d.calibrated["n_accelerators"].max()),
        "forms": [[f["form"], f["terms"], num(f["aicc"], 5), num(f["bic"], 5),
                   pct(f["median_ape"], 1)] for f in m.get("forms", [])],
        "parameters": _parameter_rows(d),
        "decomposition": decomp, "lost_headers": [LOST_LABELS[c] for c in LOST], "tops": tops,
        "predictors": _predictor_rows(m), "by_source": _source_rows(m),
        "source_targets": [dict(source=s, **v) for s, v in sorted(src.items())],
        "coverage": cov, "frontier": frontier,
        "scores": score_rows(m, d.runs) + zero3_target_rows(d.runs, d.calibrated),
        "in_sample_by_source": [[s, num(v["n"]), pct(v["median_ape"], 1), pct(v["coverage"])]
                                for s, v in sorted(ins.get("by_source", {}).items())],
    }


def predicted_vs_actual(d: ReportData, out: Path) -> Path:
    fig, axes = new_figure(2, 4.0)
    c, p = d.calibrated, d.predictions
    ax = axes[0]
    fitted = c[c["measured_mfu"] > 0] if not c.empty else c
    if fitted.empty:
        note(ax, "no calibrated runs")
    else:
        # the MAX_SERIES - 1 sources with most runs in colour, the others as grey context
        counts = fitted["source"].value_counts()
        coloured = sorted(counts.index[:MAX_SERIES - 1])
        rest = fitted[~fitted["source"].isin(coloured)]
        if not rest.empty:
            context(ax.scatter(rest["measured_mfu"], rest["predicted_mfu"], s=6, alpha=0.4,
                               color=CONTEXT_GREY,
                               label=f"{rest['source'].nunique()} other sources"))
        for source in coloured:
            g = fitted[fitted["source"] == source]
            ax.scatter(g["measured_mfu"], g["predicted_mfu"], s=6, alpha=0.5, label=source)
        lim = [1e-3, 1.0]
        ax.plot(lim, lim, color="k", lw=0.8)
        ax.set(xscale="log", yscale="log", xlim=lim, ylim=lim, xlabel="measured MFU",
               ylabel="calibrated MFU (in sample)", title="calibrated model, in sample")
        ax.legend(frameon=False, fontsize=6)
    ax = axes[1]
    sel = p[(p["predictor"] == "selected") & p["holdout"].str.startswith("largest")
            & p["predicted"].notna()] if not p.empty else p
    if sel.empty:
        note(ax, "no held-out predictions")
    else:
        ratio = sel["predicted"] / sel["actual"]
        for holdout, g in sel.groupby("holdout", sort=True):
            ax.scatter(np.log2(g["n_target"] / g["n_train_max"]), g["predicted"] / g["actual"],
                       s=8, alpha=0.5, label=holdout)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set(yscale="log", xlabel="extrapolation distance log2(N target / N train max)",
               ylabel="predicted / actual", title="selected, held-out largest N",
               ylim=(max(ratio.min() / 1.5, 1e-2), min(ratio.max() * 1.5, 1e2)))
        ax.legend(frameon=False, fontsize=7)
    return save(fig, out / "calibrate_predicted_actual.png")


def efficiency_bands(d: ReportData, out: Path, limit: int = 6) -> Path:
    """Measured MFU against N with the calibrated prediction and its 95% band, for the series
    spanning the widest range of N (one per source first)."""
    fig, ax = new_figure(1, 5.2)
    c = d.calibrated
    c = c[c["measured_mfu"] > 0] if not c.empty else c
    if c.empty:
        note(ax, "no calibrated runs")
        return save(fig, out / "calibrate_efficiency.png")
    span = c.groupby(["source", "series_id"])["n_accelerators"].agg(lambda n: n.max() / n.min())
    counts = c.groupby(["source", "series_id"])["n_accelerators"].nunique()
    span = span[counts >= 3].reset_index().sort_values(["n_accelerators", "series_id"],
                                                       ascending=[False, True])
    span["turn"] = span.groupby("source").cumcount()
    chosen = span.sort_values(["turn", "n_accelerators", "series_id"],
                              ascending=[True, False, True]).head(limit)
    # the model's in-sample median error on each source: a line far from its points says so
    ape = c.groupby("source")["ape"].median() if "ape" in c else pd.Series(dtype=float)
    for i, (sid, src) in enumerate(zip(chosen["series_id"], chosen["source"])):
        g = c[c["series_id"] == sid].groupby("n_accelerators")[
            ["measured_mfu", "predicted_mfu", "pi_low", "pi_high"]].median().reset_index()
        # colour: the accelerator family, as in every figure; marker: the series
        fam = d.runs.loc[d.runs["series_id"] == sid, "accelerator_family"] \
            if "accelerator_family" in d.runs else pd.Series(dtype=object)
        colour = family_colour(fam.iloc[0]) if len(fam) else f"C{i}"
        points = ax.plot(g["n_accelerators"], g["measured_mfu"], MARKERS[i % len(MARKERS)],
                         color=colour, ms=4)
        tag(points, sid)
        tag(ax.plot(g["n_accelerators"], g["predicted_mfu"], "-", color=colour, lw=1), sid)
        drawn = band(ax, g["n_accelerators"], g["pi_low"], g["pi_high"], colour, sid, upper=1.0)
        err = ape.get(src, float("nan"))
        why = (f"; model's median error on {src.split('_')[0]}: {100 * err:.0f}%"
               if np.isfinite(err) else "")
        gap = "" if drawn else f"; band wider than x{BAND_SPAN:.0f}, not drawn"
        points[0].set_label(short_label(sid, 48) + why + gap)
    ax.set(xscale="log", yscale="log", xlabel="accelerators N", ylabel="MFU",
           title="measured (points) and calibrated (line, 95% band) MFU")
    ax.legend(frameon=False, fontsize=6, ncol=1, loc="upper center", bbox_to_anchor=(0.5, -0.17))
    return save(fig, out / "calibrate_efficiency.png")


# Sources drawn in the decomposition figure (two bars each); past that (a fleet's campaigns,
# one source each) those with most series, the title says so; the table lists them all.
SOURCES_DRAWN = 12


def decomposition(d: ReportData, out: Path) -> Path:
    """Stacked lost shares per source at the smallest and largest N (medians over series)."""
    fig, ax = new_figure(1, 4.0)
    t = by_source(d.calibrated) if not d.calibrated.empty else pd.DataFrame()
    if t.empty:
        note(ax, "no series with two or more N")
        return save(fig, out / "calibrate_decomposition.png")
    t = t[t["end"] != "change"]
    n_sources = t["source"].nunique()
    if n_sources > SOURCES_DRAWN:   # a fleet's campaigns: the sources with most series
        most = (t.drop_duplicates("source").sort_values(["n_series", "source"],
                                                        ascending=[False, True])
                .head(SOURCES_DRAWN)["source"])
        t = t[t["source"].isin(set(most))]
    t = t.iloc[::-1]
    labels = [f"{r.source}: {r.end} N ≈ {num(r.n_accelerators)}" for r in t.itertuples()]
    left = t["measured_mfu"].to_numpy(float).copy()
    ax.barh(range(len(t)), left, color="#1b7837", label="useful (MFU)", edgecolor="white", lw=0.3)
    for cname in LOST:
        v = np.maximum(t[f"lost_{cname}"].fillna(0).to_numpy(float), 0.0)
        if v.sum() > 0:
            ax.barh(range(len(t)), v, left=left, color=COMPONENT_COLOURS[cname],
                    label=LOST_LABELS[cname], edgecolor="white", lw=0.3)
        left += v
    ax.set_yticks(range(len(t)), labels, fontsize=7)
    ax.set(xlabel="share of the measured step time (negative residuals not drawn)",
           title="where the step time goes: smallest and largest N per source" + (
               f"\n(the {SOURCES_DRAWN} of {n_sources:,} sources with most series)"
               if n_sources > SOURCES_DRAWN else ""))
    ax.legend(frameon=False, ncol=4, fontsize=6.5, loc="upper center",
              bbox_to_anchor=(0.5, -0.15))
    return save(fig, out / "calibrate_decomposition.png")


def frontier(d: ReportData, out: Path, scenarios: tuple[str, ...] = ("baseline", "b200",
                                                                       "low_latency")) -> Path:
    """Utilization against training compute: the ideal frontier (dashed) and the one at the
    calibrated efficiencies (solid), for a few scenarios."""
    fig, ax = new_figure(1, 4.0)
    ideal, cal = d.frontier, d.calibrated_frontier
    if cal.empty or ideal.empty:
        note(ax, "no calibrated frontier")
        return save(fig, out / "calibrate_frontier.png")
    theory = d.metrics.get("theory", {})
    for i, scn in enumerate(s for s in scenarios if s in set(cal["scenario"])):
        # colour: the scenario's accelerator family, as in every figure; marker: the scenario
        acc = (theory.get(scn) or {}).get("accelerator") if isinstance(theory.get(scn), dict) \
            else None
        colour = family_colour(acc) if acc else f"C{i}"
        for frame, style, label in ((ideal, "--", "ideal"), (cal, "-", "calibrated")):
            g = frame[(frame["scenario"] == scn) & frame["feasible"].astype(bool)]
            tag(ax.plot(g["training_flop"], g["utilization"], style, color=colour,
                        marker=MARKERS[i % len(MARKERS)], markevery=6, ms=4,
                        label=f"{scn}{f' ({acc})' if acc else ''}, {label}"), f"{scn}|{label}")
    ax.set(xscale="log", xlabel="training compute C (FLOP)", ylabel="utilization",
           ylim=(0, 1.0), title="frontier: ideal efficiencies against today's measured ones")
    ax.legend(frameon=False, fontsize=7)
    return save(fig, out / "calibrate_frontier.png")


#: the calibration figures: name -> a function of (data, folder) drawing it
FIGURES = {"calibrate_predicted_actual": predicted_vs_actual, "calibrate_frontier": frontier,
           "calibrate_efficiency": efficiency_bands, "calibrate_decomposition": decomposition}
