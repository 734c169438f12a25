"""Scaling laws that turn a training compute budget into a model, a batch and a step count.

All functions are vectorised: ``flop`` may be a scalar or a numpy array. Sources and status tags
follow ``docs/theory.md`` (§2): [C] = as in the co-author's simulator
``davidsj/ml_par_sim`` (run_optimizer2.ipynb), [R] = a reconstruction, not the paper's printed
equation. Every constant is a ``params.yaml`` field (``theory.laws``) except the FLOP per
parameter and token, the one of ``pipeline/measures.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.measures import FLOP_PER_PARAM_PER_TOKEN

SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True)
class Laws:
    """Constants of the compute -> (N, D, L, d, B) laws (``params.yaml: theory.laws``); the FLOP
    per parameter and token is ``pipeline.measures.FLOP_PER_PARAM_PER_TOKEN`` (6: forward 2 +
    backward 4) [C].

    Attributes:
        tokens_per_param: rho = D / N (Chinchilla; 20) [C].
        anchor_flop: C0 of the layer and batch laws (1e25 FLOP) [C].
        layers_anchor: L0, layers at C0 (120) [C].
        layers_exponent: gamma in L = L0 (C/C0)^gamma (1/6) [C].
        width_ratio: h, so that one layer holds 2 h d^2 parameters (5: d_ff + attention = 5 d) [C].
        batch_anchor_tokens: B0, critical batch at C0 (2^22 tokens) [C].
        batch_exponent: beta in B = B0 (C/C0)^beta (1/6) [C].
    """

    tokens_per_param: float = 20.0
    anchor_flop: float = 1e25
    layers_anchor: float = 120.0
    layers_exponent: float = 1.0 / 6.0
    width_ratio: float = 5.0
    batch_anchor_tokens: float = 2.0**22
    batch_exponent: float = 1.0 / 6.0


def active_params(flop: np.ndarray | float, laws: Laws) -> np.ndarray:
    """N_act = sqrt(C / (6 rho)) from C = 6 N_act D and D = rho N_act [C]."""
    return np.sqrt(np.asarray(flop, dtype=float)
                   / (FLOP_PER_PARAM_PER_TOKEN * laws.tokens_per_param))


def training_tokens(flop: np.ndarray | float, laws: Laws) -> np.ndarray:
    """D = rho N_act (tokens) [C]."""
    return laws.tokens_per_param * active_params(flop, laws)


def n_layers(flop: np.ndarray | float, laws: Laws) -> np.ndarray:
    """L = L0 (C / C0)^gamma, continuous [C: run_optimizer2]."""
    ratio = np.asarray(flop, dtype=float) / laws.anchor_flop
    return laws.layers_anchor * ratio**laws.layers_exponent


def d_model(flop: np.ndarray | float, laws: Laws) -> np.ndarray:
    """d = sqrt(N_act / (2 h L)): a layer is two linears d x h d [C]; d/L = 129.25 at baseline."""
    return np.sqrt(active_params(flop, laws) / (2.0 * laws.width_ratio * n_layers(flop, laws)))


def critical_batch_tokens(flop: np.ndarray | float, laws: Laws) -> np.ndarray:
    """B_crit = B0 (C / C0)^beta tokens per step; used as a hard cap on the batch [C]."""
    ratio = np.asarray(flop, dtype=float) / laws.anchor_flop
    return laws.batch_anchor_tokens * ratio**laws.batch_exponent


def optimizer_steps(flop: np.ndarray | float, laws: Laws) -> np.ndarray:
    """S = D / B_crit sequential optimizer steps [R]."""
    return training_tokens(flop, laws) / critical_batch_tokens(flop, laws)


def latency_per_layer_budget_s(flop: np.ndarray | float, duration_s: float, laws: Laws
                               ) -> np.ndarray:
    """T / (S L): the per-layer forward+backward time a run of C FLOP can afford (G8) [R]."""
    return duration_s / (optimizer_steps(flop, laws) * n_layers(flop, laws))


def latency_wall_flop(tau_layer_s: np.ndarray | float, duration_s: float, laws: Laws) -> np.ndarray:
    """Closed-form latency wall C_wall, solving T = S(C) L(C) tau_L for C [R, theory.md §2.5].

    With D = rho sqrt(C/(6 rho)), B = B0 x^beta, L = L0 x^gamma and x = C/C0, T = S L tau gives
    T B0 / (rho L0 tau) = sqrt(C / (6 rho)) x^(gamma - beta). For beta = gamma this is
    C_wall = 6 rho (T B0 / (rho L0 tau))^2 (theory.md writes 120 for 6 rho); otherwise the power
    of C is solved explicitly: C^(1/2 + gamma - beta) = (T B0 / (rho L0 tau))
    sqrt(6 rho) C0^(gamma - beta).
    """
    tau = np.asarray(tau_layer_s, dtype=float)
    rho, six = laws.tokens_per_param, FLOP_PER_PARAM_PER_TOKEN
    lhs = duration_s * laws.batch_anchor_tokens / (rho * laws.layers_anchor * tau)
    expo = 0.5 + laws.layers_exponent - laws.batch_exponent
    if expo <= 0:
        raise ValueError("theory.laws: batch_exponent must be below layers_exponent + 1/2 for a "
                         "finite latency wall")
    gap = laws.layers_exponent - laws.batch_exponent
    rhs = lhs * np.sqrt(six * rho) * laws.anchor_flop**gap
    return rhs ** (1.0 / expo)


def accelerators_at_full_utilization(flop: np.ndarray | float, duration_s: float,
                                     peak_flops_per_s: float) -> np.ndarray:
    """G = C / (F T): the chips a run needs at utilization 1 (G10) [R]."""
    return np.asarray(flop, dtype=float) / (peak_flops_per_s * duration_s)


def compute_bound_tokens(peak_flops_per_s: float, hbm_bytes_per_s: float,
                         bytes_per_value: float = 2.0, weight_passes: float = 4.0) -> float:
    """Tokens per local matmul for FLOP time to match weight-traffic time (G11) [R]/[C].

    A matmul whose weights dominate its traffic is compute-bound when b >= w F / (2 M) tokens;
    with ml_par_sim's 4 weight passes against 6 FLOP per parameter and token it is
    b >= (weight_passes / 6) w F / M, i.e. (4/3) F/M for w = 2 and ``weight_passes = 4``.
    The single-matmul form is :func:`compute_bound_tokens_simple`.
    """
    return weight_passes / FLOP_PER_PARAM_PER_TOKEN * bytes_per_value * peak_flops_per_s / hbm_bytes_per_s


def compute_bound_tokens_simple(peak_flops_per_s: float, hbm_bytes_per_s: float,
                                bytes_per_value: float = 2.0) -> float:
    """b >= w F / (2 M): one (b x k)(k x n) matmul whose weights dominate its bytes [R]."""
    return bytes_per_value * peak_flops_per_s / (2.0 * hbm_bytes_per_s)
