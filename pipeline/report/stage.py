"""Report stage: stage outputs -> ``reports/report.html`` (self-contained), ``reports/report.md``
and ``reports/figures/*.png``. Reads only ``data/processed`` and ``reports/metrics``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from pipeline.config import ConfigError, get
from pipeline.report import data as report_data
from pipeline.report import figures, findings, render
from pipeline.report.focus import focus_figure, focus_ids


def settings(params: dict[str, Any]) -> dict[str, Any]:
    """The ``report`` section of params.yaml, checked (ConfigError names the field)."""
    cfg = {
        "title": get(params, "report.title", str),
        "series_per_panel": get(params, "report.series_per_panel", int, default=6),
        "gap_runs": get(params, "report.gap_runs", int, default=20),
        "series_table_per_source": get(params, "report.series_table_per_source", int, default=6),
        "strategy_sources": get(params, "report.strategy_sources", list,
                                default=["megatron2021", "ultrascale_playbook2025"]),
        "baseline_scenario": get(params, "report.baseline_scenario", str, default=""),
        "strategy_models": get(params, "report.strategy_models", dict, default={}) or {},
        "frontier_scenarios": get(params, "report.frontier_scenarios", list, default=[]),
        "focus": get(params, "report.focus", list, default=[]) or [],
        "interval": get(params, "compare.interval", float, default=0.95),
    }
    if not all(isinstance(s, str) for s in cfg["focus"]):
        raise ConfigError("params: field 'report.focus' must be a list of source or series ids")
    for src, models in cfg["strategy_models"].items():
        if not (isinstance(models, list) and all(isinstance(m, str) for m in models)):
            raise ConfigError(f"params: field 'report.strategy_models.{src}' must be a list of "
                              "model names")
    for key in ("series_per_panel", "gap_runs", "series_table_per_source"):
        if cfg[key] < 1:
            raise ConfigError(f"params: field 'report.{key}' must be >= 1")
    if not all(isinstance(s, str) for s in cfg["strategy_sources"]):
        raise ConfigError("params: field 'report.strategy_sources' must be a list of source ids")
    return cfg


def run(params: dict[str, Any], *, processed_dir: Path, metrics_dir: Path,
        out_dir: Path, focus: list[str] | None = None) -> dict[str, Path]:
    """Render the report; returns the paths written (html, md and each figure). ``focus``
    (``scalewall report --focus``) replaces ``report.focus``."""
    cfg = settings(params)
    if focus:
        cfg["focus"] = list(focus)
    started = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    steps = tqdm(total=3, desc="report", file=sys.stderr, disable=None)
    data = report_data.load(processed_dir, metrics_dir)
    steps.update()
    context = findings.build(data, cfg) | {"title": cfg["title"]}
    cfg["focus_series"], cfg["focus_runs"] = focus_ids(data, cfg["focus"])
    figs = figures.make_all(data, out_dir / "figures", cfg)
    figs["focus"] = focus_figure(data, context["mine"], out_dir / "figures")
    steps.update()
    paths = render.render(context, figs, out_dir)
    steps.update()
    steps.close()
    print(f"report: {paths['html']} ({len(figs)} figures, "
          f"{time.perf_counter() - started:.1f} s)", file=sys.stderr)
    return {**paths, **figs}
