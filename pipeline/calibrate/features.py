"""Regressors of the calibrated step-time model, one row per run, from ``runs`` and ``bounds``.

Every regressor is a time relative to the run's ideal compute time ``t_compute_s`` (the model
FLOP of a step over the job's peak FLOP/s, ``bounds.parquet``), so the measured quantity is
``1 / MFU = T_step / t_compute`` (ARCHITECTURE.md: the ceiling and the measured MFU count the
same model FLOP). docs/theory.md §10 gives the model and the meaning of each term.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline.schema import CALIBRATED_SHARES

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
SHARES = CALIBRATED_SHARES  # calibrated.parquet's share_<component> (pipeline/schema.py)
# Work per accelerator at which ``small_work`` is quoted: 4096 tokens x 1024 columns.
WORK_REF = 4096.0 * 1024.0
# d/L aspect ratio used where a run states no d_model (as theory.bounds.aspect_ratio).
ASPECT_RATIO = 128.0


def _num(frame: pd.DataFrame, name: str) -> np.ndarray:
    if name not in frame.columns:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def has_layout(runs: pd.DataFrame) -> np.ndarray:
    """A run states its layout when it gives tp or pp (dp alone is implied by N)."""
    return (_num(runs, "tp") >= 1) | (_num(runs, "pp") >= 1)


def work_per_accelerator(runs: pd.DataFrame) -> np.ndarray:
    """Microbatch GEMM size per accelerator: micro_batch x seq_len tokens x d_model / tp.

    Missing micro_batch is 1 and missing tp is 1 (as theory.bounds); missing d_model comes from
    the parameter count at d/L = 128 (N = 12 L d^2, so d = (128 N / 12)^(1/3)).
    """
    micro = np.where(_num(runs, "micro_batch") > 0, _num(runs, "micro_batch"), 1.0)
    seq = np.where(_num(runs, "seq_len") > 0, _num(runs, "seq_len"), 2048.0)
    active = np.where(_num(runs, "active_params") > 0, _num(runs, "active_params"),
                      _num(runs, "params"))
    d = np.where(_num(runs, "d_model") > 0, _num(runs, "d_model"),
                 np.cbrt(ASPECT_RATIO * active / 12.0))
    tp = np.where(_num(runs, "tp") >= 1, _num(runs, "tp"), 1.0)
    return micro * seq * d / tp


def layers_and_microbatches(runs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(layers per pipeline stage, microbatches per step) of each run, as theory.bounds takes
    them: L from the run or from params at d/L = 128; m = B / (dp micro_batch seq_len), dp =
    N / (tp pp cp), at least 1 (1 where the batch is not stated)."""
    active = np.where(_num(runs, "active_params") > 0, _num(runs, "active_params"),
                      _num(runs, "params"))
    d = np.where(_num(runs, "d_model") > 0, _num(runs, "d_model"),
                 np.cbrt(ASPECT_RATIO * active / 12.0))
    layers = np.where(_num(runs, "n_layers") > 0, _num(runs, "n_layers"), d / ASPECT_RATIO)
    deg = {k: np.where(_num(runs, k) >= 1, _num(runs, k), 1.0) for k in ("tp", "pp", "cp")}
    dp = _num(runs, "n_accelerators") / (deg["tp"] * deg["pp"] * deg["cp"])
    micro = np.where(_num(runs, "micro_batch") > 0, _num(runs, "micro_batch"), 1.0)
    seq = np.where(_num(runs, "seq_len") > 0, _num(runs, "seq_len"), 2048.0)
    m = np.round(_num(runs, "global_batch_tokens") / (np.maximum(dp, 1.0) * micro * seq))
    m = np.where(np.isfinite(m) & (m >= 1), m, 1.0)
    return np.maximum(layers / deg["pp"], 1.0), m


def design(runs: pd.DataFrame, bounds: pd.DataFrame, domain_size: pd.Series) -> pd.DataFrame:
    """One row per run of ``runs`` (same order): run facts and the regressors ``x_<term>``.

    ``domain_size``: scale-up domain size per accelerator id (catalog ``scaleup_domain_size``).
    Runs without a bound get NaN regressors.
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
    stage_layers, microbatches = layers_and_microbatches(runs)
    x = {
        "x_compute": np.ones(len(runs)),
        "x_launch": stage_layers * microbatches / t_c,
        "x_small_work": WORK_REF / work_per_accelerator(runs),
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
