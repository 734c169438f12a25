"""Per-run ceilings: the cost model applied to each measured run's own configuration.

Every run of ``runs.parquet`` gets the utilization ceiling of its accelerator, model shape,
batch and layout (``bounds.parquet``, pipeline/theory/contract.py). Where the data lacks a
field, a documented default from ``params.yaml: theory.bounds`` is used (the shape and schedule
by the rule of pipeline/shapes.py) and named in ``assumed``; where a run lacks what no default
can stand in for (accelerator, chip count, parameter count), it gets no bound and ``assumed``
says why. All runs are evaluated in one vectorised call.

Defaults lean optimistic (more microbatches, interleaving, TP placed at its cheaper
orientation), because a ceiling must not sit below a measurement. A run whose measured MFU still
exceeds its ceiling is flagged in ``exceeds_bound`` with the reason.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, replace
from typing import Any, Mapping

import numpy as np
import pandas as pd

from pipeline.config import BoundHardware, BoundsSettings, IngestSettings, settings
from pipeline.measures import attention_flop_per_token
from pipeline.shapes import batch_tokens, complete_shape, microbatches, stated_or
from pipeline.theory.cost import step_cost
from pipeline.theory.inputs import Hardware, Layout, Shape
from pipeline.theory.scenarios import LATENCY_FIELDS, baseline_constants, bytes_per_value

BOUND_COLUMNS = ("run_id", "bound_mfu", "t_compute_s", "t_hbm_s", "t_net_tp_s", "t_net_dp_s",
                 "t_net_pp_s", "t_net_ep_s", "t_bubble_s", "t_latency_s", "binding", "assumed")
_HW_COLUMNS = typing.get_args(BoundHardware)  # hbm, scale-up, domain size, scale-out
# Candidate layouts evaluated at once (runs x TP x PP): ~40 arrays of 8 bytes each per
# candidate, so ~20 MB a chunk, whatever the number of runs.
CANDIDATES_PER_CHUNK = 1 << 16


def _col(runs: pd.DataFrame, name: str) -> np.ndarray:
    if name not in runs.columns:
        return np.full(len(runs), np.nan)
    return pd.to_numeric(runs[name], errors="coerce").to_numpy(dtype=float)


def _text_col(runs: pd.DataFrame, name: str) -> np.ndarray:
    if name not in runs.columns:
        return np.full(len(runs), None, dtype=object)
    return runs[name].astype(object).where(runs[name].notna(), None).to_numpy()


class _Notes:
    """Per-run lists of assumed fields, joined with '; ' at the end."""

    def __init__(self, n: int) -> None:
        self.items: list[list[str]] = [[] for _ in range(n)]

    def add(self, mask: np.ndarray, text) -> None:
        for i in np.nonzero(mask)[0]:
            self.items[i].append(text(i) if callable(text) else text)

    def joined(self) -> list[str]:
        return ["; ".join(x) for x in self.items]


@dataclass
class _PerRun:
    """What the steps of ``compute_bounds`` fill in, one array entry per run."""

    runs: pd.DataFrame
    dflt: BoundsSettings  # theory.bounds, as validated
    ingest: IngestSettings  # its precision assumed where a run states none, its FLOP counting
    notes: _Notes
    no_bound: np.ndarray
    values: dict[str, Any]

    def col(self, name: str) -> np.ndarray:
        return _col(self.runs, name)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.values[key] = value


def compute_bounds(runs: pd.DataFrame, catalog, params: Mapping[str, Any]) -> pd.DataFrame:
    """``bounds.parquet`` rows (plus diagnostic columns) for every run, in run_id order.

    The steps follow docs/theory.md §7 (per-run ceilings): the run's hardware, its model shape,
    its layout and batch (stated, or stand-ins from ``theory.bounds`` named in ``assumed``),
    then the cost model on every candidate layout and the best valid one per run.
    """
    _, const, _, latency = baseline_constants(params)
    r = _PerRun(runs, settings(params, "theory").bounds, settings(params, "ingest"),
                _Notes(len(runs)), np.zeros(len(runs), bool), {})
    _hardware(r, catalog, params)
    _shape(r)
    _layout(r)
    _batch(r)
    picks = [_pick(*_candidates(r, const, latency, chunk)) for chunk in _chunks(r)]
    cost = type(picks[0][0])(**{k: np.concatenate([p[0].__dict__[k] for p in picks])
                                for k in picks[0][0].__dict__})
    return _best(r, cost, *(np.concatenate([p[i] for p in picks]) for i in range(1, 5)))


def _chunks(r: _PerRun) -> list[np.ndarray]:
    """Runs in consecutive chunks of at most ``CANDIDATES_PER_CHUNK`` candidate layouts (a
    searched run has one per TP x PP pair): memory stays that of one chunk's candidates, not
    of runs x candidates."""
    per_run = np.where(r["searched"], (r.dflt.search_max_log2 + 1) ** 2, 1)
    chunk = (np.cumsum(per_run) - 1) // CANDIDATES_PER_CHUNK
    return np.split(np.arange(len(r.runs)), np.flatnonzero(np.diff(chunk)) + 1)


def _hardware(r: _PerRun, catalog, params: Mapping[str, Any]) -> None:
    """Hardware per run, from the catalog (unknown accelerator: no bound). The peak is the one
    ``runs.parquet`` carries (``peak_flops_per_s_per_accelerator`` at ``peak_precision``, looked
    up by the ingest at the same stated or assumed precision); a frame without it (a run
    written by hand) gets it from the catalog."""
    n, dflt, notes = len(r.runs), r.dflt, r.notes
    accel = _text_col(r.runs, "accelerator")
    known = np.array([a is not None and a in catalog.hardware.index for a in accel], bool)
    notes.add(~known, lambda i: f"no bound: accelerator {accel[i]!r} not in catalog")
    r.no_bound |= ~known
    precision = _text_col(r.runs, "precision")
    missing_prec = np.array([p is None for p in precision])
    notes.add(missing_prec & known, f"precision={r.ingest.default_precision}")
    precision = np.where(missing_prec, r.ingest.default_precision, precision)
    peak = np.full(n, np.nan)
    width = np.full(n, np.nan)
    hw_cols = {c: np.full(n, np.nan) for c in _HW_COLUMNS}
    widths = settings(params, "theory").bytes_per_value
    run_peak = r.col("peak_flops_per_s_per_accelerator")
    run_used = _text_col(r.runs, "peak_precision")
    # the catalog's row read once per accelerator, not once per run (a frame lookup each)
    hw_of: dict[str, tuple[float, ...]] = {}
    for i in np.nonzero(known)[0]:
        if run_peak[i] > 0 and run_used[i] is not None:
            value, used = run_peak[i], run_used[i]
        else:
            value, used = catalog.peak_flops_per_s(accel[i], precision[i])
        if value is not None:
            peak[i] = value
            width[i] = float(widths.get(used, np.nan))
        values = hw_of.get(accel[i])
        if values is None:
            row = catalog.hardware.loc[accel[i]]
            values = hw_of[accel[i]] = tuple(float(row[c]) if pd.notna(row[c]) else np.nan
                                             for c in _HW_COLUMNS)
        for c, v in zip(_HW_COLUMNS, values):
            hw_cols[c][i] = v
    use_run_peak = np.isnan(peak) & (run_peak > 0)
    notes.add(use_run_peak, "peak_flops_per_s=run's stated peak (catalog has none)")
    peak = np.where(use_run_peak, run_peak, peak)
    width = np.where(np.isnan(width), bytes_per_value(params, r.ingest.default_precision), width)
    notes.add(np.isnan(peak) & known, "no bound: no peak FLOP/s for this precision")
    r.no_bound |= np.isnan(peak)
    for c in _HW_COLUMNS:
        gap = np.isnan(hw_cols[c]) & known
        fill = dflt.hardware.get(c)
        if fill is None:
            notes.add(gap, f"no bound: catalog lacks {c}")
            r.no_bound |= gap
        else:
            notes.add(gap, f"{c}={fill:g}")
            hw_cols[c] = np.where(gap, fill, hw_cols[c])
    r["peak"], r["width"], r["hw_cols"] = peak, width, hw_cols


def _shape(r: _PerRun) -> None:
    """Model shape: parameters, depth and width (12 L d^2 where one is missing), sequence."""
    dflt, notes = r.dflt, r.notes
    params_n = r.col("params")
    notes.add(~(params_n > 0), "no bound: params missing")
    r.no_bound |= ~(params_n > 0)
    active = r.col("active_params")
    notes.add(~(active > 0) & (params_n > 0), "active_params=params")
    active = np.where(active > 0, active, params_n)
    shape = complete_shape(active, r.col("n_layers"), r.col("d_model"), r.col("pp"),
                           dflt.aspect_ratio)
    layers, d = shape.n_layers, shape.d_model
    notes.add(shape.from_params & (params_n > 0),
              f"n_layers,d_model from params at d/L={dflt.aspect_ratio:g}")
    notes.add(shape.d_from_layers, "d_model from params and n_layers (12 L d^2)")
    notes.add(shape.layers_from_d, "n_layers from params and d_model (12 L d^2)")
    notes.add(shape.raised_to_pp, "n_layers raised to pp (guessed depth below the stated pipeline)")
    seq = r.col("seq_len")
    notes.add(~(seq > 0) & ~r.no_bound, f"seq_len={dflt.seq_len:g}")
    seq = stated_or(seq, dflt.seq_len)
    r.values.update(params_n=params_n, active=active, layers=layers, d=d, seq=seq)


def _layout(r: _PerRun) -> None:
    """Layout: cp and the replicas of ep fold into token parallelism; a missing degree is 1,
    except that a run stating neither tp nor pp gets the best 1-D TP x PP layout whose
    degrees divide its chip count (a ceiling over the layouts it could have used)."""
    n, dflt, notes = len(r.runs), r.dflt, r.notes
    n_acc = r.col("n_accelerators")
    notes.add(~(n_acc >= 1), "no bound: n_accelerators missing or zero")
    r.no_bound |= ~(n_acc >= 1)
    no_bound = r.no_bound
    tp_stated, pp_stated = r.col("tp"), r.col("pp")
    searched = ~(tp_stated >= 1) & ~(pp_stated >= 1) & ~no_bound
    deg = {}
    for name in ("tp", "pp", "cp", "ep"):
        value = r.col(name)
        quiet = searched if name in ("tp", "pp") else np.zeros(n, bool)
        notes.add(~(value >= 1) & ~no_bound & ~quiet, f"{name}=1")
        deg[name] = np.where(value >= 1, value, 1.0)
    cp = deg["cp"]
    dp_stated = r.col("dp")
    dp_run = n_acc / (deg["tp"] * deg["pp"] * cp)
    mismatch = (dp_stated >= 1) & (np.abs(dp_stated - dp_run) > 0.5) & ~searched
    notes.add(mismatch & ~no_bound, lambda i: f"dp={dp_run[i]:g} from n_accelerators (stated "
              f"{dp_stated[i]:g})")
    notes.add((cp > 1) & ~no_bound, "cp as token parallelism (KV exchange ignored)")
    params_n, active = r["params_n"], r["active"]
    moe = active < params_n * (1 - 1e-9)
    f_exp = np.where(moe, dflt.moe_expert_fraction, 0.0)
    notes.add(moe & ~no_bound, f"expert_fraction={dflt.moe_expert_fraction:g}, "
              f"top_k={dflt.moe_top_k:g}")
    ratio = params_n / np.where(active > 0, active, 1.0)
    n_experts = np.where(moe, dflt.moe_top_k * (ratio - (1 - f_exp)) / np.maximum(f_exp, 1e-9),
                         1.0)
    zero = r.col("zero_stage")
    family = _text_col(r.runs, "strategy_family")
    fsdp = np.array([f in ("fsdp", "hybrid_fsdp") for f in family])
    notes.add(~(zero >= 0) & fsdp & ~no_bound, "zero_stage=3 (FSDP)")
    notes.add(~(zero >= 0) & ~fsdp & ~no_bound, "zero_stage=1")
    zero = np.where(zero >= 0, zero, np.where(fsdp, 3.0, 1.0))
    notes.add((zero >= 3) & ~no_bound, f"fsdp_gather={dflt.fsdp_gather}")
    r.values.update(n_acc=n_acc, searched=searched, deg=deg, dp_run=dp_run, f_exp=f_exp,
                    n_experts=n_experts, zero=zero)


def _batch(r: _PerRun) -> None:
    """Batch: sequences split over dp (cp splits each sequence and does not multiply them)."""
    dflt, notes, no_bound = r.dflt, r.notes, r.no_bound
    batch = r.col("global_batch_tokens")
    micro = r.col("micro_batch")
    notes.add(~(micro > 0) & ~no_bound, f"micro_batch={dflt.micro_batch_sequences:g}")
    micro = stated_or(micro, dflt.micro_batch_sequences)
    batch, no_batch = batch_tokens(batch, r["dp_run"], micro, r["seq"], r["deg"]["pp"])
    notes.add(no_batch & ~no_bound,
              "global_batch_tokens=dp*micro_batch*seq_len*m (m = 4 pp, or 1 without pp)")
    r.values.update(batch=batch, micro=micro)


def _candidates(r: _PerRun, const, latency: Mapping[str, float], runs: np.ndarray):
    """The cost model on every candidate of ``runs`` (run indices): one per run, or the TP x PP
    grid for runs whose layout is searched. Returns the costs, the owning run of each
    candidate, its tp, pp and interleave, and whether it is a valid layout."""
    n, dflt, searched, deg = len(r.runs), r.dflt, r["searched"], r["deg"]
    n_acc, cp, layers, d, seq = r["n_acc"], deg["cp"], r["layers"], r["d"], r["seq"]
    grid = 2.0 ** np.arange(dflt.search_max_log2 + 1)
    g_tp, g_pp = (a.ravel() for a in np.meshgrid(grid, grid, indexing="ij"))
    counts = np.where(searched[runs], g_tp.size, 1)
    owner = np.repeat(runs, counts)
    first = np.r_[0, np.cumsum(counts)[:-1]]
    pos = np.arange(owner.size) - np.repeat(first, counts)
    c_tp = np.where(searched[owner], g_tp[pos % g_tp.size], deg["tp"][owner])
    c_pp = np.where(searched[owner], g_pp[pos % g_pp.size], deg["pp"][owner])
    dp = n_acc[owner] / (c_tp * c_pp * cp[owner])
    fits = (dp >= 1 - 1e-9) & (c_pp <= layers[owner]) & (c_tp <= d[owner])
    valid = fits & (~searched[owner] | (np.abs(dp - np.round(dp)) < 1e-9))
    replicas = np.maximum(dp * cp[owner], 1.0)
    ep = np.minimum(deg["ep"][owner], replicas)  # Megatron: the ep group lies inside dp
    m = microbatches(r["batch"][owner], dp, r["micro"][owner], seq[owner])
    if dflt.interleave == "max":
        v = np.where((m >= c_pp) & (c_pp > 1), np.maximum(np.floor(layers[owner] / c_pp), 1.0),
                     1.0)
    else:
        v = np.ones(owner.size)

    ok = ~r.no_bound
    safe = lambda x, fill=1.0: np.where(ok[owner] & np.isfinite(x), x, fill)  # noqa: E731
    at = lambda x: x[owner]  # noqa: E731
    hw_cols = r["hw_cols"]
    hw = Hardware(peak_flops_per_s=safe(at(r["peak"])),
                  hbm_bytes_per_s=safe(at(hw_cols["hbm_bytes_per_s"])),
                  scaleup_bytes_per_s=safe(at(hw_cols["scaleup_bytes_per_s"])),
                  scaleup_domain_size=safe(at(hw_cols["scaleup_domain_size"])),
                  scaleout_bytes_per_s=safe(at(hw_cols["scaleout_bytes_per_s"])),
                  **{k: latency[k] for k in LATENCY_FIELDS})
    attention = attention_flop_per_token(layers, d, seq) if r.ingest.attention_flops else np.zeros(n)
    shape = Shape(params=safe(at(r["params_n"])), active_params=safe(at(r["active"])),
                  n_layers=safe(at(layers)), d_model=safe(at(d)), seq_len=safe(at(seq)),
                  expert_fraction=safe(at(r["f_exp"]), 0.0), top_k=dflt.moe_top_k,
                  n_experts=safe(at(r["n_experts"])),
                  attention_flop_per_token=safe(at(attention), 0.0))
    layout = Layout(dp=safe(replicas / ep), tp1=safe(c_tp), pp=safe(c_pp), ep=safe(ep),
                    microbatches=safe(m), zero_stage=safe(at(r["zero"]), 1.0), interleave=safe(v))
    run_const = replace(const, blocks_per_layer=dflt.blocks_per_layer,
                        fsdp_gather=dflt.fsdp_gather)
    cand = _cost_by_width(hw, shape, layout, safe(at(r["batch"])), run_const,
                          safe(at(r["width"]), 2.0))
    return cand, owner, c_tp, c_pp, v, valid


def _pick(cand, owner: np.ndarray, c_tp: np.ndarray, c_pp: np.ndarray, v: np.ndarray,
          valid: np.ndarray):
    """The best valid candidate of each run (first on ties): its cost, tp, pp, interleave and
    whether it is valid at all, one entry per run in run order."""
    score = np.where(valid, cand.utilization, -np.inf)
    order = np.lexsort((np.arange(owner.size), -score, owner))
    pick = order[np.r_[True, owner[order][1:] != owner[order][:-1]]]
    cost = type(cand)(**{k: np.array(np.broadcast_to(val, owner.shape)[pick])
                         for k, val in cand.__dict__.items()})
    return cost, c_tp[pick], c_pp[pick], v[pick], np.isfinite(score[pick])


def _best(r: _PerRun, cost, tp_pick: np.ndarray, pp_pick: np.ndarray, v_pick: np.ndarray,
          found: np.ndarray) -> pd.DataFrame:
    """The best candidate per run (``_pick``), as ``bounds.parquet`` rows."""
    notes, searched, deg = r.notes, r["searched"], r["deg"]
    notes.add(searched & found, lambda i: f"layout searched: tp={tp_pick[i]:g}, "
              f"pp={pp_pick[i]:g} (best 1-D TP x PP dividing n_accelerators)")
    notes.add(searched & ~found, "no bound: no TP x PP layout divides n_accelerators")
    no_bound = r.no_bound
    notes.add(found & (v_pick > 1) & ~no_bound,
              lambda i: f"interleave={v_pick[i]:g} (L/pp chunks per stage)")
    stated_bad = ~searched & ~found & ~no_bound
    notes.add(stated_bad & (deg["tp"] * deg["pp"] * deg["cp"] > r["n_acc"]),
              "no bound: tp*pp*cp exceeds n_accelerators")
    notes.add(stated_bad & (deg["pp"] > r["layers"]), "no bound: pp exceeds n_layers")
    notes.add(stated_bad & (deg["tp"] > r["d"]), "no bound: tp exceeds d_model")
    no_bound = no_bound | stated_bad | (searched & ~found)
    ok = ~no_bound
    nan = np.where(ok, 1.0, np.nan)
    out = pd.DataFrame({
        "run_id": _text_col(r.runs, "run_id"),
        "bound_mfu": np.minimum(cost.utilization, 1.0) * nan,
        "t_compute_s": cost.t_compute_s * nan, "t_hbm_s": cost.t_hbm_s * nan,
        "t_net_tp_s": cost.t_net_tp_s * nan, "t_net_dp_s": cost.t_net_dp_s * nan,
        "t_net_pp_s": cost.t_net_pp_s * nan, "t_net_ep_s": cost.t_net_ep_s * nan,
        "t_bubble_s": cost.t_bubble_s * nan, "t_latency_s": cost.t_latency_s * nan,
        "binding": np.where(ok, cost.binding_names(), None),
        "assumed": notes.joined(),
        "t_step_s": cost.t_step_s * nan,
        "peak_flops_per_s": np.where(ok, r["peak"], np.nan),
        # the completed shape and microbatch the ceiling used (the memory model takes them)
        "n_layers_used": r["layers"], "d_model_used": r["d"], "seq_len_used": r["seq"],
        "micro_batch_used": r["micro"],
    })
    return _compare(out, r.runs, r.dflt.tolerance)


def _cost_by_width(hw: Hardware, shape: Shape, layout: Layout, batch: np.ndarray, const,
                   width: np.ndarray):
    """step_cost with a per-run bytes per value: evaluated once per distinct width."""
    result = None
    for w in np.unique(width):
        cost = step_cost(hw, shape, layout, batch, replace(const, bytes_per_value=float(w)))
        if result is None:
            result = {k: np.array(np.broadcast_to(v, width.shape), dtype=np.asarray(v).dtype)
                      for k, v in cost.__dict__.items()}
        pick = width == w
        for k, v in cost.__dict__.items():
            result[k][pick] = np.broadcast_to(v, width.shape)[pick]
    return type(cost)(**result)


def _compare(out: pd.DataFrame, runs: pd.DataFrame, tolerance: float) -> pd.DataFrame:
    """Measured MFU (HFU where MFU is absent: HFU >= MFU, so the test is conservative) against
    the ceiling; ``exceeds_bound`` where it is above by more than ``tolerance``."""
    mfu, hfu = _col(runs, "mfu"), _col(runs, "hfu")
    measured = np.where(np.isfinite(mfu), mfu, hfu)
    kind = np.where(np.isfinite(mfu), "mfu", np.where(np.isfinite(hfu), "hfu", None))
    out["measured_mfu"] = measured
    out["measured_kind"] = kind
    exceeds = np.isfinite(measured) & np.isfinite(out["bound_mfu"].to_numpy()) & (
        measured > out["bound_mfu"].to_numpy() + tolerance)
    out["exceeds_bound"] = exceeds
    reasons = []
    for i in range(len(out)):
        if not exceeds[i]:
            reasons.append(None)
            continue
        reasons.append(f"measured {kind[i]} {measured[i]:.3f} > bound {out['bound_mfu'].iat[i]:.3f}"
                       f" (binding {out['binding'].iat[i]}; "
                       f"assumed: {out['assumed'].iat[i] or '-'})")
    out["exceed_reason"] = reasons
    return out.sort_values("run_id", kind="mergesort").reset_index(drop=True)
