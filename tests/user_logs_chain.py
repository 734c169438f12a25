"""A user's step logs and one published table through every stage to the report, run once per
test session and shared by the tests that read what comes out (``shared_user_chain``).

The logs folder holds what users bring (``write_user_logs``):
- ``llama3-sweep/``: one folder per job (``2025-08/n<N>/train.log``) under a campaign
  ``run.yaml``, the largest log gzip-compressed: one strong scaling series;
- ``single/``: a lone Megatron log with its ``run.yaml``: a run in no series;
- ``broken/``: a real NeMo log whose ``run.yaml`` gives no accelerator count: a reject.
The published table is ``nvidia_dgxc2024.csv`` (same accelerator family and model size). The
calibrate stage does not run (too few runs to calibrate): compare gets an empty
``selected_targets.parquet``. The grids are ``coarse_settings.coarse``'s: the tests read the
report's sections on the user's runs, not the frontier's numbers.

Not a test module (no ``test_`` prefix).
"""

from __future__ import annotations

import gzip
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from coarse_settings import coarse
from shared_run import once_per_session
from test_e2e_logs import STEP_TIME_MS, megatron_log

PROJ_ROOT = Path(__file__).resolve().parents[1]
CATALOG = PROJ_ROOT / "data" / "catalog"
REAL_LOGS = Path(__file__).parent / "fixtures" / "logs" / "real"
CAMPAIGN = "llama3-sweep"
PUBLISHED_TABLE = "nvidia_dgxc2024.csv"


@dataclass(frozen=True)
class Chain:
    """Where one run of the chain left its files."""

    root: Path
    processed: Path
    metrics: Path
    params_file: Path
    report_md: Path
    report_html: Path
    focus: Path


def write_job_folders(logs: Path, gz_largest: bool = False) -> dict[int, Path]:
    """One folder per job at depth 2 (``<campaign>/2025-08/n<N>/train.log``), one run.yaml."""
    campaign = logs / CAMPAIGN
    campaign.mkdir(parents=True)
    (campaign / "run.yaml").write_text("accelerator: H100-SXM5-80GB\nmodel: llama3-8b\n")
    paths = {}
    for n, ms in STEP_TIME_MS.items():
        job = campaign / "2025-08" / f"n{n}"
        job.mkdir(parents=True)
        text = megatron_log(n, ms)
        if gz_largest and n == max(STEP_TIME_MS):
            paths[n] = job / "train.log.gz"
            paths[n].write_bytes(gzip.compress(text.encode(), mtime=0))
        else:
            paths[n] = job / "train.log"
            paths[n].write_text(text)
    return paths


def write_user_logs(logs: Path) -> None:
    """The three folders of the module docstring."""
    write_job_folders(logs, gz_largest=True)
    (logs / "single").mkdir(parents=True)
    (logs / "single" / "run.yaml").write_text("accelerator: H100-SXM5-80GB\nmodel: llama3-8b\n")
    (logs / "single" / "train.log").write_text(megatron_log(64, 2600.0))
    (logs / "broken").mkdir()
    (logs / "broken" / "run.yaml").write_text("accelerator: H100-SXM5-80GB\n")
    shutil.copy(REAL_LOGS / "nemo2" / "bionemo_esm2.log", logs / "broken" / "esm2.log")


def chain_params() -> dict[str, Any]:
    """params.yaml on coarse grids, without MLPerf inputs, one log reader, and the strategy
    comparison on the one published source present."""
    from pipeline.config import load_params
    params = coarse(load_params())
    params["ingest"]["mlperf_roots"] = []
    params["ingest"]["logs"]["workers"] = 1
    params["report"].update(strategy_sources=["nvidia_dgxc2024"], strategy_models={})
    return params


def run_chain(root: Path) -> Chain:
    """ingest, fit, theory, compare and report on ``write_user_logs`` and the published table."""
    from pipeline.compare import stage as compare
    from pipeline.fit import stage as fit_stage
    from pipeline.ingest import stage as ingest_stage
    from pipeline.report import stage as report_stage
    from pipeline.schema import empty_frame
    from pipeline.theory import stage as theory_stage

    write_user_logs(root / "logs")
    (root / "published").mkdir()
    shutil.copy(PROJ_ROOT / "data" / "raw" / "published" / PUBLISHED_TABLE, root / "published")
    params = chain_params()
    params_file = root / "params.yaml"
    params_file.write_text(yaml.safe_dump(params), encoding="utf-8")
    out, metrics, plots = root / "processed", root / "metrics", root / "plots"
    metrics.mkdir()
    ingest_stage.run(params, published_dir=root / "published", logs_dir=root / "logs",
                     catalog_dir=CATALOG, out_dir=out, metrics_path=metrics / "ingest.json")
    fit_stage.run(params, processed_dir=out, out_dir=out, metrics_path=metrics / "fit.json",
                  plots_dir=plots)
    theory_stage.run(params, processed_dir=out, catalog_dir=CATALOG, out_dir=out,
                     metrics_path=metrics / "theory.json", plots_dir=plots)
    empty_frame("selected_targets.parquet").to_parquet(out / "selected_targets.parquet")
    compare.run(params, processed_dir=out, metrics_dir=metrics, out_dir=out,
                metrics_path=metrics / "compare.json", plots_dir=plots)
    paths = report_stage.run(params, processed_dir=out, metrics_dir=metrics,
                             out_dir=root / "reports")
    return Chain(root=root, processed=out, metrics=metrics, params_file=params_file,
                 report_md=paths["md"], report_html=paths["html"], focus=paths["focus"])


def shared_user_chain(tmp_path_factory: Any) -> Chain:
    """One ``run_chain`` per test session, across xdist workers too (``shared_run``; read-only:
    a test that changes files copies them)."""
    return once_per_session(tmp_path_factory, "user_chain", run_chain)


def focused_report(chain: Chain, focus: str, out: Path) -> str:
    """``scalewall report --focus FOCUS`` on the chain's outputs: the Markdown it writes."""
    from typer.testing import CliRunner

    from pipeline.__main__ import app
    result = CliRunner().invoke(app, [
        "report", "--processed", str(chain.processed), "--metrics-dir", str(chain.metrics),
        "--out", str(out), "--focus", focus, "--params", str(chain.params_file)])
    assert result.exit_code == 0, result.output
    return (out / "report.md").read_text()
