"""The schedule columns of a run record (recompute, virtual_pipeline, sequence_parallel,
pipeline_flushes) and its kernel facts (fused_attention, tp_comm_overlap, dp_comm_overlap):
allowed forms, aliases, and a clear reject for anything else (fuzzed)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest.core.derive import Reject
from pipeline.ingest.core.schedule import (parse_flag, parse_pipeline_flushes, parse_recompute,
                                           parse_schedule, parse_sequence_parallel,
                                           parse_virtual_pipeline)
from pipeline.vocab import KERNEL_COLUMNS, RECOMPUTE_MODES


@pytest.mark.parametrize("text, expected", [
    ("full", "full"), ("Selective", "selective"), (" none ", "none"), ("uniform", "full"),
    ("block", "full"), ("off", "none"), ("", None), (None, None)])
def test_recompute_forms(text, expected) -> None:
    assert parse_recompute({"recompute": text}) == expected


@pytest.mark.parametrize("text, expected", [("1", 1), ("7", 7), ("3.0", 3), ("", None)])
def test_virtual_pipeline_forms(text, expected) -> None:
    assert parse_virtual_pipeline({"virtual_pipeline": text}) == expected


@pytest.mark.parametrize("text", ["0", "-2", "2.5", "seven", "inf", "nan"])
def test_virtual_pipeline_rejects(text) -> None:
    with pytest.raises(Reject, match="virtual_pipeline"):
        parse_virtual_pipeline({"virtual_pipeline": text})


@pytest.mark.parametrize("text, expected", [("true", True), ("False", False), ("1", True),
                                            ("no", False), (True, True), ("", None)])
def test_sequence_parallel_forms(text, expected) -> None:
    assert parse_sequence_parallel({"sequence_parallel": text}) is expected


def test_interleaving_without_a_pipeline_is_rejected() -> None:
    row = {"pp": 1}
    with pytest.raises(Reject, match="needs pp > 1"):
        parse_schedule({"virtual_pipeline": "4"}, row)
    row = {"pp": 8}
    parse_schedule({"virtual_pipeline": "4", "recompute": "full"}, row)
    assert row == {"pp": 8, "recompute": "full", "virtual_pipeline": 4, "sequence_parallel": None,
                   "pipeline_flushes": None, "fused_attention": None, "tp_comm_overlap": None,
                   "dp_comm_overlap": None}


def test_kernel_facts_are_true_false_or_rejected_by_name() -> None:
    row = {"pp": 1}
    parse_schedule({"fused_attention": "false", "tp_comm_overlap": "no", "dp_comm_overlap": "1"},
                   row)
    assert (row["fused_attention"], row["tp_comm_overlap"], row["dp_comm_overlap"]) == \
        (False, False, True)
    with pytest.raises(Reject, match="tp_comm_overlap='sometimes' is not true or false"):
        parse_schedule({"tp_comm_overlap": "sometimes"}, {"pp": 1})


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=12))
def test_fuzzed_schedule_text_is_parsed_or_rejected(text) -> None:
    """Any text either parses to an allowed value or rejects naming the field; never
    anything else (no exception type other than Reject, no value outside the vocabulary)."""
    for name, parse, ok in (
            ("recompute", parse_recompute, lambda v: v is None or v in RECOMPUTE_MODES),
            ("virtual_pipeline", parse_virtual_pipeline,
             lambda v: v is None or (isinstance(v, int) and v >= 1)),
            ("pipeline_flushes", parse_pipeline_flushes,
             lambda v: v is None or (isinstance(v, int) and v >= 1)),
            ("sequence_parallel", parse_sequence_parallel,
             lambda v: v is None or isinstance(v, bool)),
            *((name, lambda f, name=name: parse_flag(f, name),
               lambda v: v is None or isinstance(v, bool)) for name in KERNEL_COLUMNS)):
        try:
            value = parse({name: text})
        except Reject as exc:
            assert name in str(exc)
        else:
            assert ok(value), (name, text, value)
