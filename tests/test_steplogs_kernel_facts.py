"""A step log's sidecar states the kernel facts (``fused_attention``, ``tp_comm_overlap``,
``dp_comm_overlap``) and the measured network (``cluster``) that runs.parquet carries and the
calibrate stage reads: a value reaches the run row, a bad one rejects the log naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pipeline.config import LogsSettings
from pipeline.ingest.core.normalize import CatalogCache, normalize
from pipeline.ingest.records import Record
from pipeline.ingest.sources.steplogs.reader import read_one
from pipeline.vocab import KERNEL_COLUMNS
from test_ingest_normalize import OPTS

LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"
NANOTRON = LOGS / "nanotron"


@pytest.fixture(scope="module")
def catalog():
    from pipeline.catalog import load_catalog
    return CatalogCache(load_catalog(Path(__file__).resolve().parents[1] / "data" / "catalog"))


def _read(tmp_path: Path, extra: str) -> tuple:
    """The nanotron fixture log with its run.yaml, a catalog model, and ``extra`` lines,
    through ``read_one``."""
    log = tmp_path / "job" / "nanotron.log"
    log.parent.mkdir(exist_ok=True)
    log.write_bytes((NANOTRON / "nanotron.log").read_bytes())
    (log.parent / "run.yaml").write_text((NANOTRON / "run.yaml").read_text()
                                         + "model: playbook-1b\n" + extra)
    return read_one(log, tmp_path, LogsSettings(), {})[0], log


def _row(fields: dict, log: Path, catalog: CatalogCache) -> dict:
    fields = dict(fields)
    fields.pop("_line"), fields.pop("_format")
    return normalize(Record(source=fields["source"], path=str(log), line=1, fields=fields),
                     catalog, OPTS)


def test_the_sidecar_kernel_facts_and_cluster_reach_the_run_row(tmp_path, catalog) -> None:
    fields, log = _read(tmp_path, "fused_attention: false\ntp_comm_overlap: true\n"
                                  "dp_comm_overlap: False\ncluster: hf_playbook\n")
    assert isinstance(fields, dict)
    row = _row(fields, log, catalog)
    assert (row["fused_attention"], row["tp_comm_overlap"], row["dp_comm_overlap"],
            row["cluster"]) == (False, True, False, "hf_playbook")


def test_without_them_the_run_row_leaves_them_empty(tmp_path, catalog) -> None:
    fields, log = _read(tmp_path, "")
    assert isinstance(fields, dict)
    row = _row(fields, log, catalog)
    assert [row[k] for k in (*KERNEL_COLUMNS, "cluster")] == [None, None, None, None]


@pytest.mark.parametrize("key", KERNEL_COLUMNS)
def test_a_kernel_fact_that_is_not_true_or_false_rejects_the_log_naming_it(tmp_path,
                                                                           key) -> None:
    result, _ = _read(tmp_path, f"{key}: sometimes\n")
    assert result[0] == "bad_value"
    assert f"'{key}' must be true or false, got 'sometimes'" in result[1]
    assert "run.yaml" in result[1]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(KERNEL_COLUMNS),
       text=st.one_of(st.sampled_from(["true", "false", "TRUE", " False", "yes", "1", "0", "on",
                                       "~", "null", "''"]),
                      st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                                     blacklist_characters="\n\r:#'\"{}[],&*!|>%@`"),
                              max_size=12)))
@example(key="tp_comm_overlap", text="True")
def test_fuzz_a_kernel_fact_is_true_false_empty_or_a_named_reject(tmp_path, catalog, key,
                                                                  text) -> None:
    """YAML 1.2 core booleans only: true/false in any case become the flag; an empty value
    (``~``, ``null``, nothing) leaves it unset; anything else rejects the log naming the key;
    never a crash."""
    result, log = _read(tmp_path, f"{key}: {text}\n")
    stripped = text.strip()
    if isinstance(result, dict):
        row = _row(result, log, catalog)
        if stripped.lower() in ("true", "false"):
            assert row[key] is (stripped.lower() == "true")
        else:
            assert row[key] is None
    else:
        assert result[0] in ("bad_value", "malformed_row"), result
        assert key in result[1] or result[0] == "malformed_row"
        assert stripped.lower() not in ("true", "false")
