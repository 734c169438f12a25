"""Layout ranking: within each (model, N) group of a sweep, does the model order the layouts
as they measured? Spearman correlation between predicted and measured MFU, and the regret of
the model's pick (best measured MFU / measured MFU of the predicted best - 1), beside two
baselines: the ideal ceiling's ranking and the rule "fewest pipeline stages, then smallest TP".
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

MIN_LAYOUTS = 5
RANKERS = ("calibrated", "ceiling", "fewest_pp_then_tp")


def _regret(measured: np.ndarray, score: np.ndarray) -> float:
    pick = int(np.argmax(score))
    return float(np.max(measured) / measured[pick] - 1.0)


def ranked_groups(calibrated: pd.DataFrame, runs: pd.DataFrame, source: str,
                  min_layouts: int = MIN_LAYOUTS):
    """The (model, N) groups of ``source`` that are ranked: ((model, N), its finished runs with
    a measured and a predicted MFU), each with >= ``min_layouts`` of them."""
    cols = ["run_id", "model", "tp", "pp", "status"]
    c = calibrated[calibrated["source"] == source].merge(runs[cols], on="run_id", how="left")
    c = c[(c["status"] == "ok") & (c["measured_mfu"] > 0) & c["predicted_mfu"].notna()]
    return [(key, g) for key, g in c.groupby(["model", "n_accelerators"], sort=True)
            if len(g) >= min_layouts]


def ranking_table(calibrated: pd.DataFrame, runs: pd.DataFrame, source: str,
                  min_layouts: int = MIN_LAYOUTS) -> pd.DataFrame:
    """One row per (model, N) group with >= ``min_layouts`` measured layouts of ``source``
    (:func:`ranked_groups`): spearman_<ranker> and regret_<ranker> for every ranker."""
    rows = []
    for (model, n), g in ranked_groups(calibrated, runs, source, min_layouts):
        measured = g["measured_mfu"].to_numpy(float)
        rule = -(g["pp"].astype(float).to_numpy() * 1e6 + g["tp"].astype(float).to_numpy())
        scores = {"calibrated": g["predicted_mfu"].to_numpy(float),
                  "ceiling": g["ceiling_mfu"].to_numpy(float), "fewest_pp_then_tp": rule}
        row = dict(model=str(model), n_accelerators=float(n), n_layouts=int(len(g)))
        for name, score in scores.items():
            rho = spearmanr(score, measured).statistic if np.ptp(score) > 0 else np.nan
            row[f"spearman_{name}"] = float(rho)
            row[f"regret_{name}"] = _regret(measured, score)
        rows.append(row)
    return pd.DataFrame(rows)


def ranking_summary(table: pd.DataFrame) -> dict:
    """Medians per ranker (the calibrated model and the two baselines it is compared with)."""
    if table.empty:
        return {"groups": 0}
    out: dict = {"groups": int(len(table)), "min_layouts": MIN_LAYOUTS}
    for name in RANKERS:
        out[name] = dict(median_spearman=float(table[f"spearman_{name}"].median()),
                         median_regret=float(table[f"regret_{name}"].median()),
                         mean_regret=float(table[f"regret_{name}"].mean()))
    out["table"] = table.to_dict(orient="records")
    return out
