"""Report stage: stage outputs -> ``reports/report.html`` (self-contained), ``reports/report.md``
and ``reports/figures/*.png``. Reads only ``data/processed`` and ``reports/metrics``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from pipeline.config import (PROJ_ROOT, ConfigError, ReportSettings, check_scenario_names,
                             settings as load_group)
from pipeline.report import data as report_data
from pipeline.report import (charts, figures, findings, key_findings, plot_data, render,
                             sections)
from pipeline.report.style import read_audits
from pipeline.report.focus import focus_figure, focus_ids
from pipeline.report.plan import add_plans
from pipeline.snapshot import SnapshotBusy, busy


def report_settings(params: dict[str, Any]) -> ReportSettings:
    """The validated ``report`` group (ConfigError names the field), its scenario names checked
    against ``theory.scenarios`` when that group is given."""
    cfg = load_group(params, "report")
    if isinstance(params, dict) and "theory" in params:
        check_scenario_names(cfg, set(load_group(params, "theory").scenarios))
    return cfg


def check_sources(cfg: ReportSettings, data: Any) -> None:
    """The sources the strategy comparison and the focus name must be in the data (when there
    is data): an unknown one is a broken setting, not a silently empty section."""
    runs = data.runs
    known = set(runs["source"]) if len(runs) and "source" in runs else None
    if known is None:
        return
    for i, source in enumerate(cfg.strategy_sources):
        if source not in known:
            raise ConfigError(f"params: field 'report.strategy_sources.{i}': no source "
                              f"{source[:80]!r} in runs.parquet")
    for source in cfg.strategy_models:
        if source not in known:
            raise ConfigError(f"params: field 'report.strategy_models.{source[:80]}': no source "
                              f"{source[:80]!r} in runs.parquet")
    # A focus naming nothing that exists would silently show the default section instead.
    series = set(runs["series_id"].dropna()) if "series_id" in runs else set()
    for i, name in enumerate(cfg.focus):
        if name not in known and name not in series:
            close = sorted(s for s in known if name.lower() in s.lower())[:5]
            hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
            raise ConfigError(f"params: field 'report.focus.{i}' (or --focus): {name[:80]!r} is "
                              f"neither a source nor a series id in runs.parquet{hint}")


def run(params: dict[str, Any], *, processed_dir: Path, metrics_dir: Path,
        out_dir: Path, focus: list[str] | None = None) -> dict[str, Path]:
    """Render the report; returns the paths written (html, md and each figure). ``focus``
    (``scalewall report --focus``) replaces ``report.focus``."""
    cfg = report_settings(params)
    if focus:
        cfg = cfg.model_copy(update={"focus": list(focus)})
    min_success = load_group(params, "fit").default_law_min_success
    not_now = busy(PROJ_ROOT, processed_dir)
    if not_now:
        raise SnapshotBusy(not_now)
    started = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    steps = tqdm(total=3, desc="report", file=sys.stderr, disable=None)
    data = report_data.load(processed_dir, metrics_dir)
    check_sources(cfg, data)
    steps.update()
    context = findings.build(data, cfg, min_success) | {"title": cfg.title}
    context |= sections.build_all(data, cfg)
    context["key_findings"] = key_findings.build(data, context)
    context["mine"] = add_plans(context["mine"], data.runs, processed_dir, metrics_dir, params)
    chosen = focus_ids(data, cfg.focus)
    figs = figures.make_all(data, out_dir / "figures", cfg, chosen)
    figs["focus"] = focus_figure(data, context["mine"], out_dir / "figures")
    steps.update()
    paths = render.render(context, figs, out_dir, charts=charts.make_all(data, cfg, chosen),
                          audits=read_audits(figs))
    paths.update(plot_data.write(data, out_dir / "plots", cfg, chosen))
    steps.update()
    steps.close()
    print(f"report: {paths['html']} ({len(figs)} figures, "
          f"{time.perf_counter() - started:.1f} s)", file=sys.stderr)
    return {**paths, **figs}
