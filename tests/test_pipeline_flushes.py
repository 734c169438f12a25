"""Pipeline schedules per optimizer step (``pipeline_flushes``): torchtitan and NeMo Automodel
run one pipeline schedule per gradient-accumulation step, each filling and draining the
pipeline, where Megatron runs one for the step's microbatches. The column is read from tables
and sidecars, priced by the step model (the bubble once per schedule) and taken by
``plan --layout flushes=``."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pipeline.calibrate.critical_path import Theta, step_components
from pipeline.ingest.core.derive import Reject
from pipeline.ingest.core.schedule import parse_schedule
from pipeline.ingest.sources.steplogs.sidecar import ALLOWED_KEYS
from pipeline.plan.request import PlanError, check_layout_fits_model, parse_layout
from tests.step_rows import gpt3_175b_rows


def test_tables_and_sidecars_state_it_as_a_count_with_a_pipeline() -> None:
    row = {"pp": 4}
    parse_schedule({"pipeline_flushes": "4"}, row)
    assert row["pipeline_flushes"] == 4
    assert "pipeline_flushes" in ALLOWED_KEYS
    for bad in ("0", "-1", "1.5", "two"):
        with pytest.raises(Reject, match="pipeline_flushes"):
            parse_schedule({"pipeline_flushes": bad}, {"pp": 4})
    with pytest.raises(Reject, match="pipeline_flushes=2 needs pp > 1"):
        parse_schedule({"pipeline_flushes": "2"}, {"pp": 1})
    row = {"pp": 1}
    parse_schedule({"pipeline_flushes": "1"}, row)   # one schedule: says nothing wrong
    assert row["pipeline_flushes"] == 1


@pytest.fixture()
def pipelined(catalog):
    """GPT-3 175B at tp 8, pp 8 on 1,024 A100, 32 microbatches per step: one schedule, four,
    and (more than the microbatches) 64."""
    return gpt3_175b_rows(catalog, 4, n_accelerators=1024, tp=8, pp=8,
                          global_batch_tokens=2048 * 16 * 32, micro_batch=1,
                          pipeline_flushes=[np.nan, 1, 4, 64])


def test_the_bubble_is_paid_once_per_schedule(pipelined) -> None:
    r = pipelined
    assert r.config.microbatches.tolist() == [32.0] * 4
    n = 4
    theta = Theta(np.full(n, 0.8), np.full(n, 0.5), np.full(n, 0.5), np.zeros(n), np.zeros(n),
                  np.ones(n))
    parts = step_components(r.config, r.machine, theta)
    bubble = parts["bubble"]
    assert bubble[0] == bubble[1] > 0                      # not stated = one schedule
    assert bubble[2] == pytest.approx(4 * bubble[1])
    assert bubble[3] == pytest.approx(32 * bubble[1])      # at most one per microbatch
    for name in ("compute", "tp_comm", "pp_p2p", "dp_comm"):
        assert parts[name][2] == pytest.approx(parts[name][1])
    # the ideal machine (the theory's ceiling) pays the same fills and drains
    ideal = step_components(r.config, replace(r.machine, ideal=True), Theta.ideal(n))
    assert ideal["bubble"][2] == pytest.approx(4 * ideal["bubble"][1])


def test_plan_takes_it_as_a_layout_key() -> None:
    assert parse_layout("tp=8,pp=4,flushes=2") == {"tp": 8, "pp": 4, "pipeline_flushes": 2}
    with pytest.raises(PlanError, match="flushes=0 out of range"):
        parse_layout("flushes=0")


def test_plan_refuses_flushes_without_a_pipeline(catalog) -> None:
    from pipeline.plan.request import resolve_model
    model = resolve_model(catalog, "llama-3-70b", {}, None)
    with pytest.raises(PlanError, match="needs pp > 1"):
        check_layout_fits_model({"pp": 1, "pipeline_flushes": 2}, model)
    check_layout_fits_model({"pp": 4, "pipeline_flushes": 2}, model)


def test_a_table_row_with_more_flushes_than_microbatches_is_rejected() -> None:
    """A step of 524,288 tokens at seq_len 4,096, dp 16 and micro-batch 1 has 8 microbatches:
    8 or 4 schedules are possible, 16 and 3 are not (the planner's rule: each schedule runs
    m / flushes); the reject names the field and the count."""
    from pipeline.ingest.core.normalize import _check_flushes
    row = {"global_batch_tokens": 4096.0 * 16 * 8, "seq_len": 4096, "dp": 16, "micro_batch": 1,
           "pipeline_flushes": 8}
    _check_flushes(row)
    with pytest.raises(Reject, match=r"pipeline_flushes=16 exceeds the step's 8 microbatches"):
        _check_flushes({**row, "pipeline_flushes": 16})
    _check_flushes({**row, "dp": None, "pipeline_flushes": 16})   # not computable: no verdict
    _check_flushes({**row, "pipeline_flushes": 4})
    with pytest.raises(Reject, match=r"pipeline_flushes=3 does not divide the step's 8 "):
        _check_flushes({**row, "pipeline_flushes": 3})

