"""Shared fixtures. Tests that read ../shared skip cleanly where it is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

PROJ_ROOT = Path(__file__).resolve().parents[1]
SHARED = PROJ_ROOT.parent / "shared"
MLPERF_TRACES = SHARED / "traces" / "mlperf"
REFERENCE_DATA = SHARED / "reference-data"


@pytest.fixture(scope="module")
def params() -> dict:
    """The project's params.yaml (tests must not mutate it; build a new dict instead)."""
    from pipeline.config import load_params
    return load_params(PROJ_ROOT / "params.yaml")


@pytest.fixture(scope="module")
def catalog():
    """The shipped hardware and model catalog."""
    from pipeline.catalog import load_catalog
    return load_catalog(PROJ_ROOT / "data" / "catalog")


@pytest.fixture
def mlperf_traces() -> Path:
    if not MLPERF_TRACES.is_dir():
        pytest.skip(f"{MLPERF_TRACES} is absent: MLPerf trace tests need ../shared")
    return MLPERF_TRACES


@pytest.fixture
def reference_data() -> Path:
    if not REFERENCE_DATA.is_dir():
        pytest.skip(f"{REFERENCE_DATA} is absent: reference-data tests need ../shared")
    return REFERENCE_DATA
