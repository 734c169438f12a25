"""The framework family comes from what a row states (``framework``), not from its source id."""

from __future__ import annotations

import csv
import io
import itertools
import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pipeline.config import LogsSettings
from pipeline.frameworks import PLAYBOOK, SOURCE_FAMILY, family_of
from pipeline.ingest.contract import RUN_COLUMNS
from pipeline.ingest.core.derive import Reject
from pipeline.ingest.core.normalize import normalize
from pipeline.ingest.sources.published import read_file
from pipeline.ingest.sources.mlperf.system import load_system
from pipeline.ingest.sources.steplogs.reader import read_one
from pipeline.text import strip_invisible
from test_ingest_normalize import CATALOG, OPTS

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "data" / "raw" / "published"
LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"


def _family(**columns: object) -> str:
    return str(family_of(pd.DataFrame({k: [v] for k, v in columns.items()}))[0])


@pytest.mark.parametrize(("framework", "family"), [
    ("nanotron", PLAYBOOK), ("torchtitan", "fsdp"), ("Meta 4D parallelism (FSDP)", "fsdp"),
    ("Megatron-LM", "megatron"), ("NeMo 24.09", "megatron"), ("NVIDIA NeMo Framework Release 24.09",
                                                            "megatron"),
    ("Megatron-DeepSpeed", "megatron_deepspeed"),
    ("NGC PyTorch Release 24.01 Deepspeed N8", "deepspeed"),
])
def test_a_new_source_gets_its_family_from_its_framework(framework: str, family: str) -> None:
    # a source id that no mapping knows, with a strategy text that names no software
    assert _family(source="my_cluster_2026", strategy="DP64 TP1 PP1", framework=framework) == family


def test_the_order_of_the_rules() -> None:
    # the stated family first
    assert _family(source="x", framework="nanotron", framework_family="fsdp") == "fsdp"
    # DeepSpeed named in the strategy: a source's DeepSpeed baselines ran DeepSpeed
    assert _family(source="x", framework="Megatron-LM",
                   strategy="ZeRO-3 (DeepSpeed) data parallel") == "deepspeed"
    # Megatron-DeepSpeed's strategy texts name DeepSpeed for its engine, not ZeRO-3 baselines
    assert _family(source="x", framework="Megatron-DeepSpeed",
                   strategy="Megatron TP8 + DeepSpeed PP35") == "megatron_deepspeed"
    assert _family(source="x", strategy="Megatron-DeepSpeed 3D + ZeRO-1") == "megatron_deepspeed"
    # the framework before the source's family
    assert _family(source="llama3", framework="nanotron") == PLAYBOOK
    # a framework text that names no family: the source's, then the strategy text, then default
    assert _family(source="llama3", framework="Pathways (JAX, T5X)") == "fsdp"
    assert _family(source="x", framework="Pathways (JAX, T5X)", strategy="FSDP") == "fsdp"
    assert _family(source="x", framework="maxtext") == "megatron"
    assert _family(source="x", framework=None, strategy="nanotron DP8") == PLAYBOOK


def test_shipped_tables_framework_agrees_with_the_source_families() -> None:
    """The framework each shipped table states gives every row the family its source had."""
    checked = 0
    for path in sorted(PUBLISHED.glob("*.csv")):
        frame = pd.read_csv(path, dtype=str, keep_default_na=False).replace("", None)
        if frame["source"].iloc[0] not in SOURCE_FAMILY:
            continue
        assert frame["framework"].notna().all(), path.name
        by_framework = family_of(frame)
        by_source = family_of(frame.drop(columns="framework"))
        assert (by_framework == by_source).all(), path.name
        # and without the source id, the framework alone still says it
        renamed = family_of(frame.assign(source="copy_" + frame["source"]))
        assert (renamed == by_source).all(), path.name
        checked += len(frame)
    assert checked > 3000


def test_runs_contract_has_the_framework_column() -> None:
    types = {name: str(t) for name, t, _ in RUN_COLUMNS}
    assert types["framework"] == "string"
    names = [name for name, _, _ in RUN_COLUMNS]
    assert names.index("framework") == names.index("strategy_family") + 1


def test_mlperf_system_description_framework_is_carried(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    base = {"number_of_nodes": 2, "accelerators_per_node": 8, "accelerator_model_name": "H100"}
    path.write_text(json.dumps({**base, "framework": " NVIDIA NeMo Framework Release 24.09 "}))
    assert load_system(path, "s").framework == "NVIDIA NeMo Framework Release 24.09"
    for absent in ({}, {"framework": ""}, {"framework": 3}):
        path.write_text(json.dumps({**base, **absent}))
        assert load_system(path, "s").framework is None


def test_step_log_framework_is_its_format_unless_the_sidecar_says(tmp_path: Path) -> None:
    fields, _ = read_one(LOGS / "nanotron" / "nanotron.log", LOGS, LogsSettings(), {})
    assert isinstance(fields, dict) and fields["framework"] == "nanotron"
    log = tmp_path / "run" / "nanotron.log"
    log.parent.mkdir()
    log.write_bytes((LOGS / "nanotron" / "nanotron.log").read_bytes())
    (log.parent / "run.yaml").write_text((LOGS / "nanotron" / "run.yaml").read_text()
                                         + "framework: nanotron fork 0.4\n")
    fields, _ = read_one(log, tmp_path, LogsSettings(), {})
    assert isinstance(fields, dict) and fields["framework"] == "nanotron fork 0.4"
    fields, _ = read_one(LOGS / "jsonl" / "steps.jsonl", LOGS, LogsSettings(), {})
    assert isinstance(fields, dict) and "framework" not in fields


def test_a_megatron_format_log_with_a_zero_stage_argument_is_megatron_deepspeed(
        tmp_path: Path) -> None:
    real = LOGS / "real" / "megatron_args"
    lines = (real / "qwen2_0p5b_n2.log").read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if "world_size ...." in line)
    log = tmp_path / "ds" / "qwen.log"
    log.parent.mkdir()
    log.write_text("".join(lines[:at + 1] + ["  zero_stage ...................................... 1\n"]
                           + lines[at + 1:]))
    (log.parent / "run.yaml").write_text((real / "run.yaml").read_text())
    fields, _ = read_one(log, tmp_path, LogsSettings(), {})
    assert isinstance(fields, dict) and fields["framework"] == "Megatron-DeepSpeed"
    assert _family(**{k: fields.get(k) for k in ("source", "strategy", "framework")}) == \
        "megatron_deepspeed"
    plain, _ = read_one(real / "qwen2_0p5b_n2.log", LOGS, LogsSettings(), {})
    assert isinstance(plain, dict) and plain["framework"] == "Megatron-LM"


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(framework=st.text(max_size=30))
@example(framework="0\xad0")   # a soft hyphen: removed by the ingest, as invisible
def test_fuzz_a_published_framework_cell_is_carried_stripped_and_read_by_family_of(
        tmp_path: Path, framework: str) -> None:
    good = (Path(__file__).parent / "fixtures" / "published" / "synthetic_good.csv").read_text()
    header, first = list(csv.reader(io.StringIO(good)))[:2]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([header + ["framework"], first + [framework]])
    path = tmp_path / "t.csv"
    path.write_text(buf.getvalue(), encoding="utf-8")
    records = [r for r in read_file(path, root=tmp_path) if r.fields is not None]
    if not records:
        return  # a cell that breaks the row (e.g. a NUL) is a reject, tested elsewhere
    try:
        row = normalize(records[0], CATALOG, OPTS)
    except Reject:
        return
    # the ingest removes invisible characters (pipeline/text.py), then strips whitespace
    stated = strip_invisible(framework)[0].strip()
    assert row["framework"] == (stated or None) or (row["framework"] or "") in stated
    assert _family(**{k: row[k] for k in ("source", "strategy", "framework")}) in (
        "megatron", "fsdp", "deepspeed", PLAYBOOK)


def _normalized(path: Path, source: str, limit: int | None = None) -> pd.DataFrame:
    """A shipped table's rows through the ingest's reader and normalize (the shipped catalog),
    under ``source``."""
    from pipeline.catalog import load_catalog
    from pipeline.ingest.core.normalize import CatalogCache
    catalog = CatalogCache(load_catalog(ROOT / "data" / "catalog"))
    rows = []
    for record in itertools.islice(read_file(path, ROOT), limit):
        if record.fields is None:
            continue
        try:
            rows.append(normalize(record.__class__(source, record.path, record.line,
                                                   fields={**record.fields, "source": source}),
                                  catalog, OPTS))
        except Reject:
            continue
    return pd.DataFrame(rows)


def test_shipped_kernel_facts_and_cluster_travel_with_the_rows_not_the_source_id() -> None:
    """megatron2021's Megatron-LM rows state the 2021 kernels (its DeepSpeed baselines keep
    DeepSpeed's DP overlap) and the Playbook's rows their measured cluster, so a copy under
    another source id (the scale benchmark's, a user's) is modelled the same."""
    from pipeline.calibrate import families as fam
    from pipeline.calibrate.hardware import load_network
    from pipeline.catalog import load_catalog
    network = load_network(ROOT / "data" / "catalog",
                           load_catalog(ROOT / "data" / "catalog").hardware)
    megatron = _normalized(PUBLISHED / "megatron2021.csv", "copy_of_megatron2021")
    fused, tp_overlap, dp_overlap, _ = fam.kernels(megatron)
    baseline = (megatron["framework"] == "DeepSpeed").to_numpy()
    assert len(megatron) >= 20 and baseline.sum() >= 4
    assert not fused.any() and not tp_overlap.any()
    assert (dp_overlap == baseline).all()
    playbook = _normalized(PUBLISHED / "ultrascale_playbook2025_all_configs.csv", "copy_of_pb",
                           limit=300)
    cluster, unknown = fam.cluster_of(playbook, network.clusters)
    assert len(playbook) > 200 and (cluster == "hf_playbook").all() and unknown == []
    assert [k.all() for k in fam.kernels(playbook)[:3]] == [True, True, True]
