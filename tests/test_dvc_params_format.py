"""params.yaml is kept in the layout ``dvc exp run -S`` writes: setting one value changes that
one line (``scripts/format_params.py`` restores the layout after a hand edit)."""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path

import pytest
import yaml

from pipeline.config import PROJ_ROOT

apply_overrides = pytest.importorskip("dvc.utils.hydra").apply_overrides
PARAMS = PROJ_ROOT / "params.yaml"


def _diff(a: Path, b: Path) -> list[str]:
    return [line for line in difflib.unified_diff(a.read_text().splitlines(),
                                                  b.read_text().splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def test_params_yaml_is_in_dvcs_layout(tmp_path):
    copy = tmp_path / "params.yaml"
    shutil.copy(PARAMS, copy)
    apply_overrides(copy, [])
    assert _diff(PARAMS, copy) == [], (
        "params.yaml is not in the layout `dvc exp run -S` writes (block lists, no comment or "
        "blank line right after a list): run `.venv/bin/python scripts/format_params.py`")


@pytest.mark.parametrize("override, line", [
    ("fit.scale=linear", "  scale: linear"),
    ("compare.efficiency_threshold=0.6", "  efficiency_threshold: 0.6"),
    ("ingest.logs.workers=4", "    workers: 4"),
    ("report.gap_runs=30", "  gap_runs: 30"),
])
def test_dvc_exp_run_set_changes_one_line(tmp_path, override, line):
    copy = tmp_path / "params.yaml"
    shutil.copy(PARAMS, copy)
    apply_overrides(copy, [override])   # what `dvc exp run -S` does to params.yaml
    changed = _diff(PARAMS, copy)
    assert len(changed) == 2 and changed[0].startswith("-") and changed[1].startswith("+")
    assert changed[1][1:].split("#")[0].rstrip() == line
    key, value = override.split("=")
    loaded = yaml.safe_load(copy.read_text())
    for part in key.split("."):
        loaded = loaded[part]
    assert str(loaded) == value
