"""The release stage's contracts: the bundle's files, its metrics and its headline.

The bundle (``data/release/``) is a folder a stranger can use without this code: the runs as
Parquet and CSV, the sources with their licence or terms, a rejects summary, a coverage table and
figure, Croissant metadata (``croissant.json``, generated from ``pipeline/ingest/contract.py:
RUN_COLUMNS``) and a data card. Its version is the data's hash with a date tag taken from the
data (the newest source's publication month), so the same inputs give the same bytes.
"""

from __future__ import annotations

from pydantic import Field

from pipeline.contracts import Headline, Metrics, Stage

BUNDLE_DIR = "data/release"
SOURCES_FILE = "data/catalog/sources.csv"
# The bundle's files, in the order the manifest lists them.
BUNDLE_FILES = ("runs.parquet", "runs.csv", "sources.csv", "rejects_summary.csv",
                "coverage.csv", "coverage.png", "croissant.json", "DATA_CARD.md")
# Columns the release adds to runs.parquet's (from data/catalog/sources.csv).
ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("source_url", "string", "where the source can be read (data/catalog/sources.csv)"),
    ("licence", "string", "the source's licence, or 'not stated here' (see terms in "
                          "sources.csv)"),
    ("year", "int64", "year the run was published: the source's publication year; MLPerf: the "
                      "round's (v4.x = 2024)"),
)
# The licence of the compilation (the table's structure, the derivations and the code that
# makes it); each value stays its source's, under the terms in sources.csv.
DATASET_LICENCE = "CC-BY-4.0"
DATASET_LICENCE_URL = "https://creativecommons.org/licenses/by/4.0/"


class ReleaseMetrics(Metrics):
    version: str
    date_tag: str
    data_sha256: str
    runs: int = Field(ge=0)
    sources: int = Field(ge=0)
    rejects: int = Field(ge=0)
    excluded_runs: dict[str, int]
    files: dict[str, str]


class ReleaseHeadline(Headline):
    runs: int = Field(ge=0)
    sources: int = Field(ge=0)


OUTPUTS: dict[str, tuple] = {}  # writes no contract Parquet to data/processed
METRICS = ReleaseMetrics.model_validate
HEADLINE = ReleaseHeadline

# The release reads the ingest's outputs and the sources catalog and writes a folder of its own
# files, so it runs its own entry (like the ingest and the report).
STAGE = Stage(
    name="release", help="A versioned dataset bundle in data/release: runs (Parquet, CSV), "
                         "sources with licences, rejects summary, coverage, Croissant metadata, "
                         "data card.",
    params=(), reads=("runs.parquet", "rejects.parquet"), raw=(SOURCES_FILE,),
    entry="pipeline.release.stage:run", outs=(BUNDLE_DIR,))
