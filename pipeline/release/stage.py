"""The release stage (``scalewall release``): write the versioned bundle to ``data/release/``.

Reads ``runs.parquet`` and ``rejects.parquet`` (checked against the ingest's contracts) and
``data/catalog/sources.csv``; writes ``contract.BUNDLE_FILES`` and ``MANIFEST.json`` (the
version and every file's SHA-256). The version is ``<year>.<month>.0+<first 12 hex of the SHA-256 of
runs.csv>`` (``sources.version``): the year and month are the newest released source's
publication, so nothing depends on the clock and a rerun on the same inputs writes the same
bytes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402

from pipeline.coverage import by_source, draw, family_by_n  # noqa: E402
from pipeline.ingest.contract import RUNS_SCHEMA  # noqa: E402
from pipeline.io import atomic_path, write_json, write_parquet, write_text  # noqa: E402
from pipeline.io_parts import read_frame  # noqa: E402
from pipeline.release import card, card_text, croissant  # noqa: E402
from pipeline.release.bundle import (release_runs, rejects_summary,  # noqa: E402
                                     sources_table)
from pipeline.release.contract import ADDED_COLUMNS, BUNDLE_FILES, SOURCES_FILE  # noqa: E402
from pipeline.release.sources import date_tag, read_sources, version  # noqa: E402
from pipeline.schema import check_metrics, check_output  # noqa: E402

RELEASE_SCHEMA = pa.schema([*RUNS_SCHEMA, *(pa.field(n, pa.type_for_alias(t))
                                            for n, t, _ in ADDED_COLUMNS)])


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_table_csv(frame: pd.DataFrame, path: Path) -> None:
    """CSV with ``\\n`` line ends, no index, floats as Python's shortest repr (exact)."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, lineterminator="\n")


def write_figure(table: pd.DataFrame, path: Path) -> None:
    """The coverage heat map as a PNG without date or software metadata."""
    plt.rcParams.update({"font.size": 8, "axes.titlesize": 9, "svg.hashsalt": "scalewall"})
    fig, ax = plt.subplots(figsize=(7.0, 0.45 * len(table.index) + 1.4))
    draw(ax, table)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png", metadata={"Software": None})
    plt.close(fig)


def write_bundle(runs: pd.DataFrame, rejects: pd.DataFrame, sources: pd.DataFrame,
                 out: Path) -> dict[str, Any]:
    """Write the bundle to ``out``; return the release metrics."""
    out.mkdir(parents=True, exist_ok=True)
    released, excluded = release_runs(runs, sources)
    names = set(released["source"])
    write_table_csv(released, out / "runs.csv")
    write_parquet(released, out / "runs.parquet", RELEASE_SCHEMA)
    table = sources_table(released, rejects[rejects["source"].isin(names)], sources)
    write_table_csv(table, out / "sources.csv")
    write_table_csv(rejects_summary(rejects), out / "rejects_summary.csv")
    per_source = by_source(released)
    write_table_csv(per_source, out / "coverage.csv")
    per_family = family_by_n(released)
    write_figure(per_family, out / "coverage.png")
    year, month = date_tag(sources, names)
    digest = sha256(out / "runs.csv")
    release = version((year, month), digest)
    tag = f"{year}-{month:02d}" if month else f"{year}"
    cite_as = card.CITE_AS % (release, year)
    hashes = {n: sha256(out / n) for n in ("runs.csv", "runs.parquet", "sources.csv")}
    info = {"description": f"{len(released):,} measured training runs of large models from "
                           f"{len(names)} public sources, with configuration, measures, "
                           "citation and licence per run.",
            "date_published": f"{year}-{max(month, 1):02d}-01",
            "cite_as": cite_as, "runs": len(released),
            "sources": len(names)}
    write_text(json.dumps(croissant.metadata(release, hashes, info), indent=1,
                          ensure_ascii=False) + "\n", out / "croissant.json")
    write_text(card_text.document({
        "version": release, "date_tag": tag, "runs": len(released), "sources": len(names),
        "rejects": len(rejects), "coverage": card.coverage_tables(per_family, per_source),
        "biases": card.biases(released), "cite_as": cite_as}), out / "DATA_CARD.md")
    files = {n: sha256(out / n) for n in BUNDLE_FILES}
    write_json({"version": release, "files": files}, out / "MANIFEST.json")
    return {"version": release, "date_tag": tag, "data_sha256": digest,
            "runs": len(released), "sources": len(names), "rejects": len(rejects),
            "excluded_runs": excluded, "files": files}


def run(params: dict[str, Any], *, processed_dir: Path, out_dir: Path, metrics_path: Path,
        sources_path: Path = Path(SOURCES_FILE)) -> dict[str, Any]:
    """Run the release stage; return the metrics written to ``metrics_path``."""
    del params  # the release reads no settings
    runs = check_output("runs.parquet", read_frame(Path(processed_dir) / "runs.parquet"))
    rejects = check_output("rejects.parquet",
                           pd.read_parquet(Path(processed_dir) / "rejects.parquet"))
    metrics = write_bundle(runs, rejects, read_sources(Path(sources_path)), Path(out_dir))
    write_json(check_metrics("release", metrics), Path(metrics_path))
    return metrics
