"""The analyst notebooks run top to bottom with nbclient against a pipeline output.

The pipeline output here is the synthetic upstream of ``tests/synthetic_upstream.py`` plus real
compare/report runs on it; the notebooks find it through ``SCALEWALL_PROCESSED`` and
``SCALEWALL_METRICS`` (their defaults are ``../data/processed`` and ``../reports/metrics``).
The notebooks are stored without outputs; this test checks that too.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from synthetic_upstream import shared_downstream

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
NAMES = ("01-explore-runs.ipynb", "02-fit-laws.ipynb", "03-theory-frontier.ipynb",
         "04-calibrate.ipynb", "05-plan.ipynb")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pipeline_output(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return shared_downstream(tmp_path_factory)


@pytest.mark.parametrize("name", NAMES)
def test_stored_without_outputs(name: str) -> None:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, name


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs(name: str, pipeline_output: dict[str, Path], monkeypatch) -> None:
    monkeypatch.setenv("SCALEWALL_PROCESSED", str(pipeline_output["processed"]))
    monkeypatch.setenv("SCALEWALL_METRICS", str(pipeline_output["metrics"]))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute(env=dict(os.environ))
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                   for o in outputs)
    if name.startswith("01"):
        assert "runs, 4 rejects, 4 series" in text
    elif name.startswith("02"):
        assert "syn: 8b-h100-strong | strong scaling | 7 points" in text
        assert "amdahl" in text and "usl" in text  # every law compared
    elif name.startswith("03"):
        assert "changed" in text and "knee_flop" in text
    elif name.startswith("04"):
        # the per-family parameters, then the series and its larger-N layouts predicted
        assert "eta" in text and "omega" in text and "c0_s" in text
        assert "predicted MFU" in text and "95% high" in text and "binding" in text
    else:  # the planner's table for both models and the fixed layout at each N
        assert "llama-3-70b" in text and "llama-3.1-405b" in text and "memory_bytes" in text
        assert "N = 512: " in text and "N = 8192: " in text
