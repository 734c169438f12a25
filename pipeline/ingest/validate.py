"""``scalewall validate FILE``: what the ingest would make of one published table.

Runs the same reading and normalization as the ingest stage on a single format-v1 CSV, writes
nothing, and reports every record as a run or a reject with its reason, so a user can fix a
table before adding it to ``data/raw/published/``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from pipeline.ingest.sources.published import read_file
from pipeline.ingest.stage import check_accounting, convert, load_catalog, read_options


def validate_table(path: Path, params: dict[str, Any], catalog_dir: Path
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Runs and rejects (rows as the ingest stage would write them) of one published CSV."""
    options, _ = read_options(params)
    runs, rejects, read = convert(read_file(Path(path)), load_catalog(Path(catalog_dir)), options)
    check_accounting(read, runs, rejects)
    return runs, rejects


def summary(path: Path, runs: list[dict[str, Any]], rejects: list[dict[str, Any]]) -> str:
    """Human-readable account: counts, reject reasons by line, and the derived columns."""
    lines = [f"{path}: {len(runs) + len(rejects)} records -> {len(runs)} runs, "
             f"{len(rejects)} rejects"]
    for r in sorted(rejects, key=lambda r: r["line"]):
        lines.append(f"  line {r['line']}: {r['reason']}")
    derived = Counter(name for run in runs for name in (run.get("derived") or "").split(";")
                      if name)
    if derived:
        lines.append("  derived (at transcription or by the ingest), runs: " + ", ".join(
            f"{name} ({count})" for name, count in sorted(derived.items())))
    return "\n".join(lines)
