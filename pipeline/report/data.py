"""Load the stage outputs the report is rendered from (and nothing else).

A missing file gives an empty frame, so the report still renders and says which input is absent
instead of failing; ``ReportData.missing`` lists them for the caveats section.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline.io_parts import read_frame
from pipeline.report.contract import STAGE

FRAMES = tuple(name.removesuffix(".parquet") for name in STAGE.reads)
METRICS = STAGE.reads_metrics


@dataclass
class ReportData:
    frames: dict[str, pd.DataFrame]
    metrics: dict[str, dict[str, Any]]
    missing: list[str] = field(default_factory=list)
    # (frame name, column) -> (the frame it was built on, value -> row positions)
    _positions: dict[tuple[str, str], tuple[pd.DataFrame, dict[Any, np.ndarray]]] = field(
        default_factory=dict, repr=False, compare=False)

    def __getattr__(self, name: str) -> pd.DataFrame:
        try:
            return self.frames[name]
        except KeyError as exc:
            raise AttributeError(name) from exc

    def rows_where(self, name: str, column: str, value: Any) -> pd.DataFrame:
        """The rows of frame ``name`` whose ``column`` equals ``value``, in frame order (what
        ``frame[frame[column] == value]`` selects), by positions grouped once per frame: a
        figure asks for one series at a time, and a mask over every row per series would
        cost series x rows."""
        frame = self.frames[name]
        built = self._positions.get((name, column))
        if built is None or built[0] is not frame:
            built = (frame, frame.groupby(column, sort=False).indices if len(frame) else {})
            self._positions[(name, column)] = built
        return frame.iloc[built[1].get(value, np.zeros(0, dtype=np.intp))]


def finite_or_none(x: Any) -> float | None:
    """``x`` as a float when it is a finite number, else None (for the templates)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def load(processed_dir: Path, metrics_dir: Path) -> ReportData:
    frames, metrics, missing = {}, {}, []
    for name in FRAMES:
        path = Path(processed_dir) / f"{name}.parquet"
        if path.exists():
            frames[name] = read_frame(path)  # a file or a folder of parts
        else:
            frames[name] = pd.DataFrame()
            missing.append(str(path))
    for name in METRICS:
        path = Path(metrics_dir) / f"{name}.json"
        if path.exists():
            metrics[name] = json.loads(path.read_text(encoding="utf-8"))
        else:
            metrics[name] = {}
            missing.append(str(path))
    return ReportData(frames, metrics, missing)


def rank_within_source(summary: pd.DataFrame) -> pd.DataFrame:
    """``summary`` with ``turn``: each series' rank within its source, widest N range first,
    then the most points, then the id."""
    s = summary.assign(span=summary["n_max"] / summary["n_min"])
    s = s.sort_values(["span", "n_distinct", "series_id"], ascending=[False, False, True])
    return s.assign(turn=s.groupby("source").cumcount())


def select_series(summary: pd.DataFrame, scaling: str, limit: int) -> list[str]:
    """The series worth drawing, taken in turn from each source so that no source with many
    small series crowds out the others (``rank_within_source``)."""
    if summary.empty or "scaling" not in summary:
        return []
    s = rank_within_source(summary[summary["scaling"] == scaling])
    s = s.sort_values(["turn", "span", "series_id"], ascending=[True, False, True])
    return list(s["series_id"].head(limit))


def short_label(series_id: str, width: int = 44) -> str:
    """``source/source-rest`` -> ``source: rest``, cut to ``width`` characters."""
    source, _, rest = series_id.partition("/")
    rest = rest[len(source) + 1:] if rest.startswith(source + "-") else rest
    label = f"{source}: {rest}" if rest else source
    return label if len(label) <= width else label[: width - 1] + "…"
