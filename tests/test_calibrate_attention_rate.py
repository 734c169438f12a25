"""Attention priced below the GEMM rate: a fitted attention_efficiency in a physical range."""

from __future__ import annotations

from pipeline.calibrate import fitting as ft
from pipeline.config import settings


def test_selected_form_fits_attention_efficiency_in_a_physical_range(params) -> None:
    cfg = settings(params, "calibrate")
    assert "attention_efficiency" in cfg.forms[cfg.criterion if cfg.criterion in cfg.forms
                                               else "critical_path"]
    lo, hi = ft.BOUNDS["attention_efficiency"]
    # fused attention kernels run at 0.2-1 of the GEMM rate (FlashAttention-2/3 report 35-75%
    # of peak forward on A100/H100 against the GEMMs' ~80%): never above the GEMMs
    assert (lo, hi) == (0.2, 1.0)
