"""The calibrated step time of any layout: one function for ``plan`` and the report.

    model = load_model(processed, catalog)       # reads calibrate's outputs, never refits
    frame = predict(layouts, model, interval)     # row-aligned with ``layouts``

``layouts`` has runs.parquet-style columns (params, active_params, n_layers, d_model, seq_len,
accelerator, n_accelerators, accelerators_per_node, precision, dp, tp, pp, cp, ep, zero_stage,
micro_batch, global_batch_tokens, recompute, virtual_pipeline, sequence_parallel, optional
framework_family). The result has ``step_time_s`` with ``step_time_low_s`` and
``step_time_high_s``, ``mfu`` with ``mfu_low`` and ``mfu_high``, ``ceiling_mfu`` (the ideal
theory's ceiling of the same layout), ``binding`` (the costliest component) and one
``<component>_s`` per component.

The model behind this interface today is the calibrate stage's fitted form
(``calibration.parquet``, docs/theory.md §10) applied to the ideal component times of
:func:`pipeline.theory.cost.step_cost` for the layout, with the theory's per-run constants
(``theory.bounds``: attention + MLP TP blocks, ZeRO-3 gathered once a step) and at the
population level (no source effect: a new user's software is a new source). A layout without
``virtual_pipeline`` gets the interleaving the model was fitted with (``theory.bounds``: L / pp
chunks where m >= pp); missing depth, width and batch are completed by pipeline/shapes.py, as
for the runs the model was fitted on. Two additions the
fitted form lacks: activation recompute costs its FLOP (full: one more forward, 1/3 of the
step's model FLOP; selective: the attention core's forward, Korthikanti et al. 2022 §5), and
the predicted MFU and its interval never exceed the ideal ceiling (a physical bound). The
interval is log-normal with the pooled residual and between-source spreads of the fit and the
efficiencies' standard errors (their covariance is not stored, so they are taken as
independent).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
from scipy.stats import norm

from pipeline.calibrate.frontier import Efficiencies
from pipeline.catalog import Catalog, load_catalog
from pipeline.config import PROJ_ROOT, ConfigError, load_params, settings
from pipeline.measures import FLOP_PER_PARAM_PER_TOKEN, attention_flop_per_token
from pipeline.shapes import batch_tokens, complete_shape, microbatches
from pipeline.theory.cost import step_cost
from pipeline.theory.inputs import Hardware, Layout, Shape
from pipeline.theory.memory import recompute_code
from pipeline.theory.scenarios import LATENCY_FIELDS, baseline_constants

COMPONENTS = ("compute", "hbm", "net_tp", "net_dp", "net_pp", "net_ep", "bubble", "latency",
              "overhead")
OUTPUT_COLUMNS = ("step_time_s", "step_time_low_s", "step_time_high_s", "mfu", "mfu_low",
                  "mfu_high", "ceiling_mfu", "binding", *(f"{c}_s" for c in COMPONENTS))


@dataclass(frozen=True)
class StepModel:
    """The calibrated efficiencies and spreads, with the settings and catalog they apply to."""

    efficiencies: Efficiencies
    log_sd_new: float            # residual + between-source spread of log step time
    log_se_theta: Mapping[str, float]
    params: Mapping[str, Any]
    catalog: Catalog


def load_model(processed: Path, catalog: Path, params: Mapping[str, Any] | None = None
               ) -> StepModel:
    """The model from ``processed/calibration.parquet`` (no refit) and the catalog;
    ``params`` defaults to the project's params.yaml."""
    path = Path(processed) / "calibration.parquet"
    if not path.exists():
        raise ConfigError(f"{path}: no calibrated model (run `dvc repro calibrate` first)")
    cal = pd.read_parquet(path)
    eff = cal[cal["group"].isin(["efficiency", "efficiency_fixed"])]
    theta = {str(r.parameter): float(r.estimate) for r in eff.itertuples()}
    se = {str(r.parameter): float(r.stderr / r.estimate)
          for r in eff.itertuples() if r.estimate > 0 and np.isfinite(r.stderr)}
    sd = {str(r.parameter): float(r.estimate) for r in cal.itertuples()
          if r.parameter in ("sigma_pool", "sigma_u")}
    log_sd = float(np.hypot(sd.get("sigma_pool", 0.0), sd.get("sigma_u", 0.0)))
    loaded = load_params(PROJ_ROOT / "params.yaml") if params is None else params
    return StepModel(Efficiencies(theta), log_sd, se, loaded, load_catalog(catalog))


def _num(frame: pd.DataFrame, name: str, default: float = np.nan) -> np.ndarray:
    if name not in frame.columns:
        return np.full(len(frame), default, dtype=float)
    out = pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return np.where(np.isfinite(out), out, default)


def _hardware(layouts: pd.DataFrame, model: StepModel) -> tuple[Hardware, np.ndarray]:
    """Per row: the catalog hardware (theory.bounds fills a missing scale-out bandwidth) and
    the bytes per value of its precision."""
    theory = settings(model.params, "theory")
    fill = theory.bounds.hardware or {}
    _, _, _, latency = baseline_constants(model.params)
    cat = model.catalog
    cols = {k: np.full(len(layouts), np.nan) for k in
            ("peak", "hbm_bytes_per_s", "scaleup_bytes_per_s", "scaleup_domain_size",
             "scaleout_bytes_per_s", "width")}
    default = settings(model.params, "ingest").default_precision
    precision = (layouts["precision"].astype(object).where(layouts["precision"].notna(), default)
                 if "precision" in layouts else pd.Series([default] * len(layouts)))
    keys = pd.Series(list(zip(layouts["accelerator"], precision)))
    for (acc, prec), rows in keys.groupby(keys).groups.items():
        at = np.asarray(rows)
        if acc not in cat.hardware.index:
            raise ValueError(f"accelerator: {acc!r} is not a catalog id")
        peak, used = cat.peak_flops_per_s(acc, prec or default)
        if peak is None:
            raise ValueError(f"precision: the catalog has no {prec or default} peak for {acc}")
        cols["peak"][at] = peak
        cols["width"][at] = theory.bytes_per_value.get(used, 2.0)
        row = cat.hardware.loc[acc]
        for k in ("hbm_bytes_per_s", "scaleup_bytes_per_s", "scaleup_domain_size",
                  "scaleout_bytes_per_s"):
            v = row[k]
            cols[k][at] = float(v) if pd.notna(v) else float(fill.get(k, np.nan))
    per_node = _num(layouts, "accelerators_per_node")
    domain = np.where(per_node >= 1, per_node, cols["scaleup_domain_size"])
    hw = Hardware(peak_flops_per_s=cols["peak"], hbm_bytes_per_s=cols["hbm_bytes_per_s"],
                  scaleup_bytes_per_s=cols["scaleup_bytes_per_s"], scaleup_domain_size=domain,
                  scaleout_bytes_per_s=cols["scaleout_bytes_per_s"],
                  **{k: latency[k] for k in LATENCY_FIELDS})
    return hw, cols["width"]


def predict(layouts: pd.DataFrame, model: StepModel, interval: float = 0.95) -> pd.DataFrame:
    """Calibrated step time, MFU and their interval for every row of ``layouts``."""
    layouts = layouts.reset_index(drop=True)
    theory = settings(model.params, "theory")
    attention = settings(model.params, "ingest").attention_flops
    hw, width = _hardware(layouts, model)
    params = _num(layouts, "params")
    active = _num(layouts, "active_params")
    active = np.where(active > 0, active, params)
    seq = _num(layouts, "seq_len", theory.bounds.seq_len)
    n = _num(layouts, "n_accelerators")
    tp, pp, cp, ep = (np.maximum(_num(layouts, k, 1.0), 1.0) for k in ("tp", "pp", "cp", "ep"))
    shape_ = complete_shape(active, _num(layouts, "n_layers"), _num(layouts, "d_model"), pp,
                            theory.bounds.aspect_ratio)
    layers, d = shape_.n_layers, shape_.d_model
    dp = _num(layouts, "dp")
    dp = np.where(dp >= 1, dp, n / (tp * pp * cp))
    micro = _num(layouts, "micro_batch", theory.bounds.micro_batch_sequences)
    batch, _ = batch_tokens(_num(layouts, "global_batch_tokens"), dp, micro, seq, pp)
    m = microbatches(batch, dp, micro, seq)
    replicas = dp * cp
    ep = np.minimum(ep, replicas)
    attn = attention_flop_per_token(layers, d, seq) if attention else np.zeros(len(layouts))
    moe = active < params * (1 - 1e-9)
    f_exp = np.where(moe, theory.bounds.moe_expert_fraction, 0.0)
    top_k = theory.bounds.moe_top_k
    ratio = params / active
    n_experts = np.where(moe, top_k * (ratio - (1 - f_exp)) / np.maximum(f_exp, 1e-9), 1.0)
    shape = Shape(params=params, active_params=active, n_layers=layers, d_model=d, seq_len=seq,
                  expert_fraction=f_exp, top_k=top_k, n_experts=n_experts,
                  attention_flop_per_token=attn)
    # no stated interleaving: the theory's per-run convention the model was fitted on
    # (theory.bounds.interleave "max": L / pp chunks per stage when m >= pp)
    v_max = np.where((m >= pp) & (pp > 1), np.maximum(np.floor(layers / pp), 1.0), 1.0) \
        if theory.bounds.interleave == "max" else np.ones(len(layouts))
    v = _num(layouts, "virtual_pipeline")
    layout = Layout(dp=replicas / ep, tp1=tp, pp=pp, ep=ep, microbatches=m,
                    zero_stage=_num(layouts, "zero_stage", 1.0),
                    interleave=np.where(v >= 1, v, v_max))
    _, const, _, _ = baseline_constants(model.params)
    const = replace(const, blocks_per_layer=theory.bounds.blocks_per_layer,
                    fsdp_gather=theory.bounds.fsdp_gather)
    ideal, parts = None, None
    for w in np.unique(width):
        sel = width == w
        sub = _subset(sel, hw, shape, layout)
        c = replace(const, bytes_per_value=float(w))
        one = step_cost(*sub[:3], batch[sel], c)
        one_parts = model.efficiencies.parts(one, *sub)
        if parts is None:
            parts = {k: np.full(len(layouts), np.nan) for k in one_parts}
            ideal = {k: np.full(len(layouts), np.nan) for k in ("utilization", "t_compute_s")}
        for k, v in one_parts.items():
            parts[k][sel] = v
        ideal["utilization"][sel] = np.broadcast_to(one.utilization, (sel.sum(),))
        ideal["t_compute_s"][sel] = np.broadcast_to(one.t_compute_s, (sel.sum(),))
    rc = (recompute_code(layouts["recompute"].to_numpy(dtype=object)) if "recompute" in layouts
          else np.zeros(len(layouts), np.int64))
    parts["compute"] = parts["compute"] * _recompute_factor(rc, d, seq)
    t_step = sum(parts.values())
    t_c = ideal["t_compute_s"]
    z = norm.ppf(0.5 + interval / 2)
    shares = {k: v / t_step for k, v in parts.items()}
    var_par = sum((shares.get(k, 0.0) * model.log_se_theta.get(k, 0.0)) ** 2
                  for k in model.efficiencies.theta)
    sd = np.sqrt(model.log_sd_new ** 2 + var_par)
    ceiling = np.minimum(ideal["utilization"], 1.0)
    mfu = np.minimum(t_c / t_step, ceiling)
    out = pd.DataFrame({
        "step_time_s": t_c / mfu,
        "step_time_low_s": np.maximum(t_step * np.exp(-z * sd), t_c / ceiling),
        "step_time_high_s": t_step * np.exp(z * sd),
        "mfu": mfu,
        "mfu_low": t_c / (t_step * np.exp(z * sd)),
        "mfu_high": np.minimum(t_c / (t_step * np.exp(-z * sd)), ceiling),
        "ceiling_mfu": ceiling,
    })
    names = list(parts)
    stacked = np.stack([parts[k] for k in names])
    out["binding"] = np.asarray(names, dtype=object)[np.argmax(stacked, axis=0)]
    for k in COMPONENTS:
        out[f"{k}_s"] = parts.get(k, np.zeros(len(layouts)))
    return out


def _recompute_factor(code: np.ndarray, d_model: np.ndarray, seq_len: np.ndarray) -> np.ndarray:
    """Compute time with recompute over compute without: full recomputes the forward, 1/3 of
    the 6 N FLOP per token; selective the attention core's forward, 4 s h of the 72 h^2 + 12 s h
    training FLOP per token and layer (Korthikanti et al. 2022 §5, GPT layer)."""
    h, s = d_model, seq_len
    selective = 1.0 + 4.0 * s * h / (72.0 * h * h + 12.0 * s * h)
    full = 1.0 + 2.0 / FLOP_PER_PARAM_PER_TOKEN
    return np.where(code >= 2, full, np.where(code >= 1, selective, 1.0))


def _subset(sel: np.ndarray, *objs):
    """The dataclasses with every array field restricted to ``sel``."""
    out = []
    for obj in objs:
        values = {}
        for k, v in obj.__dict__.items():
            a = np.asarray(v)
            values[k] = a[sel] if a.ndim and a.shape[0] == sel.size else v
        out.append(type(obj)(**values))
    return tuple(out)
