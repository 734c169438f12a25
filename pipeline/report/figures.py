"""The report's figures, drawn from the stage outputs only. One function per figure; each writes
one PNG and returns its path. Axes carry units; log axes where values span decades."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter

from pipeline.report import calibration
from pipeline.report.data import ReportData, best_per_point, select_series, short_label
from pipeline.report.energy import energy_figure
from pipeline.report.findings import strategy_runs
from pipeline.report.style import (COMPONENT_COLOURS, MARKERS, STRATEGY_COLOURS, STRATEGY_NAMES,
                                   family_colour, new_figure, note, save)
from pipeline.vocab import SHARE_SLOTS

LAW_COLOURS = {"power": "#1b9e77", "amdahl": "#d95f02", "usl": "#7570b3", "comm": "#e7298a"}
# the theory's decomposition, in stacking order
SHARE_COLOURS = {k: COMPONENT_COLOURS[k] for k in SHARE_SLOTS}
SCENARIO_STYLES = ("-", "--", "-.", ":")


def representative_runs(c: pd.DataFrame, per_source: int | None = None) -> pd.DataFrame:
    """One run per (source, model, accelerator family): the one at the largest N (ties: the
    highest MFU, then run_id), so that sweeps of thousands of configurations do not bury the
    rest; ``per_source`` keeps the largest-N ones of each source."""
    if c.empty:
        return c
    r = c.sort_values(["n_accelerators", "mfu", "run_id"], ascending=[False, False, True])
    r = r.groupby(["source", "model", "accelerator_family"], sort=False).head(1)
    if per_source:
        r = r.groupby("source", sort=False).head(per_source)
    return r.sort_values(["source", "n_accelerators", "run_id"])


def _series_frames(data: ReportData, sid: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    c = data.comparison_curves
    c = c[c["series_id"] == sid]
    return c[c["kind"] == "measured"].sort_values("n_accelerators"), \
        c[c["kind"] != "measured"].sort_values("n_accelerators")


def scaling(data: ReportData, out: Path, limit: int, focus: tuple[str, ...] = ()
            ) -> tuple[Path, Path]:
    """Aggregate throughput and efficiency against N, strong and weak scaling apart; the
    ``focus`` series (``report.focus``) first, drawn bold and starred."""
    # legends go under each panel (7 labels would cover the data inside it)
    fig_t, axes_t = new_figure(2, 6.4)
    fig_e, axes_e = new_figure(2, 6.2, sharey=True)
    summ = data.comparison_series
    threshold = data.metrics["compare"].get("efficiency_threshold", 0.5)
    level = f'{data.metrics["compare"].get("interval", 0.95):.0%}'
    for col, kind in enumerate(("strong", "weak")):
        ax_t, ax_e = axes_t[col], axes_e[col]
        mine = [f for f in focus if f in set(summ.loc[summ["scaling"] == kind, "series_id"])] \
            if not summ.empty else []
        chosen = mine + [c for c in select_series(summ, kind, limit) if c not in mine]
        chosen = chosen[:max(limit, len(mine))]
        if not chosen:
            note(ax_t, f"no {kind}-scaling series")
            note(ax_e, f"no {kind}-scaling series")
            continue
        lo, hi = np.inf, 0.0
        for i, sid in enumerate(chosen):
            meas, curve = _series_frames(data, sid)
            fam = meas["accelerator_family"].iloc[0]
            colour, marker = family_colour(fam), MARKERS[i % len(MARKERS)]
            unit = meas["y"].iloc[0] / meas["n_accelerators"].iloc[0]
            law = meas["law"].iloc[0]
            label = f"{short_label(sid, 52)} ({fam}{', ' + law if isinstance(law, str) else ''})"
            bold = {"ms": 8, "mec": "k", "mew": 1.2} if sid in mine else {}
            label = f"★ {label}" if sid in mine else label
            ax_t.plot(meas["n_accelerators"], meas["y"] / unit, marker, color=colour, label=label,
                      **bold)
            ax_e.plot(meas["n_accelerators"], meas["efficiency"], marker, color=colour,
                      label=label, **bold)
            if curve["predicted"].notna().any():
                ax_t.plot(curve["n_accelerators"], curve["predicted"] / unit, "-", color=colour, lw=1)
                ax_t.fill_between(curve["n_accelerators"], curve["pi_low"] / unit,
                                  curve["pi_high"] / unit, color=colour, alpha=0.08, lw=0)
                ax_e.plot(curve["n_accelerators"], curve["efficiency_law"], "-", color=colour, lw=1)
            if curve["efficiency_theory"].notna().sum() > 1:
                ax_e.plot(curve["n_accelerators"], curve["efficiency_theory"], ":", color=colour, lw=1.2)
            lo = min(lo, meas["n_accelerators"].min())
            hi = max(hi, curve["n_accelerators"].max() if len(curve) else meas["n_accelerators"].max())
        ideal = np.array([lo, hi])
        ax_t.plot(ideal, ideal, "k--", lw=0.8, label="ideal linear scaling")
        ax_t.set_ylim(lo / 2, hi * 3)
        ax_t.set(xscale="log", yscale="log", xlabel="accelerators N",
                 ylabel="throughput (accelerator-equivalents at smallest N)",
                 title=f"{kind} scaling: fitted law, {level} prediction band")
        ax_e.axhline(threshold, color="k", lw=0.6, ls="--")
        ax_e.set(xscale="log", xlabel="accelerators N", title=f"{kind} scaling efficiency",
                 ylim=(0, 1.3))
        for ax in (ax_t, ax_e):
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), frameon=False, fontsize=6.5)
    axes_e[0].set_ylabel("efficiency (per-accelerator throughput / at smallest N)")
    fig_e.suptitle("points: measured · solid: fitted law · dotted: theory ceiling for the same "
                   "configuration · dashed: threshold", fontsize=8)
    return save(fig_t, out / "scaling_throughput.png"), save(fig_e, out / "scaling_efficiency.png")


def holdout_in_equivalents(data: ReportData) -> pd.DataFrame:
    """Held-out predictions with actual, predicted and interval in accelerator-equivalents (the
    series' throughput over its per-accelerator throughput at its smallest N), so that series
    measured in tokens/s, FLOP/s or 1/time-to-train share one axis."""
    ex, c = data.extrapolation, data.comparison_curves
    if ex.empty or c.empty:
        return ex.iloc[0:0]
    m = c[c["kind"] == "measured"].sort_values(["series_id", "n_accelerators"])
    first = m.groupby("series_id").head(1)
    unit = (first["y"] / first["n_accelerators"]).set_axis(first["series_id"])
    metric = first.set_index("series_id")["y_metric"]
    e = ex[ex["series_id"].map(metric) == ex["y_metric"]].copy()
    u = e["series_id"].map(unit)
    for col in ("actual", "predicted", "pi_low", "pi_high"):
        e[col] = e[col] / u
    return e.dropna(subset=["actual", "predicted"])


def laws_holdout(data: ReportData, out: Path) -> Path:
    """Held-out points: each law refitted without the largest k points and scored on them.
    Left: predicted against actual (accelerator-equivalents); right: the ratio's distribution
    per law and k, with the share of points inside the prediction interval."""
    fig, (ax, ax_r) = new_figure(2, 4.4)
    ex = holdout_in_equivalents(data)
    level = f'{data.metrics["fit"].get("interval", 0.95):.0%}'
    if ex.empty:
        note(ax, "no series with enough points for held-out tests")
        note(ax_r, "")
        return save(fig, out / "laws_holdout.png")
    laws, ks = sorted(ex["law"].unique()), sorted(ex["k"].unique())
    for law in laws:
        g = ex[ex["law"] == law]
        ax.plot(g["actual"], g["predicted"], "o", ms=3, alpha=0.45, mec="none",
                color=LAW_COLOURS.get(law, "#444444"), label=law)
    span = np.array([ex["actual"].min() / 2, ex["actual"].max() * 2])
    ax.plot(span, span, "k--", lw=0.8, label="predicted = actual")
    ax.set_xlim(*span)
    ax.set_ylim(*span)
    ax.set(xscale="log", yscale="log", xlabel="actual (accelerator-equivalents at smallest N)",
           ylabel="predicted (accelerator-equivalents)", title="held-out largest-N points")
    ax.legend(frameon=False, loc="upper left")
    boxes, pos, colours, ticks = [], [], [], []
    for j, law in enumerate(laws):
        for i, k in enumerate(ks):
            g = ex[(ex["law"] == law) & (ex["k"] == k)]
            ratio = (g["predicted"] / g["actual"]).to_numpy(float)
            ratio = ratio[np.isfinite(ratio) & (ratio > 0)]
            if not len(ratio):
                continue
            x = j + (i - (len(ks) - 1) / 2) * 0.35
            boxes.append(ratio), pos.append(x), colours.append(LAW_COLOURS.get(law, "#444444"))
            covered = g["covered"].astype(float).mean() if "covered" in g else np.nan
            ax_r.text(x, 14, f"k={k}\n{covered:.0%}", ha="center", va="bottom", fontsize=6.5)
        ticks.append(law)
    parts = ax_r.boxplot(boxes, positions=pos, widths=0.3, whis=(5, 95), showfliers=False,
                         patch_artist=True, medianprops={"color": "k"})
    for patch, colour in zip(parts["boxes"], colours):
        patch.set(facecolor=colour, alpha=0.6)
    ax_r.axhline(1.0, color="k", lw=0.8, ls="--")
    ax_r.set(yscale="log", ylim=(0.05, 40), xticks=range(len(laws)), xticklabels=ticks,
             xlim=(-0.6, len(laws) - 0.4), ylabel="predicted / actual (box: IQR, whiskers: 5–95%)",
             title=f"error per law and k (label: share inside {level} PI)")
    return save(fig, out / "laws_holdout.png")


def strategy(data: ReportData, out: Path, sources: list[str], models: dict[str, list[str]]) -> Path:
    """Best utilization per strategy family against N, one panel per source (line style per
    model)."""
    fig, axes = new_figure(max(len(sources), 1), 4.2, squeeze=False)
    for ax, source in zip(axes[0], sources):
        best = strategy_runs(data.runs, source, models.get(source)) if not data.runs.empty \
            else pd.DataFrame()
        if best.empty:
            note(ax, f"no strong-scaling runs with utilization from {source}")
            continue
        for j, (model, g) in enumerate(best.groupby("model", sort=True)):
            for fam, h in g.groupby("strategy_family", sort=True):
                ax.plot(h["n_accelerators"], h["util"], SCENARIO_STYLES[j % 4], marker=MARKERS[j % 10],
                        ms=4, color=STRATEGY_COLOURS.get(fam, "#999999"), label=f"{STRATEGY_NAMES.get(fam, fam)} · {model}")
        metric = "/".join(sorted(best["metric"].unique()))
        families = ", ".join(sorted(best["accelerator_family"].dropna().unique()))
        ax.set(xscale="log", xlabel="accelerators N", ylabel=f"best {metric} at N",
               title=f"{source} ({families})", ylim=(0, None))
        # N spans one or two decades here: plain counts read better than 4×10²
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.legend(frameon=False, fontsize=6.5, title="strategy family · model", title_fontsize=7)
    return save(fig, out / "strategy.png")


def hardware(data: ReportData, out: Path, regression: dict[str, Any] | None) -> Path:
    """MFU against the accelerator's compute-to-bandwidth ratio (peak FLOP/s over HBM B/s):
    every run faint, each family's median with its interquartile range bold, and the fit
    stage's partial slope drawn through the overall medians."""
    fig, ax = new_figure(1, 4.2)
    c = data.comparison
    col = "flops_per_hbm_byte"
    if c.empty or col not in c or c[col].notna().sum() == 0:
        note(ax, "compute-to-bandwidth ratios are not in the stage outputs")
        return save(fig, out / "hardware.png")
    g = best_per_point(c[c[col].notna()], "mfu", (col,))
    for (fam, ratio), h in g.groupby(["accelerator_family", col], sort=True):
        colour = family_colour(fam)
        ax.plot(h[col], h["mfu"], "o", ms=2.5, alpha=0.25, color=colour)
        q1, q2, q3 = h["mfu"].quantile([0.25, 0.5, 0.75])
        ax.errorbar([ratio], [q2], yerr=[[q2 - q1], [q3 - q2]], fmt="o", ms=7, color=colour,
                    mec="k", capsize=3, label=f"{fam} at {ratio:.0f} FLOP/B (n={len(h)})")
    slope = (regression or {}).get("slope_per_doubling")
    if slope is not None:
        x = np.geomspace(g[col].min(), g[col].max(), 50)
        x0, y0 = float(np.exp(np.log(g[col]).median())), float(g["mfu"].median())
        ax.plot(x, y0 + slope * np.log2(x / x0), "k-", lw=1,
                label=f"fit stage: {slope * 100:+.2f} MFU points per doubling (partial effect)")
    ax.set(xscale="log", xlabel="peak FLOP/s ÷ HBM bytes/s at the run's precision (FLOP/byte)",
           ylabel="best MFU per source, model and N (median, IQR)",
           title="utilization against compute-to-bandwidth ratio", ylim=(0, 1.05))
    # the ratios span under a decade, so the labelled ticks are minor ones: plain numbers
    # (set after the log scale, which resets formatters)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.legend(frameon=False, ncol=3, fontsize=6.5, loc="upper right")
    return save(fig, out / "hardware.png")


def power_cost(data: ReportData, out: Path) -> Path:
    """Energy per token and tokens per accelerator-hour against N."""
    c = data.comparison
    has_energy = "energy_j_per_token" in c and c["energy_j_per_token"].notna().any()
    # without any energy figure the panel would be an empty half page: draw throughput alone
    fig, axes = new_figure(2 if has_energy else 1, 4.0, squeeze=False)
    panels = ([("energy_j_per_token", "energy per token (J)")] if has_energy else []) + [
        ("tokens_per_accelerator_hour", "tokens per accelerator-hour")]
    for ax, (col, ylabel) in zip(axes[0], panels):
        g = c[c[col].notna()] if col in c else c
        if g.empty:
            note(ax, f"no runs report {ylabel}")
            continue
        # energy: lowest is best; throughput: highest is best
        best = best_per_point(g.assign(_key=-g[col] if col.startswith("energy") else g[col]), "_key")
        for (src, model, fam), h in best.groupby(["source", "model", "accelerator_family"], sort=True):
            h = h.sort_values("n_accelerators")
            ax.plot(h["n_accelerators"], h[col], "o-" if len(h) > 1 else "o", ms=3.5, lw=1,
                    alpha=0.8, color=family_colour(fam))
        for fam in sorted(g["accelerator_family"].dropna().unique()):
            ax.plot([], [], "o", color=family_colour(fam), label=fam)
        ax.set(xscale="log", yscale="log", xlabel="accelerators N", ylabel=ylabel,
               title=f"{ylabel} (best per model and N; one line per model)")
        ax.legend(frameon=False, ncol=2, title="accelerator family", title_fontsize=7)
    if not has_energy:
        fig.text(0.99, 0.01, "no run reports energy per token", ha="right", fontsize=7,
                 color="#555555")
    return save(fig, out / "power_cost.png")


def frontier(data: ReportData, out: Path, scenarios: list[str],
             focus_runs: frozenset[str] = frozenset()) -> Path:
    """Utilization against training compute per scenario (colour: the scenario's accelerator
    family; line style: the variant), knee and wall marked, measured runs overlaid (the focus
    runs of ``report.focus`` as black stars)."""
    fig, ax = new_figure(1, 5.2)
    f, theory = data.frontier, data.metrics["theory"]
    if f.empty:
        note(ax, "no frontier from the theory stage")
        return save(fig, out / "frontier.png")
    names = [s for s in scenarios if s in set(f["scenario"])] or sorted(f["scenario"].unique())
    styles: dict[str, int] = {}
    for scen in names:
        g = f[(f["scenario"] == scen) & f["feasible"].astype(bool)].sort_values("training_flop")
        marks = theory.get(scen) if isinstance(theory.get(scen), dict) else {}
        fam = str(marks.get("accelerator", "")).split("-SXM")[0]
        colour = family_colour(marks.get("accelerator"))
        ls = SCENARIO_STYLES[styles.setdefault(fam, 0) % len(SCENARIO_STYLES)]
        styles[fam] += 1
        ax.plot(g["training_flop"], g["utilization"], ls=ls, color=colour, lw=1.4, label=scen)
        for key, sym in (("knee_flop", "v"), ("wall_flop", "x")):
            x = marks.get(key)
            # a wall "beyond the grid" is the grid's edge, not a wall: left unmarked
            if x and len(g) and not (key == "wall_flop" and marks.get("wall_beyond_grid")):
                y = np.interp(np.log(x), np.log(g["training_flop"]), g["utilization"])
                ax.plot([x], [y], sym, color=colour, mec="k", ms=7)
    c = data.comparison
    if not c.empty and "training_flop" in c:
        r = representative_runs(c[c["training_flop"].notna() & c["mfu"].notna()])
        for fam, h in r.groupby("accelerator_family"):
            ax.plot(h["training_flop"], h["mfu"], "o", ms=4, alpha=0.6, color=family_colour(fam),
                    mec="none")
        ax.plot([], [], "o", color="#777777", ms=4, label="measured runs (colour: family)")
        mine = c[c["run_id"].isin(focus_runs) & c["training_flop"].notna() & c["mfu"].notna()]
        if len(mine):
            ax.plot(mine["training_flop"], mine["mfu"], "*", color="k", ms=11,
                    label="★ your runs")
    ax.plot([], [], "kv", label="knee")
    ax.plot([], [], "kx", label="latency wall")
    ax.set(xscale="log", xlabel="training compute (FLOP)", ylabel="utilization (MFU)",
           title="frontier per scenario (colour: accelerator family), measured runs overlaid",
           ylim=(0, 1.05))
    # under the axes: inside, it covers the smallest measured runs
    ax.legend(frameon=False, ncol=4, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13))
    return save(fig, out / "frontier.png")


def _model_name(model: object, width: int = 26) -> str:
    """'GPT (529.6B; 105 layers, ...)' -> 'GPT (529.6B)'."""
    name = str(model)
    if "(" in name and ";" in name:
        name = name.split(";")[0] + ")"
    return name if len(name) <= width else name[: width - 1] + "…"


def gap(data: ReportData, out: Path, limit: int, focus_runs: frozenset[str] = frozenset()
        ) -> Path:
    """Stacked shares of measured step time: ideal compute, theory's overheads, unexplained;
    the largest-N run of each focus series (``report.focus``) first, starred."""
    c = data.comparison
    fig, ax = new_figure(1, 5.0)
    if c.empty or "share_compute" not in c or c["share_compute"].notna().sum() == 0:
        note(ax, "no runs with both a measured MFU and a theory bound")
        return save(fig, out / "gap.png")
    g = c[c["share_compute"].notna() & (c["share_residual"] >= 0)]
    per_source = max(1, limit // max(g["source"].nunique(), 1))
    mine = g[g["run_id"].isin(focus_runs)]
    mine = mine.sort_values("n_accelerators").groupby("series_id", dropna=False).tail(1)
    top = representative_runs(g[~g["run_id"].isin(focus_runs)], per_source)
    top = pd.concat([mine, top]).head(max(limit, len(mine))).iloc[::-1]
    labels = [("★ " if r.run_id in focus_runs else "")
              + f"{r.source}: {_model_name(r.model)} · {r.accelerator_family} · N={int(r.n_accelerators):,}"
              for r in top.itertuples()]
    left = np.zeros(len(top))
    for key, colour in SHARE_COLOURS.items():
        v = top[f"share_{key}"].fillna(0).to_numpy()
        if v.sum() > 0:
            ax.barh(range(len(top)), v, left=left, color=colour, label=key.replace("_", " "),
                    edgecolor="white", lw=0.3)
        left += v
    ax.set_yticks(range(len(top)), labels, fontsize=7)
    ax.set(xlim=(0, 1), xlabel="share of measured step time",
           title="where the measured step time goes (largest-N runs per source)")
    ax.legend(frameon=False, ncol=5, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12))
    return save(fig, out / "gap.png")


def make_all(data: ReportData, out: Path, cfg: dict[str, Any]) -> dict[str, Path]:
    """Draw every figure; returns name -> PNG path."""
    out.mkdir(parents=True, exist_ok=True)
    focus, focus_runs = tuple(cfg.get("focus_series", ())), frozenset(cfg.get("focus_runs", ()))
    t, e = scaling(data, out, cfg["series_per_panel"], focus)
    from pipeline.report.findings import hardware_regression
    reg = hardware_regression(data.metrics["fit"])
    return {"scaling_throughput": t, "scaling_efficiency": e,
            "laws_holdout": laws_holdout(data, out),
            "strategy": strategy(data, out, cfg["strategy_sources"], cfg["strategy_models"]),
            "hardware": hardware(data, out, reg), "power_cost": power_cost(data, out),
            "energy": energy_figure(data, out),
            "frontier": frontier(data, out, cfg["frontier_scenarios"], focus_runs),
            "gap": gap(data, out, cfg["gap_runs"], focus_runs), **calibration.figures(data, out)}
