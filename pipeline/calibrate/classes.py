"""Leave-source-out scores per class of run: dense BF16, FP8, long context (>= 16K tokens per
sequence), and each accelerator family; production sources only (the layout sweeps apart).

Median APE of the step time (the MFU's, the same ratio), interval coverage and median width
(high / low) of the calibrated predictor's leave-source-out predictions, the figures
``source_scores`` reports per source, cut by what the run is rather than who published it.
"""

from __future__ import annotations

import pandas as pd

LONG_CONTEXT_TOKENS = 16384


def _cut(g: pd.DataFrame) -> dict:
    return dict(n=int(len(g)), median_ape=float(g["ape"].median()),
                coverage=float(g["covered"].mean()),
                median_width=float((g["pi_high"] / g["pi_low"]).median()))


def class_scores(pred: pd.DataFrame, runs: pd.DataFrame, playbook_source: str,
                 sweep_ids: frozenset[str] = frozenset()) -> dict:
    """{class: {n, median_ape, coverage, median_width}} (module docstring); the layout sweeps'
    runs (``sweep_ids``) apart."""
    src = pred[(pred["holdout"] == "source") & (pred["predictor"] == "calibrated")
               & (pred["source"] != playbook_source)
               & ~pred["run_id"].astype(str).isin(sweep_ids)]
    facts = runs[["run_id", "precision", "seq_len", "accelerator_family", "params",
                  "active_params"]].astype({"run_id": str})
    g = src.astype({"run_id": str}).merge(facts, on="run_id", how="left")
    precision = g["precision"].fillna("bf16").str.lower()
    dense = ~(pd.to_numeric(g["active_params"], errors="coerce")
              < pd.to_numeric(g["params"], errors="coerce"))
    seq = pd.to_numeric(g["seq_len"], errors="coerce")
    cuts = {"dense_bf16": dense & precision.isin(["bf16", "fp16"]),
            "fp8": precision.isin(["fp8", "mxfp8"]),
            "long_context": seq >= LONG_CONTEXT_TOKENS}
    for fam in sorted(g["accelerator_family"].dropna().unique()):
        cuts[f"accelerator_{fam}"] = g["accelerator_family"] == fam
    return {name: _cut(g[mask]) for name, mask in cuts.items() if mask.any()}
