"""Your runs first: the report's opening section for the sources in ``report.focus``.

``report.focus`` lists sources or series ids; empty means every source of step logs (runs with
``source_kind == "log"``, i.e. everything under ``data/raw/logs``). For each of their scaling
series the section gives the measured efficiency against N, the prediction to 4x and 16x the
largest measured N with its interval (``predict_multiples``), where the step time goes at the
largest N (the theory's decomposition in ``comparison.parquet``), and published series of the
same accelerator family and a model of similar size to compare with (each run in no series and
each log that became a reject: ``pipeline.report.your_runs``). ``focus_figure`` draws it; the
other figures mark the same series and runs (``focus_ids``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline.fit.contract import MULTIPLES_OF_N_MAX
from pipeline.report.data import ReportData
from pipeline.report.style import COMPONENT_COLOURS, family_colour, new_figure, note, save
from pipeline.vocab import SHARE_SLOTS

MULTIPLES = MULTIPLES_OF_N_MAX  # the fit stage predicts each law there (fits.parquet)
# Published series "of the same model size": active parameters within this factor of yours.
SIZE_FACTOR = 1.5
PUBLISHED_SHOWN = 5
Y_NAMES = {"model_flops_per_s": "model FLOP/s", "tokens_per_s": "tokens/s",
           "inverse_time_to_train_per_s": "1/time-to-train (1/s)"}
# Shares of the step time below this are left out of the sentence (they round to 0 %).
MIN_SHARE = 0.005


def _num(x: Any) -> float | None:
    """A plain float for the templates (numpy and pandas scalars, NA -> None)."""
    try:
        return None if x is None or pd.isna(x) else float(x)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Focus:
    """``report.focus`` resolved on the data: the series ids in focus (sorted) and the run ids."""

    series: tuple[str, ...] = ()
    runs: frozenset[str] = frozenset()


def focus_ids(d: ReportData, focus: list[str]) -> Focus:
    """The runs of the focus sources (or of the focus series), by default those of step logs,
    and their series."""
    runs = d.runs
    if runs.empty:
        return Focus()
    if focus:
        mine = runs[runs["source"].isin(focus) | runs["series_id"].isin(focus)]
    else:
        mine = runs[runs["source_kind"] == "log"]
    listed = set(d.series["series_id"]) if not d.series.empty else set()
    series = sorted(s for s in mine["series_id"].dropna().unique() if s in listed)
    return Focus(tuple(series), frozenset(mine["run_id"]))


def predict_multiples(d: ReportData, series_id: str,
                      multiples: tuple[int, ...] = MULTIPLES) -> list[dict[str, Any]]:
    """Throughput and efficiency at ``multiples`` x the largest measured N, with the interval
    for one new measurement (``fit.interval``), of the law the compare stage drew for the
    series (the fit stage's default law, or the next in its ranking where that one could not
    be fitted): the fit stage's own predictions (fits.parquet ``*_at_<m>x_n_max``, written by
    ``pipeline.fit.derived.predictions_at_multiples``); nothing is refitted here.

    The one place the report predicts: when the calibrate stage publishes calibrated
    intervals, this function reads them instead.
    """
    summ, fits = d.comparison_series, d.fits
    row = summ[summ["series_id"] == series_id] if not summ.empty else summ
    if row.empty or fits.empty or not isinstance(row["law"].iloc[0], str):
        return []
    law = row["law"].iloc[0]
    fit = fits[(fits["series_id"] == series_id) & (fits["law"] == law)]
    if fit.empty or "predicted_at_n_min" not in fit:
        return []
    fit = fit.iloc[0]
    n0, n_max = float(fit["n_min"]), float(fit["n_max"])
    per0 = float(fit["predicted_at_n_min"]) / n0
    out = []
    for m in multiples:
        n = m * n_max
        p, lo, hi = (float(fit[f"{k}_at_{m}x_n_max"]) for k in ("predicted", "pi_low", "pi_high"))
        if not (np.isfinite(p) and np.isfinite(per0) and per0 > 0):
            return []
        out.append({"multiple": m, "n": n, "law": law,
                    "y_metric": Y_NAMES.get(fit["y_metric"], fit["y_metric"]),
                    "predicted": p, "pi_low": lo, "pi_high": hi, "efficiency": p / n / per0,
                    "efficiency_low": lo / n / per0, "efficiency_high": hi / n / per0})
    return out


def _shares(row: pd.Series, names: tuple[str, ...] = SHARE_SLOTS) -> list[dict[str, Any]]:
    # The calibrated residual is negative where the model predicts a longer step than measured
    # (the other shares then sum to more than 1): kept, so the parts shown add up.
    parts = [{"part": k.replace("_", " "), "share": float(row[f"share_{k}"])}
             for k in names if f"share_{k}" in row and pd.notna(row[f"share_{k}"])
             and (row[f"share_{k}"] >= MIN_SHARE
                  or (k == "residual" and abs(row[f"share_{k}"]) >= MIN_SHARE))]
    return sorted(parts, key=lambda p: -p["share"])


def _decomposition(d: ReportData, run_id: str) -> dict[str, Any]:
    """Where the step time of ``run_id`` goes: the calibrated model's shares (calibrated.parquet,
    with its predicted MFU and interval) where the calibrate stage covered the run, else the
    theory's ideal decomposition (comparison.parquet) with its ceiling."""
    cal = d.calibrated
    row = cal[cal["run_id"] == run_id] if not cal.empty else cal
    if len(row):
        r = row.iloc[0]
        return {"model": "calibrated", "shares": _shares(r, SHARE_SLOTS),
                "predicted_mfu": _num(r["predicted_mfu"]), "pi_low": _num(r["pi_low"]),
                "pi_high": _num(r["pi_high"]), "bound_mfu": None}
    comp = d.comparison
    row = comp[comp["run_id"] == run_id] if not comp.empty else comp
    if len(row):
        return {"model": "theory", "shares": _shares(row.iloc[0]),
                "bound_mfu": _num(row["bound_mfu"].iloc[0])}
    return {"model": None, "shares": [], "bound_mfu": None}


def _published_alike(d: ReportData, family: str, params: float | None,
                     yours: set[str] = frozenset()) -> list[dict[str, Any]]:
    """Published series on the same accelerator family with a model of similar size (not
    ``yours``, the series in focus)."""
    summ, runs = d.comparison_series, d.runs
    if summ.empty or runs.empty or not params:
        return []
    size = runs.groupby("series_id")["active_params"].median()
    kind = runs.groupby("series_id")["source_kind"].first()
    alike = summ[(summ["accelerator_family"] == family)
                 & summ["series_id"].map(kind).ne("log")
                 & ~summ["series_id"].isin(yours)].copy()
    alike["params"] = alike["series_id"].map(size)
    ratio = alike["params"] / params
    alike = alike[(ratio <= SIZE_FACTOR) & (ratio >= 1 / SIZE_FACTOR)]
    alike = alike.assign(gap=np.abs(np.log(alike["params"] / params)),
                         span=alike["n_max"] / alike["n_min"])
    alike = alike.sort_values(["gap", "span", "series_id"], ascending=[True, False, True])
    mfu = d.comparison.groupby("series_id")["mfu"].median() if not d.comparison.empty else {}
    return [{"series_id": r.series_id, "model": r.model, "scaling": r.scaling,
             "n_min": _num(r.n_min), "n_max": _num(r.n_max),
             "efficiency_at_n_max": _num(r.efficiency_at_n_max),
             "mfu": _num(mfu.get(r.series_id)) if len(mfu) else None}
            for r in alike.head(PUBLISHED_SHOWN).itertuples()]


def shown_series(d: ReportData, series_ids: tuple[str, ...],
                 shown: int | None) -> tuple[str, ...]:
    """The focus series detailed in the report (``report.series_shown``; each costs a table, a
    prediction, a planner search and a figure line): all of them up to ``shown`` (None: all);
    past that (a fleet's campaigns), the ``shown`` reaching the largest N (then the most runs,
    then by id), in id order. ``scalewall report --focus <source>`` details any other."""
    if shown is None or len(series_ids) <= shown:
        return series_ids
    table = d.series[d.series["series_id"].isin(series_ids)]
    top = table.sort_values(["n_max", "n_points", "series_id"],
                            ascending=[False, False, True]).head(shown)
    return tuple(sorted(top["series_id"]))


def focus_section(d: ReportData, focus: list[str],
                  shown: int | None = None) -> dict[str, Any]:
    """The section's content: one entry per focus series shown (``shown_series``), plus the
    runs in no series. The interval is the fit stage's (``fit.interval``, from fit.json)."""
    interval = d.metrics.get("fit", {}).get("interval", 0.95)
    chosen = focus_ids(d, focus)
    series_ids, run_ids = chosen.series, chosen.runs
    runs = d.runs
    comp = d.comparison
    ceiling = dict(zip(comp["run_id"], comp["bound_mfu"])) \
        if not comp.empty and "bound_mfu" in comp else {}
    entries = []
    for sid in shown_series(d, series_ids, shown):
        mine = runs[runs["series_id"] == sid].sort_values(["n_accelerators", "run_id"])
        s = d.series[d.series["series_id"] == sid].iloc[0]
        curves = d.comparison_curves
        meas = curves[(curves["series_id"] == sid) & (curves["kind"] == "measured")] \
            if not curves.empty else curves
        eff = dict(zip(meas["n_accelerators"], meas["efficiency"])) if len(meas) else {}
        points = [{"n": _num(r.n_accelerators), "step_time_s": _num(r.step_time_s),
                   "tokens_per_s": _num(r.tokens_per_s), "mfu": _num(r.mfu),
                   "ceiling_mfu": _num(ceiling.get(r.run_id)),
                   "efficiency": _num(eff.get(float(r.n_accelerators)))}
                  for r in mine.itertuples()]
        family = mine["accelerator_family"].iloc[0]
        params = mine["active_params"].median()
        entries.append({
            "series_id": sid, "source": s["source"], "model": s["model"],
            "accelerator": s["accelerator"], "scaling": s["scaling"], "n_min": _num(s["n_min"]),
            "n_max": _num(s["n_max"]), "n_points": _num(s["n_points"]), "points": points,
            "prediction": predict_multiples(d, sid),
            "decomposition": _decomposition(d, mine["run_id"].iloc[-1]),
            "published": _published_alike(d, family, params if pd.notna(params) else None,
                                          set(series_ids))})
    return {"focus": list(focus), "series": entries, "n_series": len(series_ids),
            "n_runs": len(run_ids), "interval": interval, "multiples": list(MULTIPLES)}


def focus_figure(d: ReportData, section: dict[str, Any], out: Path) -> Path:
    """Efficiency against N of the focus series (measured, the law to 16x with its band) over
    published series alike in grey; and the step-time shares at each series' largest N."""
    fig, (ax, bx) = new_figure(2, 4.4)
    entries = section["series"]
    if not entries:
        note(ax, "no series of your own yet:\ndrop step logs into data/raw/logs/<campaign>/")
        note(bx, "no step-time decomposition")
        return save(fig, out / "focus.png")
    curves = d.comparison_curves
    for e in entries:
        for p in e["published"]:
            g = curves[(curves["series_id"] == p["series_id"]) & (curves["kind"] == "measured")]
            ax.plot(g["n_accelerators"], g["efficiency"], "-", color="#bbbbbb", lw=0.8)
    ax.plot([], [], "-", color="#bbbbbb", label="published, same family and model size")
    for i, e in enumerate(entries):
        colour = family_colour(e["accelerator"]) if len(entries) == 1 else f"C{i % 10}"
        xs = [p["n"] for p in e["points"] if p["efficiency"] is not None]
        ys = [p["efficiency"] for p in e["points"] if p["efficiency"] is not None]
        ax.plot(xs, ys, "o-", color=colour, ms=7, mec="k", lw=2, label=f"★ {e['series_id']}"[:60])
        pred = e["prediction"]
        if pred:
            px = [xs[-1]] + [p["n"] for p in pred]
            ax.plot(px, [ys[-1]] + [p["efficiency"] for p in pred], "--", color=colour, lw=1.2)
            ax.fill_between(px, [ys[-1]] + [p["efficiency_low"] for p in pred],
                            [ys[-1]] + [p["efficiency_high"] for p in pred], color=colour,
                            alpha=0.15, lw=0)
    ax.set(xscale="log", xlabel="accelerators N", ylabel="scaling efficiency",
           title=f"your series; dashed: law to {max(MULTIPLES)}x N, band {section['interval']:.0%}")
    ax.legend(frameon=False, fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    labels, left = [], np.zeros(len(entries))
    # the calibrated model's parts where calibrate covered the run, else the theory's
    for key, colour in COMPONENT_COLOURS.items():
        v = np.array([next((p["share"] for p in e["decomposition"]["shares"]
                            if p["part"] == key.replace("_", " ")), 0.0) for e in entries])
        v = np.clip(v, 0.0, None)  # a negative residual is in the text, not stacked
        if v.sum() > 0:
            bx.barh(range(len(entries)), v, left=left, color=colour, height=0.5,
                    label=key.replace("_", " "))
        left += v
    labels = [f"N={int(e['n_max']):,}" if len(entries) == 1 else f"{i + 1}: N={int(e['n_max']):,}"
              for i, e in enumerate(entries)]
    bx.set_yticks(range(len(entries)), labels, fontsize=7)
    if left.max() > 1:  # the modelled parts exceed the measured step (negative residual)
        bx.axvline(1.0, color="k", lw=0.8, ls=":", label="measured step time")
    bx.set(xlim=(0, max(1.0, float(left.max()))), ylim=(-0.75, len(entries) - 0.25),
           xlabel="share of the step time",
           title="where the step time goes (largest N)")
    bx.legend(frameon=False, ncol=3, fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    return save(fig, out / "focus.png")
