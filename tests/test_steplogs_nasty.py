"""Bad input: every nasty log ends as a run with its trouble in the notes, or as a reject with
a reason; never a crash, never a silent drop."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline.config import ConfigError
from pipeline.config import LogsSettings
from pipeline.ingest.sources.steplogs.reduce import warmup_count
from pipeline.ingest.sources.steplogs.reader import find_logs, read_logs

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "logs"
PARAMS = {"ingest": {"logs": {"warmup_steps": "auto", "max_warmup_fraction": 0.5,
                              "min_steady_steps": 3}}}
CLEAN_MEDIAN_S = 2.4094  # the clean Megatron fixture's steady-state median


@pytest.fixture(scope="module")
def nasty():
    records, steps = read_logs(FIXTURES / "nasty", PARAMS)
    return {Path(r.path).name: r for r in records}, steps


def test_every_log_file_is_one_record():
    records, _ = read_logs(FIXTURES, PARAMS)
    logs = find_logs(FIXTURES)
    assert len(records) == len(logs) and len({r.path for r in records}) == len(logs)
    assert all((r.fields is None) != (r.reason is None) for r in records)


def test_cut_mid_line_drops_the_cut_step(nasty):
    f = nasty[0]["cut_midline.log"].fields
    assert "1 last step line cut mid-line" in f["notes"]
    assert "7 steps logged" in f["notes"]  # iteration 8 (cut inside 2408.8 ms) is not used
    assert f["step_time_s"] == pytest.approx(2.41)  # median of iterations 3-7


def test_binary_garbage_inside_a_log_is_counted(nasty):
    f = nasty[0]["garbage_mid.log"].fields
    assert f["step_time_s"] == pytest.approx(CLEAN_MEDIAN_S)
    assert "binary garbage" in f["notes"] and "8 steps logged" in f["notes"]


def test_binary_file_empty_file_and_non_log_are_rejected(nasty):
    recs = nasty[0]
    assert recs["binary.log"].reason.startswith("binary_file:")
    assert recs["empty.log"].reason.startswith("truncated_log: empty file")
    assert recs["unknown.txt"].reason.startswith("not_a_run: no step lines")


def test_interleaved_ranks_keep_one_rank(nasty):
    recs, steps = nasty
    f = recs["interleaved.log"].fields
    assert f["step_time_s"] == pytest.approx(CLEAN_MEDIAN_S)
    assert "ranks 0, 1 interleaved: kept rank 0 (8 steps), set aside 8" in f["notes"]
    assert "1 step line(s) garbled" in f["notes"]
    rows = steps[steps.path.str.endswith("interleaved.log")]
    assert sorted(rows["rank"].unique().tolist()) == [0, 1]
    assert not rows[rows["rank"] == 1].used.any()


def test_nan_loss_steps_are_left_out(nasty):
    recs, steps = nasty
    f = recs["nan_loss.log"].fields
    assert "2 step(s) with NaN/inf loss left out" in f["notes"]
    # Iterations 5 and 7 (2410.0, 2415.2 ms) are NaN: median of 2412.3 2405.9 2398.7 2408.8.
    assert f["step_time_s"] == pytest.approx((2.4059 + 2.4088) / 2)
    rows = steps[steps.path.str.endswith("nan_loss.log")]
    assert rows.is_nan_loss.tolist() == [False] * 4 + [True, False, True, False]


def test_restart_starts_a_segment_with_its_own_warmup(nasty):
    recs, steps = nasty
    f = recs["restart.log"].fields
    assert "1 restart(s), step numbers went back at line 46 (step 6 -> 4)" in f["notes"]
    assert "3 warm-up dropped" in f["notes"]
    assert f["step_time_s"] == pytest.approx((2.4062 + 2.4099) / 2)
    rows = steps[steps.path.str.endswith("restart.log")]
    assert rows.segment.max() == 1 and len(rows) == 11


def test_clock_jump_is_counted_and_not_used(nasty):
    f = nasty[0]["clock_jump.log"].fields
    assert "2 clock jump(s) or pause(s)" in f["notes"]
    assert f["step_time_s"] == pytest.approx(0.6261, rel=1e-4)


def test_too_few_steps(nasty):
    reason = nasty[0]["too_few.log"].reason
    assert reason.startswith("too_few_steps: 2 steady-state steps < min_steady_steps 3")


def test_sidecar_conflict_names_both_values():
    records, _ = read_logs(FIXTURES / "conflict", PARAMS)
    (rec,) = records
    assert rec.reason.startswith("conflict: n_accelerators: log says 64")
    assert "says 32" in rec.reason and "run.yaml" in rec.reason


def test_missing_accelerator_is_rejected():
    records, _ = read_logs(FIXTURES / "missing", PARAMS)
    assert records[0].reason.startswith("missing_required: accelerator")


def _megatron_copy(tmp_path: Path, sidecars: dict[str, str]) -> list:
    log = (FIXTURES / "megatron" / "gpt_n64.log").read_text()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "job.log").write_text(log)
    for rel, text in sidecars.items():
        (tmp_path / rel).write_text(text)
    records, _ = read_logs(tmp_path, PARAMS)
    return records


def test_sidecar_precedence(tmp_path):
    records = _megatron_copy(tmp_path, {
        "run.yaml": "accelerator: A100\nmodel: root-model\nprecision: bf16\n",
        "sub/run.yaml": "model: folder-model\n",
        "sub/job.run.yaml": "model: stem-model\naccelerator: H100\n",
        "sub/job.log.yaml": "accelerator: H100-SXM5-80GB\n"})
    f = records[0].fields
    assert f["accelerator"] == "H100-SXM5-80GB" and f["model"] == "stem-model"
    assert f["source"] == "logs/sub"


@pytest.mark.parametrize("sidecar,code", [
    ("accelerator: H100\nn_accelerator: 64\n", "bad_value: sidecar"),
    ("accelerator: H100\ntp: two\n", "bad_value: sidecar"),
    ("accelerator: [H100\n", "malformed_row: sidecar"),
    ("- accelerator\n", "malformed_row: sidecar"),
    ("accelerator: H100\nformat: fairseq\n", "bad_value: sidecar"),
    ("accelerator: H100\nmfu: 0.5\n", "bad_value: sidecar"),
    ("accelerator: H100\nformat: nemo\n", "too_few_steps: 0 steady-state steps"),
    ("accelerator: H100\nprecision: fp8\n", "conflict: precision: log says 'bf16'"),
])
def test_bad_sidecars_reject_the_log(tmp_path, sidecar, code):
    records = _megatron_copy(tmp_path, {"sub/run.yaml": sidecar})
    assert records[0].reason.startswith(code), records[0].reason


def test_warmup_auto_settles_and_is_capped():
    s = LogsSettings()
    assert warmup_count(np.array([12.9, 2.79, 2.41, 2.40, 2.41, 2.39, 2.41, 2.40]), s) == 2
    assert warmup_count(np.array([2.4] * 8), s) == 0
    # Never settles in the first half: capped at half the steps.
    assert warmup_count(np.array([9.0, 8.0, 7.0, 6.0, 2.4, 2.4, 2.4, 2.4]), s) == 4
    # A single fast step among slow ones is not "settled": it needs a second one inside.
    assert warmup_count(np.array([9.0, 2.4, 9.0, 2.4, 2.4, 2.4, 2.4, 2.4]), s) == 3
    assert warmup_count(np.array([9.0, 2.4, 2.4]), LogsSettings(warmup_steps=2)) == 2


@pytest.mark.parametrize("bad", [{"warmup_steps": "sometimes"}, {"warmup_steps": -1},
                                 {"max_warmup_fraction": 1.5}, {"min_steady_steps": 0},
                                 {"workers": 0}])
def test_bad_params_name_the_field(tmp_path, bad):
    params = {"ingest": {"logs": {**PARAMS["ingest"]["logs"], **bad}}}
    with pytest.raises(ConfigError, match="ingest.logs"):
        read_logs(tmp_path, params)


def test_parallel_workers_give_the_same_result():
    one = read_logs(FIXTURES, PARAMS)
    two = read_logs(FIXTURES, {"ingest": {"logs": {**PARAMS["ingest"]["logs"], "workers": 2}}})
    assert [r.fields or r.reason for r in one[0]] == [r.fields or r.reason for r in two[0]]
    assert one[1].equals(two[1])
    # the comparison is over real work: 42 files (41 logs, 20 of them excerpts of real
    # output, and _generate.py, a not_a_run), 27 of them runs, 235 step rows
    assert (len(one[0]), sum(r.fields is not None for r in one[0]), len(one[1])) == (42, 27, 235)


def test_emptying_the_folder_memo_between_batches_changes_nothing(monkeypatch):
    """The memo of folders and sidecars only saves work: emptied before every batch of 4 logs,
    the records (paths, sources, sidecar values, reasons) are the same."""
    from pipeline.ingest.sources.steplogs import reader

    kept = read_logs(FIXTURES, PARAMS)
    monkeypatch.setattr(reader, "MEMO_ENTRIES", 0)
    monkeypatch.setattr(reader, "BATCH_FILES", 4)
    emptied = read_logs(FIXTURES, PARAMS)
    assert [(r.source, r.path, r.fields or r.reason) for r in emptied[0]] == [
        (r.source, r.path, r.fields or r.reason) for r in kept[0]]
    assert emptied[1].equals(kept[1])


def test_steps_dir_holds_the_same_rows_one_file_per_log(tmp_path):
    """Rows streamed to ``steps_dir`` (what keeps memory flat) are the rows returned in memory."""
    import pyarrow.dataset as ds

    records, frame = read_logs(FIXTURES, PARAMS)
    params = {"ingest": {"logs": {**PARAMS["ingest"]["logs"], "workers": 2}}}
    (tmp_path / "stale.arrow").write_bytes(b"left from an earlier run")
    streamed, empty = read_logs(FIXTURES, params, steps_dir=tmp_path)
    assert len(empty) == 0 and list(empty.columns) == list(frame.columns)
    assert [r.fields or r.reason for r in streamed] == [r.fields or r.reason for r in records]
    files = {r.path: r.meta.get("steps_file") for r in streamed if r.meta.get("steps_file")}
    assert sorted(p.name for p in tmp_path.glob("*.arrow")) == sorted(set(files.values()))
    table = ds.dataset(sorted(tmp_path.glob("*.arrow")), format="arrow").to_table()
    back = table.to_pandas()
    for c in ("path", "format"):
        back[c] = back[c].astype(object)
    back = back.sort_values(["path", "step", "segment", "rank", "line"], kind="stable",
                            ignore_index=True)
    assert len(back) == len(frame) > 0
    assert back.equals(frame.sort_values(["path", "step", "segment", "rank", "line"],
                                         kind="stable", ignore_index=True))
    assert set(back.path) == set(files)


@pytest.mark.parametrize("slice_rows", [1 << 18, 60])
def test_steps_parquet_streamed_from_steps_dir_is_sorted_and_complete(tmp_path, monkeypatch,
                                                                      slice_rows):
    """The Parquet file written one log slice at a time holds the in-memory rows of every
    accepted log, with its run id, sorted by (run_id, path, step, segment, rank, line); also
    with row groups of 60 rows over batch files of 6 logs (a group gathered from many files,
    a file's logs not side by side in it, as at 10^5 logs)."""
    import hashlib

    import pyarrow as pa

    from pipeline.ingest.sources.steplogs import reader, store

    monkeypatch.setattr(store, "SLICE_ROWS", slice_rows)
    monkeypatch.setattr(reader, "BATCH_FILES", 6 if slice_rows == 60 else reader.BATCH_FILES)
    import pyarrow.parquet as pq

    from pipeline.ingest.sources.steplogs.store import write_steps_parquet

    records, frame = read_logs(FIXTURES, PARAMS)
    read_logs(FIXTURES, PARAMS, steps_dir=tmp_path / "steps")
    # run ids in an order unrelated to the paths' (as hashes are): a group's logs scatter over
    # the batch files
    run_by_path = {r.path: hashlib.sha1(r.path.encode()).hexdigest()[:12] for r in records
                   if r.reason is None}
    schema = pa.schema([("run_id", pa.string()), ("path", pa.string()), ("step", pa.int64()),
                        ("step_time_s", pa.float64()), ("segment", pa.int64()),
                        ("rank", pa.int32()), ("line", pa.int64()), ("loss", pa.float64()),
                        ("used", pa.bool_())])
    n = write_steps_parquet(tmp_path / "steps", run_by_path, tmp_path / "steps.parquet", schema)
    got = pq.read_table(tmp_path / "steps.parquet").to_pandas()
    want = frame[frame.path.isin(run_by_path)].assign(run_id=lambda f: f.path.map(run_by_path))
    want = want.sort_values(["run_id", "path", "step", "segment", "rank", "line"],
                            kind="stable", ignore_index=True)[schema.names]
    assert n == len(got) == len(want) > 0 and len(want) < len(frame)  # a rejected log's rows
    assert got.equals(want.astype({"path": object, "run_id": object}))
    again = tmp_path / "again.parquet"
    write_steps_parquet(tmp_path / "steps", run_by_path, again, schema)
    assert again.read_bytes() == (tmp_path / "steps.parquet").read_bytes()
    groups = pq.ParquetFile(tmp_path / "steps.parquet").metadata.num_row_groups
    assert groups == 1 if slice_rows > len(want) else groups >= 3


def test_warmup_only_where_training_starts():
    """A log opening mid-run (first step above WARMUP_HORIZON_STEPS) drops only steps at least
    MID_RUN_SLOW_FACTOR times the steady median; the last step is never warm-up."""
    s = LogsSettings()
    x = np.array([45.0, 41.2, 39.4])
    assert warmup_count(x, s) == 1                      # from step 1: the 12 % settles
    assert warmup_count(x, s, mid_run=True) == 0        # iterations 991-993: steady
    assert warmup_count(np.array([90.0, 41.2, 39.4, 40.0]), s, mid_run=True) == 1
    assert warmup_count(np.array([40.0, 40.0, 40.0, 120.0]), s, mid_run=True) == 0
    assert warmup_count(np.array([40.0, 40.0, 40.0, 120.0]), s) == 0


def test_every_file_under_the_logs_folder_is_a_run_or_a_reject(tmp_path):
    """Rotated logs are read (each part a log of its own); any other file is a not_a_run reject
    stating the naming rule; sidecars, READMEs and hidden files are not listed; a folder
    named like a log is a special_file reject and its files are read."""
    src = (Path(__file__).parent / "fixtures" / "logs" / "megatron" / "gpt_n64.log").read_bytes()
    camp = tmp_path / "c"
    (camp / "job.log").mkdir(parents=True)
    (camp / "job.log" / "train.log").write_bytes(src)
    (camp / "train.log.1").write_bytes(src)
    import gzip
    (camp / "train.log.2.gz").write_bytes(gzip.compress(src))
    (camp / "notes.md").write_text("my notes\n")
    (camp / "run.yaml").write_text("accelerator: H100-SXM5-80GB\nmodel: llama3-8b\n")
    (camp / "README.md").write_text("about\n")
    (camp / ".hidden").write_text("x\n")
    records, _ = read_logs(tmp_path, PARAMS)
    by_name = {Path(r.path).name: r for r in records}
    assert sorted(by_name) == ["job.log", "notes.md", "train.log", "train.log.1",
                               "train.log.2.gz"]
    assert by_name["train.log.1"].fields["step_time_s"] == by_name["train.log"].fields[
        "step_time_s"] == by_name["train.log.2.gz"].fields["step_time_s"]
    assert by_name["notes.md"].reason.startswith("not_a_run: not read as a step log: step logs "
                                                 "are files named *.log")
    assert by_name["job.log"].reason.startswith("special_file")


def _jsonl_records(tmp_path: Path, lines: list[str]) -> list:
    """The records of one JSONL step log of ``lines`` on 8 H100 (a campaign folder and its
    sidecar)."""
    camp = tmp_path / "c"
    camp.mkdir()
    (camp / "s.jsonl").write_text("".join(line + "\n" for line in lines))
    (camp / "run.yaml").write_text("accelerator: H100-SXM5-80GB\nn_accelerators: 8\n")
    return read_logs(tmp_path, PARAMS)[0]


def test_text_step_values_are_a_reject_quoting_them(tmp_path):
    records = _jsonl_records(tmp_path, [
        f'{{"step": {i}, "step_time_s": "1.0s", "tokens_per_s": 1000}}' for i in range(1, 11)])
    reason = records[0].reason
    assert reason.startswith('bad_value: step_time_s = \'"1.0s"\' at line 1 is not a number '
                             "(10 line(s))")


def test_negative_step_times_are_named_negative(tmp_path):
    records = _jsonl_records(tmp_path, [
        f'{{"step": {i}, "step_time_s": {-1.0 if i % 2 else 1.0}, "tokens_per_s": 1000}}'
        for i in range(1, 21)])
    assert "10 step(s) with a step time <= 0 or above 1e+06 s left out (10 negative: lines 1" \
        in records[0].fields["notes"]


def test_a_printed_rate_near_the_largest_double_is_kept_for_the_range_checks(tmp_path):
    """Two middle tokens/s of 1.7e308 once summed to inf in the median and the printed rate
    was dropped as if absent; it is kept, and the row's derived MFU then rejects the run."""
    records = _jsonl_records(tmp_path, [
        f'{{"step": {i}, "step_time_s": 4.0, "tokens_per_s": 1.7e308}}' for i in range(1, 21)])
    assert records[0].fields["tokens_per_s"] == 1.7e308
