"""The CLI registers the stage commands on first use: a one-shot ``plan`` (or ``metrics``)
imports neither the runner nor the contracts (pandera), which were most of its start-up time;
the stage commands are still there, in ``dvc repro``'s order."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from pipeline.config import PROJ_ROOT
from tests.workspace import shipped_mark

# imports a plan answer never needs: the runner and every stage's contract, pandera (and with
# it hypothesis), the fit laws
HEAVY = ("pipeline.runner", "pipeline.schema", "pipeline.contracts", "pandera", "hypothesis",
         "statsmodels", "pipeline.fit")


def _modules_after(code: str) -> set[str]:
    env = dict(os.environ, PYTHONPATH=str(PROJ_ROOT))
    out = subprocess.run([sys.executable, "-c", code + "\nimport json, sys\n"
                          "print(json.dumps(sorted(sys.modules)))"],
                         cwd=PROJ_ROOT, env=env, capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@shipped_mark("data/processed/calibration.parquet", "reports/metrics/theory.json")
def test_plan_imports_no_stage_code_or_pandera():
    code = ("from typer.testing import CliRunner\nfrom pipeline.__main__ import app\n"
            "r = CliRunner().invoke(app, ['plan', 'llama-3-70b', 'H100', '--n', '512', '--json'])\n"
            "assert r.exit_code == 0, r.output")
    loaded = _modules_after(code)
    assert "pipeline.plan.search" in loaded  # the answer was computed
    assert not {m for m in loaded if m.split(".")[0] in HEAVY or m in HEAVY}


def test_stage_commands_are_listed_in_dvc_order_and_run():
    from pipeline.__main__ import app
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    listed = result.stdout.split("Commands:", 1)[1].splitlines()
    names = [line.split()[0] for line in listed if line.startswith("  ") and line.split()]
    stages = [n for n in names if n in ("ingest", "fit", "theory", "calibrate", "compare",
                                        "report")]
    assert stages == ["ingest", "fit", "theory", "calibrate", "compare", "report"]
    assert {"plan", "validate", "metrics", "preflight"} <= set(names)
    fit_help = CliRunner().invoke(app, ["fit", "--help"])
    assert fit_help.exit_code == 0 and "--processed" in fit_help.stdout


def test_unknown_command_still_says_so():
    from pipeline.__main__ import app
    result = CliRunner().invoke(app, ["fitt"])
    assert result.exit_code == 2
    assert "fitt" in result.output
