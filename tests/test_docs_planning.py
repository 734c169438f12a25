"""docs/planning.md's commands run as written: every ``scalewall plan`` line of its examples
exits 0, or 2 where the line is marked ``# exit 2``, and its output holds the lines the doc
quotes under it (``> ``-prefixed lines of the example)."""

from __future__ import annotations

import shlex

import pytest
from typer.testing import CliRunner

from pipeline.__main__ import app
from pipeline.config import PROJ_ROOT

DOC = PROJ_ROOT / "docs/planning.md"
OUTPUTS = (PROJ_ROOT / "data/processed/calibration.parquet",
           PROJ_ROOT / "reports/metrics/theory.json")
pytestmark = pytest.mark.skipif(not all(p.exists() for p in OUTPUTS),
                                reason="pipeline outputs absent (run dvc repro)")


def examples() -> list[tuple[str, int, list[str]]]:
    """(command, expected exit status, quoted output lines) of each example block."""
    out: list[tuple[str, int, list[str]]] = []
    inside = False
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            inside = not inside
            continue
        if not inside:
            continue
        if line.startswith("$ scalewall plan "):
            command, _, mark = line[2:].partition("  # ")
            out.append((command.strip(), 2 if mark.strip() == "exit 2" else 0, []))
        elif line.startswith("> ") and out:
            out[-1][2].append(line[2:])
    return out


def test_the_doc_has_examples():
    assert len(examples()) >= 5


@pytest.mark.parametrize("command, status, quoted", examples(), ids=lambda x: str(x)[:60])
def test_each_example_runs_as_documented(command, status, quoted):
    args = shlex.split(command)[1:]  # drop "scalewall"
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == status, result.output
    for text in quoted:
        assert text in result.output, text
