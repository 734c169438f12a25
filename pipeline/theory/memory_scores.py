"""Where the memory model is right and wrong, beyond the pooled scores of
:func:`pipeline.theory.memory_fit.score`: the crashes no memory model can predict (a pipeline
deeper than any that completed) and the held-out residuals by layout axis.

Both read the held-out frame ``score`` builds (columns ``model``, ``status``, ``pp``,
``predicted``, ``measured`` and the layout axes).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pandas as pd

#: layout axes the residuals are broken down by
AXES = ("tp", "pp", "zero_stage", "micro_batch", "recompute")
#: a rule stated once, for the metrics and the report
UNBUILDABLE_RULE = ("pipeline is deeper than the deepest at which any of the model's "
                    "configurations completed")


def unbuildable_depth(outcomes: pd.DataFrame) -> np.ndarray:
    """True for a configuration whose pipeline depth ``pp`` is deeper than the deepest at
    which any configuration of the same model completed (``status`` ``ok``).

    A deeper pipeline never needs more memory per GPU: each stage holds fewer layers' states,
    and under 1F1B the first stage keeps min(m, p) microbatches of L/p layers, about L layers'
    activations at any p >= m (Narayanan et al. 2021 §2.2). So when every configuration at a
    depth crashes, at any tp, dp, micro-batch and ZeRO stage, while shallower ones complete,
    the crash is not a memory failure (a stage left without a layer, for one). A model with no
    completed configuration has none marked.
    """
    pp = pd.to_numeric(outcomes["pp"], errors="coerce")
    done = pp.where(outcomes["status"] == "ok")
    deepest = done.groupby(outcomes["model"]).transform("max")
    return (pp > deepest).fillna(False).to_numpy(bool)


def residuals_by_axis(peak: pd.DataFrame, column: str = "predicted") -> dict[str, Any]:
    """Per source and layout axis value: runs, median log(predicted / measured) (the bias:
    > 0 over, < 0 under) and median APE, held out."""
    ratio = peak[column].to_numpy(float) / peak["measured"].to_numpy(float)
    frame = peak.assign(_log=np.log(ratio), _ape=np.abs(ratio - 1.0))
    out: dict[str, Any] = {}
    for source, rows in frame.groupby("source", sort=True):
        by_axis = {}
        for axis in AXES:
            if axis not in rows or rows[axis].isna().all():
                continue
            key = rows[axis].map(_label)
            cells = {value: {"n": int(len(g)), "median_log_ratio": float(g["_log"].median()),
                             "median_ape": float(g["_ape"].median())}
                     for value, g in rows.groupby(key, sort=False)}
            by_axis[axis] = dict(sorted(cells.items(), key=lambda kv: _order(kv[0])))
        out[str(source)] = by_axis
    return out


def buildable_scores(outcomes: pd.DataFrame, balanced: Callable[[pd.DataFrame, str], dict],
                     per_size: Callable[..., dict]) -> dict[str, Any]:
    """The balanced accuracy on the configurations :func:`unbuildable_depth` keeps, with the
    rule and how many it drops per model size (beside, never instead of, the pooled score)."""
    drop = unbuildable_depth(outcomes)
    kept = outcomes[~drop]
    dropped = outcomes[drop]
    return {"rule": UNBUILDABLE_RULE, "n_excluded": int(drop.sum()),
            "excluded_by_model": {str(k): int(v)
                                  for k, v in dropped.groupby("model").size().items()},
            "overall": balanced(kept, "predicted"), "naive_overall": balanced(kept, "naive"),
            "per_model_size": per_size(kept, balanced)}


def completed_not_fitting(scored: pd.DataFrame) -> dict[str, Any]:
    """Per source: runs that completed (any status but ``oom``) with a predicted peak, and how
    many of them the model says do not fit in their chip's HBM; each of those contradicts a
    measurement."""
    ok = scored["status"].astype(str).ne("oom") & np.isfinite(scored["predicted"]) \
        & np.isfinite(scored["hbm"])
    done = scored[ok]
    over = done["predicted"] > done["hbm"]
    return {str(source): {"n_completed": int(len(g)),
                          "predicted_not_to_fit": int(over[g.index].sum())}
            for source, g in done.groupby("source", sort=True)}


def _label(value: Any) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "not stated"
    if isinstance(value, (int, float, np.integer, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _order(label: str) -> tuple[int, float, str]:
    try:
        return (0, float(label), label)
    except ValueError:
        return (1, 0.0, label)
