"""Blackwell GEMM efficiency from OpenXLA's sm_100 matmul table (data/catalog/gemm_efficiency.csv):
golden figures, the same-absolute-rate rule for the derived parts, and GB300's same-share rule
(its 1.4 kW affords the ~1.11^3 power its rated clock needs over B200's 1 kW; GB200's 1.2 kW not)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline.calibrate.hardware import gemm_max_efficiency, load_gemm

CATALOG = Path(__file__).resolve().parents[1] / "data" / "catalog"
# OpenXLA kDefaultMatmulPTable, sm_100, b=4 m=n=k=4096 (FLOP/s)
SM100_BF16, SM100_FP8 = 1.670467342710337e15, 3.279676742061148e15


def _eta(chip: str, precision: str) -> float:
    table = load_gemm(CATALOG)
    return float(gemm_max_efficiency(table, np.array([chip], object),
                                     np.array([precision], object))[0])


@pytest.mark.parametrize("chip,precision,peak,rate", [
    ("B200-SXM-180GB", "bf16", 2.25e15, SM100_BF16), ("B200-SXM-180GB", "fp8", 4.5e15, SM100_FP8),
    ("GB200", "bf16", 2.5e15, SM100_BF16), ("GB200", "fp8", 5e15, SM100_FP8),
    ("B300-SXM-270GB", "bf16", 2.25e15, SM100_BF16)])
def test_blackwell_rows_give_the_measured_absolute_rate(chip, precision, peak, rate) -> None:
    """efficiency x the catalog's dense peak = the sm_100 table's best rate (within rounding)."""
    assert _eta(chip, precision) * peak == pytest.approx(rate, rel=2e-3)


def test_blackwell_reaches_less_of_its_peak_than_hopper() -> None:
    assert _eta("B200-SXM-180GB", "bf16") == pytest.approx(0.742)
    assert _eta("B200-SXM-180GB", "bf16") < _eta("H100-SXM5-80GB", "bf16")


@pytest.mark.parametrize("precision,b200_peak", [("bf16", 2.25e15), ("fp8", 4.5e15)])
def test_gb300_reaches_the_share_of_its_peak_b200_reaches(precision, b200_peak) -> None:
    """GB300 (1.4 kW against B200's 1 kW, verda.com/blog/gb300-nvl72-architecture): the sm_100
    rate's share of B200's peak, so above the absolute rate GB200 is held at."""
    rate = SM100_BF16 if precision == "bf16" else SM100_FP8
    assert _eta("GB300", precision) == pytest.approx(rate / b200_peak, rel=2e-3)
    assert _eta("GB300", precision) > _eta("GB200", precision)
