"""Each step-log format: the exact numbers extracted from a fixture written like the real output.

Fixtures: ``tests/fixtures/logs/<format>/`` (regenerate with ``_generate.py``); every expected
value below is worked out by hand from the numbers written there.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest.sources.steplogs.reader import detect_format, read_logs

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "logs"
PARAMS = {"ingest": {"logs": {"warmup_steps": "auto", "max_warmup_fraction": 0.5,
                              "min_steady_steps": 3, "settle_tolerance": 0.05}}}


def runs_of(folder: str):
    records, steps = read_logs(FIXTURES / folder, PARAMS)
    by_name = {Path(r.path).name: r for r in records}
    return by_name, steps


def test_megatron_exact_numbers():
    recs, steps = runs_of("megatron")
    f = recs["gpt_n64.log"].fields
    steady_ms = [2412.3, 2405.9, 2410.0, 2398.7, 2415.2, 2408.8]  # iterations 3-8
    assert f["step_time_s"] == pytest.approx(statistics.median(steady_ms) / 1000, rel=1e-12)
    assert f["step_time_s"] == pytest.approx(2.4094)
    assert f["tokens_per_s"] == pytest.approx(
        statistics.median(128 * 4096 / (ms / 1000) for ms in steady_ms), rel=1e-12)
    assert f["tflops_per_accelerator"] == pytest.approx(107.95)
    assert (f["n_accelerators"], f["tp"], f["pp"], f["dp"], f["cp"]) == (64, 2, 1, 32, 1)
    assert (f["seq_len"], f["n_layers"], f["d_model"], f["micro_batch"]) == (4096, 32, 4096, 1)
    assert f["precision"] == "bf16"
    assert f["global_batch_tokens"] == 128 * 4096
    assert f["accelerator"] == "H100-SXM5-80GB" and f["model"] == "llama3-8b"
    assert f["source_kind"] == "log" and f["citation"].endswith("megatron/gpt_n64.log")
    assert "mfu" not in f  # not printed: the ingest core derives it
    assert "2 warm-up dropped" in f["notes"] and "IQR 2.40663-2.41173 s" in f["notes"]
    # Same job at N = 64 and 128 in one folder: one source, which the ingest's series rule
    # turns into a strong-scaling series (test_ingest_stage: all parsers on their fixtures).
    g = recs["gpt_n128.log"].fields
    assert g["n_accelerators"] == 128 and g["source"] == f["source"] == "logs"
    assert g["global_batch_tokens"] == f["global_batch_tokens"]
    rows = steps[steps.path.str.endswith("gpt_n64.log")]
    assert rows.step.tolist() == list(range(1, 9))
    assert rows.is_warmup.tolist() == [True, True] + [False] * 6
    assert rows.step_time_s.iloc[0] == pytest.approx(12.9361)
    assert rows.loss.iloc[0] == pytest.approx(10.44022)
    assert rows.tflops_per_accelerator.iloc[1] == pytest.approx(93.2)


def test_torchtitan_exact_numbers_with_ansi_and_rank_prefix():
    recs, steps = runs_of("torchtitan")
    f = recs["llama3_8b.log"].fields
    # tps is per device: whole job = median steady tps (6543) x 8 devices of the 4x2 mesh.
    assert f["tokens_per_s"] == 6543 * 8
    assert (f["n_accelerators"], f["dp"], f["tp"]) == (8, 4, 2)
    assert f["params_b"] == pytest.approx(8.030261248)
    assert (f["d_model"], f["n_layers"], f["seq_len"]) == (4096, 32, 8192)
    assert f["global_batch_tokens"] == 4 * 8192
    # No step time printed: 10 steps between stamps 76.801 s and 83.062 s, etc.
    assert f["step_time_s"] == pytest.approx(0.6261, rel=1e-4)
    assert f["tflops_per_accelerator"] == pytest.approx(300.98)
    assert f["mfu"] == pytest.approx(0.3043)
    assert "step_time_s" in f["derived"].split(";") and "tokens_per_s" in f["derived"]
    rows = steps[steps.format == "torchtitan"]
    assert rows.step.tolist() == [1, 10, 20, 30, 40, 50, 60]
    assert rows["rank"].tolist() == [0] * 7
    assert rows.loss.tolist()[:2] == pytest.approx([12.2535, 9.8123])
    assert rows.tokens_per_s_per_accelerator.tolist()[0] == 812


def test_nemo_both_layouts():
    recs, steps = runs_of("nemo")
    v2 = recs["nemo2.log"].fields
    assert v2["step_time_s"] == pytest.approx(1.505)  # median of 1.505 1.498 1.512 1.501 1.507
    assert v2["tokens_per_s"] == pytest.approx(8 * 4096 / 1.505)
    assert v2["n_accelerators"] == 8 and v2["global_batch_tokens"] == 8 * 4096
    v1 = recs["nemo1_tqdm.log"].fields
    assert v1["step_time_s"] == pytest.approx(5.903)
    # devices 8 x num_nodes 2 from the Hydra config; the per-log sidecar (16) agrees with it
    # and overrides the folder's run.yaml (8), so no conflict.
    assert v1["n_accelerators"] == 16 and v1["tp"] == 4 and v1["precision"] == "bf16"
    assert v1["seq_len"] == 2048 and v1["global_batch_tokens"] == 256 * 2048
    assert "6 progress-bar redraw(s)" in v1["notes"]
    rows = steps[steps.path.str.endswith("nemo1_tqdm.log")]
    assert rows.step.tolist() == [0, 1, 2, 3, 4, 5]
    assert rows.step_time_s.tolist() == pytest.approx([9.812, 5.91, 5.903, 5.897, 5.9, 5.905])


def test_deepspeed_throughput_timer_and_profiler():
    recs, _ = runs_of("deepspeed")
    f = recs["ds.log"].fields
    assert f["step_time_s"] == pytest.approx(256 / 64.0)  # global batch / CurrSamplesPerSec
    assert f["tokens_per_s"] == pytest.approx(64.0 * 2048)
    assert f["tflops_per_accelerator"] == pytest.approx(152.36)
    assert (f["n_accelerators"], f["zero_stage"], f["precision"]) == (16, 3, "bf16")
    assert "flops profiler at step 20" in f["notes"]


def test_nanotron_human_format():
    recs, steps = runs_of("nanotron")
    f = recs["nanotron.log"].fields
    assert f["step_time_s"] == pytest.approx(1.23)
    assert f["tokens_per_s"] == 106_000 and f["tflops_per_accelerator"] == 123
    assert (f["dp"], f["tp"], f["pp"], f["d_model"], f["n_layers"]) == (4, 2, 1, 2048, 24)
    assert f["seq_len"] == 4096 and f["global_batch_tokens"] == 32 * 4096
    assert steps.step_time_s.tolist()[0] == pytest.approx(4.52)


def test_hf_trainer_summary():
    recs, steps = runs_of("hf_trainer")
    f = recs["trainer.log"].fields
    assert f["step_time_s"] == pytest.approx(1 / 3.21)
    assert f["tokens_per_s"] == pytest.approx(205.432 * 1024)
    assert f["global_batch_tokens"] == 64 * 1024
    assert f["params_b"] == pytest.approx(0.124439808)
    assert "warm-up included" in f["notes"]
    assert steps.loss.tolist() == pytest.approx([3.2, 2.9, 2.6])


def test_generic_jsonl():
    recs, _ = runs_of("jsonl")
    f = recs["steps.jsonl"].fields
    assert f["step_time_s"] == pytest.approx(3.91)
    assert f["tokens_per_s"] == pytest.approx(1048576 / 3.91)
    assert f["mfu"] == pytest.approx(0.41)
    assert (f["n_accelerators"], f["tp"], f["accelerator"]) == (32, 4, "TPU v5p")


@pytest.mark.parametrize("folder,name,fmt", [
    ("megatron", "gpt_n64.log", "megatron"), ("torchtitan", "llama3_8b.log", "torchtitan"),
    ("nemo", "nemo2.log", "nemo"), ("nemo", "nemo1_tqdm.log", "nemo"),
    ("deepspeed", "ds.log", "deepspeed"), ("nanotron", "nanotron.log", "nanotron"),
    ("hf_trainer", "trainer.log", "hf_trainer"), ("jsonl", "steps.jsonl", "jsonl"),
])
def test_format_detected_by_content(folder, name, fmt):
    text = (FIXTURES / folder / name).read_text(encoding="utf-8")
    assert detect_format(text) == fmt


MEGATRON_DEEPSPEED = (
    "7:  iteration {it:8d}/   30517 | consumed samples: {cs:12d} | consumed tokens: {ct:12d} | "
    "elapsed time per iteration (ms): {ms:.1f} | learning rate: 6.000E-07 | global batch size: "
    "   16 | lm loss: 1.183278E+01 | loss scale: 1.0 | grad norm: 36.543 | actual seqlen:  4096 |"
    " number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: "
    "{sps:.3f} | tokens per gpu per second (tgs): {tgs:.3f} | TFLOPs: {tf:.2f} |\n")


def test_megatron_deepspeed_layout(tmp_path):
    """microsoft/Megatron-DeepSpeed: no stamp, srun label, tgs and TFLOPs fields."""
    ms = [15232.8, 4000.1, 3990.2, 4010.3, 4001.0]
    text = "".join(MEGATRON_DEEPSPEED.format(it=i, cs=16 * i, ct=65536 * i, ms=t,
                                             sps=16000 / t, tgs=65536000 / t / 32,
                                             tf=25.55 if i == 1 else 97.3 + i / 10)
                   for i, t in enumerate(ms, 1))
    (tmp_path / "mds.out").write_text(text)
    (tmp_path / "run.yaml").write_text("accelerator: A100-SXM4-80GB\nn_accelerators: 32\n")
    records, steps = read_logs(tmp_path, PARAMS)
    f = records[0].fields
    assert f["seq_len"] == 4096 and f["global_batch_tokens"] == 16 * 4096
    # Steady iterations 2-5: median of 4000.1 3990.2 4010.3 4001.0 ms, of 97.5 97.6 97.7 97.8.
    assert f["step_time_s"] == pytest.approx((4000.1 + 4001.0) / 2000)
    assert f["tflops_per_accelerator"] == pytest.approx((97.6 + 97.7) / 2)
    assert steps["rank"].tolist() == [7] * 5
    assert steps.tokens_per_s_per_accelerator.iloc[0] == pytest.approx(
        float(f"{65536000 / 15232.8 / 32:.3f}"))


def test_jsonl_with_loss_first_is_not_taken_for_a_trainer_log():
    text = "".join(f'{{"loss": 2.{i}, "step": {i}, "step_time_s": 1.5}}\n' for i in range(5))
    assert detect_format(text) == "jsonl"


def test_composer_blocks_in_the_console_loggers_layout(tmp_path):
    """Blocks as composer/loggers/console_logger.py writes them (header, then '\\t Train
    name: value' lines, four decimals), not pasted output: five blocks, step time 1 /
    batches_per_sec, N and the batch from the Config dump."""
    from pipeline.ingest.sources.steplogs.reader import read_logs
    head = ("******************************\nConfig:\nglobal_train_batch_size: 256\n"
            "max_seq_len: 2048\nnum_gpus_per_node: 8\nnum_nodes: 4\n"
            "******************************\n")
    blocks = "".join(
        f"[batch={b}/5]:\n\t Train time/batch: {b - 1}\n\t Train loss/train/total: 2.0000\n"
        f"\t Train throughput/batches_per_sec: 0.5000\n\t Train throughput/tokens_per_sec: "
        f"262144.0000\n\t Train throughput/device/tokens_per_sec: 8192.0000\n"
        for b in range(1, 6))
    camp = tmp_path / "c"
    camp.mkdir()
    (camp / "train.log").write_text(head + blocks)
    (camp / "run.yaml").write_text("accelerator: H100-SXM5-80GB\nmodel: llama3-8b\n")
    record = read_logs(tmp_path, PARAMS)[0][0]
    f = record.fields
    assert f["step_time_s"] == 2.0 and f["tokens_per_s"] == 262144.0
    assert (f["n_accelerators"], f["seq_len"], f["global_batch_tokens"]) == (32, 2048, 524288)


_SECONDS = st.floats(0.001, 1e4, allow_nan=False)


@settings(max_examples=40, deadline=None)
@given(times=st.lists(_SECONDS, min_size=1, max_size=8),
       tokens=st.floats(1.0, 1e7, allow_nan=False), absl=st.booleans())
def test_maxtext_lines_round_trip(tmp_path_factory, times, tokens, absl):
    """Lines in metric_logger.py's layout (three decimals) read back to the printed values."""
    from pipeline.ingest.sources.steplogs.reader import parse_file
    prefix = "I0811 21:54:55.531340 138304841739136 metric_logger.py:226] " if absl else ""
    text = "".join(f"{prefix}completed step: {i}, seconds: {t:.3f}, TFLOP/s/device: 1.000, "
                   f"Tokens/s/device: {tokens:.3f}, total_weights: 8192, loss: 2.000\n"
                   for i, t in enumerate(times))
    log = tmp_path_factory.mktemp("mx") / "train.log"
    log.write_text(text)
    state, _, _ = parse_file(log, "maxtext")
    assert list(state.cols["step_time_s"]) == [float(f"{t:.3f}") for t in times]
    assert set(state.cols["tokens_per_s_per_accelerator"]) == {float(f"{tokens:.3f}")}


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.floats(1e-3, 1e6, allow_nan=False), min_size=1, max_size=8))
def test_torchtune_lines_round_trip(tmp_path_factory, values):
    """Lines in metric_logging.py's layout (repr of the float) read back exactly."""
    from pipeline.ingest.sources.steplogs.reader import parse_file
    text = "".join(f"Step {i} | loss:2.5 lr:2e-05 tokens_per_second_per_gpu:{v!r} \n"
                   for i, v in enumerate(values, 1))
    log = tmp_path_factory.mktemp("tt") / "train.log"
    log.write_text(text)
    state, _, _ = parse_file(log, "torchtune")
    assert list(state.cols["tokens_per_s_per_accelerator"]) == values
