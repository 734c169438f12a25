"""params.yaml loading: a broken configuration names the offending field."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from pipeline.__main__ import app
from pipeline.config import PARAMS_PATH, ConfigError, get, load_params


def test_shipped_params_load_and_have_every_stage():
    params = load_params(PARAMS_PATH)
    assert {"ingest", "fit", "theory", "compare", "report"} <= set(params)


def test_get_walks_dotted_paths_and_checks_types():
    params = {"fit": {"interval": 0.95, "laws": ["usl"], "flag": True, "n": 3}}
    assert get(params, "fit.interval", float) == 0.95
    assert get(params, "fit.n", float) == 3.0 and isinstance(get(params, "fit.n", float), float)
    assert get(params, "fit.missing", int, default=7) == 7
    with pytest.raises(ConfigError, match=r"'fit\.missing'"):
        get(params, "fit.missing", int)
    with pytest.raises(ConfigError, match=r"'fit\.laws' must be int"):
        get(params, "fit.laws", int)
    with pytest.raises(ConfigError, match=r"'fit\.flag' must be int or float"):
        get(params, "fit.flag", (int, float))


def test_unreadable_and_invalid_params_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot be read"):
        load_params(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("ingest: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_params(bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_params(scalar)


def test_cli_reports_a_broken_params_file_with_exit_code_2(tmp_path):
    bad = tmp_path / "params.yaml"
    bad.write_text("- not a mapping\n")
    result = CliRunner().invoke(app, ["fit", "--params", str(bad)])
    assert result.exit_code == 2
    assert "mapping" in result.output
