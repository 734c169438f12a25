"""The calibration itself: which runs are fitted, the two groups' fits (production families;
the Playbook), the candidate forms, and the ``StepModel`` and ``calibration.parquet`` they give.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import norm

from pipeline.calibrate import fitting as ft
from pipeline.calibrate.critical_path import PARAMETERS, Theta, step_components
from pipeline.calibrate.families import SWEEP_FAMILIES
from pipeline.calibrate.hardware import load_gemm, load_network, load_sm_counts
from pipeline.calibrate.topology import load_topology
from pipeline.calibrate.step import Rows, StepModel, rows_of
from pipeline.processes import map_in_order


@dataclass
class Data:
    """Every run of runs.parquet as step-function rows, with the measured log step time."""

    runs: pd.DataFrame
    rows: Rows
    log_t: np.ndarray           # measured log step time (NaN without a measured MFU)
    measured_mfu: np.ndarray
    has_layout: np.ndarray
    fit: np.ndarray             # the fit set
    playbook: np.ndarray        # the layout sweeps' rows (``SWEEP_FAMILIES``), fitted apart
    flop_per_rank: np.ndarray   # model FLOP per rank per step
    log_ideal: np.ndarray       # log of the ideal step time (the ceiling)
    accelerator_family: np.ndarray

    def subset(self, mask: np.ndarray) -> Rows:
        return ft._subset(self.rows, mask)


def bare_model(catalog, catalog_dir: Path, latency: dict, attention_flops: bool,
               aspect_ratio: float) -> StepModel:
    """A StepModel without fitted values (the hardware side only)."""
    return StepModel(theta={}, population=np.array([1.0, 1.0, 1.0, 0.0, 0.0, 1.0]), source_effect={},
                     interval_q={}, catalog=catalog, gemm=load_gemm(catalog_dir),
                     network=load_network(catalog_dir, catalog.hardware),
                     kernel_latency_s=float(latency["kernel_latency_s"]),
                     scaleup_latency_s=float(latency["scaleup_latency_s"]),
                     attention_flops=attention_flops, aspect_ratio=aspect_ratio,
                     sm_count=load_sm_counts(catalog_dir),
                     topology=load_topology(catalog_dir))


#: Sources whose MoE rows all state a deduplicating dispatcher, and which: NeMo Automodel's MoE
#: benchmark table prints kernels 'TE + DeepEP' on every MoE row (its configs
#: examples/benchmark/configs/*_te_deepep.yaml). ``moe_dispatcher`` where a row leaves it empty
#: (pipeline/calibrate/moe.py ``dispatch_shares``).
DEDUP_DISPATCH_SOURCES = {"nemo_automodel2025": "deepep"}


def with_stated_dispatcher(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with ``moe_dispatcher`` filled for the MoE rows of ``DEDUP_DISPATCH_SOURCES``
    (a stated value is kept)."""
    stated = (runs["moe_dispatcher"] if "moe_dispatcher" in runs
              else pd.Series(None, index=runs.index, dtype=object))
    source = runs["source"].astype(object) if "source" in runs else pd.Series(
        None, index=runs.index, dtype=object)
    moe = (pd.to_numeric(runs.get("active_params"), errors="coerce")
           < pd.to_numeric(runs.get("params"), errors="coerce")) if "params" in runs else False
    filled = source.map(DEDUP_DISPATCH_SOURCES).where(moe)
    return runs.assign(moe_dispatcher=stated.astype(object).where(stated.notna(), filled))


def load_data(runs: pd.DataFrame, model: StepModel) -> Data:
    """Fit set: runs that state a layout (tp or pp), have a measured MFU (HFU where the source
    gives only that, as bounds.parquet) and that the catalog can cost. ``mfu`` counts the
    FLOP of ``step_components`` (the ingest recounts a source's own count from tokens/s:
    pipeline/ingest/core/flop_count.py), so the measured step time is the one printed."""
    runs = with_stated_dispatcher(runs.reset_index(drop=True))
    rows = rows_of(runs, model)
    mfu = pd.to_numeric(runs["mfu"], errors="coerce").to_numpy(float, na_value=np.nan)
    hfu = pd.to_numeric(runs["hfu"], errors="coerce").to_numpy(float, na_value=np.nan)
    measured = np.where(mfu > 0, mfu, hfu)
    tp = pd.to_numeric(runs["tp"], errors="coerce").to_numpy(float, na_value=np.nan)
    pp = pd.to_numeric(runs["pp"], errors="coerce").to_numpy(float, na_value=np.nan)
    has_layout = (tp >= 1) | (pp >= 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ideal_mach = replace(rows.machine, ideal=True)
        ideal = step_components(rows.config, ideal_mach, Theta.ideal(len(runs)))
        flop = ideal["model_flop_per_rank"]
        log_t = np.log(flop / (rows.peak_flops_per_s * measured))
        log_ideal = np.log(ideal["step_time_s"])
    fit = has_layout & rows.ok & np.isfinite(log_t) & (runs["status"].to_numpy() == "ok")
    family = (runs["accelerator_family"].astype(object).to_numpy() if "accelerator_family" in runs
              else runs["accelerator"].astype(object).to_numpy())
    return Data(runs=runs, rows=rows, log_t=log_t, measured_mfu=measured,
                has_layout=has_layout & rows.ok, fit=fit,
                playbook=np.isin(rows.family, SWEEP_FAMILIES),
                flop_per_rank=flop, log_ideal=log_ideal, accelerator_family=family)


@dataclass
class Fitted:
    production: ft.GroupFit
    playbook: ft.GroupFit | None     # the layout sweeps' group (one family per sweep)
    form: str
    forms: pd.DataFrame

    def theta_of(self, family: str) -> np.ndarray:
        """One family's natural parameters: its group's estimate, else the population's."""
        group = self.playbook if family in SWEEP_FAMILIES and self.playbook is not None \
            else self.production
        return group.theta(family) if family in group.z_family else self.production.population

    def theta_rows(self, family: np.ndarray) -> np.ndarray:
        """Per row, its family's parameters (worked out once per family)."""
        codes, names = pd.factorize(pd.Series(family, dtype=object), use_na_sentinel=False)
        table = np.array([self.theta_of(f) for f in names], dtype=float)
        return table.reshape(-1, len(PARAMETERS))[codes]

    def source_effect(self, source: np.ndarray, family: np.ndarray | None = None
                      ) -> np.ndarray:
        """Each row's production source effect; 0 on a sweep's rows (``family``), which are
        fitted apart without one."""
        u = dict(self.production.u)
        out = np.array([u.get(s, 0.0) for s in source], dtype=float)
        return out if family is None else np.where(np.isin(family, SWEEP_FAMILIES), 0.0, out)


def fit_groups(data: Data, mask: np.ndarray, free: tuple[str, ...], *, em_rounds: int,
               balance: float, start: Fitted | None = None, fixed_sigma: bool = False
               ) -> tuple[ft.GroupFit, ft.GroupFit | None]:
    """Production and Playbook fits on the runs of ``mask``."""
    prod = mask & ~data.playbook
    pb = mask & data.playbook
    kw = dict(em_rounds=em_rounds, free=free)
    p_ref = start.production if start is not None else None
    b_ref = start.playbook if start is not None else None
    production = ft.fit_group(data.subset(prod), data.log_t[prod], playbook=False,
                              balance=balance, start=p_ref,
                              fixed_sigma=p_ref if fixed_sigma else None, **kw)
    playbook = (ft.fit_group(data.subset(pb), data.log_t[pb], playbook=True, start=b_ref,
                             fixed_sigma=b_ref if fixed_sigma else None, **kw)
                if pb.any() else None)
    return production, playbook


#: fitted runs from which calibrate's refits (the forms, the holdouts) run over
#: ``calibrate.workers`` processes: below it a refit costs less than a worker's start
MIN_PARALLEL_RUNS = 2000


def parallel_workers(data: Data, workers: int) -> int:
    """``workers`` for refits on ``data``, or 1 below ``MIN_PARALLEL_RUNS`` fitted runs."""
    return workers if int(data.fit.sum()) >= MIN_PARALLEL_RUNS else 1


def _form_fit(data: Data, prod: np.ndarray, balance: float, task: tuple[int, list[str]]
              ) -> ft.GroupFit:
    rounds, params = task
    return ft.fit_group(data.subset(prod), data.log_t[prod], playbook=False,
                        em_rounds=rounds, free=tuple(params), balance=balance)


def fit_forms(data: Data, forms: dict[str, list[str]], criterion: str, *, em_rounds: int,
              balance: float, workers: int = 1) -> Fitted:
    """Every form on the production runs (the Playbook is fitted with the chosen one); the one
    with the lowest ``criterion`` is kept (``first``: the first form, the others fitted for
    comparison only)."""
    prod = data.fit & ~data.playbook
    n = int(prod.sum())
    table, fits = [], {}
    first = next(iter(forms))
    # a comparison form (criterion 'first') needs its likelihood, not converged variances
    tasks = [(em_rounds if criterion != "first" or name == first else min(em_rounds, 2), params)
             for name, params in forms.items()]
    groups = map_in_order(_form_fit, tasks, parallel_workers(data, workers),
                          shared=(data, prod, balance))
    for (name, params), g in zip(forms.items(), groups):
        fits[name] = g
        th = np.array([g.theta(f) for f in data.rows.family[prod]])
        u = np.array([g.u.get(s, 0.0) for s in data.rows.source[prod]])
        ape = np.abs(np.exp(data.log_t[prod] - ft.log_step_time(data.subset(prod), th) - u)
                     - 1.0)
        table.append(dict(form=name, terms=",".join(params),
                          dropped=",".join(p for p in PARAMETERS if p not in params),
                          n_params=int(g.n_params), loglik=g.loglik, aicc=g.aicc(n), bic=g.bic(n),
                          median_ape=float(np.median(ape))))
    frame = pd.DataFrame(table)
    best = (next(iter(forms)) if criterion == "first"
            else str(frame.sort_values([criterion, "form"]).iloc[0]["form"]))
    production = fits[best]
    pb = data.fit & data.playbook
    playbook = (ft.fit_group(data.subset(pb), data.log_t[pb], playbook=True,
                             em_rounds=em_rounds, free=tuple(forms[best])) if pb.any() else None)
    return Fitted(production=production, playbook=playbook, form=best, forms=frame)


def step_model(fitted: Fitted, base: StepModel, interval_q: dict[str, float]) -> StepModel:
    theta = {f: fitted.production.theta(f) for f in fitted.production.families}
    if fitted.playbook is not None:
        theta.update({f: fitted.playbook.theta(f) for f in fitted.playbook.families})
    sd = dict(fitted.production.sigma)
    if fitted.playbook is not None:
        sd.update(fitted.playbook.sigma)
    return StepModel(theta=theta, population=fitted.production.population,
                     source_effect=dict(fitted.production.u), interval_q=dict(interval_q),
                     catalog=base.catalog, gemm=base.gemm, network=base.network,
                     kernel_latency_s=base.kernel_latency_s,
                     scaleup_latency_s=base.scaleup_latency_s,
                     attention_flops=base.attention_flops, residual_sd=sd,
                     aspect_ratio=base.aspect_ratio, sm_count=base.sm_count,
                     topology=base.topology)


def _natural_ci(z: np.ndarray, cov: np.ndarray, level: float, held: set[int]
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """stderr (delta method) and the CI of the natural parameters (transformed z CI)."""
    se_z = np.sqrt(np.maximum(np.diag(cov), 0.0))
    zq = float(norm.ppf(0.5 + level / 2))
    se = se_z * ft.natural_derivative(z)
    lo, hi = ft.to_natural(z - zq * se_z), ft.to_natural(z + zq * se_z)
    for j in held:
        se[j], lo[j], hi[j] = 0.0, np.nan, np.nan
    return se, lo, hi


def calibration_table(fitted: Fitted, model: StepModel, level: float,
                      constants: dict[str, float]) -> pd.DataFrame:
    """calibration.parquet: family and population parameters (natural units) with CIs, source
    effects, residual and between-source sds, conformal half-widths and the constants the step
    function needs; :func:`pipeline.calibrate.step.model_from_table` reads it back."""
    rows = []
    groups = [("production", fitted.production)]
    if fitted.playbook is not None:
        groups.append(("sweeps", fitted.playbook))
    for gname, g in groups:
        held = {j for j, p in enumerate(PARAMETERS) if p not in g.free}
        names = ["population"] + g.families if gname == "production" else g.families
        for f in names:
            z = g.z_pop if f == "population" else g.z_family[f]
            est = g.population if f == "population" else g.theta(f)
            se, lo, hi = _natural_ci(z, g.cov_z.get(f, g.cov_z["population"]), level, held)
            label = "production" if f == "population" else f
            n = int(sum(g.n_runs.values())) if f == "population" else g.n_runs.get(f, 0)
            for j, p in enumerate(PARAMETERS):
                rows.append(dict(parameter=f"{label}.{p}",
                                 group="efficiency_fixed" if j in held else "efficiency",
                                 estimate=float(est[j]), stderr=float(se[j]),
                                 ci_low=float(lo[j]), ci_high=float(hi[j]), n_runs=n))
        for s in g.sources:
            if gname == "production":
                rows.append(dict(parameter=s, group="source_effect", estimate=g.u[s],
                                 stderr=np.nan, ci_low=np.nan, ci_high=np.nan,
                                 n_runs=g.n_runs_source[s]))
            rows.append(dict(parameter=s, group="residual_sd", estimate=g.sigma[s],
                             stderr=np.nan, ci_low=np.nan, ci_high=np.nan,
                             n_runs=g.n_runs_source[s]))
        if gname == "production":
            rows.append(dict(parameter="production", group="between_source_sd",
                             estimate=g.sigma_u, stderr=np.nan, ci_low=np.nan, ci_high=np.nan,
                             n_runs=len(g.sources)))
    for fam_name, q in sorted(model.interval_q.items()):
        rows.append(dict(parameter=fam_name, group="interval", estimate=float(q), stderr=np.nan,
                         ci_low=np.nan, ci_high=np.nan, n_runs=0))
    for name, value in sorted(constants.items()):
        rows.append(dict(parameter=name, group="constant", estimate=float(value), stderr=np.nan,
                         ci_low=np.nan, ci_high=np.nan, n_runs=0))
    out = pd.DataFrame(rows)
    out.insert(2, "form", fitted.form)
    out["n_runs"] = out["n_runs"].astype("int64")
    return out
