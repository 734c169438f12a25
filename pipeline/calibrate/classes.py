"""Classes of run: what a run is (dense BF16, FP8, long context >= 16K tokens per sequence, MoE)
and on which accelerator family, for two uses.

- **Scores.** :func:`class_scores`: leave-source-out median APE, interval coverage and median
  width (high / low) of the calibrated predictor per class, production sources only (the layout
  sweeps apart): the figures ``source_scores`` reports per source, cut by what the run is rather
  than who published it. The cuts overlap (an FP8 run on H100 is in ``fp8`` and in
  ``accelerator_H100``).
- **Mondrian intervals.** :func:`interval_class` puts every run in ONE cell, ``<architecture>/
  <accelerator family>/<kind>`` with ``kind`` (:func:`workload_kind`) the first of moe,
  long_context, fp8, dense_bf16 that applies; :func:`class_chain` is the cell's fallback chain,
  family x kind -> architecture x kind (the catalog's ``architecture``: an H200 run falls back to
  Hopper runs of its kind before runs of every chip) -> kind -> production, that the interval
  walks until a level has enough scores
  (``pipeline/calibrate/intervals.py``, Mondrian conformal prediction: Vovk et al. 2005 §4.5,
  the quantile taken within the category of the case).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

LONG_CONTEXT_TOKENS = 16384
# workload kinds in priority order: a run takes the first that applies
KINDS = ("moe", "long_context", "fp8", "dense_bf16")
FP8_PRECISIONS = ("fp8", "mxfp8")
CLASS_PREFIX = "class:"


def workload_kind(precision: np.ndarray, seq_len: np.ndarray, moe: np.ndarray) -> np.ndarray:
    """Per run the first of ``KINDS`` that applies: moe (routed experts), long_context (>=
    ``LONG_CONTEXT_TOKENS`` tokens per sequence), fp8 (fp8 or mxfp8 GEMMs), else dense_bf16
    (16-bit; a run that states no precision is priced at bf16 and counts as such)."""
    prec = np.array([str(p).lower() if isinstance(p, str) else "bf16" for p in precision],
                    dtype=object)
    seq = np.asarray(pd.to_numeric(pd.Series(seq_len), errors="coerce"), float)
    return np.select([np.asarray(moe, bool), seq >= LONG_CONTEXT_TOKENS,
                      np.isin(prec, FP8_PRECISIONS)], list(KINDS[:3]), KINDS[3]).astype(object)


def _named(values) -> list[str]:
    return [str(v) if isinstance(v, str) and v else "?" for v in values]


def interval_class(accelerator_family: np.ndarray, kind: np.ndarray,
                   architecture: np.ndarray | None = None) -> np.ndarray:
    """The Mondrian cell of each run: ``<architecture>/<accelerator family>/<kind>`` (``?`` for
    a chip the catalog does not name)."""
    fam = _named(accelerator_family)
    arch = _named(np.full(len(fam), None) if architecture is None else architecture)
    return np.array([f"{a}/{f}/{k}" for a, f, k in zip(arch, fam, kind)], dtype=object)


def class_chain(cell: str) -> tuple[str, ...]:
    """Interval keys from the finest to the coarsest: family x kind (``class:H200/dense_bf16``),
    architecture x kind (``class:Hopper/dense_bf16``), kind, all production."""
    arch, fam, kind = cell.split("/", 2)
    return (f"{CLASS_PREFIX}{fam}/{kind}", f"{CLASS_PREFIX}{arch}/{kind}", CLASS_PREFIX + kind,
            "production")


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
    moe = (pd.to_numeric(g["active_params"], errors="coerce")
           < pd.to_numeric(g["params"], errors="coerce"))
    seq = pd.to_numeric(g["seq_len"], errors="coerce")
    cuts = {"dense_bf16": ~moe & precision.isin(["bf16", "fp16"]),
            "fp8": precision.isin(list(FP8_PRECISIONS)),
            "long_context": seq >= LONG_CONTEXT_TOKENS,
            "moe": moe}
    for fam in sorted(g["accelerator_family"].dropna().unique()):
        cuts[f"accelerator_{fam}"] = g["accelerator_family"] == fam
    return {name: _cut(g[mask]) for name, mask in cuts.items() if mask.any()}
