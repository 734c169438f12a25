"""Ingest roots given as URLs (pipeline/ingest/roots.py): a ``file://`` URL reads the folder
it names, with the outputs of its path; another protocol is refused naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pipeline.__main__ import app
from pipeline.config import load_params
from test_e2e_logs import STEP_TIME_MS, megatron_log

CATALOG = Path(__file__).resolve().parents[1] / "data" / "catalog"


def _ingest(tmp_path: Path, logs: str, out: str, mlperf: list[str] | None = None):
    params = load_params()
    params["ingest"]["mlperf_roots"] = mlperf or []
    params["ingest"]["allow_mlperf_roots_outside_project"] = True
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    (tmp_path / "published").mkdir(exist_ok=True)
    return CliRunner().invoke(app, [
        "ingest", "--published", str(tmp_path / "published"), "--logs", logs,
        "--catalog", str(CATALOG), "--out", str(tmp_path / out),
        "--metrics", str(tmp_path / out / "ingest.json"), "--params", str(tmp_path / "params.yaml")])


def test_a_file_url_root_reads_the_folder_it_names(tmp_path: Path) -> None:
    logs = tmp_path / "logs" / "sweep"
    logs.mkdir(parents=True)
    (logs / "run.yaml").write_text("accelerator: H100-SXM5-80GB\nmodel: llama3-8b\n")
    for n, ms in STEP_TIME_MS.items():
        (logs / f"n{n}.log").write_text(megatron_log(n, ms))
    by_path = _ingest(tmp_path, str(tmp_path / "logs"), "a")
    by_url = _ingest(tmp_path, (tmp_path / "logs").as_uri(), "b")
    assert by_path.exit_code == 0 and by_url.exit_code == 0, by_url.output
    for name in ("runs.parquet", "rejects.parquet", "series.parquet", "steps.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    import pandas as pd
    assert len(pd.read_parquet(tmp_path / "b" / "runs.parquet")) == len(STEP_TIME_MS)


@pytest.mark.parametrize("where", ["logs", "mlperf"])
def test_an_object_store_url_is_refused_naming_the_field(tmp_path: Path, where: str) -> None:
    (tmp_path / "logs").mkdir()
    url = "s3://fleet-logs/2026/"
    result = (_ingest(tmp_path, url, "a") if where == "logs"
              else _ingest(tmp_path, str(tmp_path / "logs"), "a", mlperf=[url]))
    assert result.exit_code == 2
    field = "--logs" if where == "logs" else "ingest.mlperf_roots.0"
    assert field in result.output and "s3://" in result.output and "mount" in result.output
    assert not (tmp_path / "a" / "runs.parquet").exists()
