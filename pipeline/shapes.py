"""A run's model shape and schedule where its source does not state them: one rule for every
consumer (the theory's per-run ceilings, pipeline/theory/bounds.py, and the calibrated model's
regressors, pipeline/calibrate/features.py).

* Depth and width from the parameter count, ``N_act = 12 L d^2`` (a transformer block holds
  ``4 d^2`` attention and ``8 d^2`` MLP weights; Kaplan et al. 2020, arXiv:2001.08361, §2.1):
  with neither stated, ``d / L`` = the aspect ratio (``theory.bounds.aspect_ratio``; Kaplan et
  al. Fig. 5: the loss depends only weakly on it over a wide range); with one stated, the other
  from ``12 L d^2``. A guessed depth is raised to the stated pipeline degree (a pipeline needs
  a layer per stage), keeping ``12 L d^2``.
* Microbatches per step ``m = B / (dp b T)`` (tokens per step over the tokens of one microbatch
  on each replica), rounded, at least 1. Where the batch is not stated it is taken as
  ``dp b T m`` with ``m = 4 pp`` under pipelining and 1 without: the 1F1B bubble is
  ``(pp - 1) / m`` of the step (Narayanan et al. 2021, arXiv:2104.04473, §2.2), below 25% at
  ``m = 4 pp``.

All functions are vectorised over runs (numpy arrays; NaN or <= 0 = not stated).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: parameters per layer per d_model^2 of a dense transformer block (4 attention + 8 MLP)
PARAMS_PER_LAYER_PER_D2 = 12.0
#: microbatches per pipeline stage assumed where a pipelined run states no batch
MICROBATCHES_PER_STAGE = 4.0


@dataclass(frozen=True)
class Shape:
    """Depth and width of each run, and how each was obtained (boolean masks over runs)."""

    n_layers: np.ndarray
    d_model: np.ndarray
    from_params: np.ndarray      # neither stated: both from N at d/L = aspect ratio
    d_from_layers: np.ndarray    # d from N and the stated L
    layers_from_d: np.ndarray    # L from N and the stated d
    raised_to_pp: np.ndarray     # a guessed L below the stated pp, raised to pp


def complete_shape(active_params: np.ndarray, n_layers: np.ndarray, d_model: np.ndarray,
                   pp: np.ndarray, aspect_ratio: float) -> Shape:
    """Depth and width where a run lacks them, from ``N_act = 12 L d^2`` (module docstring)."""
    active = np.asarray(active_params, dtype=float)
    layers, d = np.asarray(n_layers, dtype=float), np.asarray(d_model, dtype=float)
    k, a = PARAMS_PER_LAYER_PER_D2, aspect_ratio
    both = ~(layers > 0) & ~(d > 0)
    layers = np.where(both, np.cbrt(active / (k * a * a)), layers)
    d = np.where(both, a * layers, d)
    only_d = ~(d > 0) & (layers > 0)
    d = np.where(only_d, np.sqrt(active / (k * layers)), d)
    only_l = ~(layers > 0) & (d > 0)
    layers = np.where(only_l, active / (k * d * d), layers)
    shallow = (both | only_l) & (np.asarray(pp, dtype=float) > layers)
    layers = np.where(shallow, pp, layers)
    d = np.where(shallow, np.sqrt(active / (k * layers)), d)
    return Shape(n_layers=layers, d_model=d, from_params=both, d_from_layers=only_d,
                 layers_from_d=only_l, raised_to_pp=shallow)


def stated_or(values: np.ndarray, default: float) -> np.ndarray:
    """The stated values (> 0), ``default`` elsewhere."""
    values = np.asarray(values, dtype=float)
    return np.where(values > 0, values, default)


def default_microbatches(pp: np.ndarray) -> np.ndarray:
    """Microbatches per step assumed where the batch is not stated: 4 pp, or 1 without pp."""
    pp = np.asarray(pp, dtype=float)
    return np.where(pp > 1, MICROBATCHES_PER_STAGE * pp, 1.0)


def batch_tokens(stated: np.ndarray, dp: np.ndarray, micro_batch: np.ndarray,
                 seq_len: np.ndarray, pp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tokens per step: the stated batch, else ``dp b T m`` at the default m. Returns the batch
    and the mask of runs whose batch was assumed."""
    stated = np.asarray(stated, dtype=float)
    missing = ~(stated > 0)
    assumed = np.maximum(dp, 1.0) * micro_batch * seq_len * default_microbatches(pp)
    return np.where(missing, assumed, stated), missing


def microbatches(batch_tokens: np.ndarray, dp: np.ndarray, micro_batch: np.ndarray,
                 seq_len: np.ndarray) -> np.ndarray:
    """Microbatches per step ``m = round(B / (dp b T))``, at least 1."""
    m = np.round(np.asarray(batch_tokens, dtype=float) / (np.maximum(dp, 1.0) * micro_batch
                                                          * seq_len))
    return np.where(np.isfinite(m) & (m >= 1), m, 1.0)
