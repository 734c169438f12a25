"""MLPerf tree walker, per-run extraction and olympic score on the synthetic trees in
``tests/fixtures/mlperf/rounds`` (see its README: every expected value below is exact by
construction) and on small trees generated in a temp folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest.sources.mlperf.tree import find_rounds, read_tree
from pipeline.ingest.sources.mlperf.system import olympic_score_s
from pipeline.ingest.records import RUN_EXTRAS

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "mlperf" / "rounds"
ROUND = FIXTURES / "v9.0"
V1_FIELDS = {"source", "citation", "model", "params_b", "accelerator", "n_accelerators", "seq_len",
             "global_batch_tokens", "micro_batch", "dp", "tp", "pp", "cp", "tokens_per_s",
             "step_time_s", "time_to_train_s", "derived", "notes"}
# Read by the ingest core (normalize.ID_FIELDS) though not in RUN_EXTRAS.
CORE_EXTRAS = {"submitter", "result_path", "log_sha1"}


@pytest.fixture(scope="module")
def records() -> dict[str, object]:
    stats: dict[str, int] = {}
    recs = list(read_tree(FIXTURES, stats=stats))
    out = {str(Path(r.path).relative_to(ROUND)): r for r in recs}
    assert len(out) == len(recs)  # one record per file
    out["_stats"] = stats
    return out


def _run(records, rel):
    rec = records[rel]
    assert rec.reason is None, rec.reason
    return rec.fields


def _reason(records, rel):
    rec = records[rel]
    assert rec.fields is None
    return rec.reason


L405 = "Synth/results/h100_n2/llama31_405b"


def test_one_record_per_result_file_and_nothing_else(records) -> None:
    expected = {str(p.relative_to(ROUND)) for p in ROUND.glob("*/results/*/*/result_*.txt")}
    assert set(records) - {"_stats"} == expected
    # power logs, files at the wrong depth are not runs and yield no record
    assert not any("power" in k or "extra" in k for k in records)
    assert "Synth/results/result_0.txt" not in records
    assert records["_stats"] == {"result_files": len(expected), "groups": 10,
                                 "power_logs": 1, "power_measurements": 1}


def test_fields_use_published_v1_names_and_run_extras(records) -> None:
    allowed = V1_FIELDS | set(RUN_EXTRAS) | CORE_EXTRAS
    checked = 0
    for key, rec in records.items():
        if key != "_stats" and rec.fields is not None:
            assert set(rec.fields) <= allowed, set(rec.fields) - allowed
            # what the ingest core needs to place and identify a run is always there
            assert {"source", "citation", "model", "accelerator", "n_accelerators", "status",
                    "log_sha1", "result_path"} <= set(rec.fields), key
            checked += 1
    assert checked == 8  # the fixture trees' 8 readable runs (7 result files are rejects)


def test_prefixed_run_with_corrupt_lines(records) -> None:
    f = _run(records, f"{L405}/result_0.txt")
    assert f["time_to_train_s"] == pytest.approx(100.0, abs=1e-9)
    assert f["status"] == "ok"
    assert (f["model"], f["params_b"]) == ("Llama 3.1 405B", 405.0)
    assert f["accelerator"] == "NVIDIA H100-SXM5-80GB"
    assert (f["n_accelerators"], f["accelerators_per_node"]) == (16, 8)
    assert (f["seq_len"], f["global_batch_tokens"]) == (8192, 16 * 8192)
    assert f["step_time_s"] == 32.0  # median of 31, 32, 33
    # 0.5 samples/s = GBS 16 / 32 s: samples, converted with seq_len since 405B is packed
    assert f["tokens_per_s"] == pytest.approx(0.5 * 8192)
    assert (f["tp"], f["pp"], f["cp"], f["dp"], f["micro_batch"]) == (8, 2, 1, 1, 1)
    derived = f["derived"].split(";")
    for name in ("n_accelerators", "global_batch_tokens", "tokens_per_s", "dp", "olympic_score_s"):
        assert name in derived
    assert "time_to_train_s" not in derived
    assert f["citation"] == "MLPerf Training v9.0 Synth h100_n2 llama31_405b result_0"
    assert (f["mlperf_version"], f["benchmark"], f["system"]) == ("v9.0", "llama31_405b", "h100_n2")
    assert f["source_kind"] == "mlperf" and f["source"] == "mlperf_logs"
    assert f["provenance"].endswith("result_0.txt:33")  # the run_start line
    assert records[f"{L405}/result_0.txt"].line == 33
    # the cut line and the interleaved fragment both lack metadata
    assert "2 without metadata" in f["notes"]


def test_last_run_start_before_first_run_stop(records) -> None:
    f = _run(records, f"{L405}/result_1.txt")
    assert f["time_to_train_s"] == pytest.approx(120.5, abs=1e-9)


def test_openmpi_prefix_and_crlf(records) -> None:
    assert _run(records, f"{L405}/result_2.txt")["time_to_train_s"] == pytest.approx(110.25)


def test_olympic_score_is_median_of_three_times_scaling_factor(records) -> None:
    for i in range(3):
        f = _run(records, f"{L405}/result_{i}.txt")
        assert f["olympic_score_s"] == pytest.approx(110.25 * 1.5, rel=1e-12)


def test_bad_logs_are_rejected_with_codes(records) -> None:
    g = "Synth/results/h100_n2/gpt3"
    assert _run(records, f"{g}/result_0.txt")["status"] == "no_run_stop"
    assert "time_to_train_s" not in _run(records, f"{g}/result_0.txt")
    assert _run(records, f"{g}/result_0.txt")["step_time_s"] == 2.0
    assert _reason(records, f"{g}/result_1.txt").startswith("truncated_log:")
    assert _reason(records, f"{g}/result_2.txt").startswith("binary_file:")
    assert _reason(records, f"{g}/result_3.txt").startswith("no_run_start:")
    # 4 runs, none converged: no score
    assert "olympic_score_s" not in _run(records, f"{g}/result_0.txt")


def test_aborted_run_keeps_its_time_and_reports_samples_not_tokens(records) -> None:
    f = _run(records, "Synth/results/h100_n2/bert/result_0.txt")
    assert f["status"] == "aborted"
    assert f["time_to_train_s"] == pytest.approx(60.0)
    assert "tokens_per_s" not in f and "params_b" not in f and f["model"] == "bert"
    assert "1000 sequences/s" in f["notes"]


def test_system_description_problems_name_the_file(records) -> None:
    r = _reason(records, "Ghost/results/ghost_sys/bert/result_0.txt")
    assert r.startswith("missing_required:") and "Ghost/systems/ghost_sys.json" in r
    r = _reason(records, "Broken/results/bad/bert/result_0.txt")
    assert r.startswith("malformed_row:") and "Broken/systems/bad.json" in r


def test_cpu_only_system_is_a_reject_not_a_run_with_zero(records) -> None:
    r = _reason(records, "CPU/results/spr_n4/dlrm_dcnv2/result_0.txt")
    assert r.startswith("out_of_range:") and "0 accelerators" in r and "CPU-only" in r


@pytest.mark.parametrize("system, chips", [
    ("cloud-tpu-v5p-64-maxtext", 32),      # JSON 8 x 4 chips; name counts 64 TensorCores
    ("cloud-tpu-v5p-128-cores", 64),       # JSON counted cores (32 x 4 = 128): halved
    ("cloud-tpu-trillium-16-maxtext", 16),  # one TensorCore per Trillium chip
])
def test_tpu_names_count_tensorcores(records, system, chips) -> None:
    f = _run(records, f"Google/results/{system}/gpt3/result_0.txt")
    assert f["n_accelerators"] == chips
    assert f["accelerators_per_node"] == (2 if system.endswith("cores") else 4)
    assert "n_accelerators" in f["derived"].split(";")
    assert "TensorCores" in f["notes"]


def test_tpu_name_and_json_disagreeing_is_a_conflict(records) -> None:
    r = _reason(records, "Google/results/cloud-tpu-v5p-256-odd/gpt3/result_0.txt")
    assert r.startswith("conflict:") and "40" in r and "128" in r


def test_round_folder_and_folder_of_rounds_agree() -> None:
    assert [v for _, v in find_rounds(FIXTURES)] == ["v9.0"]
    assert [v for _, v in find_rounds(ROUND)] == ["v9.0"]
    a = [(Path(r.path).name, r.fields, r.reason) for r in read_tree(FIXTURES)]
    b = [(Path(r.path).name, r.fields, r.reason) for r in read_tree(ROUND)]
    assert a == b


def test_deterministic() -> None:
    a = [(r.path, r.fields, r.reason, r.meta) for r in read_tree(FIXTURES)]
    b = [(r.path, r.fields, r.reason, r.meta) for r in read_tree(FIXTURES)]
    assert a == b


# --- olympic score rules on generated groups --------------------------------------------------

def _log(ttt_ms: int | None, status: str = "success") -> str:
    t0 = 1_700_000_000_000
    lines = [{"time_ms": t0, "key": "run_start", "value": None, "metadata": {}}]
    if ttt_ms is not None:
        lines.append({"time_ms": t0 + ttt_ms, "key": "run_stop", "value": None,
                      "metadata": {"status": status}})
    return "".join(":::MLLOG " + json.dumps(d) + "\n" for d in lines)


def _tree(tmp_path: Path, bench: str, runs: list[tuple[int | None, str]],
          factor: float | None = None) -> list:
    rnd = tmp_path / "training_results_v4.1"
    folder = rnd / "S" / "results" / "sys" / bench
    folder.mkdir(parents=True)
    (rnd / "S" / "systems").mkdir()
    (rnd / "S" / "systems" / "sys.json").write_text(json.dumps(
        {"number_of_nodes": 1, "accelerators_per_node": "8", "accelerator_model_name": "H100"}))
    for i, (ttt, status) in enumerate(runs):
        (folder / f"result_{i}.txt").write_text(_log(ttt, status))
    if factor is not None:
        (folder / "scaling.json").write_text(json.dumps({"scaling_factor": factor}))
    return list(read_tree(rnd))


def test_one_non_converged_run_is_a_dropped_slow_run(tmp_path) -> None:
    ttt = [60_000 + 1000 * i for i in range(9)]  # 60..68 s
    recs = _tree(tmp_path, "bert", [(t, "success") for t in ttt] + [(30_000, "aborted")], 1.2)
    assert recs[0].fields["mlperf_version"] == "v4.1"
    # drop the fastest ok run (60) and count the aborted one as the slowest: mean of 61..68
    expected = sum(range(61, 69)) / 8 * 1.2
    assert [r.fields["olympic_score_s"] for r in recs] == [pytest.approx(expected)] * 10


def test_two_non_converged_runs_give_no_score(tmp_path) -> None:
    runs = [(60_000 + i, "success") for i in range(8)] + [(1, "aborted"), (None, "")]
    recs = _tree(tmp_path, "bert", runs)
    assert all("olympic_score_s" not in r.fields for r in recs)
    assert "did not converge" in recs[0].fields["notes"]


def test_too_few_runs_give_no_score(tmp_path) -> None:
    recs = _tree(tmp_path, "bert", [(60_000, "success")] * 9)
    assert all("olympic_score_s" not in r.fields for r in recs)
    assert "9 of 10 required runs" in recs[0].fields["notes"]


def test_olympic_function_matches_summarizer_rules() -> None:
    assert olympic_score_s([3.0, 1.0, 2.0], 3, "gpt3", 1.0)[0] == 2.0
    assert olympic_score_s([3.0, 1.0], 3, "gpt3", 2.0)[0] == 6.0  # 1 dropped: keep the 2nd
    assert olympic_score_s([1.0], 3, "gpt3", 1.0)[0] is None
    unet = [float(i) for i in range(40)]
    assert olympic_score_s(unet, 40, "unet3d", 1.0)[0] == pytest.approx(sum(range(4, 36)) / 32)
    assert olympic_score_s(unet[:36], 40, "unet3d", 1.0)[0] == pytest.approx(sum(range(4, 36)) / 32)
    assert olympic_score_s(unet[:35], 40, "unet3d", 1.0)[0] is None


def test_negative_counts_are_out_of_range(tmp_path) -> None:
    from pipeline.ingest.sources.mlperf.system import load_system
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"number_of_nodes": -2, "accelerators_per_node": -8,
                                "accelerator_model_name": "H100"}))
    assert load_system(path, "x")[0] == "out_of_range"


def test_cross_check_olympic_with_official_summarizer_helper() -> None:
    from mlperf_logging.result_summarizer.result_summarizer import _compute_olympic_average
    scores = [5.0, 1.0, 4.0, 2.0, 3.0, 9.0, 7.0, 6.0, 8.0]
    ours = olympic_score_s(scores, 10, "bert", 1.0)[0]
    assert ours == pytest.approx(_compute_olympic_average(sorted(scores), 1, 1))


def test_bad_scaling_json_means_no_score_with_reason(tmp_path) -> None:
    recs = _tree(tmp_path, "gpt3", [(1000, "success")] * 3, factor=-1.0)
    assert all("olympic_score_s" not in r.fields for r in recs)
    assert "scaling_factor=-1.0" in recs[0].fields["notes"]


def test_unreadable_log_is_a_reject(tmp_path, monkeypatch) -> None:
    from pipeline.ingest.sources.mlperf import mllog

    def boom(*_a, **_k):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(mllog, "parse_file", boom)
    recs = _tree(tmp_path, "gpt3", [(1000, "success")])
    assert recs[0].reason.startswith("unreadable: PermissionError")


_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(),
                     st.text(max_size=6), st.sampled_from(["8", " 4 ", "²", "N/A", "0", "1e3"]))


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(["number_of_nodes", "accelerators_per_node",
                                        "accelerator_model_name", "system_name"]), _scalars),
       st.sampled_from(["gpu_n2", "cloud-tpu-v5p-64-maxtext", "tpu-v4-7"]))
def test_fuzz_system_description_never_raises(desc, system) -> None:
    import tempfile

    from pipeline.ingest.sources.mlperf.system import SystemInfo, load_system
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.json"
        path.write_text(json.dumps(desc))
        out = load_system(path, system)
    if isinstance(out, SystemInfo):
        assert out.n_accelerators > 0 and out.per_node >= 0 and out.accelerator
    else:
        code, detail = out
        assert code in {"bad_value", "out_of_range", "missing_required", "conflict"} and detail


_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(status=_values, gbs=_values, seq=_values, stats=_values, t_stop=st.integers(-10**15, 10**15))
def test_fuzz_event_values_of_any_type_never_raise(status, gbs, seq, stats, t_stop) -> None:
    import tempfile
    t0 = 1_700_000_000_000
    events = [{"time_ms": t0, "key": "global_batch_size", "value": gbs, "metadata": {}},
              {"time_ms": t0, "key": "max_sequence_length", "value": seq, "metadata": {}},
              {"time_ms": t0, "key": "run_start", "value": None, "metadata": {}},
              {"time_ms": t0, "key": "tracked_stats", "value": stats, "metadata": {}},
              {"time_ms": t0, "key": "throughput", "value": stats, "metadata": {}},
              {"time_ms": t0 + t_stop, "key": "run_stop", "value": None,
               "metadata": {"status": status}}]
    log = "".join(":::MLLOG " + json.dumps(e) + "\n" for e in events)
    with tempfile.TemporaryDirectory() as tmp:
        rnd = Path(tmp) / "v5.0"
        folder = rnd / "S" / "results" / "sys" / "llama31_405b"
        folder.mkdir(parents=True)
        (rnd / "S" / "systems").mkdir()
        (rnd / "S" / "systems" / "sys.json").write_text(json.dumps(
            {"number_of_nodes": 2, "accelerators_per_node": 8, "accelerator_model_name": "H100"}))
        for i in range(3):
            (folder / f"result_{i}.txt").write_text(log)
        recs = list(read_tree(rnd))
    assert len(recs) == 3
    for rec in recs:
        if rec.fields is not None:
            assert rec.fields["status"] in {"ok", "aborted"}
            assert rec.fields["time_to_train_s"] > 0
            for k in ("tokens_per_s", "step_time_s", "global_batch_tokens", "seq_len"):
                assert k not in rec.fields or rec.fields[k] > 0
        else:
            assert rec.reason.startswith("out_of_range:")


def test_result_links_that_dangle_loop_or_leave_the_root_are_bad_link_rejects(tmp_path) -> None:
    """Issue 13: a symlinked result log is read when it stays inside the tree, and is otherwise
    a ``bad_link`` reject (never skipped silently, never read from outside the root)."""
    outside = tmp_path / "elsewhere.txt"
    outside.write_text(_log(60_000))
    rnd = tmp_path / "root" / "training_results_v4.1"
    folder = rnd / "S" / "results" / "sys" / "bert"
    folder.mkdir(parents=True)
    (rnd / "S" / "systems").mkdir()
    (rnd / "S" / "systems" / "sys.json").write_text(json.dumps(
        {"number_of_nodes": 1, "accelerators_per_node": "8", "accelerator_model_name": "H100"}))
    (folder / "result_0.txt").write_text(_log(60_000))
    (folder / "result_1.txt").symlink_to("result_0.txt")            # inside: read
    (folder / "result_2.txt").symlink_to("missing.txt")             # dangling
    (folder / "result_3.txt").symlink_to("result_3.txt")            # loop
    (folder / "result_4.txt").symlink_to(outside)                   # outside the root
    recs = {Path(r.path).name: r for r in read_tree(rnd)}
    assert sorted(recs) == [f"result_{i}.txt" for i in range(5)]
    assert recs["result_0.txt"].fields["time_to_train_s"] == 60.0
    assert recs["result_1.txt"].fields["time_to_train_s"] == 60.0
    reasons = {k: r.reason for k, r in recs.items() if r.reason}
    assert reasons == {
        "result_2.txt": "bad_link: dangling symlink result_2.txt -> missing.txt",
        "result_3.txt": "bad_link: symlink loop result_3.txt -> result_3.txt",
        "result_4.txt": f"bad_link: symlink result_4.txt -> {outside} points outside the data "
                        "folder training_results_v4.1/"}
