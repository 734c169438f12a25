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


#: the files whose tests take longest in ``make test`` (its ``--durations`` list), longest first
LONGEST_FILES = ("test_dvc_shell.py", "test_operations.py", "test_report_hostile.py",
                 "test_e2e_job_folders.py", "test_theory_bounds.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first, then files by their number of ``slow`` tests, each file's
    tests in their own order.

    ``make test`` hands whole files to its worker processes (pytest-xdist ``--dist loadfile``,
    ``--no-loadscope-reorder``) in this order: the long files start first and the many short
    ones fill in behind them, so no worker is left with a long file at the end.
    """
    slow_per_file: dict[Path, int] = {}
    for item in items:
        slow_per_file[item.path] = slow_per_file.get(item.path, 0) + bool(
            item.get_closest_marker("slow"))

    def rank(item: pytest.Item) -> tuple[int, int]:
        name = item.path.name
        first = LONGEST_FILES.index(name) if name in LONGEST_FILES else len(LONGEST_FILES)
        return first, -slow_per_file[item.path]

    items.sort(key=rank)
