"""The report's figures, drawn from the stage outputs only. One function per figure; each writes
one PNG and returns its path. Axes carry units; log axes where values span decades."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter

from pipeline.config import ReportSettings
from pipeline.report.focus import Focus
from pipeline.report import calibration, coverage
from pipeline.measures import best_per_point
from pipeline.processes import map_in_order
from pipeline.report.data import ReportData, select_series, short_label
from pipeline.report.energy import energy_figure
from pipeline.report.findings import strategy_runs
from pipeline.fit.contract import MULTIPLES_OF_N_MAX
from pipeline.report.style import (BAND_SPAN, COMPONENT_COLOURS, CONTEXT_GREY, MARKERS,
                                   MAX_SERIES, STRATEGY_COLOURS, STRATEGY_NAMES, band, context,
                                   family_colour, new_figure, note, save, tag)
from pipeline.vocab import SHARE_SLOTS

LAW_COLOURS = {"power": "#1b9e77", "amdahl": "#d95f02", "usl": "#7570b3", "comm": "#e7298a"}
# the theory's decomposition, in stacking order
SHARE_COLOURS = {k: COMPONENT_COLOURS[k] for k in SHARE_SLOTS}
SCENARIO_STYLES = ("-", "--", "-.", ":")
# A law's curve is drawn at most this far past the largest measured N: the fit stage's
# furthest prediction (fits.parquet ``*_at_<m>x_n_max``).
DRAW_BEYOND = max(MULTIPLES_OF_N_MAX)


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
    """(measured points, the law's curve) of one series. The curve is the dense grid only
    (``kind == "curve"``): the extrapolation targets are scored elsewhere and, mixed into the
    grid, drew spikes where another predictor's value sat among the law's."""
    c = data.rows_where("comparison_curves", "series_id", sid)
    return c[c["kind"] == "measured"].sort_values("n_accelerators"), \
        c[c["kind"] == "curve"].sort_values("n_accelerators")


def law_domain(curve: pd.DataFrame, n_max: float) -> pd.DataFrame:
    """The part of a law's curve that is drawn: up to ``DRAW_BEYOND`` x the largest measured N
    (the fit stage's furthest prediction) and only while its band constrains the outcome
    (``pi_high / pi_low <= BAND_SPAN``); beyond that the law says nothing."""
    c = curve[curve["n_accelerators"] <= DRAW_BEYOND * n_max]
    if c.empty or "pi_low" not in c:
        return c
    ratio = c["pi_high"] / c["pi_low"].where(c["pi_low"] > 0)
    wide = (c["n_accelerators"] > n_max) & ~(ratio <= BAND_SPAN)
    if wide.any():
        c = c[c["n_accelerators"] < c.loc[wide, "n_accelerators"].min()]
    return c


def scaling_choice(data: ReportData, kind: str, limit: int, focus: tuple[str, ...] = ()
                   ) -> list[str]:
    """The series a scaling panel highlights: the focus series first, then those spanning the
    widest N of each source in turn; never more than ``MAX_SERIES``."""
    summ = data.comparison_series
    if summ.empty:
        return []
    ids = set(summ.loc[summ["scaling"] == kind, "series_id"])
    mine = [f for f in focus if f in ids]
    rest = [c for c in select_series(summ, kind, limit) if c not in mine]
    return (mine + rest)[:max(min(limit, MAX_SERIES), len(mine))][:MAX_SERIES]


def series_label(data: ReportData, sid: str, width: int = 34) -> str:
    """A label that tells series apart at a glance: the series id after its source (for the
    MLPerf-style ids with a path, the model and the last segment), then the family."""
    meas, _ = _series_frames(data, sid)
    fam = meas["accelerator_family"].iloc[0] if len(meas) else ""
    source, _, rest = sid.partition("/")
    rest = rest[len(source) + 1:] if rest.startswith(source + "-") else rest
    if "/" in rest and len(meas):
        tail = rest.rsplit("/", 1)[1]
        rest = f"{_model_name(meas['model'].iloc[0], 18)} {tail if tail != 'weak' else ''}".strip()
    rest = rest if len(rest) <= width else rest[: width - 1] + "…"
    return f"{source.split('_')[0]}: {rest} ({fam})"


# A band of the other series is drawn where at least this many of them have a point.
BAND_MIN_SERIES = 5
BAND_QUANTILES = (0.1, 0.5, 0.9)


def context_band(measured: pd.DataFrame, chosen: set[str]) -> pd.DataFrame:
    """The series of ``measured`` not in ``chosen`` summarised at each power-of-two bin of N
    (N rounded to the nearest 2^k): the 10th, 50th and 90th percentiles of their throughput in
    accelerator-equivalents at their smallest N (``y_q10``...) and of their efficiency
    (``eff_q10``...), where ``BAND_MIN_SERIES`` or more of them have a point; the grey band of
    the scaling figures, in place of one grey line per series."""
    m = measured[measured["series_id"].notna() & ~measured["series_id"].isin(chosen)]
    m = m.sort_values(["series_id", "n_accelerators"], kind="mergesort")
    m = m[m.groupby("series_id")["n_accelerators"].transform("size") >= 2]
    columns = ["n_accelerators", *(f"{v}_q{round(100 * q)}" for v in ("y", "eff")
                                   for q in BAND_QUANTILES)]
    if m.empty:
        return pd.DataFrame(columns=columns)
    first = m.groupby("series_id")[["y", "n_accelerators"]].transform("first")
    m = m.assign(y_rel=m["y"] / (first["y"] / first["n_accelerators"]),
                 bin=np.round(np.log2(m["n_accelerators"].to_numpy(float))))
    rows = []
    for k, g in m.groupby("bin", sort=True):
        if g["series_id"].nunique() < BAND_MIN_SERIES:
            continue
        row = {"n_accelerators": float(2.0 ** k)}
        for v, col in (("y", "y_rel"), ("eff", "efficiency")):
            values = g[col].to_numpy(float)
            values = values[np.isfinite(values)]
            for q in BAND_QUANTILES:
                row[f"{v}_q{round(100 * q)}"] = float(np.quantile(values, q)) if len(values) \
                    else np.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def _draw_band(ax: Any, band_frame: pd.DataFrame, prefix: str, n_other: int) -> None:
    """The other series as one grey band (10th-90th percentile) and its median, dotted."""
    if len(band_frame) < 2:
        return
    n = band_frame["n_accelerators"]
    context(ax.fill_between(n, band_frame[f"{prefix}_q10"], band_frame[f"{prefix}_q90"],
                            color=CONTEXT_GREY, alpha=0.45, lw=0, zorder=1,
                            label=f"other {n_other} series: middle 80%"))
    context(ax.plot(n, band_frame[f"{prefix}_q50"], ":", color="#999999", lw=1.0, zorder=1,
                    label="their median"))


def _chosen_series(data: ReportData, ax_t: Any, ax_e: Any, chosen: list[str],
                   focus: tuple[str, ...]) -> tuple[float, float, float]:
    """Draw each chosen series on the throughput and efficiency panels (points, named in the
    legend; law; band); returns the N range drawn and the highest efficiency."""
    lo, hi, top = np.inf, 0.0, 1.0
    for i, sid in enumerate(chosen):
        meas, curve = _series_frames(data, sid)
        colour, marker = family_colour(meas["accelerator_family"].iloc[0]), MARKERS[i]
        unit = meas["y"].iloc[0] / meas["n_accelerators"].iloc[0]
        n_max = float(meas["n_accelerators"].max())
        bold = {"ms": 7, "mec": "k", "mew": 1.0} if sid in focus else {"ms": 5}
        text = ("★ " if sid in focus else "") + series_label(data, sid)
        tag(ax_t.plot(meas["n_accelerators"], meas["y"] / unit, marker, color=colour,
                      zorder=3, label=text, **bold), sid)
        tag(ax_e.plot(meas["n_accelerators"], meas["efficiency"], marker, color=colour,
                      zorder=3, label=text, **bold), sid)
        law = law_domain(curve, n_max) if curve["predicted"].notna().any() else curve.iloc[0:0]
        inside, past = law[law["n_accelerators"] <= n_max], law[law["n_accelerators"] >= n_max]
        for part, ls in ((inside, "-"), (past, "--")):
            if len(part) > 1:
                tag(ax_t.plot(part["n_accelerators"], part["predicted"] / unit, ls,
                              color=colour, lw=1), sid)
                tag(ax_e.plot(part["n_accelerators"], part["efficiency_law"], ls,
                              color=colour, lw=1), sid)
        if len(law) > 1:
            band(ax_t, law["n_accelerators"], law["pi_low"] / unit, law["pi_high"] / unit,
                 colour, sid, upper=None)
        top = max(top, float(meas["efficiency"].max()))
        lo = min(lo, float(meas["n_accelerators"].min()))
        hi = max(hi, float(law["n_accelerators"].max()) if len(law) else n_max)
    return lo, hi, top


def scaling(data: ReportData, out: Path, limit: int, focus: tuple[str, ...] = ()
            ) -> tuple[Path, Path]:
    """Throughput and efficiency against N, strong and weak scaling apart: the chosen series
    (``scaling_choice``) coloured by accelerator family, marked and named in the legend under
    each panel; the fitted law solid over the measured N and dashed past it, only as far as
    ``law_domain`` allows, its band only where it constrains the outcome; every other series
    summarised as one grey band (``context_band``)."""
    fig_t, axes_t = new_figure(2, 10.0, squeeze=False, nrows=2)
    fig_e, axes_e = new_figure(2, 10.0, squeeze=False, nrows=2)
    axes_t, axes_e = axes_t[:, 0], axes_e[:, 0]
    summ, curves = data.comparison_series, data.comparison_curves
    threshold = data.metrics["compare"].get("efficiency_threshold", 0.5)
    for col, kind in enumerate(("strong", "weak")):
        ax_t, ax_e = axes_t[col], axes_e[col]
        chosen = scaling_choice(data, kind, limit, focus)
        if not chosen:
            note(ax_t, f"no {kind}-scaling series")
            note(ax_e, f"no {kind}-scaling series")
            continue
        meas_all = curves[(curves["kind"] == "measured") & (curves["scaling"] == kind)]
        others = meas_all.loc[~meas_all["series_id"].isin(chosen), "series_id"].nunique()
        grey = context_band(meas_all, set(chosen))
        _draw_band(ax_t, grey, "y", others)
        _draw_band(ax_e, grey, "eff", others)
        lo, hi, top = _chosen_series(data, ax_t, ax_e, chosen, focus)
        ideal = np.array([lo, hi])
        context(ax_t.plot(ideal, ideal, "k--", lw=0.8))
        ax_t.set(xscale="log", yscale="log", xlabel="accelerators N",
                 ylabel="throughput (accelerator-equivalents at smallest N)",
                 title=f"{kind} scaling: throughput against N", xlim=(lo / 1.5, hi * 1.3),
                 ylim=(lo / 2, hi * 1.5))
        context(ax_e.axhline(threshold, color="k", lw=0.6, ls=":"))
        context(ax_e.axhline(1.0, color="k", lw=0.6, ls="-", alpha=0.4))
        ax_e.set(xscale="log", xlabel="accelerators N", title=f"{kind} scaling efficiency",
                 xlim=(lo / 1.5, hi * 1.3), ylim=(0, 1.05 * max(top, 1.0)),
                 ylabel="efficiency (per-accelerator throughput / at smallest N)")
        if top > 1.0:
            ax_e.axhspan(1.0, 1.05 * top, color="#fff2cc", lw=0, zorder=0)
            ax_e.text(0.02, 0.98, "above 1: per-accelerator throughput rose with N "
                      "(see text)", transform=ax_e.transAxes, fontsize=6.5, va="top",
                      color="#7a5c00")
        for ax in (ax_t, ax_e):
            ax.legend(frameon=False, ncol=2, fontsize=6.5, loc="upper center",
                      bbox_to_anchor=(0.5, -0.13))
    legend = ("points: measured, coloured by accelerator family (one series each); solid: "
              "fitted law over the measured N; dashed: to at most " f"{DRAW_BEYOND}x the "
              "largest N while its band stays within a factor "
              f"{BAND_SPAN:.0f}; grey band: every other series (10th-90th percentile at each "
              "power of two of N)")
    for fig in (fig_t, fig_e):
        fig.text(0.01, 0.005, legend, ha="left", fontsize=6.5, color="#444444", wrap=True)
    # the legends under each panel are laid out with it; the key below them all
    return (save(fig_t, out / "scaling_throughput.png", key_height=0.035),
            save(fig_e, out / "scaling_efficiency.png", key_height=0.035))


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
    fig, ax = new_figure(1, 4.8)
    c = data.comparison
    col = "flops_per_hbm_byte"
    if c.empty or col not in c or c[col].notna().sum() == 0:
        note(ax, "compute-to-bandwidth ratios are not in the stage outputs")
        return save(fig, out / "hardware.png")
    g = best_per_point(c[c[col].notna()], "mfu", (col,))
    groups = []
    for (fam, ratio), h in g.groupby(["accelerator_family", col], sort=True):
        prec = h["precision"].dropna().str.upper().value_counts() if "precision" in h else []
        groups.append((fam, ratio, h, prec.index[0] if len(prec) else ""))
    # the families with most points are drawn in colour; the rest grey, labelled in place
    shown = sorted(groups, key=lambda t: (-len(t[2]), t[0], t[1]))[:MAX_SERIES]
    variants: dict[str, int] = {}
    for fam, ratio, h, prec in groups:
        key = f"{fam}|{ratio:.1f}"
        q1, q2, q3 = h["mfu"].quantile([0.25, 0.5, 0.75])
        if not any(t[0] == fam and t[1] == ratio for t in shown):
            context(ax.plot(h[col], h["mfu"], "o", ms=2, alpha=0.3, color=CONTEXT_GREY))
            context(ax.plot([ratio], [q2], "o", ms=5, color="#999999", mec="k", mew=0.5))
            t = ax.annotate(fam, (ratio, q2), xytext=(3, -8), textcoords="offset points",
                            fontsize=6, color="#777777")
            t.set_gid("label:context")
            continue
        colour = family_colour(fam)
        marker = MARKERS[variants.setdefault(fam, 0) % len(MARKERS)]
        variants[fam] += 1
        tag(ax.plot(h[col], h["mfu"], marker, ms=2.5, alpha=0.25, color=colour), key)
        bar = ax.errorbar([ratio], [q2], yerr=[[q2 - q1], [q3 - q2]], fmt=marker, ms=7,
                          color=colour, mec="k", capsize=3,
                          label=f"{fam} {prec} at {ratio:.0f} FLOP/B (n={len(h)})".replace("  ", " "))
        tag(bar, key)
    slope = (regression or {}).get("slope_per_doubling")
    if slope is not None:
        x = np.geomspace(g[col].min(), g[col].max(), 50)
        x0, y0 = float(np.exp(np.log(g[col]).median())), float(g["mfu"].median())
        ax.plot(x, y0 + slope * np.log2(x / x0), "k-", lw=1,
                label=f"fit stage: {slope * 100:+.2f} MFU points per doubling (partial effect)")
    ax.set(xscale="log", xlabel="peak FLOP/s ÷ HBM bytes/s at the run's precision (FLOP/byte)",
           ylabel="best MFU per source, model and N (median, IQR)",
           title="utilization against compute-to-bandwidth ratio",
           ylim=(0, min(1.0, 1.1 * float(g["mfu"].max()))))
    # room on the right for the in-place labels of the grey families (never past the axes)
    lo, hi = ax.get_xlim()
    ax.set_xlim(lo, hi * 1.12)
    # the ratios span under a decade, so the labelled ticks are minor ones: plain numbers
    # (set after the log scale, which resets formatters)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    # under the axes: inside, it hid the best H100 runs
    ax.legend(frameon=False, ncol=3, fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    return save(fig, out / "hardware.png")


def power_cost(data: ReportData, out: Path, highlight: int = 6) -> Path:
    """Tokens per accelerator-hour against N: what an accelerator-hour buys as the job grows
    (best run per source, model, family and N). The ``highlight`` lines over the widest range
    of N are coloured by accelerator family, marked apart and named in the legend under the
    axes; the other models' points are grey, without lines.
    Energy per token is the energy figure's (MLPerf power)."""
    c = data.comparison
    col = "tokens_per_accelerator_hour"
    fig, ax = new_figure(1, 4.4)
    g = c[c[col].notna()] if col in c else c.iloc[0:0]
    if g.empty:
        note(ax, "no run reports tokens per accelerator-hour")
        return save(fig, out / "power_cost.png")
    best = best_per_point(g, col)
    lines = []
    for (src, model, fam), h in best.groupby(["source", "model", "accelerator_family"], sort=True):
        h = h.sort_values("n_accelerators")
        span = float(h["n_accelerators"].iloc[-1] / h["n_accelerators"].iloc[0])
        lines.append((-span, -len(h), src, model, fam, h))
    lines.sort(key=lambda t: t[:4])
    chosen = [(t[2], t[3], t[4]) for t in lines[:min(highlight, MAX_SERIES)] if t[0] < -1]
    rest = [t[5] for t in lines if (t[2], t[3], t[4]) not in chosen]
    if rest:
        others = pd.concat(rest)
        context(ax.plot(others["n_accelerators"], others[col], "o", ms=2.5, color=CONTEXT_GREY,
                        zorder=1, label=f"other models ({len(rest)}): best run per N"))
    for i, (_, _, src, model, fam, h) in enumerate(t for t in lines if t[2:5] in chosen):
        key, colour = f"{src}|{model}|{fam}", family_colour(fam)
        tag(ax.plot(h["n_accelerators"], h[col], MARKERS[i] + "-", ms=3.5, lw=1.3,
                    color=colour, zorder=3,
                    label=f"{_model_name(model, 20)} ({fam}, {src.split('_')[0]})"), key)
    ax.set(xscale="log", yscale="log", xlabel="accelerators N",
           ylabel="tokens per accelerator-hour",
           title="tokens per accelerator-hour against N (best per model and N)")
    ax.legend(frameon=False, ncol=2, fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.14))
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
        tag(ax.plot(g["training_flop"], g["utilization"], ls=ls, color=colour, lw=1.4,
                    label=scen), f"scenario:{scen}")
        for key, sym in (("knee_flop", "v"), ("wall_flop", "x")):
            x = marks.get(key)
            # a wall "beyond the grid" is the grid's edge, not a wall: left unmarked
            if x and len(g) and not (key == "wall_flop" and marks.get("wall_beyond_grid")):
                y = np.interp(np.log(x), np.log(g["training_flop"]), g["utilization"])
                tag(ax.plot([x], [y], sym, color=colour, mec="k", ms=7), f"scenario:{scen}")
    c = data.comparison
    if not c.empty and "training_flop" in c:
        # one class, not one colour per family: with the scenarios that would be ~18
        r = representative_runs(c[c["training_flop"].notna() & c["mfu"].notna()])
        tag(ax.plot(r["training_flop"], r["mfu"], "o", ms=3.5, alpha=0.55, color="#525252",
                    mec="none", label="measured runs (best per model, family, largest N)"),
            "measured")
        mine = c[c["run_id"].isin(focus_runs) & c["training_flop"].notna() & c["mfu"].notna()]
        if len(mine):
            ax.plot(mine["training_flop"], mine["mfu"], "*", color="k", ms=11,
                    label="★ your runs")
    context(ax.plot([], [], "kv", label="knee"))
    context(ax.plot([], [], "kx", label="latency wall"))
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


def _scaling_figures(data: ReportData, out: Path, cfg: ReportSettings, focus: Focus
                     ) -> dict[str, Path]:
    t, e = scaling(data, out, cfg.series_per_panel, focus.series)
    return {"scaling_throughput": t, "scaling_efficiency": e}


def _hardware_figure(data: ReportData, out: Path, cfg: ReportSettings, focus: Focus) -> Path:
    from pipeline.report.findings import hardware_regression
    return hardware(data, out, hardware_regression(data.metrics["fit"]))


# Each figure from (data, folder, settings, focus): name -> a function drawing it (or, for a
# dict, several), in the order the report lists them; the costliest first, as the pool
# hands them out in this order.
_FIGURES: dict[str, Callable[..., Any]] = {
    "scaling": _scaling_figures,
    "laws_holdout": lambda d, out, cfg, focus: laws_holdout(d, out),
    "strategy": lambda d, out, cfg, focus: strategy(d, out, cfg.strategy_sources,
                                                    cfg.strategy_models),
    "hardware": _hardware_figure,
    "power_cost": lambda d, out, cfg, focus: power_cost(d, out),
    "energy": lambda d, out, cfg, focus: energy_figure(d, out),
    "frontier": lambda d, out, cfg, focus: frontier(d, out, cfg.frontier_scenarios, focus.runs),
    "gap": lambda d, out, cfg, focus: gap(d, out, cfg.gap_runs, focus.runs),
    "coverage": lambda d, out, cfg, focus: coverage.figure(d, out),
    **{name: (lambda d, out, cfg, focus, draw=draw: draw(d, out))
       for name, draw in calibration.FIGURES.items()},
}


def _draw(data: ReportData, out: Path, cfg: ReportSettings, focus: Focus, name: str
          ) -> dict[str, Path]:
    drawn = _FIGURES[name](data, out, cfg, focus)
    return drawn if isinstance(drawn, dict) else {name: drawn}


def make_all(data: ReportData, out: Path, cfg: ReportSettings, focus: Focus = Focus()
             ) -> dict[str, Path]:
    """Draw every figure, the ``focus`` series and runs marked; returns name -> PNG path. The
    figures are independent: drawn over ``cfg.workers`` processes."""
    out.mkdir(parents=True, exist_ok=True)
    drawn = map_in_order(_draw, list(_FIGURES), cfg.workers, shared=(data, out, cfg, focus))
    return {name: path for figures in drawn for name, path in figures.items()}
