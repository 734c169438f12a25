"""The hostile-input corpus through the ingest stage (issue 13, item 7).

``python -m pipeline ingest`` on ``corpus.build``'s folder exits 0; every corpus file ends as
the exact reject reason ``corpus.EXPECTED`` gives (or as a run where the hostile part is only
skipped), and runs + rejects account for every record of every file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def run_ingest(data: Path, out: Path, **ingest: object) -> subprocess.CompletedProcess:
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    params["ingest"]["mlperf_roots"] = []
    params["ingest"].update(ingest)
    (out / "params.yaml").parent.mkdir(parents=True, exist_ok=True)
    (out / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "pipeline", "ingest", "--published", str(data / "published"),
         "--logs", str(data / "logs"), "--catalog", str(ROOT / "data" / "catalog"),
         "--out", str(out / "processed"), "--metrics", str(out / "ingest.json"),
         "--params", str(out / "params.yaml")],
        cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("hostile")
    data = base / "data"
    expected = corpus.build(data)
    proc = run_ingest(data, base / "out")
    return {"data": data, "out": base / "out", "expected": expected, "proc": proc}


@pytest.mark.slow
def test_stage_exits_0_with_bounded_output(ingested: dict) -> None:
    proc = ingested["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(proc.stderr) < 5000  # no traceback, no value dumps
    assert not list((ingested["out"] / "processed").glob(".*"))  # no scratch or partial files


@pytest.mark.slow
def test_every_file_ends_as_expected(ingested: dict) -> None:
    assert corpus.check(ingested["expected"], ingested["data"], ingested["out"] / "processed",
                        ROOT) == []


@pytest.mark.slow
def test_accounting(ingested: dict) -> None:
    metrics = json.loads((ingested["out"] / "ingest.json").read_text())
    t = metrics["totals"]
    assert t["read"] == t["runs"] + t["rejects"]
    rejects = pd.read_parquet(ingested["out"] / "processed" / "rejects.parquet")
    assert rejects["reason"].str.len().max() <= 2100  # bounded messages (pipeline.bounded)
    assert rejects["record"].str.len().max() <= 600


def test_mlperf_roots_outside_project_stop_the_stage(tmp_path: Path) -> None:
    (tmp_path / "data" / "published").mkdir(parents=True)
    (tmp_path / "data" / "logs").mkdir()
    proc = run_ingest(tmp_path / "data", tmp_path / "out", mlperf_roots=[str(tmp_path)])
    assert proc.returncode == 2
    assert "field 'ingest.mlperf_roots.0'" in proc.stderr and "outside the project" in proc.stderr
    assert "Traceback" not in proc.stderr
