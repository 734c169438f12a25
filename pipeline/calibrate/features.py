"""Regressors of the calibrated step-time model, one row per run, from ``runs`` and ``bounds``.

Every regressor is a time relative to the run's ideal compute time ``t_compute_s`` (the model
FLOP of a step over the job's peak FLOP/s, ``bounds.parquet``), so the measured quantity is
``1 / MFU = T_step / t_compute`` (docs/architecture.md: the ceiling and the measured MFU count the
same model FLOP). docs/theory.md §10 gives the model and the meaning of each term.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline.config import BoundsSettings
from pipeline.shapes import batch_tokens, complete_shape, microbatches, stated_or
from pipeline.vocab import SHARE_SLOTS

# Terms of the model and what their coefficient means (docs/theory.md §10).
TERMS: dict[str, str] = {
    "compute": "1 / achieved fraction of peak on the arithmetic at large work per accelerator",
    "small_work": "extra compute time at a microbatch GEMM of WORK_REF (tokens x d / tp), "
                  "scaling as WORK_REF / work",
    "hbm": "exposed fraction of the ideal HBM time",
    "net_tp": "exposed fraction of the ideal TP link time, TP inside the scale-up domain",
    "net_tp_out": "exposed fraction of the ideal TP link time, TP beyond the scale-up domain",
    "net_dp": "exposed fraction of the ideal DP (gradient / FSDP) link time",
    "net_pp": "exposed fraction of the ideal PP link time",
    "net_ep": "exposed fraction of the ideal EP all-to-all time",
    "bubble": "multiple of the ideal pipeline bubble",
    "latency": "multiple of the ideal latency chain",
    "overhead": "fixed seconds per step (optimizer, data loading, launch gaps)",
    "sync": "seconds per step per doubling of N (stragglers, barrier skew)",
    "launch": "seconds per layer and microbatch on a pipeline stage (kernel launches, "
              "per-microbatch synchronisation)",
}
# Component of the step time each term's calibrated time belongs to (calibrated.parquet shares).
SHARE_OF: dict[str, str] = {
    "compute": "compute", "small_work": "compute", "hbm": "hbm", "net_tp": "net_tp",
    "net_tp_out": "net_tp", "net_dp": "net_dp", "net_pp": "net_pp", "net_ep": "net_ep",
    "bubble": "bubble", "latency": "latency", "overhead": "overhead", "sync": "overhead",
    "launch": "overhead",
}
SHARES = SHARE_SLOTS  # calibrated.parquet's share_<slot> (pipeline/calibrate/contract.py)
# Work per accelerator at which ``small_work`` is quoted: 4096 tokens x 1024 columns.
WORK_REF = 4096.0 * 1024.0


def _num(frame: pd.DataFrame, name: str) -> np.ndarray:
    if name not in frame.columns:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def has_layout(runs: pd.DataFrame) -> np.ndarray:
    """A run states its layout when it gives tp or pp (dp alone is implied by N)."""
    return (_num(runs, "tp") >= 1) | (_num(runs, "pp") >= 1)


def _shape(runs: pd.DataFrame, defaults: BoundsSettings):
    """Depth, width, microbatch sequences and sequence length of each run, completed by the
    rule of pipeline/shapes.py with the theory's stand-ins (``theory.bounds``)."""
    active = np.where(_num(runs, "active_params") > 0, _num(runs, "active_params"),
                      _num(runs, "params"))
    shape = complete_shape(active, _num(runs, "n_layers"), _num(runs, "d_model"),
                           _num(runs, "pp"), defaults.aspect_ratio)
    micro = stated_or(_num(runs, "micro_batch"), defaults.micro_batch_sequences)
    seq = stated_or(_num(runs, "seq_len"), defaults.seq_len)
    return shape, micro, seq


def work_per_accelerator(runs: pd.DataFrame, defaults: BoundsSettings) -> np.ndarray:
    """Microbatch GEMM size per accelerator: micro_batch x seq_len tokens x d_model / tp, with
    the shape completed as the theory completes it (pipeline/shapes.py); missing tp is 1."""
    shape, micro, seq = _shape(runs, defaults)
    tp = np.where(_num(runs, "tp") >= 1, _num(runs, "tp"), 1.0)
    return micro * seq * shape.d_model / tp


def layers_and_microbatches(runs: pd.DataFrame, defaults: BoundsSettings
                            ) -> tuple[np.ndarray, np.ndarray]:
    """(layers per pipeline stage, microbatches per step) of each run, completed as the theory
    completes them (pipeline/shapes.py): m = B / (dp micro_batch seq_len), dp = N / (tp pp cp),
    at least 1; where the batch is not stated, m = 4 pp under pipelining, else 1."""
    shape, micro, seq = _shape(runs, defaults)
    deg = {k: np.where(_num(runs, k) >= 1, _num(runs, k), 1.0) for k in ("tp", "pp", "cp")}
    dp = _num(runs, "n_accelerators") / (deg["tp"] * deg["pp"] * deg["cp"])
    batch, _ = batch_tokens(_num(runs, "global_batch_tokens"), dp, micro, seq, deg["pp"])
    m = microbatches(batch, dp, micro, seq)
    return np.maximum(shape.n_layers / deg["pp"], 1.0), m


def design(runs: pd.DataFrame, bounds: pd.DataFrame, domain_size: pd.Series,
           defaults: BoundsSettings) -> pd.DataFrame:
    """One row per run of ``runs`` (same order): run facts and the regressors ``x_<term>``.

    ``domain_size``: scale-up domain size per accelerator id (catalog ``scaleup_domain_size``);
    ``defaults``: the theory's stand-ins for an unstated shape (``theory.bounds``). Runs without
    a bound get NaN regressors.
    """
    b = bounds.set_index("run_id").reindex(runs["run_id"].astype(str))
    # bounds.parquet carries the measured MFU (HFU where no MFU) and the peak it used; fall
    # back to the run's own where an older bounds file lacks them.
    measured = (b["measured_mfu"].to_numpy(float) if "measured_mfu" in b
                else np.where(_num(runs, "mfu") > 0, _num(runs, "mfu"), _num(runs, "hfu")))
    peak = (b["peak_flops_per_s"].to_numpy(float) if "peak_flops_per_s" in b
            else _num(runs, "peak_flops_per_s_per_accelerator"))
    t_c = b["t_compute_s"].to_numpy(float)
    n = _num(runs, "n_accelerators")
    tp = np.where(_num(runs, "tp") >= 1, _num(runs, "tp"), 1.0)
    domain = runs["accelerator"].map(domain_size).to_numpy(dtype=float, na_value=np.nan)
    tp_out = tp > np.where(np.isfinite(domain), domain, 8.0)
    rel = {name: b[f"t_{name}_s"].to_numpy(float) / t_c
           for name in ("hbm", "net_tp", "net_dp", "net_pp", "net_ep", "bubble", "latency")}
    stage_layers, m = layers_and_microbatches(runs, defaults)
    x = {
        "x_compute": np.ones(len(runs)),
        "x_launch": stage_layers * m / t_c,
        "x_small_work": WORK_REF / work_per_accelerator(runs, defaults),
        "x_hbm": rel["hbm"],
        "x_net_tp": np.where(tp_out, 0.0, rel["net_tp"]),
        "x_net_tp_out": np.where(tp_out, rel["net_tp"], 0.0),
        "x_net_dp": rel["net_dp"], "x_net_pp": rel["net_pp"], "x_net_ep": rel["net_ep"],
        "x_bubble": rel["bubble"], "x_latency": rel["latency"],
        "x_overhead": 1.0 / t_c,
        "x_sync": np.log2(np.maximum(n, 1.0)) / t_c,
    }
    frame = pd.DataFrame({
        "run_id": runs["run_id"].astype(str).to_numpy(),
        "source": runs["source"].astype(str).to_numpy(),
        "series_id": runs["series_id"].astype(object).to_numpy(),
        "accelerator": runs["accelerator"].astype(object).to_numpy(),
        "accelerator_family": (runs["accelerator_family"].astype(object).to_numpy()
                               if "accelerator_family" in runs else runs["accelerator"].to_numpy()),
        "n_accelerators": n,
        "has_layout": has_layout(runs),
        "measured_mfu": measured,
        "bound_mfu": b["bound_mfu"].to_numpy(float),
        "t_compute_s": t_c,
        "peak": peak,
        **x,
    })
    return frame


def x_matrix(frame: pd.DataFrame, terms: list[str]) -> np.ndarray:
    """The (runs x terms) regressor matrix of ``terms``."""
    return np.column_stack([frame[f"x_{t}"].to_numpy(float) for t in terms])
