"""The data card's document: fixed prose around the figures ``card.py`` computes."""

from __future__ import annotations

from typing import Any

from pipeline.release.contract import DATASET_LICENCE, DATASET_LICENCE_URL

LOADING = """```python
import pandas as pd
runs = pd.read_parquet("runs.parquet")            # or pd.read_csv("runs.csv")

from datasets import load_dataset                  # Hugging Face datasets
runs_ds = load_dataset("parquet", data_files="runs.parquet", split="train")

import duckdb
duckdb.sql("SELECT source, count(*) AS runs, max(n_accelerators) AS n_max "
           "FROM 'runs.parquet' GROUP BY source ORDER BY runs DESC").show()
```"""


def document(v: dict[str, Any]) -> str:
    """The card. ``v``: version, date_tag, runs, sources, rejects, coverage (the tables),
    biases (the list), cite_as (BibTeX)."""
    return _composition(v) + _use(v)


def _composition(v: dict[str, Any]) -> str:
    """Title, version, motivation, composition and coverage."""
    return f"""# scalewall runs: measured training throughput of large models

Version **{v['version']}**: year and month of the newest source's publication
({v['date_tag']}), then the first 12 hex digits of the SHA-256 of `runs.csv`. {v['runs']:,} runs from {v['sources']} sources;
{v['rejects']:,} input records were rejected with a reason (`rejects_summary.csv`).

## Motivation

How does training throughput scale with the number of accelerators, and where do
data-movement limits (Erdil and Schneider-Joseph 2024) bind? Answering it needs measured runs
with their configuration, from every public source, in one table with one schema and units, a
citation per row, and what each value was derived from. This is that table, built by the
scalewall pipeline (`dvc repro`) from the published tables, MLPerf results and step logs under
`data/raw/`.

## Composition

One row per measured training configuration (a run): the model's size and shape, the
accelerator (catalog id and family), the job's size N and layout (data, tensor, pipeline,
context and expert parallel degrees, ZeRO stage, micro-batch, recompute), precision, the
measures (tokens/s, model and hardware FLOP/s, MFU, HFU, step time, MLPerf time to train,
power and energy where measured), its scaling series, its source and citation, the source's
URL and licence, and `derived` (the columns computed rather than published). Units are SI and
sit in the column name; `croissant.json` lists every column with its type, unit and meaning.
Sources: `sources.csv` (citation, URL, licence or terms, runs, rejects, what was derived).

### Coverage

{v['coverage']}

![Runs per accelerator family and job size](coverage.png)

"""


def _use(v: dict[str, Any]) -> str:
    """Collection, biases, uses, loading, licence, citation, maintenance."""
    return f"""## Collection and transcription

Each published table was transcribed by hand from its source into the project's published-table
format (`data/raw/published/README.md` of the scalewall repository says, per file, what was
read where, what was checked against the source and what was assumed); MLPerf results come
from the MLCommons results repositories' logs. The pipeline's ingest turns every record into a
run or a reject with a reason (`records read = runs + rejects`), resolves accelerators and
models against cited catalogs, and derives missing measures (listed per run in `derived`).
Assumptions are stated in the rows: an accelerator chosen where a source names only its class
is listed in `derived` and explained in `notes`.

## Known biases and gaps

{v['biases']}

## Uses

Recommended: comparing measured scaling efficiency with models of it; calibrating and scoring
performance models out of sample (leave a source out); finding where the evidence is thin (the
coverage table above); adding your own runs and comparing them with published ones.

Discouraged: ranking vendors or labs (setups, software versions and tuning effort differ and are
only partly recorded); treating derived values as published ones (check `derived`); reading a
trend from one sweep's runs as a trend across labs; using MLPerf time-to-train as throughput
without its benchmark's quality target.

## Loading

{LOADING}

## Licence and terms

The compilation (the table's structure, the derivations, this card) is released under
{DATASET_LICENCE} ({DATASET_LICENCE_URL}). Each value is a fact published by its source and
stays under that source's terms, listed per source in `sources.csv` (`licence`, `terms`) and per
run in `licence` and `source_url`. Cite the sources you rely on as well as this dataset.

## Citation

```bibtex
{v['cite_as']}
```

## Maintenance

Built by `scalewall release` (the DVC stage `release`) from the pipeline's outputs; rerunning it
on the same inputs gives the same bytes, and a changed input gives a new version. New sources
are added as a table in `data/raw/published/` and a row in `data/catalog/sources.csv` (see the
repository's `docs/dataset.md`); corrections go through the same files, so every change is
reviewed as a diff of the transcription.
"""
