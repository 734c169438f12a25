"""The mixture-of-experts section: the measured MoE runs, the calibrated model's held-out scores
on them by source, the all-to-all share of each run's step, and the MoE frontier scenario
beside the dense one (pipeline/calibrate/moe.py prices the expert terms).

An MoE run is one whose active parameters are below its total (runs.parquet); its all-to-all
share is calibrated.parquet's ``share_net_ep`` (the exposed dispatch and combine over the
calibrated step), its held-out error the ``calibrated`` predictor's with the run's source left
out (predictions.parquet, ``holdout == "source"``, MFU).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pipeline.catalog import load_catalog
from pipeline.config import CATALOG_DIR
from pipeline.report.data import finite_or_none

SCENARIOS = ("baseline", "moe")


def moe_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The MoE runs: active parameters below the total."""
    if runs.empty or "active_params" not in runs:
        return runs.iloc[0:0]
    active, params = runs["active_params"].astype(float), runs["params"].astype(float)
    return runs[(active < params) & (runs.get("status", "ok").fillna("ok") == "ok")]


def _held_out(pred: pd.DataFrame, ids: pd.Series) -> pd.DataFrame:
    if pred.empty:
        return pred
    keep = ((pred["holdout"] == "source") & (pred["predictor"] == "calibrated")
            & (pred["metric"] == "mfu") & pred["run_id"].isin(set(ids)))
    return pred[keep]


def _score(frame: pd.DataFrame) -> dict[str, Any]:
    ape = frame["ape"].astype(float)
    ape = ape[np.isfinite(ape)]
    covered = frame["covered"].dropna().astype(bool)
    return {"n": int(ape.size), "median_ape": finite_or_none(ape.median()) if ape.size else None,
            "coverage": finite_or_none(covered.mean()) if covered.size else None}


def _share_rows(mine: pd.DataFrame, calibrated: pd.DataFrame) -> list[dict[str, Any]]:
    """One row per MoE run with its all-to-all share and whether its EP group stays inside one
    scale-up domain (ep <= the catalog's scaleup_domain_size), sorted by model, chip, N."""
    if calibrated.empty or "share_net_ep" not in calibrated:
        return []
    share = calibrated.set_index("run_id")["share_net_ep"]
    domain = pd.to_numeric(load_catalog(CATALOG_DIR).hardware["scaleup_domain_size"],
                           errors="coerce")
    rows = []
    for r in mine.itertuples(index=False):
        ep = finite_or_none(r.ep)
        rows.append({"source": r.source, "model": r.model_id or r.model,
                     "accelerator": r.accelerator, "n": int(r.n_accelerators),
                     "ep": ep, "pp": finite_or_none(r.pp),
                     "inside": bool(ep and ep <= domain.get(r.accelerator, 8.0)),
                     "precision": r.precision, "share": finite_or_none(share.get(r.run_id))})
    return sorted(rows, key=lambda x: (x["model"], x["accelerator"], x["n"], x["ep"] or 0))


def _frontier(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """Knee and wall with their CIs of the dense (baseline) and the MoE scenario: the theory's
    ideal figures and the calibrated ones (calibrate metrics ``frontier``)."""
    node = metrics.get("calibrate", {}).get("frontier") or {}
    out = []
    for name in SCENARIOS:
        f = node.get(name)
        if not f:
            continue
        knee_ci = f.get("knee_flop_calibrated_ci") or [None, None]
        wall_ci = f.get("wall_flop_calibrated_ci") or [None, None]
        out.append({"scenario": name, "knee_ideal": finite_or_none(f.get("knee_flop")),
                    "wall_ideal": finite_or_none(f.get("wall_flop")),
                    "knee": finite_or_none(f.get("knee_flop_calibrated")),
                    "knee_low": finite_or_none(knee_ci[0]),
                    "knee_high": finite_or_none(knee_ci[1]),
                    "wall": finite_or_none(f.get("wall_flop_calibrated")),
                    "wall_low": finite_or_none(wall_ci[0]),
                    "wall_high": finite_or_none(wall_ci[1]),
                    "wall_beyond_grid": bool(f.get("wall_beyond_grid_calibrated"))})
    return out


def share_by(shares: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """The all-to-all share's median and run count per value of ``key`` (``ep`` or ``n``), in
    ascending order: the finding's share against EP and against N."""
    groups: dict[float, list[float]] = {}
    for r in shares:
        if r["share"] is not None and r[key]:
            groups.setdefault(float(r[key]), []).append(float(r["share"]))
    return [{key: int(k), "n_runs": len(v), "share": float(np.median(v))}
            for k, v in sorted(groups.items())]


def moe_section(data: Any) -> dict[str, Any]:
    """Template context (``available`` False without MoE runs)."""
    mine = moe_runs(data.runs)
    if mine.empty:
        return {"available": False}
    held = _held_out(data.predictions, mine["run_id"])
    by_source = [{"source": s, **_score(g)} for s, g in held.groupby("source", sort=True)]
    shares = _share_rows(mine, data.calibrated)
    values = np.array([r["share"] for r in shares if r["share"] is not None], float)
    inside = [r["share"] for r in shares if r["share"] is not None and r["ep"] and r["inside"]]
    across = [r["share"] for r in shares
              if r["share"] is not None and r["ep"] and not r["inside"]]
    return {"available": True, "n_runs": int(len(mine)),
            "n_sources": int(mine["source"].nunique()),
            "with_ep": int(pd.to_numeric(mine["ep"], errors="coerce").ge(1).sum()),
            "overall": _score(held), "by_source": by_source, "shares": shares,
            "share_median": finite_or_none(np.median(values)) if values.size else None,
            "share_inside": finite_or_none(np.median(inside)) if inside else None,
            "share_across": finite_or_none(np.median(across)) if across else None,
            "share_by_ep": share_by(shares, "ep"), "share_by_n": share_by(shares, "n"),
            "frontier": _frontier(data.metrics)}
