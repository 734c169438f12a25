"""The import contracts of .importlinter hold, and the linter does detect a broken one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config import PROJ_ROOT

LINT = Path(sys.executable).with_name("lint-imports")


def _lint(config: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT), "--config", str(config)], cwd=PROJ_ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not LINT.exists() and shutil.which("lint-imports") is None,
                    reason="import-linter not installed")
def test_project_contracts_are_kept():
    done = _lint(PROJ_ROOT / ".importlinter")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "7 kept, 0 broken" in done.stdout


@pytest.mark.skipif(not LINT.exists(), reason="import-linter not installed")
def test_a_broken_contract_is_reported(tmp_path):
    # compare reads the shared measures: forbidding that import must fail the check.
    config = tmp_path / "broken.ini"
    config.write_text("[importlinter]\nroot_package = pipeline\n\n"
                      "[importlinter:contract:x]\nname = x\ntype = forbidden\n"
                      "source_modules =\n    pipeline.compare\n"
                      "forbidden_modules =\n    pipeline.measures\n")
    done = _lint(config)
    assert done.returncode == 1 and "0 kept, 1 broken" in done.stdout


def _contract_modules() -> list[str]:
    return sorted(f"pipeline.{p.parent.name}.contract"
                  for p in (PROJ_ROOT / "pipeline").glob("*/contract.py"))


def test_contract_modules_import_only_contracts():
    """A stage's contract module may be imported by any reader (.importlinter ignores imports of
    `*.contract`) because it brings in no stage code: only pipeline.contracts, pipeline.vocab and
    other contract modules."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("pipeline")
    allowed = {"pipeline.contracts", "pipeline.vocab", *_contract_modules()}
    modules = _contract_modules()
    assert {"pipeline.ingest.contract", "pipeline.fit.contract", "pipeline.theory.contract",
            "pipeline.calibrate.contract", "pipeline.compare.contract"} <= set(modules)
    for module in modules:
        bad = graph.find_modules_directly_imported_by(module) - allowed
        assert not bad, f"{module} imports {sorted(bad)}"
