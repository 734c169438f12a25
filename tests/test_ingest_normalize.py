"""Record -> run: golden derivations, every reject code, strategy families, fuzzing."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest.core.derive import Reject, strategy_family
from pipeline.measures import flop_per_token as flops_per_token
from pipeline.config import IngestSettings, load_params
from pipeline.config import settings as settings_of
from pipeline.ingest.core.normalize import CatalogCache, normalize, run_id
from pipeline.ingest.records import REJECT_CODES, Record
from pipeline.ingest.contract import RUN_COLUMN_NAMES


def load_stub() -> Any:
    """The test-only catalog of tests/fixtures/stub_catalog.py."""
    name = "_ingest_stub_catalog"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, Path(__file__).parent / "fixtures" / "stub_catalog.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


CATALOG = CatalogCache(load_stub().StubCatalog())
OPTS: IngestSettings = settings_of(load_params(), "ingest")


def _norm(options: IngestSettings = OPTS, **fields: Any) -> dict[str, Any]:
    base = {"source": "t", "citation": "t Table 1", "model": "Some Model", "params_b": "7", "accelerator": "H100",
            "n_accelerators": "64", "tokens_per_s": "1000"}
    base.update(fields)
    base = {k: v for k, v in base.items() if v is not None}
    return normalize(Record("t", "t.csv", 2, fields=base), CATALOG, options)


def _reject(**fields: Any) -> str:
    with pytest.raises(Reject) as info:
        _norm(**fields)
    return str(info.value)


# Golden derivations ----------------------------------------------------------------------------
def test_llama3_405b_tflops_to_model_flops_and_mfu() -> None:
    """Llama 3 (arXiv:2407.21783) Table 4: 405B on 8192 H100 at 430 TFLOP/s per GPU, MFU 43 %.

    With the source's MFU removed, MFU is derived as 430 / 989.5 (H100 SXM bf16 dense peak).
    """
    row = _norm(model="Llama 3 405B", params_b="405", n_accelerators="8192",
                tflops_per_accelerator="430", tokens_per_s=None, precision="bf16")
    assert row["model_flops_per_s"] == 430e12 * 8192 == 3.52256e18
    assert row["mfu"] == pytest.approx(430 / 989.5, rel=1e-12)
    assert round(row["mfu"], 2) == 0.43  # the paper's figure
    assert row["peak_flops_per_s_per_accelerator"] == 989.5e12
    assert row["peak_precision"] == "bf16" and row["precision"] == "bf16"
    assert set(row["derived"].split(";")) >= {"model_flops_per_s", "mfu"}
    assert row["tokens_per_s"] is None  # never invented from FLOPs


def test_source_mfu_is_kept_not_overwritten() -> None:
    row = _norm(model="Llama 3 405B", params_b="405", n_accelerators="8192",
                tflops_per_accelerator="430", mfu="0.43")
    assert row["mfu"] == 0.43
    assert "mfu" not in row["derived"].split(";")


def test_tokens_per_s_to_mfu_with_attention_term_by_hand() -> None:
    """GPT-3 175B (L=96, d=12288, T=2048 from the catalog) on 1024 A100 at 1e5 tokens/s.

    FLOPs/token = 6 * 175e9 + 12 * 96 * 12288 * 2048 = 1.05e12 + 28_991_029_248
    = 1_078_991_029_248 (PaLM App. B); MFU = 1e5 * that / (1024 * 312e12).
    """
    row = _norm(model="GPT-3 175B", params_b="175", accelerator="A100 80GB",
                n_accelerators="1024", tokens_per_s="100000", power_w_per_accelerator="400")
    assert (row["n_layers"], row["d_model"], row["seq_len"]) == (96, 12288, 2048)
    assert row["model_id"] == "gpt3-175b"
    assert row["model_flops_per_s"] == pytest.approx(1.078991029248e17, rel=1e-12)
    assert row["mfu"] == pytest.approx(1.078991029248e17 / 3.19488e17, rel=1e-12)
    assert row["tokens_per_s_per_accelerator"] == pytest.approx(100000 / 1024)
    assert row["energy_j_per_token"] == pytest.approx(400 * 1024 / 1e5)
    derived = set(row["derived"].split(";"))
    assert {"n_layers", "d_model", "seq_len", "model_flops_per_s", "mfu",
            "tokens_per_s_per_accelerator", "energy_j_per_token"} <= derived
    no_attention = _norm(OPTS.model_copy(update={"attention_flops": False}), model="GPT-3 175B", params_b="175",
                         accelerator="A100 80GB", n_accelerators="1024", tokens_per_s="100000")
    assert no_attention["model_flops_per_s"] == pytest.approx(1.05e17, rel=1e-12)


def test_flops_per_token_formula() -> None:
    assert flops_per_token(1e9, 24, 2048, 2048) == (6e9 + 12 * 24 * 2048 * 2048, True)
    assert flops_per_token(1e9, None, 2048, 2048) == (6e9, False)
    assert flops_per_token(1e9, 24, 2048, 2048, attention=False) == (6e9, False)


def test_step_time_throughput_and_time_to_train() -> None:
    row = _norm(tokens_per_s=None, step_time_s="20", global_batch_tokens="4194304")
    assert row["tokens_per_s"] == 4194304 / 20
    assert row["tokens_per_s_per_accelerator"] == 4194304 / 20 / 64
    row = _norm(tokens_per_s=None, tokens_per_s_per_accelerator="1000",
                global_batch_tokens="1048576")
    assert row["tokens_per_s"] == 64000.0
    assert row["step_time_s"] == pytest.approx(1048576 / 64000)
    row = _norm(tokens_per_s=None, time_to_train_s="1600")
    assert row["inverse_time_to_train_per_s"] == 1 / 1600
    assert row["params"] == 7e9 and row["active_params"] == 7e9


def test_units_moe_and_precision_fallback() -> None:
    row = _norm(params_b="141", active_params_b="39")
    assert (row["params"], row["active_params"]) == (141e9, 39e9)
    row = _norm(accelerator="V100", precision="bf16", mfu="0.3", tokens_per_s=None)
    assert row["peak_precision"] == "fp16" and row["peak_flops_per_s_per_accelerator"] == 125e12
    assert row["model_flops_per_s"] == pytest.approx(0.3 * 64 * 125e12)
    assert _norm(precision="BFloat16")["precision"] == "bf16"
    assert "precision" not in (_norm(precision="fp8")["derived"] or "").split(";")


def test_no_mfu_against_an_assumed_precision_on_fp8_chips() -> None:
    """An H100 run of unstated precision may be fp8: its MFU is left empty (flagged in notes),
    unless ingest.mfu_on_assumed_precision says otherwise. An A100 has no fp8: derived."""
    row = _norm(tflops_per_accelerator="430", tokens_per_s=None)
    assert row["mfu"] is None and row["model_flops_per_s"] == 430e12 * 64
    assert "mfu not derived" in row["notes"]
    # Nothing rests on the assumed precision: the run's precision stays as the source left it,
    # and the peak columns say which precision their peak is at (an assumption, so derived).
    assert row["precision"] is None and "precision" not in row["derived"].split(";")
    assert (row["peak_precision"], row["peak_flops_per_s_per_accelerator"]) == ("bf16", 989.5e12)
    assert "peak_precision" in row["derived"].split(";")
    # No peak-based FLOP/s either: the source's MFU times an ambiguous peak is not derived.
    mfu_only = _norm(mfu="0.4", tokens_per_s=None)
    assert mfu_only["model_flops_per_s"] is None and mfu_only["precision"] is None
    assumed = _norm(OPTS.model_copy(update={"mfu_on_assumed_precision": True}), tflops_per_accelerator="430",
                    tokens_per_s=None)
    assert assumed["mfu"] == pytest.approx(430 / 989.5) and assumed["precision"] == "bf16"
    assert "precision" in assumed["derived"].split(";")
    a100 = _norm(accelerator="A100 80GB", tflops_per_accelerator="156", tokens_per_s=None)
    assert a100["mfu"] == pytest.approx(0.5) and a100["precision"] == "bf16"
    assert "precision" in a100["derived"].split(";")
    # An A100 run whose measures need no peak (time-to-train only) keeps precision empty.
    ttt = _norm(accelerator="A100 80GB", tokens_per_s=None, time_to_train_s="1600")
    assert ttt["precision"] is None and ttt["peak_precision"] == "bf16"
    # The assumption is no part of a run's identity.
    assert ttt["run_id"] == _norm(accelerator="A100 80GB", tokens_per_s="1000")["run_id"]


def test_params_from_model_catalog() -> None:
    row = _norm(model="GPT-3", params_b=None)
    assert row["params"] == 175e9 and "params" in row["derived"].split(";")
    assert _reject(model="Unknown LM", params_b=None).startswith("missing_required: params_b")


def test_failed_runs_kept_without_measure() -> None:
    for status in ("oom", "error", "aborted", "no_run_stop"):
        row = _norm(tokens_per_s=None, status=status)
        assert row["status"] == status and row["tokens_per_s"] is None and row["mfu"] is None


# Rejects -------------------------------------------------------------------------------------
REJECTS = [
    ({"mfu": "43", "tokens_per_s": None}, "unit_slip: mfu='43' looks like a percentage"),
    ({"hfu": "57.8"}, "unit_slip: hfu='57.8'"),
    ({"mfu": "430"}, "out_of_range: mfu='430' not in (0, 1]"),
    ({"mfu": "0"}, "out_of_range: mfu='0' not in (0, 1]"),
    ({"n_accelerators": "2.5"}, "out_of_range: n_accelerators='2.5' is not an integer >= 1"),
    ({"n_accelerators": "0"}, "out_of_range: n_accelerators='0'"),
    ({"n_accelerators": "-1"}, "out_of_range: n_accelerators='-1'"),
    ({"n_accelerators": "1e300"}, "out_of_range: n_accelerators='1e300'"),
    ({"n_accelerators": "abc"}, "bad_value: n_accelerators='abc' is not a number"),
    ({"n_accelerators": None}, "missing_required: n_accelerators"),
    ({"accelerator": "Quantum Abacus 9000"}, "unknown_accelerator: 'Quantum Abacus 9000'"),
    ({"accelerator": None}, "missing_required: accelerator"),
    ({"model": None}, "missing_required: model"),
    ({"source": ""}, "missing_required: source"),
    ({"tokens_per_s": "-5"}, "out_of_range: tokens_per_s='-5' must be > 0"),
    ({"tokens_per_s": "0"}, "out_of_range: tokens_per_s='0' must be > 0"),
    ({"tokens_per_s": "nan"}, "bad_value: tokens_per_s='nan' is not a finite number"),
    ({"tokens_per_s": "inf"}, "bad_value: tokens_per_s='inf' is not a finite number"),
    ({"tokens_per_s": "1e400"}, "bad_value: tokens_per_s='1e400' is not a finite number"),
    ({"tokens_per_s": "1e300", "params_b": "1e300"}, "out_of_range: params_b=1e+300 outside"),
    ({"tokens_per_s": "1e300", "params_b": "1e4"},
     "out_of_range: derived model_flops_per_s = past 1.8e308 (the product of its inputs "
     "overflows)"),
    ({"tokens_per_s": "fast"}, "bad_value: tokens_per_s='fast' is not a number"),
    ({"tokens_per_s": None}, "no_measure"),
    ({"tflops_per_accelerator": "1683", "precision": "bf16"},
     "out_of_range: derived mfu 1.70086 > 1"),
    ({"status": "missing_file", "notes": "log absent"},
     "missing_file: the source lists this result but not its log (notes: log absent)"),
    ({"status": "exploded"}, "bad_value: status='exploded'"),
    ({"precision": "int4"}, "bad_value: precision='int4'"),
    ({"zero_stage": "4"}, "out_of_range: zero_stage=4 not in 0..3"),
    ({"tp": "0"}, "out_of_range: tp='0'"),
    ({"active_params_b": "8"}, "out_of_range: active_params"),
    ({"tokens_per_s_per_accelerator": "1000"},
     "conflict: tokens_per_s=1000 but tokens_per_s_per_accelerator x n_accelerators=64000"),
    ({"record_kind": "claim"}, "not_a_run: record_kind=claim"),
    ({"source_kind": "blog"}, "bad_value: source_kind='blog'"),
]


@pytest.mark.parametrize(("fields", "reason"), REJECTS)
def test_reject_reasons(fields: dict[str, Any], reason: str) -> None:
    base = {"tokens_per_s": "1000"}
    base.update(fields)
    got = _reject(**base)
    assert got.startswith(reason), got
    assert got.split(":")[0] in REJECT_CODES


def test_typed_fields_from_other_parsers() -> None:
    row = _norm(n_accelerators=512, tokens_per_s=1.5e6, params_b=7.0, source_kind="mlperf")
    assert row["n_accelerators"] == 512 and row["source_kind"] == "mlperf"
    assert _reject(n_accelerators=True).startswith("bad_value")
    assert _reject(n_accelerators=float("nan")).startswith("bad_value")


def test_framework_is_carried_as_written_and_does_not_identify_the_run() -> None:
    plain, stated = _norm(tokens_per_s="1000"), _norm(tokens_per_s="1000", framework=" NeMo 24.09 ")
    assert plain["framework"] is None and stated["framework"] == "NeMo 24.09"
    assert plain["run_id"] == stated["run_id"]


def test_cluster_and_kernel_facts_are_carried_and_do_not_identify_the_run() -> None:
    plain = _norm(tokens_per_s="1000")
    stated = _norm(tokens_per_s="1000", cluster=" hf_playbook ", fused_attention="false",
                   dp_comm_overlap="true")
    assert (plain["cluster"], plain["fused_attention"], plain["dp_comm_overlap"]) == \
        (None, None, None)
    assert (stated["cluster"], stated["fused_attention"], stated["dp_comm_overlap"]) == \
        ("hf_playbook", False, True)
    assert plain["run_id"] == stated["run_id"]
    assert _reject(tokens_per_s="1000", fused_attention="maybe").startswith(
        "bad_value: fused_attention=")


def test_run_id_stable_and_identifying() -> None:
    a, b = _norm(tokens_per_s="1000"), _norm(tokens_per_s="2000")
    assert a["run_id"] == b["run_id"]  # a measure does not identify a run
    assert len(a["run_id"]) == 16 and int(a["run_id"], 16) >= 0
    assert _norm(n_accelerators="128")["run_id"] != a["run_id"]
    assert _norm(citation="Table 2")["run_id"] != a["run_id"]
    assert run_id("s", {"model": "m"}, "x/result_0.txt") != run_id("s", {"model": "m"},
                                                                    "x/result_1.txt")


# Strategy families -------------------------------------------------------------------------
@pytest.mark.parametrize(("args", "family"), [
    ((8192, 64, 8, 16, 3, "4D: TP+CP+PP+FSDP(DP)"), "3d"),
    ((1536, None, None, None, None, "PTD-P (TP+PP+DP)"), "3d"),
    ((8, 1, 8, 2, None, None), "tp_pp"),
    ((1536, None, None, None, None, "ZeRO-3 (DeepSpeed) data parallel"), "fsdp"),
    ((128, None, None, None, 3, None), "fsdp"),
    ((256, 32, 8, 1, None, "2D (FSDP 32 x TP 8)"), "hybrid_fsdp"),
    ((64, None, None, None, None, "HSDP"), "hybrid_fsdp"),
    ((64, 8, 8, 1, None, None), "tp"),
    ((64, 8, 1, 8, None, None), "pp"),
    ((32, None, None, None, None, "tensor parallel"), "tp"),
    ((8, 8, 1, 1, 1, None), "ddp"),
    ((8, None, None, None, None, "DP8 TP1 PP1 ZeRO-1 MBS1"), "ddp"),
    ((8, None, None, None, None, "DP4 TP1 PP2 ZeRO-1 MBS4"), "pp"),
    ((512, None, None, None, None, None), "unknown"),
    ((512, None, None, None, None, "NeMo recipe"), "unknown"),
])
def test_strategy_family(args: tuple, family: str) -> None:
    assert strategy_family(*args) == family


# Fuzzing ----------------------------------------------------------------------------------------
_NUMBERS = st.one_of(st.none(), st.text(max_size=8), st.floats(allow_nan=True, allow_infinity=True),
                     st.integers(-10**30, 10**30), st.booleans(),
                     st.sampled_from(["1e308", "-0", "0x10", "1_000", " 12 ", "43", "2.5"]))
_FIELDS = ["params_b", "active_params_b", "n_accelerators", "tokens_per_s", "mfu", "hfu",
           "tflops_per_accelerator", "step_time_s", "global_batch_tokens", "n_layers", "d_model",
           "seq_len", "dp", "tp", "pp", "zero_stage", "time_to_train_s", "energy_j_per_token",
           "power_w_per_accelerator", "tokens_per_s_per_accelerator", "model_flops_per_s"]


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(values=st.fixed_dictionaries({}, optional={k: _NUMBERS for k in _FIELDS}),
       texts=st.fixed_dictionaries({}, optional={
           k: st.one_of(st.none(), st.text(max_size=12), st.sampled_from(["H100", "V100", "oom"]))
           for k in ("accelerator", "precision", "status", "strategy", "scaling", "model",
                     "framework", "cluster", "fused_attention", "tp_comm_overlap")}))
def test_fuzz_normalize_only_rejects(values: dict[str, Any], texts: dict[str, Any]) -> None:
    fields = {"source": "f", "citation": "c", "model": "GPT-3", "accelerator": "H100",
              "n_accelerators": "8"}
    fields.update(texts)
    fields.update(values)
    try:
        row = normalize(Record("f", "f.csv", 2, fields=fields), CATALOG, OPTS)
    except Reject as exc:
        assert exc.code in REJECT_CODES
        return
    assert set(RUN_COLUMN_NAMES) <= set(row)
    for name in ("framework", "cluster"):
        assert row[name] is None or (isinstance(row[name], str) and row[name])
    for name in ("fused_attention", "tp_comm_overlap"):
        assert row[name] is None or isinstance(row[name], bool)
    for name in ("mfu", "hfu"):
        assert row[name] is None or 0 < row[name] <= 1
    for name in ("tokens_per_s", "model_flops_per_s", "params", "step_time_s"):
        assert row[name] is None or (math.isfinite(row[name]) and row[name] > 0)
    assert 1 <= row["n_accelerators"] <= 2**53


_TABLE = (Path(__file__).parent / "fixtures" / "published" / "synthetic_good.csv").read_bytes()


@settings(max_examples=100, deadline=None)
@given(cut=st.integers(0, len(_TABLE)), flips=st.lists(
    st.tuples(st.integers(0, len(_TABLE) - 1), st.integers(0, 255)), max_size=8))
def test_fuzz_corrupted_table_through_reader_and_normalize(cut: int,
                                                           flips: list[tuple[int, int]]) -> None:
    import tempfile

    from pipeline.ingest.sources.published import read_file
    data = bytearray(_TABLE[:cut])
    for at, byte in flips:
        if at < len(data):
            data[at] = byte
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.csv"
        path.write_bytes(bytes(data))
        for record in read_file(path, root=Path(tmp)):
            if record.fields is None:
                assert record.reason.split(":")[0] in REJECT_CODES
                continue
            try:
                normalize(record, CATALOG, OPTS)
            except Reject as exc:
                assert exc.code in REJECT_CODES


def _pos(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


_VALID = {"params_b": _pos(0.1, 2000), "tokens_per_s": _pos(1, 1e9), "mfu": _pos(0.01, 1.0),
          "step_time_s": _pos(0.01, 100), "seq_len": st.sampled_from([2048, 4096, 8192]),
          "n_layers": st.integers(1, 200), "d_model": st.sampled_from([1024, 4096, 12288]),
          "global_batch_tokens": st.sampled_from([2**20, 2**22]),
          "tp": st.sampled_from([1, 2, 8]), "pp": st.sampled_from([1, 4]),
          "precision": st.sampled_from(["bf16", "fp16", "fp8"])}


@settings(max_examples=150, deadline=None)
@given(values=st.fixed_dictionaries({"n_accelerators": st.integers(1, 3000).map(lambda k: 32 * k)},
                                    optional=_VALID),
       as_text=st.booleans())
def test_fuzz_valid_rows_keep_stated_values_and_derive_consistently(values: dict[str, Any],
                                                                    as_text: bool) -> None:
    """Plausible rows (numbers or their text): the row path, which random junk rarely reaches.
    Stated values are kept as stated; derived ones follow their formulas."""
    fields = {"source": "f", "citation": "c", "model": "GPT-3", "accelerator": "H100"}
    fields.update({k: (repr(v) if as_text and not isinstance(v, str) else v)
                   for k, v in values.items()})
    try:
        row = normalize(Record("f", "f.csv", 2, fields=fields), CATALOG, OPTS)
    except Reject as exc:  # refused only with nothing measured, or a throughput past the peak
        if exc.code == "no_measure":
            assert not {"tokens_per_s", "mfu", "step_time_s"} & set(values)
        elif exc.code == "conflict":  # a stated MFU that its stated throughput contradicts
            assert "mfu" in values and "implies mfu" in str(exc)
            assert "tokens_per_s" in values or {"step_time_s", "global_batch_tokens"} <= set(values)
        elif "shape n_layers" in str(exc):  # the shape (given, else GPT-3's) holds other params
            layers, width = values.get("n_layers", 96), values.get("d_model", 12288)
            ratio = values.get("params_b", 175.0) * 1e9 / (12 * layers * width**2)
            assert not 1 / 4 <= ratio <= 64, str(exc)
        else:
            assert exc.code == "out_of_range" and "derived mfu" in str(exc), str(exc)
            # a stated MFU is recounted from the throughput (core.flop_count), which may pass 1
            assert "mfu" not in values or "tokens_per_s" in values or {
                "step_time_s", "global_batch_tokens"} <= set(values)
        return
    derived = set((row["derived"] or "").split(";")) - {""}
    assert all(row[k] is not None for k in derived), derived
    assert row["n_accelerators"] == values["n_accelerators"]
    for name in ("mfu", "tokens_per_s", "step_time_s"):
        if name in values:  # a stated measure is never overwritten (a recounted MFU is kept
            kept = "mfu_source_count" if name == "mfu" and "mfu" in derived else name  # apart)
            assert row[kept] == pytest.approx(values[name], rel=1e-15) and kept not in derived
    if "params_b" in values:
        assert row["params"] == pytest.approx(values["params_b"] * 1e9, rel=1e-12)
    if "tokens_per_s" in derived:  # global batch over step time
        assert row["tokens_per_s"] == pytest.approx(
            row["global_batch_tokens"] / row["step_time_s"], rel=1e-12)
    if "mfu" in derived:
        assert row["mfu"] == pytest.approx(row["model_flops_per_s"] / (
            row["n_accelerators"] * row["peak_flops_per_s_per_accelerator"]), rel=1e-12)
    if row["tokens_per_s_per_accelerator"] is not None and row["tokens_per_s"] is not None:
        assert row["tokens_per_s_per_accelerator"] * row["n_accelerators"] == pytest.approx(
            row["tokens_per_s"], rel=1e-12)
    assert row["mfu"] is None or 0 < row["mfu"] <= 1


def test_a_derived_value_off_the_doubles_is_named_by_sign_never_a_bare_inf():
    from pipeline.ingest.core.derive import _shown
    assert _shown(2.5) == "2.5"
    assert _shown(math.inf).startswith("past 1.8e308")
    assert _shown(-math.inf).startswith("below -1.8e308")
    assert _shown(math.nan).startswith("not a number")
