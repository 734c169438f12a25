"""Plausibility rules of the ingest (issue 13, item 3): each a reject quoting the values."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.ingest.core.derive import Reject
from pipeline.config import IngestSettings, load_params, settings
from pipeline.ingest.core.normalize import CatalogCache, normalize
from pipeline.ingest.core.plausible import rounding
from pipeline.ingest.records import Record

BASE = {"source": "t", "citation": "t Table 1", "model": "GPT-3", "params_b": "175",
        "accelerator": "H100", "n_accelerators": "64", "tokens_per_s": "50000"}


@pytest.fixture(scope="module")
def cache(catalog) -> CatalogCache:
    return CatalogCache(catalog)


INGEST: IngestSettings = settings(load_params(), "ingest")


def _reason(cache: CatalogCache, options: IngestSettings = INGEST, **fields: Any) -> str | None:
    f = {k: v for k, v in dict(BASE, **fields).items() if v is not None}
    try:
        normalize(Record("t", "t.csv", 2, fields=f), cache, options)
    except Reject as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("fields, reason", [
    ({"n_accelerators": "1000000000000"},
     "out_of_range: n_accelerators=1000000000000 above the plausible maximum 10000000 "
     "(ingest.max_accelerators)"),
    ({"tp": "8", "pp": "4", "dp": "4"},
     "out_of_range: layout tp x pp x dp = 8 x 4 x 4 = 128 does not divide n_accelerators=64"),
    ({"tp": "3"}, "out_of_range: layout tp = 3 = 3 does not divide n_accelerators=64"),
    ({"ep": "48"}, "out_of_range: ep=48 does not divide n_accelerators=64"),
    ({"citation": None},
     "missing_required: citation (a published table says where in its source each row comes "
     "from)"),
    ({"mfu": "0.9", "tokens_per_s": "100"}, None),  # asserted below: value in the message
])
def test_rule_rejects_with_values(cache, fields, reason) -> None:
    got = _reason(cache, **fields)
    if reason is None:
        assert got.startswith("conflict: mfu=0.9 but tokens_per_s implies mfu ")
        assert "more than 3x apart" in got
    else:
        assert got == reason


@pytest.mark.parametrize("fields", [
    {"tp": "8", "pp": "4", "dp": "2"},             # equal to N
    {"tp": "8", "pp": "4"},                       # divides N (dp implied 2)
    {"tp": "8", "pp": "2", "dp": "4", "ep": "8"},  # ep carved out of dp: does not multiply
    {"n_accelerators": "10000000"},               # at the bound
])
def test_plausible_runs_pass(cache, fields) -> None:
    assert _reason(cache, **fields) is None


def test_mfu_band_follows_the_stated_rounding(cache) -> None:
    # (6 x 175e9 + attention 12 x 96 x 12288 x 2048) FLOP x 50 tok/s / (64 x 989.5e12 FLOP/s)
    # = 0.000852 MFU.
    assert _reason(cache, mfu="0.001", tokens_per_s="50") is None  # 0.0005-0.0015
    assert _reason(cache, mfu="0.0025", tokens_per_s="50") is None  # 0.00245/3 = 0.000817
    assert _reason(cache, mfu="0.003", tokens_per_s="50") is None  # 0.0025/3 = 0.000833
    assert _reason(cache, mfu="0.0030", tokens_per_s="50") == (  # 0.00295/3 = 0.000983
        "conflict: mfu=0.003 but tokens_per_s implies mfu 0.000851907 against the chip's peak "
        "9.895e+14 FLOP/s (more than 3x apart)")
    assert rounding("0.001") == pytest.approx(0.0005)
    assert rounding("4.3e-1") == pytest.approx(0.005)
    assert rounding(0.001) == 0.0


def test_max_accelerators_is_a_setting(cache) -> None:
    assert _reason(cache, INGEST.model_copy(update={"max_accelerators": 32})) == (
        "out_of_range: n_accelerators=64 above the plausible maximum 32 "
        "(ingest.max_accelerators)")
