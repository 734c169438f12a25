"""The executor setting (params.yaml ``executor``; pipeline/processes.py): every stage's outputs
are the same bytes whether its maps ran in this machine's process pool or on a Dask cluster.

The shipped data go through every stage of dvc.yaml, by the stage commands dvc.yaml runs, twice:
under ``local`` and under ``local-cluster`` (a two-worker ``dask.distributed.LocalCluster``
started by each stage); every out, metric and plot file must have the same md5. The grids are
``coarse_settings.coarse``'s (every step runs, on fewer frontier points): the maps under test
are the same ones.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from coarse_settings import coarse

PROJ_ROOT = Path(__file__).resolve().parents[1]
LINKED = ("pipeline", "data/raw", "data/catalog", "scripts")


def _stages() -> dict:
    return yaml.safe_load((PROJ_ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]


def _outputs(stages: dict) -> list[str]:
    out = []
    for stage in stages.values():
        for kind in ("outs", "metrics", "plots"):
            out += [next(iter(e)) if isinstance(e, dict) else e for e in stage.get(kind) or []]
    return out


def _project(root: Path, kind: str) -> Path:
    """A folder that runs the stages as dvc.yaml does: the code and inputs linked, params.yaml
    on the coarse grids with ``executor.kind`` set."""
    for rel in LINKED:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).symlink_to(PROJ_ROOT / rel, target_is_directory=True)
    params = coarse(yaml.safe_load((PROJ_ROOT / "params.yaml").read_text(encoding="utf-8")))
    params["executor"].update(kind=kind, cluster_workers=2)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return root


def _md5s(root: Path, outputs: list[str]) -> dict[str, str]:
    found = {}
    for rel in outputs:
        path = root / rel
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for f in files:
            found[f.relative_to(root).as_posix()] = hashlib.md5(f.read_bytes()).hexdigest()
    return found


def _run_all(root: Path, stages: dict) -> dict[str, str]:
    """Each stage's command in dvc.yaml's order; the stderr of each (the executor's report)."""
    env = {k: v for k, v in os.environ.items() if k != "SCALEWALL_WORKERS"}
    said = {}
    for name, stage in stages.items():
        cmd = shlex.split(stage["cmd"])
        assert cmd[0] == "scripts/python"
        done = subprocess.run([sys.executable, *cmd[1:]], cwd=root, env=env, capture_output=True,
                              text=True, timeout=1200)
        assert done.returncode == 0, f"{name}: {done.stderr[-3000:]}"
        said[name] = done.stderr
    return said


@pytest.mark.slow
def test_every_output_is_the_same_bytes_under_local_and_a_dask_cluster(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    stages = _stages()
    outputs = _outputs(stages)
    local = _project(tmp_path / "local", "local")
    _run_all(local, stages)
    cluster = _project(tmp_path / "cluster", "local-cluster")
    said = _run_all(cluster, stages)
    a, b = _md5s(local, outputs), _md5s(cluster, outputs)
    assert len(a) >= len(outputs), sorted(set(outputs) - set(a))
    assert {k for k in a if a[k] != b.get(k)} == set()
    # the maps really ran on the cluster: the stages that map report their tasks there
    tasks = {name: int(text.split(" maps, ")[1].split(" tasks")[0])
             for name, text in said.items() if " tasks on the cluster" in text}
    assert set(tasks) == {"ingest", "fit", "theory", "calibrate"}, said
    assert tasks["ingest"] > 0 and tasks["calibrate"] > 0, tasks
