"""The memory model on the measured runs: the fitted allocator overhead and its scores.

``predicted = states + transient + activation_factor activations + fixed_bytes``
(pipeline.theory.memory) is fitted by bounded least squares on log(predicted / measured peak)
over the runs that report their peak memory (``runs.parquet`` ``peak_memory_bytes``: the
Ultra-Scale Playbook sweep and torchtitan's tables). The activation factor is per framework
family (pipeline/frameworks.py): what a framework keeps per counted activation byte depends on
its kernels. Megatron-family runs keep Korthikanti et al.'s count (factor 1, cited, not
fitted: ``theory.memory.fixed_activation_factors``); a family with measured peaks (nanotron's
Playbook sweep, torchtitan for FSDP) gets its own fitted factor; ``fixed_bytes`` is one for
all. Each parameter is bounded to what is physically plausible (``activation_factor`` in
[1, ``theory.memory.max_activation_factor``], ``fixed_bytes`` in [0, ``max_fixed_bytes``]).
The 95% interval is from the Gauss-Newton covariance of the fit (robust soft-L1 loss). A
fractional overhead on the whole peak instead, (1 + f) raw + c, was tried first and scored
worse (docs/theory.md §11). ``fits_memory`` compares the predicted peak plus the runtime's
reserve with the capacity the driver reports (catalog ``hbm_usable_bytes``).

Scores (theory metrics ``_memory``): the peak memory's median and p90 APE, and the balanced
accuracy of ``fits_memory`` against the Playbook's completed / out-of-memory outcomes, each
held out by model (the overhead fitted without the model's own runs), overall and per model
size, beside the naive rule of weights, gradients and optimizer states only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from pipeline.folds import group_folds
from pipeline.config import settings
from pipeline.frameworks import DEFAULT_FAMILY, PLAYBOOK, family_of
from pipeline.processes import map_in_order
from pipeline.theory.memory import (MemoryConstants, Overhead, fits_in, naive_state_bytes,
                                    peak_memory)
from pipeline.theory.memory_inputs import memory_inputs
from pipeline.theory.memory_scores import (buildable_scores, completed_not_fitting,
                                            residuals_by_axis)

GB = 1e9
# Sources whose sweep records out-of-memory outcomes beside completed runs.
OUTCOME_SOURCES = ("ultrascale_playbook2025",)
MISSES_SHOWN = 12
ROBUST_SCALE = 0.25


#: what a family's factor is when neither cited nor fitted: Korthikanti et al.'s count (the
#: fused-kernel minimum, the factor's lower bound)
COUNTED_FACTOR = 1.0
POOLED = "pooled"


@dataclass(frozen=True)
class FamilyFactor:
    """One framework family's activation factor, how it was set (``fitted``, ``fixed``: a
    cited value, ``counted``: too few measured runs, Korthikanti's count) and on how many
    measured runs."""

    activation_factor: float
    ci: tuple[float, float]
    basis: str
    n_runs: int


@dataclass(frozen=True)
class OverheadFit:
    overhead: Overhead
    activation_factor_ci: tuple[float, float]
    fixed_bytes_ci: tuple[float, float]
    n_runs: int
    residual_sd: float
    by_family: Mapping[str, FamilyFactor] = field(default_factory=dict)

    def factors(self, family: np.ndarray) -> np.ndarray:
        """The activation factor of each row's family (unknown families: the counted 1)."""
        lookup = {f: ff.activation_factor for f, ff in self.by_family.items()}
        return np.array([lookup.get(f, COUNTED_FACTOR) for f in family], dtype=float)

    def apply(self, parts, family: np.ndarray) -> np.ndarray:
        """Predicted peak bytes of each row of ``parts`` (a MemoryBreakdown) at its family's
        factor."""
        return (parts.states + parts.transient + self.factors(family) * parts.activations
                + self.overhead.fixed_bytes)


def memory_constants(params: Mapping[str, Any]) -> MemoryConstants:
    """``theory.memory`` as MemoryConstants (the fit bounds are read separately)."""
    cfg = settings(params, "theory").memory
    values = {k: getattr(cfg, k) for k in MemoryConstants.__dataclass_fields__}
    # hashable, ordered forms of the per-family settings
    values["loss_bytes_per_logit"] = tuple(sorted(cfg.loss_bytes_per_logit.items()))
    values["op_selective_families"] = tuple(sorted(cfg.op_selective_families))
    values["pipeline_unsharded_grads_sources"] = tuple(
        sorted(cfg.pipeline_unsharded_grads_sources))
    values["bf16_state_sources"] = tuple(sorted(cfg.bf16_state_sources))
    values["bf16_grad_moe_sources"] = tuple(sorted(cfg.bf16_grad_moe_sources))
    return MemoryConstants(**values)


def fit_overhead(fixed: np.ndarray, activations: np.ndarray, measured: np.ndarray,
                 max_factor: float, max_fixed_bytes: float, interval: float = 0.95,
                 family: np.ndarray | None = None,
                 fixed_factors: Mapping[str, float] | None = None, min_family_runs: int = 3,
                 default_family: str = DEFAULT_FAMILY,
                 fitted_families: Sequence[str] | None = None) -> OverheadFit:
    """Bounded least squares of log(fixed + k_family activations + c) - log(measured), one
    factor k per framework family and one c; ``fixed`` is the states and transient part the
    factor does not touch.

    A family in ``fixed_factors`` keeps its cited factor; one in ``fitted_families`` (None:
    every family) with at least ``min_family_runs`` measured runs gets its own fitted factor
    (bounded to [1, ``max_factor``]); any other keeps Korthikanti's count (1) and its runs do
    not enter the fit (their measured peaks do not identify the factor). The measured runs of
    fixed and fitted families inform c. Without ``family`` all runs are one pooled family.
    ``overhead`` is ``default_family``'s.
    """
    # scipy here, not at the top: ``plan`` imports this module for the constants only
    from scipy.optimize import least_squares
    from scipy.stats import norm
    fixed_factors = dict(fixed_factors or {})
    if family is None:
        family, default_family = np.full(np.shape(fixed), POOLED, dtype=object), POOLED
    fam_all = np.asarray(family, dtype=object)
    names = sorted(set(fam_all.tolist()) | set(fixed_factors) | {default_family})
    fittable = set(names if fitted_families is None else fitted_families) - set(fixed_factors)
    ok = fit_rows(fixed, activations, measured)
    counts = {f: int((ok & (fam_all == f)).sum()) for f in names}
    used = ok & np.isin(fam_all, sorted(fittable | set(fixed_factors)))
    fixed, activations, measured, fam = (fixed[used], activations[used], measured[used],
                                         fam_all[used])
    free = [f for f in names if f in fittable and counts[f] >= min_family_runs]
    if fixed.size < 3 or (not free and fixed.size < 2):
        factors = {f: FamilyFactor(fixed_factors.get(f, COUNTED_FACTOR), (np.nan, np.nan),
                                   "fixed" if f in fixed_factors else "counted", counts[f])
                   for f in names}
        return OverheadFit(Overhead(factors[default_family].activation_factor, 0.0),
                           (np.nan, np.nan), (np.nan, np.nan), int(fixed.size), np.nan, factors)
    scale = GB  # fit c in GB so all parameters are O(1)
    index = np.array([free.index(f) if f in free else -1 for f in fam])
    held = np.array([fixed_factors.get(f, COUNTED_FACTOR) for f in fam], dtype=float)

    def row_factor(p: np.ndarray) -> np.ndarray:
        return np.where(index >= 0, p[np.maximum(index, 0)], held) if free else held

    def resid(p: np.ndarray) -> np.ndarray:
        return np.log(fixed + row_factor(p) * activations + p[-1] * scale) - np.log(measured)

    lo = np.array([1.0] * len(free) + [0.0])
    hi = np.array([max_factor] * len(free) + [max_fixed_bytes / scale])
    # robust (soft L1 beyond a factor e^0.25): a few runs whose schedule the data misstate (a
    # recompute not carried into runs.parquet) must not drag the fit
    sol = least_squares(resid, x0=(lo + hi) / 2, bounds=(lo, hi), method="trf",
                        loss="soft_l1", f_scale=ROBUST_SCALE)
    r = sol.fun
    s2 = float(r @ r) / max(r.size - lo.size, 1)
    se = np.sqrt(np.maximum(np.diag(s2 * np.linalg.pinv(sol.jac.T @ sol.jac)), 0.0))
    z = norm.ppf(0.5 + interval / 2)
    low, up = np.clip(sol.x - z * se, lo, hi), np.clip(sol.x + z * se, lo, hi)
    factors = {}
    for f in names:
        if f in free:
            i = free.index(f)
            factors[f] = FamilyFactor(float(sol.x[i]), (float(low[i]), float(up[i])), "fitted",
                                      counts[f])
        else:
            k = fixed_factors.get(f, COUNTED_FACTOR)
            factors[f] = FamilyFactor(float(k), (float(k), float(k)),
                                      "fixed" if f in fixed_factors else "counted", counts[f])
    d = factors[default_family]
    return OverheadFit(Overhead(d.activation_factor, float(sol.x[-1] * scale)), d.ci,
                       (float(low[-1] * scale), float(up[-1] * scale)), int(fixed.size),
                       float(np.sqrt(s2)), factors)


def fit_rows(fixed: np.ndarray, activations: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """The rows ``fit_overhead`` can use: a positive predicted and measured peak. Its fit
    depends on these rows alone (a family without one is never fitted, and a family it has
    not seen gets the counted factor it would get anyway)."""
    return (fixed + activations > 0) & (measured > 0)


def _fit(fixed, activations, measured, family, cfg) -> OverheadFit:
    """:func:`fit_overhead` with the ``theory.memory`` settings."""
    return fit_overhead(fixed, activations, measured, cfg.max_activation_factor,
                        cfg.max_fixed_bytes, family=family,
                        fixed_factors=cfg.fixed_activation_factors,
                        min_family_runs=cfg.min_family_runs,
                        fitted_families=cfg.fitted_activation_families)


def _unstated_recompute(predicted: np.ndarray, frame: pd.DataFrame, inputs, const, fit,
                        family: np.ndarray, capacity: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Where a run states no recompute policy (``recompute`` null: most vendor tables), the peak
    under the least recompute it fits with: none, then selective, then full (a completed run
    that states no policy ran one that fits; Megatron-Bridge's recipes set recompute and
    activation offloading per chip, e.g. ``cpu_offloading_num_layers`` in
    scripts/performance/configs/llama/llama3_workload_base_configs.py at commit 00919dc,
    which its published tables do not print). A stated policy is never changed; where no
    policy fits, the full-recompute figure (the smallest) is given and the run does not fit.
    Returns (the peaks, the recompute code each row is sized with).
    """
    stated = (frame["recompute"].notna().to_numpy() if "recompute" in frame
              else np.zeros(len(frame), bool))
    out = np.asarray(predicted, dtype=float).copy()
    codes = np.asarray(inputs.recompute).copy()
    # the Playbook sweep's nanotron runs state their policy by convention (none), and their
    # completed / out-of-memory outcomes score fits_memory: the rule never touches them
    todo = (~stated & (family != PLAYBOOK) & np.isfinite(capacity)
            & ~np.asarray(fits_in(out, capacity, const), bool))
    for code in (1, 2):  # selective, then full
        if not todo.any():
            break
        lighter = replace(inputs, recompute=np.full(len(out), code, np.int64))
        alt = np.asarray(fit.apply(peak_memory(lighter, const), family), dtype=float)
        take = todo & (np.asarray(fits_in(alt, capacity, const), bool) | (code == 2))
        out[take] = alt[take]
        codes[take] = code
        todo &= ~take
    return out, codes


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
    capacity = usable_hbm_bytes(frame["accelerator"], catalog)
    # the room a predicted peak must fit in: the driver's capacity less the runtime's reserve
    room = capacity - const.runtime_reserve_bytes
    measured = _measured(frame)
    fixed = parts.states + parts.transient
    family = family_of(frame)
    fit = _fit(fixed, parts.activations, measured, family, cfg)
    predicted, codes = _unstated_recompute(fit.apply(parts, family), frame, inputs, const, fit,
                                           family, capacity)
    # the held-out scores size each run with the policy it is sized with here
    parts = peak_memory(replace(inputs, recompute=codes), const)
    raw, fixed = parts.raw, parts.states + parts.transient
    # a run that states no degree (MLPerf) has no layout to size: no memory figure
    stated = np.zeros(len(frame), bool)
    for k in ("tp", "pp", "dp"):
        if k in frame:
            stated |= pd.to_numeric(frame[k], errors="coerce").to_numpy(float) >= 1
    has = np.isfinite(raw) & (raw > 0) & stated
    out = pd.DataFrame({
        "run_id": bounds["run_id"].to_numpy(),
        "memory_bytes_per_accelerator": np.where(has, predicted, np.nan),
        "fits_memory": pd.array(np.where(has & np.isfinite(capacity),
                                         fits_in(predicted, capacity, const), pd.NA),
                                dtype="boolean"),
    })
    col = lambda name: (frame[name] if name in frame  # noqa: E731
                        else pd.Series(None, index=frame.index, dtype=object))
    scored = pd.DataFrame({
        "run_id": frame["run_id"], "source": col("source"), "model": col("model"),
        "params": col("params"), "status": col("status"), "family": family, "hbm": room,
        "capacity": capacity,
        "raw": raw,
        "naive": naive, "measured": measured, "tp": col("tp"), "pp": col("pp"),
        "dp": col("dp"), "zero_stage": col("zero_stage"), "micro_batch": col("micro_batch"),
        "recompute": col("recompute"), "activations": parts.activations, "fixed": fixed,
        "sized": has,
    })
    metrics = {"overhead": _fit_dict(fit, const), **score(scored, cfg, theory.workers)}
    return out, metrics


def usable_hbm_bytes(accelerators: pd.Series, catalog: Any) -> np.ndarray:
    """Per row: the capacity the driver reports (catalog ``hbm_usable_bytes``; the marketed
    ``hbm_bytes`` for a catalog that lacks the column)."""
    hw = catalog.hardware
    column = "hbm_usable_bytes" if "hbm_usable_bytes" in hw else "hbm_bytes"
    return accelerators.map(hw[column]).to_numpy(float)


def overhead_of(memory_metrics: Mapping[str, Any], family: str | None = None) -> Overhead:
    """The fitted overhead from the theory metrics' ``_memory`` node (none: no overhead): the
    default family's, or ``family``'s where the node has it."""
    node = (memory_metrics or {}).get("overhead") or {}
    factor, fixed = node.get("activation_factor"), node.get("fixed_bytes")
    if family is not None:
        factor = ((node.get("by_family") or {}).get(family) or {}).get("activation_factor",
                                                                      factor)
    if factor is None or fixed is None or not np.isfinite(factor) or not np.isfinite(fixed):
        return Overhead()
    return Overhead(float(factor), float(fixed))


def _measured(frame: pd.DataFrame) -> np.ndarray:
    if "peak_memory_bytes" not in frame:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame["peak_memory_bytes"], errors="coerce").to_numpy(float)


def _fit_dict(fit: OverheadFit, const: MemoryConstants) -> dict:
    """The fit as the metrics carry it: the top-level factor is the default family's (what the
    frontier and ``plan`` use), ``by_family`` every family's."""
    return {"family": DEFAULT_FAMILY, "activation_factor": fit.overhead.activation_factor,
            "activation_factor_ci": list(fit.activation_factor_ci),
            "fixed_bytes": fit.overhead.fixed_bytes, "fixed_bytes_ci": list(fit.fixed_bytes_ci),
            "n_runs": fit.n_runs, "residual_sd_log": fit.residual_sd,
            "runtime_reserve_bytes": float(const.runtime_reserve_bytes),
            "by_family": {f: {"activation_factor": ff.activation_factor,
                              "activation_factor_ci": list(ff.ci), "basis": ff.basis,
                              "n_runs": ff.n_runs}
                          for f, ff in sorted(fit.by_family.items())}}


def _held_out_fit(fixed: np.ndarray, activations: np.ndarray, measured: np.ndarray,
                  family: np.ndarray, model: np.ndarray, cfg,
                  held_out: list[int]) -> OverheadFit:
    """The overhead fitted on the rows whose ``model`` code is not in ``held_out``."""
    rest = ~np.isin(model, held_out)
    return _fit(fixed[rest], activations[rest], measured[rest], family[rest], cfg)


def held_out_predictions(groups: pd.Series, fixed: np.ndarray, activations: np.ndarray,
                         measured: np.ndarray, family: np.ndarray, cfg,
                         workers: int = 1) -> np.ndarray:
    """Each row's peak predicted by the overhead fitted without its group's rows (one group
    per model; past ``cfg.max_holdout_folds`` groups with fittable rows, without its fold's:
    ``pipeline.folds.group_folds``). A fit sees the other groups' fittable rows only
    (``fit_rows``: the same fit, without a pass over every run per group), and the groups with
    no fittable row share one fit, that of all fittable rows. The fits are independent: a map over ``workers``
    processes."""
    pred = np.full(len(groups), np.nan)
    code, _ = pd.factorize(groups)
    usable = np.flatnonzero(fit_rows(fixed, activations, measured))
    order = np.argsort(code, kind="stable")
    rows_of = np.split(order, np.flatnonzero(np.diff(code[order])) + 1) if len(order) else []
    measured_groups = sorted(set(code[usable].tolist()))
    shared = (fixed[usable], activations[usable], measured[usable], family[usable],
              code[usable], cfg)
    folds = group_folds(measured_groups, cfg.max_holdout_folds)
    fold_fits = map_in_order(_held_out_fit, folds, workers, shared=shared)
    fits = {g: fit for fold, fit in zip(folds, fold_fits) for g in fold}
    for g, mine in enumerate(rows_of):
        if g not in fits:  # no fittable row of its own: the fit of all fittable rows
            if -1 not in fits:
                fits[-1] = _held_out_fit(*shared, [-1])
            g = -1
        fit = fits[g]
        pred[mine] = fixed[mine] + fit.factors(family[mine]) * activations[mine] \
            + fit.overhead.fixed_bytes
    return pred


def score(scored: pd.DataFrame, cfg, workers: int = 1) -> dict:
    """Held-out-by-model APE and balanced accuracy, overall and per model size, with the naive
    rule beside; the misclassified configurations with the reason. The held-out fits run
    over ``workers`` processes."""
    groups = scored["source"].astype(str) + ":" + scored["model"].astype(str)
    fixed, act = scored["fixed"].to_numpy(float), scored["activations"].to_numpy(float)
    measured = scored["measured"].to_numpy(float)
    pred = held_out_predictions(groups, fixed, act, measured,
                                scored["family"].to_numpy(object), cfg, workers)
    scored = scored.assign(predicted=pred, group=groups)
    n_models = groups[fit_rows(fixed, act, measured)].nunique()
    out: dict[str, Any] = {"held_out": "by model (overhead fitted without the model's runs)"
                           if n_models <= cfg.max_holdout_folds else
                           f"by model, in {cfg.max_holdout_folds} folds of the {n_models} models "
                           "with a measured peak (overhead fitted without the fold's runs)"}
    peak = scored[np.isfinite(measured) & (measured > 0) & np.isfinite(pred)]
    out["peak_memory"] = {"overall": _ape(peak, "predicted"),
                          "naive_overall": _ape(peak, "naive"),
                          "per_source": {s: _ape(g, "predicted") | {"naive": _ape(g, "naive")}
                                         for s, g in peak.groupby("source")},
                          "per_model_size": _per_size(peak, _ape),
                          "by_configuration": residuals_by_axis(peak),
                          "near_capacity": _near_capacity(peak, cfg.near_capacity_fraction)}
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


def _near_capacity(peak: pd.DataFrame, fraction: float) -> dict:
    """The peaks that may be the allocator filling the chip rather than what the layout needs
    (measured at or above ``fraction`` of the capacity the driver reports), counted per
    source, and the APE without them beside the APE of all: the scores keep every peak, this
    says how much the censored-looking ones weigh."""
    near = peak["measured"].to_numpy(float) >= fraction * peak["capacity"].to_numpy(float)
    kept = peak[~near]
    return {"rule": f"measured >= {fraction:g} x the driver's capacity",
            "n": int(near.sum()),
            "per_source": {str(k): int(v) for k, v in
                           peak[near].groupby("source").size().items()},
            "overall_without": _ape(kept, "predicted"),
            "per_source_without": {s: _ape(g, "predicted") for s, g in kept.groupby("source")}}


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
