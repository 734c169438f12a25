"""The dataset release (``scalewall release``): a bundle that validates as Croissant, loads with
pandas, DuckDB and Hugging Face ``datasets``, carries a citation and a licence or terms for every
row, and is byte-identical when rebuilt from the same inputs."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pandas as pd
import pytest

import pipeline.ingest.stage as ingest_stage
from pipeline.config import PROJ_ROOT, ConfigError, load_params
from pipeline.coverage import N_BIN_LABELS, family_by_n
from pipeline.ingest.contract import RUN_COLUMNS
from pipeline.release import croissant
from pipeline.release.contract import ADDED_COLUMNS, BUNDLE_FILES
from pipeline.release.sources import read_sources, version
from pipeline.release.stage import run as release_run, write_bundle

SOURCES = PROJ_ROOT / "data" / "catalog" / "sources.csv"
PUBLISHED = PROJ_ROOT / "data" / "raw" / "published"


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ingest stage on the shipped published tables (no MLPerf power trees, no logs)."""
    tmp = tmp_path_factory.mktemp("release_ingest")
    params = copy.deepcopy(load_params(PROJ_ROOT / "params.yaml"))
    (tmp / "empty").mkdir()
    params["ingest"]["mlperf_roots"] = [str(tmp / "empty")]
    params["ingest"]["allow_mlperf_roots_outside_project"] = True
    ingest_stage.run(params, published_dir=PUBLISHED, logs_dir=tmp / "none",
                     catalog_dir=PROJ_ROOT / "data" / "catalog", out_dir=tmp / "out",
                     metrics_path=tmp / "ingest.json")
    return tmp / "out"


@pytest.fixture(scope="module")
def bundle(ingested: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("bundle")
    metrics = release_run({}, processed_dir=ingested, out_dir=out / "release",
                          metrics_path=out / "release.json", sources_path=SOURCES)
    return out / "release", metrics


def test_rebuild_is_byte_identical(bundle: tuple[Path, dict], ingested: Path,
                                   tmp_path: Path) -> None:
    first, metrics = bundle
    again = release_run({}, processed_dir=ingested, out_dir=tmp_path / "again",
                        metrics_path=tmp_path / "m.json", sources_path=SOURCES)
    assert again == metrics
    for name in (*BUNDLE_FILES, "MANIFEST.json"):
        assert (first / name).read_bytes() == (tmp_path / "again" / name).read_bytes(), name
    manifest = json.loads((first / "MANIFEST.json").read_text())
    assert manifest["version"] == metrics["version"] and set(manifest["files"]) == set(
        BUNDLE_FILES)


def test_every_run_has_citation_licence_and_a_listed_source(bundle: tuple[Path, dict]) -> None:
    folder, metrics = bundle
    runs = pd.read_parquet(folder / "runs.parquet")
    sources = pd.read_csv(folder / "sources.csv")
    assert metrics["runs"] == len(runs) and metrics["excluded_runs"] == {}
    assert runs["citation"].str.strip().str.len().gt(0).all()
    assert runs["licence"].notna().all() and runs["source_url"].str.startswith("https://").all()
    assert len(sources) == metrics["sources"] >= 16
    assert sources["licence"].str.len().gt(0).all() and sources["terms"].str.len().gt(0).all()
    assert sources["runs"].sum() == len(runs)
    assert set(sources["source"]) == set(runs["source"])


def test_version_is_the_data_hash_with_a_date_from_the_data(bundle: tuple[Path, dict]) -> None:
    folder, metrics = bundle
    import hashlib
    digest = hashlib.sha256((folder / "runs.csv").read_bytes()).hexdigest()
    assert metrics["data_sha256"] == digest
    newest = max(read_sources(SOURCES).loc[sorted(pd.read_csv(folder / "sources.csv")["source"]),
                                           "published"])
    assert metrics["version"] == f"{int(newest[:4])}.{int(newest[5:7])}.0+{digest[:12]}"
    assert version((2024, 0), "ab" * 32) == "2024.0.0+abababababab"


@pytest.mark.filterwarnings("ignore:ConjunctiveGraph is deprecated:DeprecationWarning")
def test_croissant_validates_and_reads_every_run(bundle: tuple[Path, dict]) -> None:
    import mlcroissant as mlc  # a pinned dependency: the check must run, never skip
    folder, metrics = bundle
    dataset = mlc.Dataset(jsonld=folder / "croissant.json")  # raises on an invalid document
    assert dataset.metadata.version == metrics["version"]
    records = list(dataset.records("runs"))
    assert len(records) == metrics["runs"]
    fields = {f["name"] for f in json.loads((folder / "croissant.json").read_text())[
        "recordSet"][0]["field"]}
    assert fields == {n for n, _, _ in RUN_COLUMNS} | {n for n, _, _ in ADDED_COLUMNS}


def test_croissant_fields_come_from_the_contract_with_units() -> None:
    fields = croissant.run_fields()
    assert [f[0] for f in fields[:len(RUN_COLUMNS)]] == [n for n, _, _ in RUN_COLUMNS]
    numeric = [f for f in fields if f[1] in ("sc:Integer", "sc:Float")]
    assert numeric and all("[unit: " in text for _, _, text in numeric)
    with pytest.raises(ValueError, match="new_thing_s has no unit"):
        croissant._field("new_thing_s", "double", "a new measure")


def test_loads_with_pandas_duckdb_and_datasets(bundle: tuple[Path, dict], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    folder, metrics = bundle
    from_parquet = pd.read_parquet(folder / "runs.parquet")
    from_csv = pd.read_csv(folder / "runs.csv", low_memory=False)
    assert len(from_parquet) == len(from_csv) == metrics["runs"]
    assert list(from_parquet.columns) == list(from_csv.columns)
    import duckdb  # a pinned dependency
    rows = duckdb.sql(f"SELECT source, count(*) FROM '{folder / 'runs.parquet'}' "
                      "GROUP BY source ORDER BY source").fetchall()
    assert dict(rows) == from_parquet["source"].value_counts().sort_index().to_dict()
    # Hugging Face `datasets` (a dev dependency), offline: the hub is never asked, the cache is ours.
    for name in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    import datasets
    import huggingface_hub.constants
    # both modules read the variables once, at import (which may have happened before this test)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    loaded = datasets.load_dataset("parquet", data_files=str(folder / "runs.parquet"),
                                   split="train", cache_dir=str(tmp_path / "hf_cache"))
    assert loaded.num_rows == metrics["runs"]
    assert loaded.column_names == list(from_parquet.columns)


def test_card_coverage_table_is_computed_from_the_data(bundle: tuple[Path, dict],
                                                       ingested: Path, tmp_path: Path) -> None:
    folder, metrics = bundle
    runs = pd.read_parquet(folder / "runs.parquet")
    card = (folder / "DATA_CARD.md").read_text()
    table = family_by_n(runs)
    for family, row in table.iterrows():
        cells = [f"{row[b]:,} ({row[b + ' sources']})" if row[b] else "-" for b in N_BIN_LABELS]
        assert f"| {family} | " + " | ".join(cells) + " |" in card
    assert f"{metrics['runs']:,} runs from {metrics['sources']} sources" in card
    # a source fewer: other counts, another version
    kept = pd.read_parquet(ingested / "runs.parquet")
    kept = kept[kept["source"] != "vtrain2024"]
    rejects = pd.read_parquet(ingested / "rejects.parquet")
    other = write_bundle(kept, rejects, read_sources(SOURCES), tmp_path / "b")
    assert other["runs"] == metrics["runs"] - int((runs["source"] == "vtrain2024").sum())
    assert other["version"] != metrics["version"]
    assert f"{other['runs']:,} runs from {other['sources']} sources" in (
        tmp_path / "b" / "DATA_CARD.md").read_text()


def test_runs_of_unlisted_sources_are_left_out_and_counted(ingested: Path,
                                                           tmp_path: Path) -> None:
    runs = pd.read_parquet(ingested / "runs.parquet")
    rejects = pd.read_parquet(ingested / "rejects.parquet")
    sources = read_sources(SOURCES).drop(index="megascale2024")
    metrics = write_bundle(runs, rejects, sources, tmp_path)
    n = int((runs["source"] == "megascale2024").sum())
    assert n > 0
    assert metrics["excluded_runs"] == {"source not in data/catalog/sources.csv": n}
    assert "megascale2024" not in set(pd.read_parquet(tmp_path / "runs.parquet")["source"])


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace(",2024-02,", ",Feb 2024,", 1), "column published"),
    (lambda t: t.replace(",paper,", ",blog,", 1), "column kind"),
    (lambda t: t.replace("https://arxiv.org/abs/2211.05100", "", 1), "column url is empty"),
    (lambda t: t.replace("source,title,", "id,title,", 1), "missing column(s) source"),
])
def test_a_broken_sources_catalog_names_line_and_column(tmp_path: Path, edit, message) -> None:
    path = tmp_path / "sources.csv"
    path.write_text(edit(SOURCES.read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_sources(path)


def test_citation_and_licence_files_agree_with_the_project() -> None:
    import tomllib

    import yaml

    from pipeline.release.contract import DATASET_LICENCE
    project = tomllib.loads((PROJ_ROOT / "pyproject.toml").read_text())["project"]
    cff = yaml.safe_load((PROJ_ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["version"] == project["version"] and cff["license"] == project["license"]
    assert cff["references"][0]["type"] == "data"
    assert cff["references"][0]["license"] == DATASET_LICENCE
    assert "Apache License" in (PROJ_ROOT / "LICENSE").read_text().splitlines()[1]
    assert "Version 2.0" in (PROJ_ROOT / "LICENSE").read_text()[:300]


def test_docs_schema_names_only_released_columns() -> None:
    import re
    text = (PROJ_ROOT / "docs" / "dataset.md").read_text(encoding="utf-8")
    schema = text.split("## Schema", 1)[1].split("## Sources", 1)[0]
    rows = [line for line in schema.splitlines() if line.startswith("| ") and "`" in line]
    named = {n for line in rows for n in re.findall(r"`([a-z_0-9]+)`", line.split("|")[2])}
    released = {n for n, _, _ in RUN_COLUMNS} | {n for n, _, _ in ADDED_COLUMNS}
    assert named and named <= released, sorted(named - released)
    assert released <= named, sorted(released - named)


def test_the_contribution_template_validates() -> None:
    from typer.testing import CliRunner

    from pipeline.__main__ import app
    result = CliRunner().invoke(app, [
        "validate", str(PROJ_ROOT / "docs" / "templates" / "published_table.csv"),
        "--catalog", str(PROJ_ROOT / "data" / "catalog"),
        "--params", str(PROJ_ROOT / "params.yaml")])
    assert result.exit_code == 0, result.output
    assert "2 records -> 2 runs, 0 rejects" in result.output
