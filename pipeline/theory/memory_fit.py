"""The memory model on the measured runs: the fitted allocator overhead and its scores.

``predicted = states + transient + activation_factor activations + fixed_bytes``
(pipeline.theory.memory) is fitted by bounded least squares on log(predicted / measured peak)
over the runs that report their peak memory (``runs.parquet`` ``peak_memory_bytes``: the
Ultra-Scale Playbook sweep and torchtitan's tables). Both parameters are bounded to what is
physically plausible (``activation_factor`` in [1, ``theory.memory.max_activation_factor``],
``fixed_bytes`` in [0, ``max_fixed_bytes``]). The 95% interval is from the Gauss-Newton
covariance of the fit (robust soft-L1 loss). A fractional overhead on the whole peak instead,
(1 + f) raw + c, was tried first and scored worse (docs/theory.md §11).

Scores (theory metrics ``_memory``): the peak memory's median and p90 APE, and the balanced
accuracy of ``fits_memory`` against the Playbook's completed / out-of-memory outcomes, each
held out by model (the overhead fitted without the model's own runs), overall and per model
size, beside the naive rule of weights, gradients and optimizer states only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd

from pipeline.config import settings
from pipeline.theory.memory import MemoryConstants, Overhead, naive_state_bytes, peak_memory
from pipeline.theory.memory_inputs import memory_inputs
from pipeline.theory.memory_scores import (buildable_scores, completed_not_fitting,
                                            residuals_by_axis)

GB = 1e9
# Sources whose sweep records out-of-memory outcomes beside completed runs.
OUTCOME_SOURCES = ("ultrascale_playbook2025",)
MISSES_SHOWN = 12
ROBUST_SCALE = 0.25


@dataclass(frozen=True)
class OverheadFit:
    overhead: Overhead
    activation_factor_ci: tuple[float, float]
    fixed_bytes_ci: tuple[float, float]
    n_runs: int
    residual_sd: float


def memory_constants(params: Mapping[str, Any]) -> MemoryConstants:
    """``theory.memory`` as MemoryConstants (the fit bounds are read separately)."""
    cfg = settings(params, "theory").memory
    return MemoryConstants(**{k: getattr(cfg, k) for k in MemoryConstants.__dataclass_fields__})


def fit_overhead(fixed: np.ndarray, activations: np.ndarray, measured: np.ndarray,
                 max_factor: float, max_fixed_bytes: float, interval: float = 0.95
                 ) -> OverheadFit:
    """Bounded least squares of log(fixed + k activations + c) - log(measured); ``fixed`` is
    the states and transient part the factor does not touch."""
    # scipy here, not at the top: ``plan`` imports this module for the constants only
    from scipy.optimize import least_squares
    from scipy.stats import norm
    ok = (fixed + activations > 0) & (measured > 0)
    fixed, activations, measured = fixed[ok], activations[ok], measured[ok]
    if fixed.size < 3:
        return OverheadFit(Overhead(), (np.nan, np.nan), (np.nan, np.nan), int(fixed.size),
                           np.nan)
    scale = GB  # fit c in GB so both parameters are O(1)

    def resid(p: np.ndarray) -> np.ndarray:
        return np.log(fixed + p[0] * activations + p[1] * scale) - np.log(measured)

    lo, hi = np.array([1.0, 0.0]), np.array([max_factor, max_fixed_bytes / scale])
    # robust (soft L1 beyond a factor e^0.25): a few runs whose schedule the data misstate (a
    # recompute not carried into runs.parquet) must not drag the fit
    sol = least_squares(resid, x0=(lo + hi) / 2, bounds=(lo, hi), method="trf",
                        loss="soft_l1", f_scale=ROBUST_SCALE)
    r = sol.fun
    s2 = float(r @ r) / max(r.size - 2, 1)
    se = np.sqrt(np.maximum(np.diag(s2 * np.linalg.pinv(sol.jac.T @ sol.jac)), 0.0))
    z = norm.ppf(0.5 + interval / 2)
    low, up = np.clip(sol.x - z * se, lo, hi), np.clip(sol.x + z * se, lo, hi)
    return OverheadFit(Overhead(float(sol.x[0]), float(sol.x[1] * scale)),
                       (float(low[0]), float(up[0])), (float(low[1] * scale), float(up[1] * scale)),
                       int(fixed.size), float(np.sqrt(s2)))


def runs_memory(runs: pd.DataFrame, bounds: pd.DataFrame, catalog: Any,
                params: Mapping[str, Any]) -> tuple[pd.DataFrame, dict]:
    """Per run (bounds' order): ``memory_bytes_per_accelerator`` and ``fits_memory`` (null for
    runs that state no tp, pp or dp: no layout to size); and the ``_memory`` metrics (fit,
    scores, misses).

    ``bounds`` must carry the shape the ceilings used (``n_layers_used``, ``d_model_used``,
    ``seq_len_used``, ``micro_batch_used``): the memory model takes the same completed shape.
    """
    theory = settings(params, "theory")
    cfg = theory.memory
    frame = runs.set_index("run_id").reindex(bounds["run_id"]).reset_index()
    for col in ("n_layers", "d_model", "seq_len", "micro_batch"):
        frame[col] = bounds[f"{col}_used"].to_numpy(float)
    defaults = {"seq_len": theory.bounds.seq_len,
                "micro_batch": theory.bounds.micro_batch_sequences, "zero_stage": 1.0}
    inputs, const = memory_inputs(frame, catalog, memory_constants(params), defaults)
    parts = peak_memory(inputs, const)
    raw = parts.raw
    naive = naive_state_bytes(inputs, const)
    hbm = frame["accelerator"].map(catalog.hardware["hbm_bytes"]).to_numpy(float)
    measured = _measured(frame)
    fixed = parts.states + parts.transient
    fit = fit_overhead(fixed, parts.activations, measured, cfg.max_activation_factor,
                       cfg.max_fixed_bytes)
    predicted = fit.overhead.apply(parts)
    # a run that states no degree (MLPerf) has no layout to size: no memory figure
    stated = np.zeros(len(frame), bool)
    for k in ("tp", "pp", "dp"):
        if k in frame:
            stated |= pd.to_numeric(frame[k], errors="coerce").to_numpy(float) >= 1
    has = np.isfinite(raw) & (raw > 0) & stated
    out = pd.DataFrame({
        "run_id": bounds["run_id"].to_numpy(),
        "memory_bytes_per_accelerator": np.where(has, predicted, np.nan),
        "fits_memory": pd.array(np.where(has & np.isfinite(hbm), predicted <= hbm, pd.NA),
                                dtype="boolean"),
    })
    col = lambda name: (frame[name] if name in frame  # noqa: E731
                        else pd.Series(None, index=frame.index, dtype=object))
    scored = pd.DataFrame({
        "run_id": frame["run_id"], "source": col("source"), "model": col("model"),
        "params": col("params"), "status": col("status"), "hbm": hbm, "raw": raw,
        "naive": naive, "measured": measured, "tp": col("tp"), "pp": col("pp"),
        "dp": col("dp"), "zero_stage": col("zero_stage"), "micro_batch": col("micro_batch"),
        "recompute": col("recompute"), "activations": parts.activations, "fixed": fixed,
        "sized": has,
    })
    metrics = {"overhead": _fit_dict(fit), **score(scored, cfg)}
    return out, metrics


def overhead_of(memory_metrics: Mapping[str, Any]) -> Overhead:
    """The fitted overhead from the theory metrics' ``_memory`` node (none: no overhead)."""
    node = (memory_metrics or {}).get("overhead") or {}
    factor, fixed = node.get("activation_factor"), node.get("fixed_bytes")
    if factor is None or fixed is None or not np.isfinite(factor) or not np.isfinite(fixed):
        return Overhead()
    return Overhead(float(factor), float(fixed))


def _measured(frame: pd.DataFrame) -> np.ndarray:
    if "peak_memory_bytes" not in frame:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame["peak_memory_bytes"], errors="coerce").to_numpy(float)


def _fit_dict(fit: OverheadFit) -> dict:
    return {"activation_factor": fit.overhead.activation_factor,
            "activation_factor_ci": list(fit.activation_factor_ci),
            "fixed_bytes": fit.overhead.fixed_bytes, "fixed_bytes_ci": list(fit.fixed_bytes_ci),
            "n_runs": fit.n_runs, "residual_sd_log": fit.residual_sd}


def score(scored: pd.DataFrame, cfg) -> dict:
    """Held-out-by-model APE and balanced accuracy, overall and per model size, with the naive
    rule beside; the misclassified configurations with the reason."""
    groups = scored["source"].astype(str) + ":" + scored["model"].astype(str)
    pred = np.full(len(scored), np.nan)
    fixed, act = scored["fixed"].to_numpy(float), scored["activations"].to_numpy(float)
    measured = scored["measured"].to_numpy(float)
    for g in groups.unique():
        mine = (groups == g).to_numpy()
        fit = fit_overhead(fixed[~mine], act[~mine], measured[~mine], cfg.max_activation_factor,
                           cfg.max_fixed_bytes)
        o = fit.overhead
        pred[mine] = fixed[mine] + o.activation_factor * act[mine] + o.fixed_bytes
    scored = scored.assign(predicted=pred, group=groups)
    out: dict[str, Any] = {"held_out": "by model (overhead fitted without the model's runs)"}
    peak = scored[np.isfinite(measured) & (measured > 0) & np.isfinite(pred)]
    out["peak_memory"] = {"overall": _ape(peak, "predicted"),
                          "naive_overall": _ape(peak, "naive"),
                          "per_source": {s: _ape(g, "predicted") | {"naive": _ape(g, "naive")}
                                         for s, g in peak.groupby("source")},
                          "per_model_size": _per_size(peak, _ape),
                          "by_configuration": residuals_by_axis(peak)}
    oc = scored[scored["source"].isin(OUTCOME_SOURCES) & scored["status"].isin(["ok", "oom"])
                & np.isfinite(scored["predicted"]) & np.isfinite(scored["hbm"])]
    out["fits_memory"] = {"overall": _balanced(oc, "predicted"),
                          "naive_overall": _balanced(oc, "naive"),
                          "per_model_size": _per_size(oc, _balanced),
                          "buildable": buildable_scores(oc, _balanced, _per_size)}
    out["misses"] = _misses(oc)
    out["completed_predicted_not_to_fit"] = completed_not_fitting(
        scored[scored["sized"] & scored["status"].notna()])
    return out


def _size_label(params: float) -> str:
    return f"{params / 1e9:.0f}B" if params >= 1e9 else f"{params / 1e6:.0f}M"


def _per_size(frame: pd.DataFrame, fn) -> dict:
    out = {}
    for p, g in frame.groupby("params", sort=True):
        out[_size_label(float(p))] = fn(g, "predicted") | {"naive": fn(g, "naive")}
    return out


def _ape(frame: pd.DataFrame, col: str) -> dict:
    ape = np.abs(frame[col].to_numpy(float) / frame["measured"].to_numpy(float) - 1.0)
    if not ape.size:
        return {"n": 0, "median_ape": None, "p90_ape": None}
    return {"n": int(ape.size), "median_ape": float(np.median(ape)),
            "p90_ape": float(np.percentile(ape, 90))}


def _balanced(frame: pd.DataFrame, col: str) -> dict:
    fits = frame[col].to_numpy(float) <= frame["hbm"].to_numpy(float)
    ok = (frame["status"] == "ok").to_numpy()
    n_ok, n_oom = int(ok.sum()), int((~ok).sum())
    tpr = float((fits & ok).sum() / n_ok) if n_ok else np.nan
    tnr = float((~fits & ~ok).sum() / n_oom) if n_oom else np.nan
    vals = [v for v in (tpr, tnr) if np.isfinite(v)]
    return {"n_completed": n_ok, "n_oom": n_oom, "completed_predicted_fit": tpr,
            "oom_predicted_not_fit": tnr,
            "balanced_accuracy": float(np.mean(vals)) if vals else None}


def _misses(oc: pd.DataFrame) -> dict:
    """Misclassified configurations (held out), largest margin first, with the reason."""
    fits = oc["predicted"] <= oc["hbm"]
    wrong = oc[fits != (oc["status"] == "ok")].copy()
    wrong["margin"] = np.abs(wrong["predicted"] / wrong["hbm"] - 1.0)
    wrong = wrong.sort_values(["margin", "run_id"], ascending=[False, True], kind="mergesort")
    rows = []
    for r in wrong.head(MISSES_SHOWN).itertuples():
        act = float(r.activations) / max(float(r.raw), 1.0)
        if r.status == "oom":
            why = (f"crashed but predicted {r.predicted / GB:.1f} GB of {r.hbm / GB:.0f} GB "
                   f"(activations {act:.0%} of it): the sweep does not tell OOM from other "
                   "crashes, or memory the model does not count")
        else:
            why = (f"completed with {_gb(r.measured)} measured but predicted "
                   f"{r.predicted / GB:.1f} GB (activations {act:.0%}): the model overcounts "
                   "for this layout (stored activations or in-flight microbatches)")
        rows.append({"run_id": r.run_id, "model": r.model, "status": r.status,
                     "tp": _i(r.tp), "pp": _i(r.pp), "dp": _i(r.dp),
                     "zero_stage": _i(r.zero_stage), "micro_batch": _i(r.micro_batch),
                     "predicted_bytes": float(r.predicted),
                     "measured_bytes": float(r.measured) if np.isfinite(r.measured) else None,
                     "why": why})
    by_model = {str(k): int(v) for k, v in wrong.groupby("model").size().items()}
    return {"n": int(len(wrong)), "by_model": by_model, "largest": rows}


def _gb(x: float) -> str:
    return f"{x / GB:.1f} GB" if np.isfinite(x) else "no figure"


def _i(x) -> int | None:
    return int(x) if pd.notna(x) else None
