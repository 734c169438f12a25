"""``data/catalog/sources.csv``: one row per source, with where to read it and on what terms.

Columns (all required, none empty): ``source`` (the id the runs carry), ``title``, ``publisher``,
``published`` (``YYYY-MM`` or ``YYYY``: when the source was published), ``url``, ``kind``
(``paper``, ``repository``, ``vendor_doc``, ``benchmark_results``, ``third_party_summary``),
``licence`` (an SPDX id, or a sentence saying it is not stated or not open), ``terms`` (on what
basis the values are used). A broken file stops the release with a ``ConfigError`` naming the
line and the column.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pandas as pd

from pipeline.config import ConfigError

COLUMNS = ("source", "title", "publisher", "published", "url", "kind", "licence", "terms")
KINDS = ("paper", "repository", "vendor_doc", "benchmark_results", "third_party_summary")
_PUBLISHED = re.compile(r"^(19|20)\d\d(-(0[1-9]|1[0-2]))?$")
# MLPerf Training rounds: v1.0 in 2021, v2.0 in 2022, ... (MLCommons publishes round x.0 in
# spring and x.1 in autumn of year 2020 + x).
MLPERF_FIRST_YEAR = 2020
_MLPERF_ROUND = re.compile(r"^v(\d+)\.\d+$")


def read_sources(path: Path) -> pd.DataFrame:
    """The validated sources table, indexed by ``source``, with ``year`` (int) added."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
            header = rows[0].keys() if rows else []
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read ({exc})") from None
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise ConfigError(f"{path}: missing column(s) {', '.join(missing)}")
    seen: set[str] = set()
    for line, row in enumerate(rows, start=2):
        for col in COLUMNS:
            if not (row.get(col) or "").strip():
                raise ConfigError(f"{path}:{line}: column {col} is empty")
        if row["source"] in seen:
            raise ConfigError(f"{path}:{line}: column source: duplicate id {row['source']!r}")
        seen.add(row["source"])
        if not _PUBLISHED.match(row["published"]):
            raise ConfigError(f"{path}:{line}: column published: {row['published']!r} is not "
                              "YYYY-MM or YYYY")
        if row["kind"] not in KINDS:
            raise ConfigError(f"{path}:{line}: column kind: {row['kind']!r} is not one of "
                              f"{', '.join(KINDS)}")
        if not row["url"].startswith("https://"):
            raise ConfigError(f"{path}:{line}: column url: {row['url']!r} is not an https URL")
    frame = pd.DataFrame(rows, columns=list(COLUMNS)).set_index("source")
    frame["year"] = frame["published"].str.slice(0, 4).astype("int64")
    return frame


def run_years(runs: pd.DataFrame, sources: pd.DataFrame) -> pd.Series:
    """Each run's publication year: its MLPerf round's (``mlperf_version`` v4.1 -> 2024) where
    it has one, else its source's ``year``."""
    year = runs["source"].map(sources["year"]).astype("Int64")
    if "mlperf_version" in runs:
        major = runs["mlperf_version"].astype("string").str.extract(_MLPERF_ROUND)[0]
        mlperf = (pd.to_numeric(major, errors="coerce") + MLPERF_FIRST_YEAR).astype("Int64")
        year = mlperf.fillna(year)
    return year


def date_tag(sources: pd.DataFrame, released: set[str]) -> tuple[int, int]:
    """(year, month) of the newest publication among the released sources (month 0 when only
    the year is known): a date taken from the data, not the clock."""
    dates = [(int(p[:4]), int(p[5:7]) if len(p) == 7 else 0)
             for p in sources.loc[sorted(released), "published"]]
    return max(dates)


def version(tag: tuple[int, int], data_sha256: str) -> str:
    """``<year>.<month>.0+<first 12 hex of the data's SHA-256>``: Semantic Versioning 2.0 (as
    Croissant asks), the date readable, the content in the build metadata."""
    return f"{tag[0]}.{tag[1]}.0+{data_sha256[:12]}"
