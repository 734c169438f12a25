"""The report's key findings: four to six sentences of at most about 30 words, each with the one
figure that shows it. Every number is computed here from the stage outputs (or from the section
contexts ``findings.build`` computed from them); a finding whose inputs are absent is left out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pipeline.report.data import ReportData
from pipeline.report.decompose import LOST, by_source
from pipeline.report.render import band, num, pct, sci, strategy

LOST_NAMES = {"compute": "compute inefficiency", "hbm": "HBM traffic", "net_tp": "TP traffic",
              "net_dp": "data-parallel traffic", "net_pp": "PP traffic", "net_ep": "EP traffic",
              "bubble": "the pipeline bubble", "latency": "the latency chain",
              "overhead": "overhead"}
SOURCE_NAMES = {"ultrascale_playbook2025": "the Playbook sweep",
                "megatron2021": "Megatron-LM", "mlperf_training": "MLPerf Training",
                "llama3": "Llama 3", "nvidia_dgxc2024": "NVIDIA DGX Cloud",
                "torchtitan2024": "TorchTitan"}


def source_name(source: str) -> str:
    return SOURCE_NAMES.get(source, source)


def loss_per_doubling(summary: pd.DataFrame) -> pd.DataFrame:
    """Per series: the share of per-accelerator throughput lost per doubling of N, assuming
    the loss compounds evenly over the doublings from its smallest to its largest N:
    1 - efficiency ** (1 / log2(n_max / n_min))."""
    s = summary[(summary["n_max"] > summary["n_min"]) & (summary["efficiency_at_n_max"] > 0)]
    doublings = np.log2(s["n_max"] / s["n_min"])
    return s.assign(doublings=doublings,
                    loss=1 - s["efficiency_at_n_max"] ** (1 / doublings))


def scaling_finding(d: ReportData) -> dict[str, Any] | None:
    summ = d.comparison_series
    if summ.empty:
        return None
    s = loss_per_doubling(summ)
    strong, weak = s[s["scaling"] == "strong"], s[s["scaling"] == "weak"]
    if strong.empty:
        return None
    by = (strong.groupby("source")["loss"].agg(["median", "size"])
          .sort_values(["size", "median"], ascending=[False, False]).head(3))
    parts = [f"{source_name(src)} {pct(r['median'])}" for src, r in by.iterrows()]
    text = ("With a fixed global batch, per-accelerator throughput falls a median "
            f"{pct(strong['loss'].median())} per doubling of N ("
            + ", ".join(parts) + ")")
    if len(weak):
        text += f"; with a batch growing with N, {pct(weak['loss'].median())}"
    return {"id": "scaling", "text": text + ".", "figure": "scaling_efficiency",
            "section": "series", "value": float(strong["loss"].median()),
            "caption": "Efficiency (per-accelerator throughput relative to the series' smallest "
                       f"N) against N, {len(strong)} strong- and {len(weak)} weak-scaling "
                       "series; coloured: those spanning the widest N per source, grey band: "
                       "the middle 80% of all others at each N. The loss per doubling assumes "
                       "it compounds evenly from a series' smallest to its largest N; the "
                       "median is over series."}


def ceiling_finding(d: ReportData, theory: dict[str, Any]) -> dict[str, Any] | None:
    if not theory.get("n_bound"):
        return None
    dom = theory.get("dominant")
    if dom:
        text = (f"Measured runs reach a median {pct(dom['rest_median'])} of their "
                f"data-movement ceiling ({dom['rest_runs']} runs; "
                f"{source_name(dom['source'])}'s {num(dom['runs'])}: {pct(dom['median'])})")
    else:
        text = (f"Measured runs reach a median {pct(theory['median_frac'])} of their "
                f"data-movement ceiling ({num(theory['n_bound'])} runs)")
    cal = by_source(d.calibrated) if not d.calibrated.empty else pd.DataFrame()
    if len(cal):
        large = cal[cal["end"] == "large"]
        lost = {c: float(large[f"lost_{c}"].median()) for c in LOST
                if c != "residual" and f"lost_{c}" in large}
        top = max(sorted(lost), key=lambda c: lost[c])
        text += (f"; at the largest N {LOST_NAMES.get(top, top)} costs most "
                 f"(median {pct(lost[top])} of step time)")
    return {"id": "ceiling", "text": text + ".", "figure": "calibrate_decomposition"
            if len(cal) else "gap", "section": "theory",
            "caption": "Share of the measured step time at each source's smallest and largest N: "
                       "useful arithmetic (MFU) and each component the calibrated model "
                       "attributes the rest to."}


def frontier_finding(theory: dict[str, Any], calibration: dict[str, Any]
                     ) -> dict[str, Any] | None:
    base = theory.get("baseline")
    if not base or not base.get("knee"):
        return None
    wall = (f"beyond {sci(base['wall'])} FLOP" if base.get("wall_beyond_grid")
            else f"at {sci(base['wall'])} FLOP")
    text = (f"With ideal efficiencies on {base.get('accelerator') or base['scenario']}, "
            f"utilization holds to a knee at {sci(base['knee'])} FLOP and hits the latency "
            f"wall {wall}")
    figure = "frontier"
    cal = next((f for f in calibration.get("frontier") or []
                if f.get("scenario") == base["scenario"]), None) if calibration.get(
        "available") else None
    if cal and cal.get("knee_cal"):
        lead = "at or below " if cal.get("unresolved") else "at "
        text += f"; at today's measured efficiencies the knee is {lead}{sci(cal['knee_cal'])}"
        figure = "calibrate_frontier"
    return {"id": "frontier", "text": text + ".", "figure": figure, "section": "theory",
            "caption": "Utilization against training compute: the data-movement frontier "
                       "with ideal efficiencies and, where calibrated, with today's measured "
                       "ones."}


def energy_finding(energy: dict[str, Any]) -> dict[str, Any] | None:
    c = (energy.get("cross") or {}).get("energy_j_per_token") or {}
    factor = c.get("doubling_factor")
    if factor is None or not energy.get("points"):
        return None
    ns = sorted({p["n"] for p in energy["points"]})
    interval = band(c.get("n_level_doubling_low"), c.get("n_level_doubling_high"),
                    fmt=lambda x: f"×{x:.2f}", why="three values of N")
    text = (f"In MLPerf's power-measured runs (N = {num(ns[0])} to {num(ns[-1])}), each "
            f"doubling of N multiplies energy per token by ×{factor:.2f} ({interval})")
    return {"id": "energy", "text": text + ".", "figure": "energy", "section": "power",
            "caption": "MLPerf Training power runs against N: node power per accelerator, "
                       "energy per token and energy to train (median and range of the runs; "
                       "solid AC, dashed DC)."}


def prediction_finding(laws: dict[str, Any]) -> dict[str, Any] | None:
    b = laws.get("default") or laws.get("best_ape")
    ks = laws.get("holdout_k") or []
    if not b or not ks or b.get("mean_median_ape") is None:
        return None
    k = ks[0]
    e = b[f"k{k}"]
    if e.get("median_ape") is None:
        return None
    text = (f"Asked for a series' next larger N, the default {b['law']} law misses by a median "
            f"{pct(e['median_ape'])}, and its {pct(laws['interval'])} intervals cover "
            f"{pct(e['coverage'])} of held-out points")
    if e.get("coverage") is not None and e["coverage"] < laws["interval"] - 0.1:
        text += ": they are too narrow"
    return {"id": "prediction", "text": text + ".", "figure": "laws_holdout", "section": "laws",
            "caption": f"Each law refitted without a series' largest k ∈ {{{', '.join(map(str, ks))}}}"
                       " N and scored on them: predicted against actual, and the error per "
                       "law and k."}


def strategy_finding(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    r = next((r for r in rows if r["best"]["family"] != r["worst"]["family"]), None)
    if r is None:
        return None
    b, w = r["best"], r["worst"]
    text = (f"In {source_name(r['source'])} ({r['model']}), {strategy(b['family'])} keeps "
            f"{pct(b['kept'])} of its best {r['metric']} from N = {num(b['n_min'])} to "
            f"{num(b['n_max'])}; {strategy(w['family'])} keeps {pct(w['kept'])}")
    return {"id": "strategy", "text": text + ".", "figure": "strategy", "section": "strategy",
            "caption": "Best utilization per strategy family against N, strong scaling and "
                       "configuration sweeps, one panel per source."}


def build(d: ReportData, context: dict[str, Any]) -> list[dict[str, Any]]:
    """The findings in reading order (at most six), each with its figure and its section."""
    found = [scaling_finding(d), strategy_finding(context.get("strategy") or []),
             ceiling_finding(d, context.get("theory") or {}),
             frontier_finding(context.get("theory") or {}, context.get("calibration") or {}),
             energy_finding(context.get("energy") or {}),
             prediction_finding(context.get("laws") or {})]
    out = [f for f in found if f]
    for f in out:
        f["words"] = len(f["text"].split())
    return out[:6]
