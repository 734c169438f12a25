"""The one runner of the stages: read and check the inputs, compute, check and write the outputs.

A stage is declared once (``STAGE`` in ``pipeline/<stage>/contract.py``, a
:class:`pipeline.contracts.Stage`); :func:`run_stage` reads every file it declares, checks each
against its producer's contract (a missing or broken input stops the stage: there are no silent
fallbacks), calls the stage's pure ``compute(inputs, settings)`` with the validated settings
(``pipeline.config.Settings``, the pydantic models of params.yaml, passed as they are; only the
groups the stage declares), then checks
every output against its contract and writes them only once all pass, each file atomically
(pipeline/io.py).
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

from pipeline.config import Settings, settings
from pipeline.contracts import ContractError, Stage
from pipeline.io import write_csv, write_json, write_parquet
from pipeline.io_parts import read_frame
from pipeline.report.contract import STAGE as REPORT
from pipeline.schema import PRODUCERS, check_metrics, check_output

#: every stage, in the order ``dvc repro`` runs them: each producer's declaration (a new stage
#: is one ``contract.py`` with its ``STAGE``, listed in ``schema.PRODUCERS``), then the report
STAGES: dict[str, Stage] = {s.name: s for s in (
    *(c.STAGE for c in PRODUCERS.values()), REPORT)}


@dataclass(frozen=True)
class Inputs:
    """What a stage reads: contract frames by file name, metrics JSONs by stage, the catalog."""

    frames: Mapping[str, pd.DataFrame]
    metrics: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    catalog: Any = None

    def __getitem__(self, name: str) -> pd.DataFrame:
        return self.frames[name]


@dataclass(frozen=True)
class Result:
    """What a stage's compute returns: contract frames by file name, its metrics JSON, and the
    plot CSVs by file name."""

    frames: Mapping[str, pd.DataFrame]
    metrics: dict[str, Any]
    plots: Mapping[str, pd.DataFrame] = field(default_factory=dict)


def function(ref: str) -> Callable[..., Any]:
    """The function named ``"module:function"``."""
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


def read_inputs(stage: Stage, processed_dir: Path, metrics_dir: Path,
                catalog_dir: Path | None) -> Inputs:
    """Every declared input, checked against its contract (ContractError names the file)."""
    frames = {}
    for name in stage.reads:
        path = processed_dir / name
        if not path.exists():  # a file, or a folder of parts (pipeline.io_parts)
            raise ContractError(f"{stage.name}: input {path} is missing (run the stage that "
                                f"writes {name} first)")
        frames[name] = check_output(name, read_frame(path))
    metrics = {}
    for other in stage.reads_metrics:
        path = metrics_dir / f"{other}.json"
        if not path.is_file():
            raise ContractError(f"{stage.name}: input {path} is missing")
        metrics[other] = check_metrics(other, json.loads(path.read_text(encoding="utf-8")))
    catalog = None
    if stage.catalog:
        from pipeline.catalog import load_catalog
        catalog = load_catalog(catalog_dir)
    return Inputs(frames=frames, metrics=metrics, catalog=catalog)


def check_result(stage: Stage, result: Result) -> None:
    """The outputs are exactly the declared ones and each keeps its contract."""
    if set(result.frames) != set(stage.writes) or set(result.plots) != set(stage.plots):
        raise ContractError(f"{stage.name}: wrote {sorted(result.frames)} + {sorted(result.plots)}"
                            f", declared {sorted(stage.writes)} + {sorted(stage.plots)}")
    for name, frame in result.frames.items():
        check_output(name, frame)
    check_metrics(stage.name, result.metrics)


def stage_settings(stage: Stage, params: Mapping[str, Any] | Settings) -> Settings:
    """The settings a stage may read: each params.yaml group its declaration names, validated
    (ConfigError names the field), in a ``Settings`` that holds only those groups (reading an
    undeclared group is an AttributeError: the declaration is the whole list)."""
    groups = dict.fromkeys(key.split(".")[0] for key in stage.params)
    return Settings.model_construct(**{g: settings(params, g) for g in groups})


def run_stage(name: str, params: Mapping[str, Any] | Settings, *, processed_dir: Path,
              out_dir: Path, metrics_path: Path, plots_dir: Path,
              catalog_dir: Path | None = None, metrics_dir: Path | None = None) -> dict[str, Any]:
    """Run stage ``name``: inputs from ``processed_dir`` (metrics JSONs from ``metrics_dir``,
    default the folder of ``metrics_path``), outputs to ``out_dir``, ``metrics_path`` and
    ``plots_dir``. Returns the metrics written."""
    stage = STAGES[name]
    chosen = stage_settings(stage, params)
    metrics_path = Path(metrics_path)
    inputs = read_inputs(stage, Path(processed_dir), Path(metrics_dir or metrics_path.parent),
                         catalog_dir)
    result = function(stage.compute)(inputs, chosen)
    check_result(stage, result)
    out_dir, plots_dir = Path(out_dir), Path(plots_dir)
    for file, frame in result.frames.items():
        write_parquet(frame, out_dir / file)
    for file, frame in result.plots.items():
        write_csv(frame, plots_dir / file, significant=stage.plot_significant)
    write_json(result.metrics, metrics_path)
    return result.metrics
