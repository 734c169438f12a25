"""Partial pooling of the family parameters (pipeline/calibrate/fitting.py, docs/theory.md
§10.3): a family's deviation from the population has a prior sd that shrinks with the family's
distinct configurations, so a family fitted on one configuration borrows the population's values
and one fitted on many keeps today's constant prior."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipeline.calibrate import fitting as ft
from pipeline.calibrate.estimate import bare_model, load_data
from pipeline.calibrate.simulate import simulate_runs

CATALOG = Path(__file__).resolve().parents[1] / "data" / "catalog"
LATENCY = {"kernel_latency_s": 3e-6, "scaleup_latency_s": 2e-6}
# a slower software for the few runs of the second family: its own fit would move away
SLOW = {"compute_efficiency": 0.5, "tp_overlap": 0.6, "dp_overlap": 0.7, "fixed_s": 0.1,
        "layer_overhead_s": 5e-4, "attention_efficiency": 1.0, "expert_overhead_s": 0.0}


@pytest.fixture(scope="module")
def two_families(catalog):
    """80 simulated megatron runs and 3 of a slower 'deepspeed' family (one configuration
    measured three times)."""
    base = bare_model(catalog, CATALOG, LATENCY, True, 128.0)
    big = simulate_runs(11, base, n_runs=80, n_sources=4, sigma_u=0.02)
    few = simulate_runs(12, base, n_runs=1, n_sources=1, sigma=0.0, sigma_u=0.0, theta=SLOW)
    few = few.loc[[0, 0, 0]].assign(run_id=["few0", "few1", "few2"], source="few",
                                     series_id="few/s0")
    data = load_data(pd.concat([big, few], ignore_index=True), base)
    rows = data.subset(data.fit)
    family = np.where(rows.source == "few", "deepspeed", rows.family).astype(object)
    return replace(rows, family=family), data.log_t[data.fit]


def test_repeated_runs_count_as_one_configuration(two_families) -> None:
    rows, _ = two_families
    fams = sorted(set(rows.family.tolist()))
    m = ft.distinct_configs(rows, ft._positions(rows.family, fams), len(fams))
    assert dict(zip(fams, m.tolist())) == {"deepspeed": 1.0, "megatron": 80.0}


def test_prior_sd_fades_with_configurations_and_is_constant_without_pooling() -> None:
    sd = ft.family_prior_sd(np.array([1.0, 7.0, 700.0]), 7, pool_configs=1.0)
    assert sd[0] == pytest.approx(ft.FAMILY_SD * np.sqrt(1 / 8))
    assert sd[1] == pytest.approx(ft.FAMILY_SD * np.sqrt(0.5))
    assert sd[2] == pytest.approx(ft.FAMILY_SD, rel=0.01)
    np.testing.assert_array_equal(ft.family_prior_sd(np.array([1.0, 80.0]), 7, 0.0),
                                  [ft.FAMILY_SD, ft.FAMILY_SD])


def test_a_family_of_one_configuration_is_pulled_to_the_population(two_families) -> None:
    """Without pooling the 3 slow runs pull their family's compute efficiency well below the
    population's; with a strong prior (m_0 = 1,000 configurations per parameter) the family
    gets the population's values; the default lies between."""
    rows, log_t = two_families
    eta = ft.PARAMETERS.index("compute_efficiency")
    gap = {}
    for pool in (0.0, ft.POOL_CONFIGS_PER_PARAMETER, 1000.0):
        g = ft.fit_group(rows, log_t, playbook=False, em_rounds=2, pool_configs=pool)
        gap[pool] = abs(g.theta("deepspeed")[eta] - g.population[eta])
        if pool == 1000.0:
            np.testing.assert_allclose(g.theta("deepspeed"), g.population, rtol=0.02,
                                       atol=1e-4)
    assert gap[0.0] > 0.05
    assert gap[1000.0] < 0.01
    assert gap[1000.0] < gap[ft.POOL_CONFIGS_PER_PARAMETER] < gap[0.0]
