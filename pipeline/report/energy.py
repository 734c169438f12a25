"""The report's measured energy: MLPerf power runs against N (findings and figure).

Reads only stage outputs: ``energy_points.parquet`` and ``energy_fits.parquet`` (fit stage,
``pipeline.fit.energy``), ``fit.json["energy"]`` and ``theory.json["_energy"]``
(``pipeline.theory.energy``). The Fernandez et al. 2024 figures are third-party quotes, kept
here with their provenance (``data/raw/published/fernandez2024.csv`` records them as claims).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.report.data import ReportData, finite_or_none
from pipeline.report.style import family_colour, new_figure, note, save, tag

# A third-party summary of Fernandez et al. 2024 (arXiv:2411.13055), not verified against the
# paper's text (data/raw/published/fernandez2024.csv, record_kind "claim").
FERNANDEZ_QUOTE = {"n_from": 128, "n_to": 2048, "per_gpu_throughput_change": -0.3722,
                   "per_gpu_power_change": -0.0587,
                   "citation": "Fernandez et al. 2024 (arXiv:2411.13055)"}


def _family(accelerator: str) -> str:
    return str(accelerator).split("-")[0]


_f = finite_or_none


def _frame(d: ReportData, name: str) -> pd.DataFrame:
    return d.frames.get(name, pd.DataFrame())


def energy_section(d: ReportData, baseline: str = "baseline") -> dict[str, Any]:
    """Figures for the 'Power and cost' section's measured-energy paragraphs and table, and the
    frontier's draw (``baseline``: the scenario quoted first)."""
    pts, fits = _frame(d, "energy_points"), _frame(d, "energy_fits")
    out: dict[str, Any] = {"points": [], "series": [], "fernandez": FERNANDEZ_QUOTE,
                           # the keys are optional in the contracts (null: no power data)
                           "cross": ((d.metrics.get("fit") or {}).get("energy") or {}).get(
                               "cross_series") or {},
                           "frontier": (d.metrics.get("theory") or {}).get("_energy") or {}}
    scen = out["frontier"].get("scenarios", {})
    # as the theory section picks it: the named scenario, else one called baseline, else the first
    out["baseline"] = baseline if baseline in scen else next(
        (k for k in sorted(scen) if "baseline" in k), next(iter(sorted(scen)), None))
    out["frontier_rows"] = [dict(v, scenario=k) for k, v in sorted(scen.items())]
    if pts.empty:
        return out
    for r in pts.sort_values(["series_id", "n_accelerators"]).itertuples(index=False):
        out["points"].append({
            "model": r.model, "accelerator": r.accelerator, "family": _family(r.accelerator),
            "measurement": r.power_measurement, "n": int(r.n_accelerators), "runs": int(r.n_runs),
            "power_w": _f(r.power_w_per_accelerator_median),
            "power_w_min": _f(r.power_w_per_accelerator_min),
            "power_w_max": _f(r.power_w_per_accelerator_max),
            "j_per_token": _f(r.energy_j_per_token_median), "energy_mj": _f(r.energy_j_median) / 1e6,
            "ttt_s": _f(r.time_to_train_s_median), "interconnect_share": _f(r.interconnect_share),
            "lora": "LoRA" in str(r.model)})
    if not fits.empty:
        for sid, g in fits[fits["converged"]].groupby("series_id", sort=True):
            first = g.iloc[0]
            row = {"series_id": sid, "model": first["model"], "accelerator": first["accelerator"],
                   "measurement": first["power_measurement"], "n_min": int(first["n_min"]),
                   "n_max": int(first["n_max"])}
            for q in g.itertuples(index=False):
                row[q.quantity] = {"factor": _f(q.doubling_factor), "low": _f(q.doubling_low),
                                   "high": _f(q.doubling_high), "lof_p": _f(q.lack_of_fit_p)}
            out["series"].append(row)
    out["steps"] = _steps(pts)
    return out


def _steps(pts: pd.DataFrame) -> list[dict[str, Any]]:
    """Between consecutive N of a series: how much faster, for how much more energy."""
    steps = []
    for _, g in pts.groupby("series_id", sort=True):  # the fit stage's energy series
        g = g.sort_values("n_accelerators")
        model, acc, meas = g.iloc[0][["model", "accelerator", "power_measurement"]]
        for a, b in zip(g.itertuples(index=False), g.iloc[1:].itertuples(index=False)):
            steps.append({"model": model, "accelerator": acc, "measurement": meas,
                          "n_from": int(a.n_accelerators), "n_to": int(b.n_accelerators),
                          "speedup": a.time_to_train_s_median / b.time_to_train_s_median,
                          "energy_ratio": b.energy_j_median / a.energy_j_median,
                          "power_ratio": (b.power_w_per_accelerator_median
                                          / a.power_w_per_accelerator_median)})
    return steps


def energy_figure(d: ReportData, out: Path) -> Path:
    """Power per accelerator, energy per token and energy to train against N (MLPerf power)."""
    pts = _frame(d, "energy_points")
    fig, axes = new_figure(3, 3.6, squeeze=False)
    panels = [("power_w_per_accelerator", "node power per accelerator (W)"),
              ("energy_j_per_token", "energy per token (J)"),
              ("energy_j", "energy to train (J)")]
    for ax, (q, label) in zip(axes[0], panels):
        if pts.empty:
            note(ax, "no MLPerf power measurement")
            continue
        for _, g in pts.groupby("series_id", sort=True):  # the fit stage's energy series
            g = g.sort_values("n_accelerators")
            model, acc, meas = g.iloc[0][["model", "accelerator", "power_measurement"]]
            # arrays, not Series: matplotlib calls float() on single-element Series otherwise
            y = g[f"{q}_median"].to_numpy(float)
            lo = g[f"{q}_min"].to_numpy(float) if f"{q}_min" in g else y
            hi = g[f"{q}_max"].to_numpy(float) if f"{q}_max" in g else y
            bar = ax.errorbar(g["n_accelerators"].to_numpy(float), y, yerr=[y - lo, hi - y], fmt="o",
                        ms=3.5, lw=1, capsize=2, color=family_colour(_family(acc)),
                        ls="-" if meas == "AC" else "--", alpha=0.85,
                        label=f"{model.split(' (')[0]} {_family(acc)} {meas}")
            tag(bar, f"{model}|{acc}|{meas}")
        ax.set(xscale="log", xlabel="accelerators N", ylabel=label, title=label)
        if q != "power_w_per_accelerator":
            ax.set_yscale("log")
    if not pts.empty:
        axes[0][0].legend(frameon=False, fontsize=6)
    fig.text(0.99, 0.01, "MLPerf Training v4.0/v5.0 power logs; median and range of runs; "
             "solid AC, dashed DC", ha="right", fontsize=6.5, color="#555555")
    return save(fig, out / "energy.png")
