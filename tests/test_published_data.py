"""The published tables in data/raw/published: format v1, honest values, exact MLPerf accounting.

Comparisons against ../shared/reference-data skip when it is absent (``reference_data`` fixture).
"""

from __future__ import annotations

import csv
import functools
import importlib.util
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "data" / "raw" / "published"
README = PUBLISHED / "README.md"
REQUIRED = ("source", "citation", "model", "params_b", "accelerator", "n_accelerators")
MLPERF_LLM = ("gpt3", "llama2_70b_lora", "llama31_405b", "llama31_8b")
FILES = sorted(p.name for p in PUBLISHED.glob("*.csv"))
# Transcribed by hand from the sources they cite (not from ../shared/reference-data): the MoE
# performance tables. The converter's byte-for-byte and reference-row checks do not apply.
HAND_TRANSCRIBED = ("megatron_bridge2025.csv", "nemo_automodel2025.csv", "nemo_framework2025.csv")
CONVERTED = [n for n in FILES if n not in HAND_TRANSCRIBED]


def _load_converter():
    spec = importlib.util.spec_from_file_location("transcribe_reference",
                                                  ROOT / "scripts" / "transcribe_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tr = _load_converter()
# The seven further labs (scripts/transcribe_more_labs.py): already format v1 in the reference,
# checked cell by cell in tests/test_more_labs.py.
MORE_LABS = frozenset(tr._more_labs().FILES)


@functools.lru_cache(maxsize=None)
def rows_of(name: str) -> list[dict[str, str]]:
    with open(PUBLISHED / name, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@functools.lru_cache(maxsize=None)
def reference_rows(ref_dir: Path, name: str) -> list[dict[str, str]]:
    return tr.read_reference(ref_dir, name)


@functools.lru_cache(maxsize=None)
def regenerated(ref_dir: Path) -> dict[str, list[dict]]:
    return tr.converted(ref_dir)


def f(text: str) -> float | None:
    return float(text) if text not in ("", None) else None


# --- format --------------------------------------------------------------------------------


def test_expected_sources_present():
    expected = {"fernandez2024", "megatron2021", "llama3", "palm2022", "opt2022", "bloom2022",
                "torchtitan2024", "nvidia_dgxc2024", "ultrascale_playbook2025_all_configs",
                "ultrascale_playbook2025", "mlperf_training", "megascale2024", "mtnlg2022",
                "kempnerforge2026", "maxtext_tpu", "vtrain2024", "vtrain2024_single",
                "fmsfsdp2024", "semianalysis2025"}
    assert expected <= {Path(n).stem for n in FILES}


@pytest.mark.parametrize("name", FILES)
def test_columns_required_and_documented(name):
    with open(PUBLISHED / name, newline="", encoding="utf-8") as fh:
        header = next(csv.reader(fh))
    assert set(REQUIRED) <= set(header)
    assert list(header[: len(tr.V1_COLUMNS)]) == list(tr.V1_COLUMNS)
    readme = README.read_text(encoding="utf-8")
    for column in header:
        assert f"`{column}`" in readme, f"{column} of {name} is not documented in README.md"


@pytest.mark.parametrize("name", FILES)
def test_every_row_names_source_and_citation(name):
    rows = rows_of(name)
    assert rows
    stem = Path(name).stem
    for row in rows:
        assert row["source"] and row["citation"]
        assert stem.startswith(row["source"]) or row["source"] == "mlperf_training"


@pytest.mark.parametrize("name", FILES)
def test_vocabularies_and_fractions(name):
    for row in rows_of(name):
        assert row["status"] in ("", "ok", "oom", "error", "aborted", "no_run_stop", "missing_file")
        assert row["scaling"] in ("", "strong", "weak", "single", "sweep")
        assert row["precision"] in ("", "bf16", "fp16", "fp8", "fp32")
        assert row.get("record_kind", "run") in ("run", "claim", "statistic", "microbenchmark")
        for col in ("mfu", "hfu"):
            if row[col]:
                assert 0.0 < float(row[col]) <= 1.0, (name, col, row[col])
        for col in ("tokens_per_s", "tokens_per_s_per_accelerator", "step_time_s",
                    "time_to_train_s", "n_accelerators", "params_b"):
            if row[col]:
                assert float(row[col]) > 0.0, (name, col, row[col])
        for col in row["derived"].split(";") if row["derived"] else ():
            assert col in row and row[col] != "", f"{name}: derived names empty column {col}"


# --- values against the reference data -----------------------------------------------------


@pytest.mark.parametrize("name", CONVERTED)
def test_converter_reproduces_committed_file_byte_for_byte(reference_data, name):
    rows = regenerated(reference_data)[name]
    assert tr.render(rows) == (PUBLISHED / name).read_text(encoding="utf-8")


# (output column, reference column) pairs copied without change by every published converter.
COPIED = (("params_b", "params_b"), ("n_accelerators", "n_gpus"), ("mfu", "mfu"),
          ("tokens_per_s_per_accelerator", "tokens_per_s_per_gpu"), ("step_time_s", "step_time_s"),
          ("dp", "dp"), ("tp", "tp"), ("pp", "pp"), ("cp", "cp"), ("seq_len", "seq_len"))


@pytest.mark.parametrize("name", [n for n in CONVERTED
                                  if n != "mlperf_training.csv" and n not in MORE_LABS])
def test_values_match_reference_rows(reference_data, name):
    for row in rows_of(name):
        ref_file, line = row["reference_row"].rsplit(":", 1)
        ref = reference_rows(reference_data, ref_file)[int(line) - 1]
        assert row["model"] == ref["model"]
        assert row["accelerator_as_published"] == ref["gpu_type"]
        derived = set(row["derived"].split(";"))
        for out_col, ref_col in COPIED:
            if out_col in ("mfu", "tokens_per_s_per_accelerator") and not row[out_col]:
                continue  # Playbook values printed rounded: checked below
            if ref[ref_col] and out_col not in derived:
                assert math.isclose(float(row[out_col]), float(ref[ref_col]), rel_tol=1e-9), \
                    (name, line, out_col)
            elif not ref[ref_col] and row[out_col] and out_col not in derived:
                # only the Playbook sweep's seq_len (stated in the Playbook's text) is filled in
                assert (name, out_col) == ("ultrascale_playbook2025_all_configs.csv", "seq_len")
        if ref["tokens_per_s"]:
            assert math.isclose(float(row["tokens_per_s"]), float(ref["tokens_per_s"]))
        elif row["tokens_per_s"]:
            assert "tokens_per_s" in derived
        # the reference's TFLOP/s as given: model TFLOP/s, or hardware TFLOP/s where the row
        # derives its model TFLOP/s from them (bloom2022) or has none (megatron2021)
        model = row["tflops_per_accelerator"] if "tflops_per_accelerator" not in derived else ""
        tflops = model or row.get("hardware_tflops_per_accelerator", "")
        assert f(tflops) == f(ref["tflops_per_gpu"])
        if ref["mfu"] and not row["mfu"]:  # only the Playbook's MFU printed as 0.000
            assert float(ref["mfu"]) == 0.0 and "rounded" in row["notes"]
        if ref["tokens_per_s_per_gpu"] and not row["tokens_per_s_per_accelerator"]:
            assert float(ref["tokens_per_s_per_gpu"]) < 50 and "rounded" in row["notes"]
        if ref["hfu"]:
            assert float(row["hfu"]) == float(ref["hfu"])
        elif row["hfu"]:
            assert "hfu" in derived


def test_stated_schedules():
    """Llama 3 405B: interleaved with one layer per chunk (V = 8, derived from §3.3.2's layer
    balancing), no activation checkpointing at 8K; Megatron Table 1's micro-batches from
    run_table_1.sh divide each replica's batch."""
    llama = [r for r in rows_of("llama3.csv") if r["record_kind"] == "run"]
    assert {r["virtual_pipeline"] for r in llama} == {"8"}
    assert all("virtual_pipeline" in r["derived"].split(";") for r in llama)
    assert {(r["seq_len"], r["recompute"]) for r in llama} == {("8192", "none"), ("131072", "")}
    table1 = [r for r in rows_of("megatron2021.csv") if "Table 1" in r["citation"]]
    assert [int(r["micro_batch"]) for r in table1] == [16, 16, 16, 8, 4, 2, 2, 1, 1, 1]
    for r in table1:
        replica = float(r["global_batch_tokens"]) / float(r["seq_len"]) / float(r["dp"])
        assert replica % int(r["micro_batch"]) == 0 and "micro_batch" in r["derived"]


def test_megatron_recompute_flops_kept_apart_and_hfu():
    rows = rows_of("megatron2021.csv")
    assert all(r["tflops_per_accelerator"] == "" for r in rows)
    one_t = next(r for r in rows if r["n_accelerators"] == "3072" and r["record_kind"] == "run")
    assert (one_t["hardware_tflops_per_accelerator"], one_t["hfu"]) == ("163", "0.52")
    assert float(one_t["aggregate_hardware_flops_per_s"]) == 502e15
    series = {r["series"] for r in rows if "table2" in r["series"]}
    assert series == {f"megatron2021:table2:{m}:{s}" for m in ("175b", "530b")
                      for s in ("zero3", "ptd-p")}


def test_bloom_states_model_flops_apart_from_its_hardware_flops():
    # the BigScience tr11-176B-ml README: with activation checkpointing its TFLOP/s use the 4*2
    # coefficient (hardware); model TFLOP/s are 3/4 of them, and the run recomputes in full
    [row] = rows_of("bloom2022.csv")
    assert float(row["hardware_tflops_per_accelerator"]) == 156
    assert float(row["tflops_per_accelerator"]) == pytest.approx(156 * 3 / 4)
    assert "tflops_per_accelerator" in row["derived"].split(";")
    assert row["recompute"] == "full" and row["micro_batch"] == "2"
    assert "bigscience-workshop/bigscience" in row["citation"]


def test_megatron_derived_throughput_reproduces_the_papers_training_times():
    """Eq.3-derived tokens/s gives the paper's own '34 days' (GPT-3, 1024 GPUs, 300B tokens),
    '84 days' (1T, 3072 GPUs, 450B tokens) and Table 2's days for 300B tokens."""
    rows = rows_of("megatron2021.csv")
    gpt3 = next(r for r in rows if r["citation"].endswith("Sec 5.1 text"))
    assert 300e9 / float(gpt3["tokens_per_s"]) / 86400 == pytest.approx(34, rel=0.03)
    one_t = next(r for r in rows if r["n_accelerators"] == "3072" and r["record_kind"] == "run")
    assert 450e9 / float(one_t["tokens_per_s"]) / 86400 == pytest.approx(84, rel=0.03)
    for r in rows:
        if r["extra_metric"] == "training_days_for_300B_tokens":
            assert 300e9 / float(r["tokens_per_s"]) == pytest.approx(float(r["extra_value"]),
                                                                     rel=0.03)


def test_non_runs_are_kept_and_marked():
    fern = rows_of("fernandez2024.csv")
    assert [r["record_kind"] for r in fern] == ["claim", "claim", "claim", "run", "run"]
    assert float(fern[1]["extra_value"]) == pytest.approx(-0.3722)  # -37.22 percent
    assert all(r["n_accelerators"] == "" for r in fern[3:])  # MFU without a GPU count
    palm = rows_of("palm2022.csv")
    assert palm[0]["model"] == "GPT-3" and palm[0]["n_accelerators"] == ""
    figures = rows_of("ultrascale_playbook2025.csv")
    assert sum(r["record_kind"] == "microbenchmark" for r in figures) == 21
    assert sum(r["record_kind"] == "run" for r in figures) == 5


def test_dgxc_proxy_params_follow_the_llama_405b_shape():
    assert tr.llama31_405b_params(126) / 1e9 == pytest.approx(405.8, abs=0.1)
    proxy = {int(r["n_layers"]): float(r["params_b"]) for r in rows_of("nvidia_dgxc2024.csv")
             if "proxy" in r["model"]}
    assert proxy == {7: 26.51, 21: 71.14, 42: 138.08}
    widths = {(r["d_model"], "d_model" in r["derived"].split(";"))
              for r in rows_of("nvidia_dgxc2024.csv") if "proxy" in r["model"]}
    assert widths == {("16384", True)}  # the 405B width, marked derived


def test_torchtitan_float8_tables_are_fp8():
    rows = rows_of("torchtitan2024.csv")
    for r in rows:
        table = r["citation"].split()[2]
        expect_fp8 = table in ("2", "4", "5", "6") or "Float8" in r["strategy"]
        assert (r["precision"] == "fp8") == expect_fp8, r["strategy"]


# --- Ultra-Scale Playbook ------------------------------------------------------------------


def test_playbook_sweep_keeps_failures_and_flags_figure_rows():
    rows = rows_of("ultrascale_playbook2025_all_configs.csv")
    assert len(rows) == 3264
    assert sum(r["status"] == "oom" for r in rows) == 1506
    assert all(r["tokens_per_s"] == "" for r in rows if r["status"] == "oom")
    assert {r["global_batch_tokens"] for r in rows} == {"1048576"}
    flags = [flag for r in rows for flag in r["figure"].split(";") if flag]
    assert flags.count("benchmarks_best") == 26 and flags.count("dp_scaling") == 6
    best_8b = [r for r in rows if "benchmarks_best" in r["figure"] and r["model"] == "8B"]
    assert {r["n_accelerators"]: r["tokens_per_s_per_accelerator"] for r in best_8b}["512"] \
        == "3101"


def test_playbook_throughputs_agree_to_rounding():
    """Job total and per-GPU tok/s (printed as an integer) agree within that rounding, and
    wherever both are kept they agree within 1 %."""
    for r in rows_of("ultrascale_playbook2025_all_configs.csv"):
        if r["tokens_per_s"] and r["tokens_per_s_per_accelerator"]:
            n, tps = int(r["n_accelerators"]), float(r["tokens_per_s"])
            assert abs(float(r["tokens_per_s_per_accelerator"]) * n - tps) <= max(0.5 * n + 1,
                                                                                  0.01 * tps)


def test_playbook_figure_file_does_not_repeat_sweep_rows(reference_data):
    sweep = {(r["model"], r["n_accelerators"], r["tokens_per_s_per_accelerator"])
             for r in rows_of("ultrascale_playbook2025_all_configs.csv")}
    for r in rows_of("ultrascale_playbook2025.csv"):
        if r["record_kind"] == "run":
            assert (r["model"], r["n_accelerators"], r["tokens_per_s_per_accelerator"]) not in sweep
    ref = reference_rows(reference_data, "ultrascale_playbook2025.csv")
    skipped = [x for x in ref if "best config" in x["table_or_figure"]
               or "Data Parallelism" in x["table_or_figure"]]
    assert len(ref) - len(skipped) == len(rows_of("ultrascale_playbook2025.csv"))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=4096), min_size=6, max_size=6),
       st.integers(min_value=0, max_value=3), st.booleans())
def test_playbook_strategy_round_trip(values, zero, with_gbs):
    dp, tp, pp, mbs, ga, gbs = values
    text = f"DP{dp} TP{tp} PP{pp} ZeRO-{zero} MBS{mbs} GA{ga}" + (f" GBS{gbs}" if with_gbs else "")
    parsed = tr.parse_playbook_strategy(text)
    assert (parsed["dp"], parsed["tp"], parsed["pp"], parsed["zero_stage"],
            parsed["micro_batch"], parsed["ga"]) == (dp, tp, pp, zero, mbs, ga)
    assert parsed.get("gbs") == (gbs if with_gbs else None)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=40))
def test_playbook_strategy_rejects_other_text(text):
    if re.fullmatch(r"DP\d+ TP\d+ PP\d+ ZeRO-\d MBS\d+ GA\d+( GBS\d+)?", text.strip()):
        return
    with pytest.raises(ValueError):
        tr.parse_playbook_strategy(text)


# --- MLPerf --------------------------------------------------------------------------------


def test_mlperf_row_accounting_is_exact(reference_data):
    ref = reference_rows(reference_data, "mlperf_results.csv")
    assert len(ref) == 5692
    non_llm = sum(r["benchmark"] not in MLPERF_LLM for r in ref)
    llm_dups = sum(r["benchmark"] in MLPERF_LLM and bool(r["dup_of"]) for r in ref)
    assert (non_llm, llm_dups) == (3360, 75)
    assert len(rows_of("mlperf_training.csv")) == 5692 - non_llm - llm_dups == 2257


def test_mlperf_has_no_republished_runs(reference_data):
    rows = rows_of("mlperf_training.csv")
    ref = reference_rows(reference_data, "mlperf_results.csv")
    by_key = {f"{r['version']}:{r['path']}": r for r in ref}
    kept = {f"{r['mlperf_version']}:{r['result_path']}" for r in rows}
    assert len(kept) == len(rows)
    for key in kept:
        assert by_key[key]["dup_of"] == ""
    for r in ref:  # every run that was re-published is kept once, under its first publication
        if r["dup_of"] and r["benchmark"] in MLPERF_LLM:
            assert r["dup_of"] in kept
    sha = [(r["benchmark"], r["log_sha1"]) for r in rows if r["log_sha1"]]
    assert len(sha) == len(set(sha))


def test_mlperf_values_match_reference(reference_data):
    ref = {f"{r['version']}:{r['path']}": r
           for r in reference_rows(reference_data, "mlperf_results.csv")}
    statuses = {}
    for row in rows_of("mlperf_training.csv"):
        src = ref[f"{row['mlperf_version']}:{row['result_path']}"]
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
        assert row["accelerator"] == src["accelerator_model"]
        assert f(row["n_accelerators"]) == f(src["n_accelerators"])
        if src["time_to_train_min"]:
            assert float(row["time_to_train_s"]) == pytest.approx(
                60 * float(src["time_to_train_min"]), rel=1e-9)
        assert f(row["step_time_s"]) == f(src["step_time_s_median"])
        assert f(row["olympic_score_s"]) == pytest.approx(
            None if not src["olympic_score_min"] else 60 * float(src["olympic_score_min"]))
        gbs, seq = f(src["global_batch_size"]), f(src["max_sequence_length"])
        assert f(row["global_batch_tokens"]) == (gbs * seq if gbs and seq else None)
        if row["tokens_per_s"]:
            assert src["benchmark"] != "llama2_70b_lora"
            assert float(row["tokens_per_s"]) == pytest.approx(
                float(src["samples_per_s_step"]) * seq, abs=0.06)
            assert "tokens_per_s" in row["derived"].split(";")
    assert statuses == {"ok": 2235, "missing_file": 20, "no_run_stop": 2}


def test_mlperf_olympic_score_agrees_with_scores_table(reference_data):
    scores = {(r["version"], r["submitter"], r["system"], r["benchmark"]): r["olympic_score_min"]
              for r in reference_rows(reference_data, "mlperf_scores.csv")}
    checked = 0
    for row in rows_of("mlperf_training.csv"):
        key = (row["mlperf_version"], row["submitter"], row["system"], row["benchmark"])
        if row["olympic_score_s"] and scores.get(key):
            assert float(row["olympic_score_s"]) == pytest.approx(60 * float(scores[key]))
            checked += 1
    assert checked > 2000
    gpt3_v31 = [r for r in rows_of("mlperf_training.csv") if r["mlperf_version"] == "v3.1"
                and r["system"] == "eos-dfw_n1344_ngc23.09_nemo" and r["benchmark"] == "gpt3"]
    # Published MLPerf Training v3.1 GPT-3 result at 10,752 H100: 3.917 min (mlperf.md).
    assert float(gpt3_v31[0]["olympic_score_s"]) / 60 == pytest.approx(3.917, abs=0.001)


def test_palm_model_parallel_degree_is_derived():
    """PaLM Sec 4: 12-way model x 256-way data parallel per pod, two pods (dp 512 of 6144)."""
    run = next(r for r in rows_of("palm2022.csv") if r["model"] == "PaLM"
               and r["record_kind"] == "run")
    assert (run["dp"], run["tp"]) == ("512", "12")
    assert {"dp", "tp"} <= set(run["derived"].split(";"))


def test_palm_states_its_within_pod_sharding_and_full_rematerialization():
    """arXiv:2204.02311 §4: "256-way fully sharded data parallelism" within each pod (FSDP =
    ZeRO-3 by convention, so derived) and "the rest of the activations are rematerialized"
    (full recompute, as the paper states it); §5: Adafactor without factorization, "effectively
    equivalent to Adam" (the Adam-like states the memory model counts)."""
    run = next(r for r in rows_of("palm2022.csv") if r["model"] == "PaLM"
               and r["record_kind"] == "run")
    assert (run["zero_stage"], run["recompute"]) == ("3", "full")
    assert "zero_stage" in run["derived"].split(";")
    assert "recompute" not in run["derived"].split(";")
    for quoted in ("256-way fully sharded data parallelism", "rematerialized",
                   "effectively equivalent to Adam"):
        assert quoted in run["notes"]
# --- the MoE tables -------------------------------------------------------------------------


@pytest.mark.parametrize("name", HAND_TRANSCRIBED)
def test_moe_rows_state_active_params_and_experts(name):
    """Every MoE run states its active parameters (below the total), experts and top-k, and
    its layout multiplies out to N (dp derived = N / (tp pp cp))."""
    for row in rows_of(name):
        n = int(row["n_accelerators"])
        assert int(row["dp"]) * int(row["tp"]) * int(row["pp"]) * int(row["cp"]) == n
        if not row["n_experts"]:  # a dense row of the same tables
            assert not row["active_params_b"] and not row["top_k"] and row["ep"] in ("", "1")
            continue
        assert 0 < f(row["active_params_b"]) < f(row["params_b"]), row["model"]
        assert 1 <= int(row["top_k"]) <= int(row["n_experts"])
        if row["ep"]:
            assert int(row["ep"]) <= int(row["n_experts"])
        assert "active_params_b" in row["derived"].split(";")


def test_dense_golden_rows():
    """Dense rows as the sources print them: Megatron-Bridge (df0289c) 38 rows, the NeMo
    24.07 H100 table (12) and the long-sequence LLAMA2-7B H100 table (9); every dense
    Megatron-Bridge row's GBS = MBS x DP x GA (GA in `notes`)."""
    dense = [r for r in rows_of("megatron_bridge2025.csv") if not r["n_experts"]]
    assert len(dense) == 71
    mb = [r for r in dense if "df0289c" in r["citation"]]
    assert len(mb) == 38
    for r in mb:
        ga = int(re.search(r"GA (\d+)", r["notes"]).group(1))
        assert int(r["global_batch_tokens"]) == (int(r["micro_batch"]) * int(r["dp"]) * ga
                                                 * int(r["seq_len"]))
    key = {(r["citation"].split("'")[1], r["accelerator"], r["model"], r["strategy"]): r
           for r in mb}
    row = key[("25.11 NeMo Container", "GB300", "LLAMA3_8B",
               "TP1 PP1 CP1 EP1 VPn/a MBS2 GBS128 GA8 FSDP0 (FP8-MX)")]
    assert (row["tokens_per_s_per_accelerator"], row["tflops_per_accelerator"]) == ("36108",
                                                                                  "1858")
    nemo = rows_of("nemo_framework2025.csv")
    long_seq = [r for r in nemo if "performance_long_sequence" in r["citation"]]
    assert [(r["seq_len"], r["tp"], r["cp"], r["tflops_per_accelerator"]) for r in long_seq][-1] \
        == ("1048576", "8", "32", "536")
    assert len(long_seq) == 9
    assert len([r for r in nemo if "24.07 perf numbers" in r["citation"]]) == 12
    assert len([r for r in nemo if "stored copy" in r["citation"] and not r["n_experts"]]) == 15
    h100 = [r for r in dense if "'26.06 NeMo" in r["citation"] and r["accelerator"] == "H100-SXM5-80GB"]
    assert [(r["cp"], r["tokens_per_s_per_accelerator"], r["tflops_per_accelerator"]) for r in h100] \
        == [("2", "326", "822")]


def test_moe_golden_rows():
    """Figures as the sources print them (Megatron-Bridge performance summary at df0289c;
    NeMo Automodel performance summary at 01926a5)."""
    mb = {(r["citation"].split("'")[1], r["accelerator"], r["model"], r["precision"]):
          r for r in rows_of("megatron_bridge2025.csv")}
    h100 = mb[("25.11 NeMo Container", "H100-SXM5-80GB", "Qwen3_30B_a3B", "fp8")]
    assert (h100["n_accelerators"], h100["pp"], h100["ep"], h100["virtual_pipeline"]) == (
        "16", "2", "8", "24")
    assert (h100["tokens_per_s_per_accelerator"], h100["tflops_per_accelerator"]) == ("5275", "121")
    assert len([r for r in rows_of("megatron_bridge2025.csv") if r["n_experts"]]) == 45
    am = rows_of("nemo_automodel2025.csv")
    assert [(r["n_accelerators"], r["step_time_s"]) for r in am[:2]] == [("1024", "37.87"),
                                                                        ("256", "8.18")]


# --- MLPerf layouts from the submissions' configuration scripts ----------------------------
LAYOUTS = ROOT / "data" / "raw" / "mlperf_configs" / "layouts.csv"
LAYOUT_KEY = ("round", "submitter", "system", "benchmark")


@functools.lru_cache(maxsize=None)
def layout_rows() -> list[dict[str, str]]:
    with open(LAYOUTS, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_mlperf_layouts_multiply_to_n_and_cite_a_config_file():
    rows = layout_rows()
    assert len(rows) >= 40
    for row in rows:
        tp, pp, cp, dp, n = (int(row[k]) for k in ("tp", "pp", "cp", "dp", "n_accelerators"))
        assert tp * pp * cp * dp == n, row["system"]
        assert int(row["nodes"]) * int(row["accelerators_per_node"]) == n, row["system"]
        assert int(row["minibs"]) * dp == int(row["global_batch"])
        assert int(row["micro_batch"]) >= 1 and int(row["virtual_pipeline"]) >= 1
        assert pp > 1 or int(row["virtual_pipeline"]) == 1
        assert row["repository"] == f"mlcommons/training_results_{row['round']}"
        assert re.fullmatch(r"[0-9a-f]{40}", row["commit"])
        assert row["config_path"].startswith(f"{row['submitter']}/benchmarks/{row['benchmark']}/")
        assert re.search(r"/config_[^/]+\.sh$", row["config_path"])
        assert row["files_read"].split(";")[0] == row["config_path"].rsplit("/", 1)[1]
        assert {"dp", "global_batch"} <= set(row["derived"].split(";"))
        assert row["precision"] in ("bf16", "fp8", "nvfp4", "")


def test_mlperf_layouts_one_row_per_system():
    keys = [tuple(r[k] for k in LAYOUT_KEY) for r in layout_rows()]
    assert len(keys) == len(set(keys))
    assert tr.read_layouts(LAYOUTS).keys() == set(keys)


def test_mlperf_layout_join_is_one_to_one_and_exact():
    """Every run of a system in layouts.csv carries that row's layout (or a note why not), and
    no other run carries one; the log's global batch divides into whole microbatches."""
    layouts = {tuple(r[k] for k in LAYOUT_KEY): r for r in layout_rows()}
    runs = rows_of("mlperf_training.csv")
    joined = set()
    for run in runs:
        key = (run["mlperf_version"], run["submitter"], run["system"], run["benchmark"])
        lay = layouts.get(key)
        if lay is None:
            assert run["tp"] == run["layout_source"] == "", key
            continue
        joined.add(key)
        if lay["precision"] not in tr.JOINED_PRECISIONS or lay["benchmark"] in \
                tr.MLPERF_BENCHMARK_LEFT_OUT:
            assert run["tp"] == "" and "not joined" in run["notes"], key
            continue
        for col in ("tp", "pp", "cp", "dp", "micro_batch", "virtual_pipeline"):
            assert run[col] == lay[col], (key, col)
        assert run["precision"] == lay["precision"]
        assert lay["config_path"] in run["layout_source"] and lay["commit"][:12] in \
            run["layout_source"]
        assert "dp" in run["derived"].split(";")
        assert ("precision" in run["derived"].split(";")) == ("precision" in lay["derived"])
        gbs, dp, mbs = (int(f(run[k])) for k in ("global_batch_sequences", "dp", "micro_batch"))
        assert gbs % (dp * mbs) == 0, key
    assert joined == set(layouts)  # every layout row names a system the table holds


def test_mlperf_layout_counts():
    runs = [r for r in rows_of("mlperf_training.csv") if r["tp"]]
    assert len(runs) == 93
    assert {r["benchmark"] for r in runs} == {"gpt3", "llama31_405b"}
    assert all(r["status"] == "ok" for r in runs)


def test_mlperf_layout_is_what_the_script_states():
    """Golden rows read by hand from the scripts (v3.1 GPT-3 at 10,752: config_DGXH100_1344x8x8
    x4x8_mbs1.sh + conf/megatron_gpt_config_custom.yaml default INTERLEAVED_PIPELINE=12; v5.0
    405B at 512 H100: config_DGXH100_64x8x288xtp8pp8cp2.sh)."""
    layouts = {tuple(r[k] for k in LAYOUT_KEY): r for r in layout_rows()}
    gpt3 = layouts[("v3.1", "NVIDIA", "eos-dfw_n1344_ngc23.09_nemo", "gpt3")]
    assert (gpt3["tp"], gpt3["pp"], gpt3["virtual_pipeline"], gpt3["cp"], gpt3["micro_batch"],
            gpt3["minibs"], gpt3["precision"]) == ("4", "8", "12", "1", "1", "8", "fp8")
    llama = layouts[("v5.0", "NVIDIA", "eos-dfw_n64_ngc25.01_nemo", "llama31_405b")]
    assert (llama["tp"], llama["pp"], llama["virtual_pipeline"], llama["cp"], llama["dp"],
            llama["micro_batch"], llama["minibs"]) == ("8", "8", "8", "2", "4", "1", "288")


def test_mlperf_layout_rejects_a_layout_that_does_not_multiply_to_n():
    row = {"mlperf_version": "v0", "system": "x", "benchmark": "gpt3", "n_accelerators": 64,
           "notes": None}
    bad = {"tp": "4", "pp": "8", "cp": "1", "dp": "3", "micro_batch": "1",
           "virtual_pipeline": "1", "precision": "fp8", "sequence_parallel": "True",
           "tp_comm_overlap": "True", "repository": "r", "commit": "0" * 40,
           "config_path": "c", "files_read": "c", "derived": "dp;global_batch"}
    with pytest.raises(ValueError, match="multiply"):
        tr.with_layout(row, bad)
