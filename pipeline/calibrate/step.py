"""The calibrated step time of any table of layouts: the one entry point the fit, the per-run
decomposition, the frontier and the planner share.

- :func:`load_model` reads what the calibrate stage wrote (``calibration.parquet``) and the
  hardware catalog; it never refits.
- :func:`predict` takes runs.parquet-style rows (params, active_params, n_layers, d_model,
  seq_len, accelerator, n_accelerators, accelerators_per_node, precision, dp, tp, pp, cp, ep,
  zero_stage, micro_batch, global_batch_tokens, recompute, virtual_pipeline,
  sequence_parallel, optionally framework_family and source) and returns, row-aligned, the
  step time with its interval, MFU with its interval, the ideal ceiling, the binding component
  and one ``<component>_s`` column per component of :mod:`pipeline.calibrate.critical_path`.

Intervals: the conformal half-width the stage measured for the row's family (leave-source-out
for production families, docs/theory.md §11.5), at ``interval`` = 0.95; other levels scale it
by the normal quantile ratio. The fast end is clipped at the ideal step time, so MFU and its
interval never exceed the ideal ceiling (which never exceeds 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import NormalDist
from typing import Mapping

import numpy as np
import pandas as pd

from pipeline.calibrate import families as fam
from pipeline.calibrate.classes import class_chain, interval_class, workload_kind
from pipeline.calibrate.critical_path import (COMPONENTS, PARAMETERS, Config, Machine, Theta,
                                              binding_of, step_components)
from pipeline.calibrate.hardware import (Network, gemm_max_efficiency, load_gemm, load_network,
                                         load_sm_counts, sm_counts_of)
from pipeline.calibrate.intervals import first_in_chain
from pipeline.calibrate.topology import Topology, load_topology
from pipeline.catalog import Catalog, load_catalog
from pipeline.frameworks import family_of
from pipeline.measures import FLOP_PER_PARAM_PER_TOKEN, attention_flop_per_token
from pipeline.shapes import batch_tokens, complete_shape, microbatches, stated_or

__all__ = ["StepModel", "load_model", "predict", "COMPONENTS", "PARAMETERS"]

# Stand-in where a layout row gives no sequence length (theory.bounds' default).
DEFAULT_SEQ_LEN = 2048.0
# d / heads where the model's shape gives none (GPT-3, Llama 2/3 and most Megatron shapes)
DEFAULT_HEAD_DIM = 128.0
LEVEL = 0.95
# Precisions priced at another's peak and GEMM efficiency: MXFP8 (block-scaled FP8 of the OCP
# Microscaling spec) runs at the FP8 dense peak on the chips that have it (NVIDIA Blackwell
# datasheet: the same dense FP8/FP6 figure; B200/GB200 are the catalog's MXFP8 chips)
PEAK_OF = {"mxfp8": "fp8"}
MXFP8_FAMILIES = ("B200", "GB200", "B300", "GB300")


@dataclass
class StepModel:
    """Fitted family parameters (natural units, order ``PARAMETERS``), the production
    population values, source effects (log step time), residual sds, conformal half-widths
    (log) per family at ``LEVEL``, and the constants and catalog the step function needs."""

    theta: dict[str, np.ndarray]
    population: np.ndarray
    source_effect: dict[str, float]
    interval_q: dict[str, float]
    catalog: Catalog
    gemm: dict[tuple[str, str], float]
    network: Network
    kernel_latency_s: float
    scaleup_latency_s: float
    attention_flops: bool = True
    residual_sd: dict[str, float] = field(default_factory=dict)
    aspect_ratio: float = 128.0       # theory.bounds.aspect_ratio, for shape completion
    sm_count: dict[str, float] = field(default_factory=dict)   # SMs per chip (wave quantization)
    topology: Topology = field(default_factory=Topology)   # data/catalog/clusters.csv

    def family_theta(self, family: str) -> np.ndarray:
        return self.theta.get(family, self.population)


def _num(frame: pd.DataFrame, name: str, default: float = np.nan) -> np.ndarray:
    if name not in frame.columns:
        return np.full(len(frame), default)
    values = pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return np.where(np.isfinite(values), values, default)


def _text(frame: pd.DataFrame, name: str) -> np.ndarray:
    if name not in frame.columns:
        return np.full(len(frame), None, dtype=object)
    return frame[name].astype(object).where(frame[name].notna(), None).to_numpy()


def _shape(frame: pd.DataFrame, aspect_ratio: float
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n_layers, d_model, whether both were stated): missing ones by the project's one rule
    (pipeline/shapes.py)."""
    active = np.where(_num(frame, "active_params") > 0, _num(frame, "active_params"),
                      _num(frame, "params"))
    d_stated, l_stated = _num(frame, "d_model"), _num(frame, "n_layers")
    shape = complete_shape(active, l_stated, d_stated, _num(frame, "pp", 1.0), aspect_ratio)
    return shape.n_layers, shape.d_model, (d_stated > 0) & (l_stated > 0)


@dataclass(frozen=True)
class Rows:
    """Layout rows turned into step-function inputs, with what the caller needs beside."""

    config: Config
    machine: Machine
    family: np.ndarray
    source: np.ndarray
    ok: np.ndarray           # rows with everything the step function needs
    n_accelerators: np.ndarray
    peak_flops_per_s: np.ndarray
    defaults: list[str]
    # the Mondrian interval cell (pipeline/calibrate/classes.py), None: the family's interval
    interval_class: np.ndarray | None = None


def _hardware(frame: pd.DataFrame, catalog: Catalog) -> dict[str, np.ndarray]:
    stated, rated = _text(frame, "precision"), _text(frame, "peak_precision")
    acc = _text(frame, "accelerator")
    # one answer per distinct (accelerator, precision, peak precision), then indexed
    key, first = fam.distinct_rows(acc, stated, rated)
    out = _hardware_rows(acc[first], stated[first], rated[first], catalog)
    return {k: v[key] for k, v in out.items()}


def _hardware_rows(acc: np.ndarray, stated: np.ndarray, rated: np.ndarray, catalog: Catalog
                   ) -> dict[str, np.ndarray]:
    # the precision stated, else the one the ingest rated the run's peak at, else bf16
    precision = np.array([p if isinstance(p, str) else q if isinstance(q, str) else "bf16"
                          for p, q in zip(stated, rated)], dtype=object)
    cols = ("hbm_bytes_per_s", "scaleup_bytes_per_s", "scaleout_bytes_per_s",
            "scaleup_domain_size")
    specs, peaks = {}, {}
    for a, p in set(zip(acc.tolist(), precision.tolist())):
        if a in catalog.hardware.index:
            spec = catalog.spec(a)
            specs[a] = [float(spec.get(c) or np.nan) for c in cols]
            peaks[(a, p)] = catalog.peak_flops_per_s(a, PEAK_OF.get(p, p))[0] or np.nan
            peaks[(a, "16")] = catalog.peak_flops_per_s(a, "bf16")[0] or np.nan
    nan4 = [np.nan] * 4
    table = np.array([specs.get(a, nan4) for a in acc], dtype=float).reshape(len(acc), 4)
    out = {c: table[:, i] for i, c in enumerate(cols)}
    out["peak"] = np.array([peaks.get((a, p), np.nan) for a, p in zip(acc, precision)], float)
    peak16 = np.array([peaks.get((a, "16"), np.nan) for a in acc], float)
    out["peak16"] = np.where(np.isfinite(peak16), np.minimum(peak16, out["peak"]), out["peak"])
    out["accelerator"], out["precision"] = acc, precision
    return out


def _head_dim(frame: pd.DataFrame, catalog: Catalog, d_model: np.ndarray) -> np.ndarray:
    """d / heads per row: the catalog model's ``head_dim`` (or d_model / n_heads), else
    ``DEFAULT_HEAD_DIM`` (most published shapes)."""
    codes, distinct = pd.factorize(_text(frame, "model_id"))  # per distinct id, then indexed
    known = np.full(len(distinct) + 1, np.nan)  # code -1 (no id): the last, NaN
    models = catalog.models
    for j, m in enumerate(distinct):
        if not (isinstance(m, str) and m in models.index):
            continue
        row = models.loc[m]
        hd = pd.to_numeric(row.get("head_dim"), errors="coerce")
        heads = pd.to_numeric(row.get("n_heads"), errors="coerce")
        d = pd.to_numeric(row.get("d_model"), errors="coerce")
        known[j] = float(hd) if hd > 0 else float(d / heads) if heads > 0 and d > 0 else np.nan
    out = known[codes]
    return np.where(out > 0, out, np.minimum(DEFAULT_HEAD_DIM, d_model))


def _mlp_shape(frame: pd.DataFrame, catalog: Catalog) -> dict[str, np.ndarray]:
    """``ffn_size`` and ``gated_mlp`` per row from the catalog model (``model_id``): gated
    (SwiGLU, three FFN matrices) where the catalog's parameter count is nearer
    L (2 d^2 + 2 d kv + 3 d f) + 2 V d than the same with 2 d f (GeLU); NaN / False where the
    catalog has no such model (4 d, GeLU: the step model's defaults)."""
    codes, distinct = pd.factorize(_text(frame, "model_id"))  # per distinct id, then indexed
    models = catalog.models
    known: dict[str, tuple[float, bool]] = {}
    for m in (i for i in distinct if isinstance(i, str) and i in models.index):
        row = pd.to_numeric(models.loc[m, ["params", "n_layers", "d_model", "n_kv_heads",
                                            "head_dim", "n_heads", "ffn_size", "vocab_size"]],
                            errors="coerce")
        p, layers, d, kv, hd, heads, f, v = (float(x) for x in row)
        hd = hd if hd > 0 else d / heads if heads > 0 else np.nan
        kvw = kv * hd if kv > 0 and hd > 0 else d
        base = layers * (2 * d * d + 2 * d * kvw) + 2 * (v if v > 0 else 0.0) * d
        gated = bool(abs(p - base - 3 * layers * d * f) < abs(p - base - 2 * layers * d * f))
        known[m] = (f, gated if np.isfinite(p * f * layers * d) else False)
    got = [known.get(i, (np.nan, False)) for i in distinct] + [(np.nan, False)]
    return {"ffn_size": np.array([g[0] for g in got], float)[codes],
            "gated_mlp": np.array([g[1] for g in got], bool)[codes]}


# ``moe_dispatcher`` values that send a token once per destination rank and node
# (pipeline/calibrate/moe.py ``dispatch_shares``); any other value or none: one copy per expert.
DEDUP_DISPATCHERS = ("deepep", "hybridep")
# MoE columns of a layout row; where the row leaves one empty, the model catalog's value.
_MOE_CATALOG = ("n_experts", "top_k", "expert_ffn_size", "moe_dense_layers")


def _moe_columns(frame: pd.DataFrame, catalog: Catalog, layers: np.ndarray
                 ) -> dict[str, np.ndarray]:
    """Config's MoE fields (pipeline/calibrate/moe.py): stated, else the catalog's by
    ``model_id``; moe_layers = n_layers - leading dense layers; top_k 2 where nothing says
    (the estimate's default); moe_a2a_overlap false unless stated true; moe_dispatch_dedup where
    ``moe_dispatcher`` names a deduplicating one (``DEDUP_DISPATCHERS``)."""
    # one catalog value per distinct model_id, then indexed (code -1: no id -> NaN)
    codes, distinct = pd.factorize(_text(frame, "model_id"))
    models = catalog.models
    out = {}
    for name in _MOE_CATALOG:
        known = np.array([pd.to_numeric(models.at[m, name], errors="coerce")
                          if name in models.columns and isinstance(m, str) and m in models.index
                          else np.nan for m in distinct] + [np.nan], dtype=float)
        cat = known[codes]
        out[name] = np.where(np.isfinite(_num(frame, name)), _num(frame, name), cat)
    dense = out.pop("moe_dense_layers")
    dense = np.where(np.isfinite(dense), dense, 0.0)
    out["moe_layers"] = np.maximum(layers - dense, 1.0)
    out["top_k"] = np.where(out["top_k"] >= 1, out["top_k"], 2.0)
    out["etp"] = np.maximum(_num(frame, "etp", 1.0), 1.0)
    out["capacity_factor"] = _num(frame, "capacity_factor")
    out["moe_imbalance"] = _num(frame, "moe_imbalance")
    overlap = _text(frame, "moe_a2a_overlap")
    key, first = fam.distinct_rows(overlap)  # per distinct value, then indexed
    out["moe_a2a_overlap"] = np.array([o is True or str(o).lower() == "true"
                                       for o in overlap[first]], dtype=bool)[key]
    dispatcher = _text(frame, "moe_dispatcher")
    key, first = fam.distinct_rows(dispatcher)
    out["moe_dispatch_dedup"] = np.array([str(x).lower() in DEDUP_DISPATCHERS
                                          for x in dispatcher[first]], dtype=bool)[key]
    return out


def rows_of(layouts: pd.DataFrame, model: StepModel) -> Rows:
    """Step-function inputs of runs.parquet-style rows (module docstring for the columns)."""
    n_rows = len(layouts)
    hw = _hardware(layouts, model.catalog)
    family = family_of(layouts)
    n = _num(layouts, "n_accelerators")
    tp, pp, cp = (np.maximum(_num(layouts, k, 1.0), 1.0) for k in ("tp", "pp", "cp"))
    ep = np.maximum(_num(layouts, "ep", 1.0), 1.0)
    dp = _num(layouts, "dp")
    dp = np.where(dp >= 1, dp, np.maximum(n / (tp * pp * cp), 1.0))
    seq = _num(layouts, "seq_len", DEFAULT_SEQ_LEN)
    micro = stated_or(_num(layouts, "micro_batch"), 1.0)
    batch, _ = batch_tokens(_num(layouts, "global_batch_tokens"), dp, micro, seq, pp)
    m = microbatches(batch, dp, micro, seq)
    layers, d, stated = _shape(layouts, model.aspect_ratio)
    params = _num(layouts, "params")
    active = np.where(_num(layouts, "active_params") > 0, _num(layouts, "active_params"), params)
    attn = attention_flop_per_token(layers, d, seq)
    # the model FLOP as the ingest counts them: attention only where the shape is stated
    counted = np.where(stated & model.attention_flops, attn, 0.0)
    flop_per_token = FLOP_PER_PARAM_PER_TOKEN * active + counted
    zero = np.where(_num(layouts, "zero_stage") >= 0, _num(layouts, "zero_stage"), 0.0)
    rec, v, sp, used = fam.schedule(layouts, family, tp)
    v = np.where(pp > 1, v, 1.0)
    expert_fraction = np.where(params > active, 1.0 - active / np.maximum(params, 1.0), 0.0)
    reduce_bucket, gather_bucket = fam.buckets(family, dp, zero)
    fused, overlap, dp_overlap, used_kernels = fam.kernels(layouts, family)
    cluster, unknown_clusters = fam.cluster_of(layouts, model.network.clusters)
    moe_cols = _moe_columns(layouts, model.catalog, layers)
    cfg = Config(params=params, active_params=active, expert_fraction=expert_fraction,
                 n_layers=layers, d_model=d, batch_tokens=batch, **moe_cols,
                 microbatch_tokens=micro * seq / cp, microbatches=m,
                 flop_per_token=flop_per_token, counted_attention_flop_per_token=counted,
                 attention_flop_per_token=attn, dp=dp, tp=tp,
                 pp=pp, cp=cp, ep=ep, zero_stage=zero, recompute=rec, virtual_pipeline=v,
                 sequence_parallel=sp, reduce_bucket_bytes=reduce_bucket,
                 gather_bucket_bytes=gather_bucket, tp_comm_overlap=overlap,
                 dp_comm_overlap=dp_overlap,
                 fused_attention=fused, head_dim=_head_dim(layouts, model.catalog, d),
                 shard_group=_num(layouts, "shard_group"),
                 pipeline_flushes=_num(layouts, "pipeline_flushes"),
                 **dict(zip(("gathers_per_layer", "zero3_bytes_per_s"),
                            fam.zero3_transfer(family, zero))),
                 **_mlp_shape(layouts, model.catalog),
                 fp8_linear=np.isin(hw["precision"].astype(str), ("fp8", "mxfp8")))
    domain, scaleout = _topology(layouts, model.topology, hw)
    key, first = fam.distinct_rows(hw["accelerator"], hw["precision"])  # once each, indexed
    eta = gemm_max_efficiency(model.gemm, hw["accelerator"][first],
                              np.array([PEAK_OF.get(p, p) for p in hw["precision"][first]],
                                       object))[key]
    mach = Machine(peak_flops_per_s=hw["peak"], attention_peak_flops_per_s=hw["peak16"],
                   hbm_bytes_per_s=hw["hbm_bytes_per_s"],
                   domain=domain, scaleup_bytes_per_s=hw["scaleup_bytes_per_s"],
                   scaleout_bytes_per_s=scaleout, gemm_max_efficiency=eta,
                   cluster=cluster, network=model.network,
                   scaleup_latency_s=model.scaleup_latency_s, launch_s=model.kernel_latency_s,
                   sm_count=sm_counts_of(model.sm_count, hw["accelerator"][first])[key],
                   accelerator=np.asarray(hw["accelerator"], dtype=object))
    # scale-out bandwidth matters only for groups that leave the domain
    needs_out = n > domain
    ok = (np.isfinite(hw["peak"]) & np.isfinite(hw["hbm_bytes_per_s"]) & (params > 0)
          & np.isfinite(domain) & np.isfinite(hw["scaleup_bytes_per_s"]) & (n >= 1)
          & (~needs_out | np.isfinite(scaleout)))
    # a layout sweep's rows: the kernels and buckets of their software (above), their own family
    family = fam.sweep_family(layouts, family)
    moe = (expert_fraction > 0) | (moe_cols["n_experts"] > 1)
    key, first = fam.distinct_rows(hw["accelerator"], hw["precision"], seq, moe)
    kind = workload_kind(hw["precision"][first], seq[first], moe[first])
    chips = hw["accelerator"][first]
    cells = interval_class(_chip_column(chips, model.catalog, "family"), kind,
                           _chip_column(chips, model.catalog, "architecture"))[key]
    return Rows(config=cfg, machine=mach, family=family, source=_text(layouts, "source"), ok=ok,
                n_accelerators=n, peak_flops_per_s=hw["peak"],
                defaults=used + used_kernels + unknown_clusters,
                interval_class=cells)


def _chip_column(accelerator: np.ndarray, catalog: Catalog, column: str) -> np.ndarray:
    """The catalog's ``column`` (family, architecture) of each row's chip (None where it has
    none)."""
    hw = catalog.hardware
    known = {a: hw.at[a, column] for a in set(accelerator.tolist())
             if column in hw.columns and a in hw.index}
    return np.array([known.get(a) if isinstance(known.get(a), str) else None
                     for a in accelerator], dtype=object)


def _topology(frame: pd.DataFrame, topology: Topology, hw: dict[str, np.ndarray]
              ) -> tuple[np.ndarray, np.ndarray]:
    """(scale-up domain, scale-out bytes/s per accelerator) per row: a cluster the row names
    (data/catalog/clusters.csv) gives both; else the row's ``accelerators_per_node`` is its
    domain and its accelerator's default cluster, then the hardware catalog, the rest."""
    cluster, per_node = _text(frame, "cluster"), _num(frame, "accelerators_per_node")
    key, first = fam.distinct_rows(cluster, hw["accelerator"], per_node,
                                   hw["scaleup_domain_size"], hw["scaleout_bytes_per_s"])
    domain, out = _topology_rows(cluster[first], per_node[first], topology,
                                 {k: hw[k][first] for k in ("accelerator", "scaleup_domain_size",
                                                            "scaleout_bytes_per_s")})
    return domain[key], out[key]


def scaleup_domain(frame: pd.DataFrame, model: StepModel) -> np.ndarray:
    """Accelerators in each row's scale-up domain (NVLink, a TPU slice's ICI), as the step
    model prices it (:func:`_topology`): NaN where the catalog has no figure."""
    return _topology(frame, model.topology, _hardware(frame, model.catalog))[0]


def _topology_rows(cluster: np.ndarray, per_node: np.ndarray, topology: Topology,
                   hw: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    clusters, named = topology.of_rows(cluster, hw["accelerator"])
    c_domain = topology.column(clusters, "scaleup_domain_size")
    domain = np.where(named & np.isfinite(c_domain), c_domain,
                      np.where(per_node >= 1, per_node,
                               np.where(np.isfinite(c_domain), c_domain,
                                        hw["scaleup_domain_size"])))
    c_out = topology.column(clusters, "scaleout_bytes_per_s")
    return domain, np.where(np.isfinite(c_out), c_out, hw["scaleout_bytes_per_s"])


def theta_of(model: StepModel, family: np.ndarray) -> Theta:
    # a calibration written before a parameter existed: the missing ones held off (0); one
    # vector per distinct family, then indexed (a planner's search has ~1e4 rows, 1-2 families)
    index: dict = {}
    row = np.array([index.setdefault(f, len(index)) for f in family], dtype=int)
    per_family = np.array([np.pad(np.asarray(model.family_theta(f), float),
                                  (0, max(0, len(PARAMETERS) - len(model.family_theta(f)))))
                           for f in index], dtype=float).reshape(-1, len(PARAMETERS))
    table = per_family[row]
    return Theta(*(table[:, j] for j in range(len(PARAMETERS))))


def evaluate(rows: Rows, theta: Theta, source_effect: np.ndarray | None = None
             ) -> dict[str, np.ndarray]:
    """Step components at ``theta`` (and a source effect in log time, spread over the
    components in proportion) and the ideal step time."""
    parts = step_components(rows.config, rows.machine, theta)
    if source_effect is not None:
        scale = np.exp(source_effect)
        parts = {k: v * scale if k in COMPONENTS or k == "step_time_s" else v
                 for k, v in parts.items()}
    ideal_mach = replace(rows.machine, ideal=True)
    ideal = step_components(rows.config, ideal_mach, Theta.ideal(rows.ok.size))
    parts["ideal_step_time_s"] = ideal["step_time_s"]
    return parts


def _z_ratio(interval: float) -> float:
    # the standard library's normal quantile (Wichura's AS241): scipy.stats would cost the
    # planner ~0.8 s of import for one number
    z = NormalDist().inv_cdf
    return float(z(0.5 + interval / 2) / z(0.5 + LEVEL / 2))


def interval_half_width(model: StepModel, family: np.ndarray, interval: float,
                        cells: np.ndarray | None = None) -> np.ndarray:
    """Log half-width per row at ``interval``: a layout sweep's own; else the Mondrian
    leave-source-out quantile of the row's class (its chip family x kind, else its architecture
    x kind, else its kind: ``class:`` keys of the calibration, pipeline/calibrate/classes.py),
    else its family's, else production's."""
    q = model.interval_q
    base = q.get("production", np.nan)
    family = np.asarray(family, dtype=object)
    cells = np.full(len(family), None, dtype=object) if cells is None else \
        np.asarray(cells, dtype=object)
    # one answer per distinct (family, cell), then indexed (a planner's search: ~1e4 rows)
    f_code, _ = pd.factorize(family)
    c_code, c_distinct = pd.factorize(cells)
    key = pd.factorize(f_code.astype(np.int64) * (len(c_distinct) + 1) + (c_code + 1))[0]
    first = np.zeros(int(key.max()) + 1 if len(key) else 0, dtype=np.int64)
    first[key[::-1]] = np.arange(len(key) - 1, -1, -1)  # each key's first row
    out = [q.get(f, base) if f in fam.SWEEP_FAMILIES or not isinstance(c, str)
           else first_in_chain(q, class_chain(c)[:-1] + (f, "production"))
           for f, c in zip(family[first], cells[first])]
    return np.array(out, dtype=float)[key] * _z_ratio(interval) if len(key) else \
        np.zeros(0)


def frame_of(parts: Mapping[str, np.ndarray], half: np.ndarray, ok: np.ndarray
             ) -> pd.DataFrame:
    """predict()'s columns from step components and a log half-width."""
    t = parts["step_time_s"]
    ideal = parts["ideal_step_time_s"]
    flop_rate = parts["model_flop_per_rank"]
    low = np.maximum(t * np.exp(-half), ideal)
    high = t * np.exp(half)
    t = np.maximum(t, ideal)
    peak = parts["peak"]
    mfu = flop_rate / (peak * t)
    out = pd.DataFrame({
        "step_time_s": t, "step_time_low_s": low, "step_time_high_s": high,
        "mfu": mfu, "mfu_low": flop_rate / (peak * high), "mfu_high": flop_rate / (peak * low),
        "ceiling_mfu": flop_rate / (peak * ideal),
        "binding": binding_of(parts),
        **{f"{k}_s": parts[k] for k in COMPONENTS},
    })
    out.loc[~ok, [c for c in out.columns if c != "binding"]] = np.nan
    out.loc[~ok, "binding"] = None
    return out


def predict(layouts: pd.DataFrame, model: StepModel, interval: float = 0.95) -> pd.DataFrame:
    """Row-aligned step time, MFU, their intervals, the ideal ceiling, the binding component
    and the components (module docstring). Rows the catalog cannot cost (unknown accelerator,
    a missing bandwidth the layout needs) get NaN and binding None."""
    rows = rows_of(layouts.reset_index(drop=True), model)
    theta = theta_of(model, rows.family)
    key, first = fam.distinct_rows(rows.source)  # per distinct source, then indexed
    known = np.array([model.source_effect.get(s, 0.0) if isinstance(s, str) else 0.0
                      for s in rows.source[first]], dtype=float)[key]
    with np.errstate(invalid="ignore", divide="ignore"):
        parts = evaluate(rows, theta, known)
        parts["peak"] = rows.peak_flops_per_s
        half = interval_half_width(model, rows.family, interval, rows.interval_class)
        out = frame_of(parts, half, rows.ok)
    out.index = layouts.index
    return out


# -- reading the stage's outputs ----------------------------------------------------------------
def load_model(processed: Path, catalog: Path) -> StepModel:
    """The model calibrate wrote to ``processed/calibration.parquet``, with the catalog."""
    table = pd.read_parquet(Path(processed) / "calibration.parquet")
    return model_from_table(table, load_catalog(catalog), Path(catalog))


def model_from_table(table: pd.DataFrame, catalog: Catalog, catalog_dir: Path) -> StepModel:
    def group(name: str) -> pd.DataFrame:
        return table[table["group"] == name]

    theta: dict[str, np.ndarray] = {}
    for g in ("efficiency", "efficiency_fixed"):
        for row in group(g).itertuples(index=False):
            family, param = str(row.parameter).split(".", 1)
            theta.setdefault(family, np.full(len(PARAMETERS), np.nan))[
                PARAMETERS.index(param)] = float(row.estimate)
    population = theta.pop("production")
    const = {str(r.parameter): float(r.estimate) for r in group("constant").itertuples()}
    return StepModel(
        theta=theta, population=population,
        source_effect={str(r.parameter): float(r.estimate)
                       for r in group("source_effect").itertuples()},
        interval_q={str(r.parameter): float(r.estimate) for r in group("interval").itertuples()},
        catalog=catalog, gemm=load_gemm(catalog_dir),
        network=load_network(catalog_dir, catalog.hardware),
        kernel_latency_s=const["kernel_latency_s"], scaleup_latency_s=const["scaleup_latency_s"],
        attention_flops=bool(const.get("attention_flops", 1.0)),
        aspect_ratio=float(const.get("aspect_ratio", 128.0)), sm_count=load_sm_counts(catalog_dir),
        topology=load_topology(catalog_dir),
        residual_sd={str(r.parameter): float(r.estimate)
                     for r in group("residual_sd").itertuples()})
