"""Write ``data/catalog/mfu_ceilings.csv``: per accelerator family and precision, the run of the
shipped published tables (``data/raw/published``) with the highest MFU, with its citation.

``pipeline/plausibility.py`` reads the file (the MFU rule); ``tests/test_plausibility.py`` fails
when it no longer matches the tables. Run after adding or editing a published table::

    .venv/bin/python scripts/mfu_ceilings.py

The tables are read with the ingest's own parser and normalization (MFU on the project's FLOP
count wherever a run gives tokens/s, pipeline/ingest/core/flop_count.py; stated MFUs as stated
elsewhere; missing ones derived from throughput and the catalog peak) and without the MFU rule
itself, so a table's record is never hidden by the previous record.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.catalog import load_catalog  # noqa: E402
from pipeline.config import load_params  # noqa: E402
from pipeline.ingest.stage import convert, read_options  # noqa: E402
from pipeline.ingest.sources.published import read_published  # noqa: E402
from pipeline.plausibility import CEILING_COLUMNS, CEILINGS_FILE  # noqa: E402

PUBLISHED = ROOT / "data" / "raw" / "published"
CATALOG = ROOT / "data" / "catalog"


def ceilings(published_dir: Path = PUBLISHED, catalog_dir: Path = CATALOG
             ) -> list[dict[str, Any]]:
    """One row per (family, precision): the published run with the highest MFU (ties: the
    smallest run_id), sorted by family and precision."""
    options, _ = read_options(load_params())
    runs, _, _ = convert(read_published(published_dir), load_catalog(catalog_dir), options,
                         plausibility=False)
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for run in sorted(runs, key=lambda r: r["run_id"]):
        if run["mfu"] is None or run["status"] != "ok":
            continue
        if run["active_params"] < run["params"]:
            # MoE runs set no record: their MFU sits far below a dense run's on the same chip
            # (all-to-all, small expert GEMMs), so one MoE-only family would cap dense runs at
            # 1.2 x an MoE figure (B200 bf16: 1.2 x 0.099); they are checked against the limit
            continue
        key = (run["accelerator_family"], run["precision"] or run["peak_precision"])
        if key not in best or run["mfu"] > best[key]["mfu"]:
            best[key] = run
    rows = []
    for (family, precision), run in sorted(best.items()):
        derived = set((run["derived"] or "").split(";"))
        rows.append({
            "accelerator_family": family, "precision": precision,
            "max_mfu": f"{run['mfu']:.4g}", "source": run["source"], "model": run["model"],
            "n_accelerators": run["n_accelerators"], "citation": run["citation"],
            "derived": "max_mfu" if "mfu" in derived else "",
            "notes": _how(run, derived)
            + ("; precision assumed (not stated)" if run["precision"] is None
               or "precision" in derived else ""),
        })
    return rows


def _how(run: dict[str, Any], derived: set[str]) -> str:
    """Where the record's MFU comes from (the convention: pipeline/ingest/core/flop_count.py)."""
    if "mfu" not in derived:
        return "MFU as the source states it"
    if run["mfu_source_count"] is not None and "mfu_source_count" not in derived:
        return ("MFU on the project's FLOP count from the run's tokens/s and the catalog peak "
                f"(the source states {run['mfu_source_count']:.4g} on its own count)")
    if run["mfu_source_count"] is not None:
        return ("MFU on the project's FLOP count from the run's tokens/s and the catalog peak "
                f"(the source's TFLOP/s give {run['mfu_source_count']:.4g} on its own count)")
    return "MFU derived from the run's throughput and the catalog peak"


def main() -> None:
    rows = ceilings()
    with open(CATALOG / CEILINGS_FILE, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, CEILING_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {CATALOG / CEILINGS_FILE}: {len(rows)} rows", file=sys.stderr)


if __name__ == "__main__":
    main()
