"""Golden values G4-G11 (docs/theory.md §2-§4) (exact arithmetic, rel 1e-3)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.theory import laws as lw

LAWS = lw.Laws()  # the ml_par_sim constants: rho 20, L0 120, B0 2^22, exponents 1/6
T90 = 90 * lw.SECONDS_PER_DAY
H100_BF16, H100_HBM = 989.5e12, 3.35e12


def close(actual, expected):
    assert np.asarray(actual) == pytest.approx(expected, rel=1e-3)


@pytest.mark.parametrize("flop, n, d", [(1e28, 9.1287e12, 1.8257e14),   # G4
                                        (2e31, 4.0825e14, 8.1650e15)])  # G5
def test_chinchilla_params_and_tokens(flop, n, d):
    close(lw.active_params(flop, LAWS), n)
    close(lw.training_tokens(flop, LAWS), d)


@pytest.mark.parametrize("flop, batch, layers, width, steps", [
    (1e25, 4.1943e6, 120.0, 15510, 1.3765e6),     # G6
    (1e28, 1.3264e7, 379.5, 49047, 1.3765e7),     # G7
    (2e31, 4.7079e7, 1347.0, 174095, 1.7343e8),   # G8
])
def test_ml_par_sim_laws(flop, batch, layers, width, steps):
    close(lw.critical_batch_tokens(flop, LAWS), batch)
    close(lw.n_layers(flop, LAWS), layers)
    close(lw.d_model(flop, LAWS), width)
    close(lw.optimizer_steps(flop, LAWS), steps)


def test_latency_budget_per_layer_g8():
    close(lw.latency_per_layer_budget_s(2e31, T90, LAWS) * 1e6, 33.29)


@pytest.mark.parametrize("tau_us, wall", [(10, 2.216e32), (20, 5.540e31), (33.3, 1.998e31),
                                          (50, 8.864e30)])
def test_closed_form_latency_wall_g9(tau_us, wall):
    close(lw.latency_wall_flop(tau_us * 1e-6, T90, LAWS), wall)


def test_closed_form_wall_is_consistent_with_the_budget():
    # At C_wall the per-layer budget T/(S L) equals tau, for any batch exponent too.
    for laws in (LAWS, lw.Laws(batch_exponent=1 / 3), lw.Laws(layers_anchor=60)):
        wall = lw.latency_wall_flop(25e-6, T90, laws)
        close(lw.latency_per_layer_budget_s(wall, T90, laws), 25e-6)


def test_wall_moves_up_with_batch_scaling_and_fatter_models():
    base = lw.latency_wall_flop(30e-6, T90, LAWS)
    assert lw.latency_wall_flop(30e-6, T90, lw.Laws(batch_exponent=0.25)) > base
    assert lw.latency_wall_flop(30e-6, T90, lw.Laws(layers_anchor=60)) > base


def test_wall_rejects_a_batch_exponent_without_a_wall():
    with pytest.raises(ValueError, match="batch_exponent"):
        lw.latency_wall_flop(30e-6, T90, lw.Laws(batch_exponent=0.7))


@pytest.mark.parametrize("flop, gpus", [(2e28, 2.599e6), (2e31, 2.599e9)])  # G10
def test_accelerators_at_full_utilization_g10(flop, gpus):
    close(lw.accelerators_at_full_utilization(flop, T90, H100_BF16), gpus)


def test_compute_bound_token_floor_g11():
    close(lw.compute_bound_tokens_simple(H100_BF16, H100_HBM, bytes_per_value=2.0), 295.4)
    close(lw.compute_bound_tokens(H100_BF16, H100_HBM, bytes_per_value=2.0), 393.6)


def test_aspect_ratio_is_constant_at_baseline():
    flop = np.logspace(24, 33, 10)
    ratio = lw.d_model(flop, LAWS) / lw.n_layers(flop, LAWS)
    assert np.allclose(ratio, 129.25, rtol=1e-3)
