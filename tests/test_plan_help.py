"""``plan --help`` shows every axis with an example: each option that states something about the
job (not the file paths or the output form) and each ``--layout`` key appears in an example of
the help's epilog, the help prints them, and every example runs (exit 0)."""

from __future__ import annotations

import shlex

import pytest
import typer
from typer.testing import CliRunner

from pipeline.__main__ import app
from pipeline.config import PROJ_ROOT
from pipeline.plan.help import EXAMPLES
from pipeline.plan.request import LAYOUT_KEYS

OUTPUTS = (PROJ_ROOT / "data/processed/calibration.parquet",
           PROJ_ROOT / "reports/metrics/theory.json")
# options about where files are or how the answer prints, not about the job
NOT_AXES = {"--processed", "--catalog", "--theory-metrics", "--params", "--top", "--json",
            "--help"}


def _plan_command():
    group = typer.main.get_command(app)
    return group.get_command(None, "plan")  # type: ignore[arg-type]


def _words() -> set[str]:
    out: set[str] = set()
    for _, command in EXAMPLES:
        for word in shlex.split(command):
            out.add(word)
            if word.startswith("--layout") or "=" in word:
                out |= {part.split("=")[0] for part in word.split(",")}
    return out


def test_every_axis_has_an_example():
    words = _words()
    missing = []
    for param in _plan_command().params:
        flags = [*param.opts, *param.secondary_opts]
        if not any(f.startswith("--") for f in flags) or set(flags) & NOT_AXES:
            continue
        if not set(flags) & words:
            missing.append(flags[0])
    assert not missing, missing
    keys = {k for k in LAYOUT_KEYS if k != "vp"}  # vp: an alias of v
    assert keys <= words, keys - words


def test_help_prints_the_examples():
    result = CliRunner().invoke(app, ["plan", "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0
    assert "Examples, one per axis" in result.output
    for what, command in EXAMPLES:
        assert what in result.output and command.split(" --")[0] in result.output


def test_help_reads_whole_in_an_80_column_terminal():
    """Every option's name and every example print whole at 80 columns: no ellipsis cuts
    them (typer's rich panels did: ``--global-batch-…``), no command breaks at a hyphen, and
    no markup escape shows (``\\[required]``)."""
    result = CliRunner().invoke(app, ["plan", "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    out = result.output
    assert "…" not in out and "\\[" not in out
    for param in _plan_command().params:
        for flag in (*param.opts, *param.secondary_opts):
            if flag.startswith("--"):
                assert flag in out, flag
    lines = out.splitlines()
    for _, command in EXAMPLES:
        assert "    " + command in lines, command


@pytest.mark.skipif(not all(p.exists() for p in OUTPUTS), reason="pipeline outputs absent")
@pytest.mark.parametrize("what, command", EXAMPLES, ids=[w[:30] for w, _ in EXAMPLES])
def test_each_example_runs(what, command):
    result = CliRunner().invoke(app, shlex.split(command)[1:], catch_exceptions=False)
    assert result.exit_code == 0, (what, result.output)
