"""One measurement of one configuration (pipeline/ingest/core/conflicts.py) and the stated
scaling label the batches contradict (pipeline/ingest/core/series.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipeline.ingest.stage as stage
from pipeline.catalog import load_catalog
from pipeline.config import load_params, settings as settings_of
from pipeline.ingest.core.conflicts import REPEAT_RTOL, one_per_configuration
from pipeline.ingest.core.series import assign_series
from pipeline.ingest.records import Record

CATALOG = load_catalog(Path(__file__).resolve().parents[1] / "data" / "catalog")
OPTS = settings_of(load_params(), "ingest")
BASE = {"source": "lab", "citation": "lab Table 1", "model": "Some Model", "params_b": "7",
        "accelerator": "H100-SXM5-80GB", "n_accelerators": "64", "precision": "bf16",
        "global_batch_tokens": "4194304"}


def _convert(*rows: tuple[str, int, dict[str, Any]]):
    records = [Record("lab", path, line, raw=str(f), fields={**BASE, **f})
               for path, line, f in rows]
    runs, rejects, read = stage.convert(iter(records), CATALOG, OPTS)
    stage.check_accounting(read, runs, rejects)
    return runs, rejects


def test_two_files_disagreeing_on_one_configuration_are_both_conflicts() -> None:
    """The issue's case: the same source, model and N at 30,000 and 45,000 tokens/s."""
    runs, rejects = _convert(("a.csv", 2, {"tokens_per_s": "30000", "citation": "lab T1"}),
                             ("b.csv", 2, {"tokens_per_s": "45000", "citation": "lab T2"}))
    assert runs == []
    assert [r["path"] for r in rejects] == ["a.csv", "b.csv"]
    for r in rejects:
        assert r["reason"].startswith("conflict: 2 records of one configuration disagree on "
                                      "step_time_s")
        assert "a.csv:2" in r["reason"] and "b.csv:2" in r["reason"]


def test_a_repeat_within_the_tolerance_keeps_the_first() -> None:
    runs, rejects = _convert(("b.csv", 3, {"tokens_per_s": "30500", "citation": "x"}),
                             ("a.csv", 2, {"tokens_per_s": "30000", "citation": "y"}))
    assert [r["_path"] for r in runs] == ["a.csv"]
    assert rejects[0]["reason"].startswith("duplicate: same configuration as a.csv:2")


def test_what_differs_keeps_both() -> None:
    runs, rejects = _convert(("a.csv", 2, {"tokens_per_s": "30000", "tp": "8"}),
                             ("a.csv", 3, {"tokens_per_s": "45000", "tp": "4"}))
    assert len(runs) == 2 and rejects == []


@settings(max_examples=60, deadline=None)
@given(ratio=st.floats(0.2, 5.0))
def test_rule_is_the_stated_tolerance(ratio: float) -> None:
    rows = [{"run_id": str(i), "source": "s", "step_time_s": t, "_path": f"{i}.log",
             "_line": 0, "provenance": f"{i}.log"} for i, t in enumerate((1.0, ratio))]
    kept, dropped = one_per_configuration(rows)
    repeat = abs(ratio - 1.0) <= REPEAT_RTOL
    assert len(kept) == (1 if repeat else 0)
    assert [reason.split(":")[0] for _, reason in dropped] == (
        ["duplicate"] if repeat else ["conflict", "conflict"])


def test_strong_label_contradicted_by_the_batch_gets_a_note() -> None:
    def run(n: int, batch: int, scaling: str) -> dict[str, Any]:
        return {"run_id": f"r{n}", "status": "ok", "tokens_per_s": 1.0 * n, "_series": None,
                "source": "s", "source_kind": "published", "submitter": None,
                "mlperf_version": None, "model_id": "m", "model": "m", "accelerator": "H100",
                "precision": "bf16", "strategy_family": "ddp", "scaling": scaling,
                "system": None, "global_batch_tokens": batch, "n_accelerators": n,
                "notes": None, "derived": None, "series_id": None,
                **{k: None for k in ("inverse_time_to_train_per_s", "time_to_train_s", "mfu",
                                     "model_flops_per_s", "tokens_per_s_per_accelerator",
                                     "step_time_s")}}
    rows = [run(8, 1 << 20, "strong"), run(16, 1 << 21, "strong")]
    assign_series(rows)
    assert all("scaling strong stated, but the global batch grows with N" in r["notes"]
               for r in rows)
    rows = [run(8, 1 << 20, "weak"), run(16, 1 << 20, "weak")]
    assign_series(rows)
    assert all("scaling weak stated, but every run of its group has the same global batch"
               in r["notes"] for r in rows)


def test_a_hash_collision_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs are grouped by their full configuration, the hash only picks the candidates: with
    every configuration hashing alike (all runs candidates), the outcome is the same."""
    import pipeline.ingest.core.conflicts as conflicts
    rows = [{"run_id": str(i), "source": s, "step_time_s": t, "_path": f"{i}.log", "_line": 0,
             "provenance": f"{i}.log"}
            for i, (s, t) in enumerate([("a", 1.0), ("b", 1.0), ("a", 1.05), ("c", 1.0),
                                        ("c", 2.0), ("d", 1.0)])]
    rows.append(dict(rows[-1], run_id="m", source_kind="mlperf"))  # left alone
    honest = one_per_configuration(rows)
    assert [r["run_id"] for r in honest[0]] == ["0", "1", "5", "m"]
    monkeypatch.setattr(conflicts, "hash", lambda key: 0, raising=False)
    assert conflicts._shared(rows).tolist() == [True] * 6 + [False]
    assert one_per_configuration(rows) == honest
