"""Step logs as the frameworks print them: excerpts of real output pasted in public threads.

Each fixture under ``tests/fixtures/logs/real/`` is a verbatim excerpt (lines dropped only where
noted in ``ORIGINS``); the ``run.yaml`` beside it is test input (the accelerator, and N where the
log does not print it), not a fact about the original run. Expected values are worked out by
hand from the lines in the fixture.
"""

from __future__ import annotations

import datetime
import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest.sources.steplogs.base import ParseState, human_float
from pipeline.ingest.sources.steplogs.formats import hf_trainer, megatron, nemo
from pipeline.ingest.sources.steplogs.reader import FORMATS, read_logs, sniff

REAL = Path(__file__).resolve().parent / "fixtures" / "logs" / "real"
PARAMS = {"ingest": {"logs": {"warmup_steps": "auto", "max_warmup_fraction": 0.5,
                              "min_steady_steps": 3, "settle_tolerance": 0.05}}}
# fixture -> where its lines were printed (repository, thread or file, date of the run).
ORIGINS = {
    "hf_block/aurora_trainer.log": "argonne-lcf/ALCF_Hands_on_HPC_Workshop, data_science/"
        "AI_frameworks/ezpz/README.md (transformers Trainer on Aurora, 2025-05-06)",
    "hf_block/aurora_block_only.log": "the same excerpt without its summary dict line (the "
        "output a log keeps when only the logger's lines are captured)",
    "megatron_args/qwen2_0p5b_n2.log": "modelscope/ms-swift, tests/custom/test_megatron.py "
        "history: docstring holding a Megatron-LM core_r0.7-era run of 2024-07-15 (argument "
        "dump cut to the arguments the ingest reads; step lines complete)",
    "megatron_args/mixtral_tflops.log": "NVIDIA/Megatron-LM#756 (Mixtral 8x7B on 16 x H100, "
        "2024-04-06; three complete step lines)",
    "megatron_ds/abnormal_loss.log": "deepspeedai/DeepSpeed#3742 (EleutherAI gpt-neox on "
        "DeepSpeed, 2023-07-25)",
    "torchtitan_ranks/gc_profiler.log": "pytorch/torchtitan#1287 (2025-06-16, [rank0]: prefix, "
        "GC and profiler lines between steps)",
    "torchtitan_ranks/grad_norm.log": "pytorch/torchtitan#3393 (2026-05-18, grad_norm field)",
    "torchtitan_ranks/unprefixed_ranks.log": "pytorch/torchtitan#2389 (2026-02-24, every rank "
        "printing the same step without a prefix)",
    "nemo2/bionemo_esm2.log": "NVIDIA-BioNeMo/bionemo-recipes#740 (NeMo 2 progress printer)",
    "nemo_ptl/launcher55.log": "NVIDIA/NeMo-Framework-Launcher#55 (NeMo 1 / Lightning progress "
        "bar without train_step_timing, 2023-05-25)",
    "deepspeed_old/same_train_time.log": "deepspeedai/DeepSpeed#1825 (DeepSpeed 0.5, "
        "SamplesPerSec=, 2022-03-11)",
    "deepspeed_old/v077.log": "deepspeedai/DeepSpeed#2629 (DeepSpeed 0.7.7, "
        "RunningAvgSamplesPerSec/CurrSamplesPerSec, 2022-12-20)",
    "deepspeed_new/training_step.log": "deepspeedai/DeepSpeed#5779 (epoch=/micro_step=/"
        "global_step=, 2024-07-17)",
    "nanotron/log_error.log": "huggingface/nanotron#390 (2025-10-17)",
    "nanotron/topology_2024.log": "huggingface/nanotron#23 (2024-01-17, host in the prefix)",
    "maxtext/understanding_logs.log": "AI-Hypercomputer/maxtext docs/guides/"
        "Understanding_Logs_and_Metrics.md @831e2a8 (deepseek2-16b on 4 TPU v5 chips; its "
        "config, environment, memory and step blocks in the guide's order, the guide's '...' "
        "elisions and comment lines left out)",
    "maxtext/absl_prefix.log": "AI-Hypercomputer/maxtext#4847 (2025-08-11, absl prefix, "
        "lm_loss and perplexity after the loss; profiler lines after the steps left out)",
    "torchtune/codellama_7b.log": "meta-pytorch/torchtune#1358 (2024-08-16, CodeLlama 7B full "
        "fine-tune; the thread's first 12 complete step lines)",
    "composer/mpt30b_two_nodes.log": "ROCm/rocm-blogs, the blog on fine-tuning MPT-30B with "
        "MosaicML Composer on AMD GPUs (SLURM, 2 nodes, composer 0.21.3, 2024-09-30; the blog's "
        "'.' elision lines left out)",
    "maxtext/v3_2023.log": "AI-Hypercomputer/maxtext#8 (2023-04-28, v3-8, 'TFLOP/s:' before "
        "'/device'; the fourth line, cut in the thread, left out)",
}


@pytest.fixture(scope="module")
def real():
    records, _ = read_logs(REAL, PARAMS)
    return {str(Path(r.path).relative_to(REAL)) if Path(r.path).is_absolute()
            else r.path.split("real/", 1)[1]: r for r in records}


def test_every_fixture_has_an_origin_and_a_format():
    found = sorted(str(p.relative_to(REAL)) for p in REAL.rglob("*.log"))
    assert found == sorted(ORIGINS)
    for name in found:
        kind, fmt, *_ = sniff(REAL / name)
        assert kind == "text" and fmt is not None, name


def test_hf_trainer_block_alone_gives_the_summary(real):
    block = real["hf_block/aurora_block_only.log"].fields
    both = real["hf_block/aurora_trainer.log"].fields
    # train_steps_per_second = 0.367 -> 1/0.367 s a step, in either form.
    assert block["step_time_s"] == pytest.approx(1 / 0.367)
    assert both["step_time_s"] == pytest.approx(1 / 0.367)
    # train_tokens_per_second (per device) 376.234 x the sidecar's 24 devices.
    assert block["tokens_per_s"] == pytest.approx(376.234 * 24)
    # The block rounds the runtime to 0:00:27.21; the dict's 27.2171 is kept where both exist.
    assert "27.21 s" in block["notes"] and "27.2171 s" in both["notes"]
    assert "did not parse" not in block["notes"]


def test_megatron_argument_dump_gives_layout_precision_and_schedule(real):
    f = real["megatron_args/qwen2_0p5b_n2.log"].fields
    assert (f["n_accelerators"], f["dp"], f["tp"], f["pp"], f["cp"]) == (2, 2, 1, 1, 1)
    assert (f["seq_len"], f["n_layers"], f["d_model"], f["micro_batch"]) == (128, 24, 896, 1)
    assert f["precision"] == "bf16" and "precision" in f["derived"].split(";")
    assert (f["recompute"], f["virtual_pipeline"], f["sequence_parallel"]) == \
        ("selective", 1, False)
    assert f["global_batch_tokens"] == 8 * 128
    # Iterations 10-30 are warm-up (8195.9, 786.2, 779.4 ms); the median of the other nine:
    steady_ms = [729.9, 705.2, 699.0, 717.1, 692.3, 728.1, 742.5, 719.8, 717.2]
    assert f["step_time_s"] == pytest.approx(statistics.median(steady_ms) / 1000)
    assert f["tokens_per_s"] == pytest.approx(
        statistics.median(8 * 128 / (ms / 1000) for ms in steady_ms))


def test_megatron_throughput_per_gpu(real):
    f = real["megatron_args/mixtral_tflops.log"].fields
    assert f["tflops_per_accelerator"] == pytest.approx(236.0)  # median of 239.8, 236.0, 228.4
    assert f["step_time_s"] == pytest.approx(5.5338)


def test_gpt_neox_line_fields():
    st = ParseState(fmt="megatron")
    parser = megatron.Parser(st)
    parser.feed_chunk((REAL / "megatron_ds/abnormal_loss.log").read_text(), 1, True)
    parser.finish()
    assert list(st.step) == [34]
    assert st.cols["step_time_s"][0] == pytest.approx(4.1031)
    assert st.cols["tflops_per_accelerator"][0] == pytest.approx(112.9)
    assert st.cols["loss"][0] == pytest.approx(11.18665)


@pytest.mark.parametrize("granularity, extra, expected", [
    ("full", "", "full"), ("None", "", "none"), ("None", "  recompute_activations ........ True\n",
                                                  "selective")])
def test_megatron_recompute_modes(granularity, extra, expected):
    st = ParseState(fmt="megatron")
    parser = megatron.Parser(st)
    dump = (f"  num_layers ...................................... 32\n"
            f"  pipeline_model_parallel_size .................... 4\n"
            f"  num_layers_per_virtual_pipeline_stage ........... 2\n"
            f"  recompute_granularity ........................... {granularity}\n{extra}"
            f"  sequence_parallel ............................... True\n")
    parser.feed_chunk(dump, 1, True)
    parser.finish()
    assert st.facts["recompute"] == expected
    assert st.facts["virtual_pipeline"] == 32 // (4 * 2)
    assert st.facts["sequence_parallel"] is True
    assert "virtual_pipeline" in st.derivations


def test_torchtitan_rank_prefix_and_timestamps(real):
    f = real["torchtitan_ranks/gc_profiler.log"].fields
    # Step time from the stamps: 10 steps between lines; step 200 is warm-up (auto).
    stamps = [50.322, 64.970, 78.934, 92.895, 106.869, 120.846]
    per_step = [(b - a) / 10 for a, b in zip(stamps, stamps[1:])]
    assert f["step_time_s"] == pytest.approx(statistics.median(per_step), abs=1e-6)
    assert f["tokens_per_s"] == pytest.approx(5864 * 8)  # median tps of the steady steps x N
    assert f["mfu"] == pytest.approx(0.3434)
    g = real["torchtitan_ranks/grad_norm.log"].fields
    assert g["tokens_per_s"] == pytest.approx(7309 * 8)  # median of steps 15-21 (14: warm-up)


def test_torchtitan_unprefixed_ranks_are_repeats_not_restarts(real):
    r = real["torchtitan_ranks/unprefixed_ranks.log"]
    assert r.reason.startswith("too_few_steps")
    assert "6 repeated line(s) of the same step" in r.reason and "restart" not in r.reason


def test_nemo2_step_timing(real):
    f = real["nemo2/bionemo_esm2.log"].fields
    assert f["step_time_s"] == pytest.approx(
        statistics.median([0.03146, 0.03163, 0.03215, 0.03157, 0.0317, 0.03147]))
    assert "tokens_per_s" not in f  # global batch 1 sequence, but no sequence length


def test_nemo1_progress_bar_rate():
    st = ParseState(fmt="nemo")
    parser = nemo.Parser(st)
    parser.feed_chunk((REAL / "nemo_ptl/launcher55.log").read_text(), 1, True)
    assert list(st.step) == [794]
    assert st.cols["step_time_s"][0] == pytest.approx(41.36)
    assert st.cols["loss"][0] == pytest.approx(3.09)
    assert st.counts["progress_bar_rate_steps"] == 1
    st2 = ParseState(fmt="nemo")
    nemo.Parser(st2).feed_chunk("Epoch 0: 10%| | 10/100 [00:05<00:45, 2.00it/s, "
                                "reduced_train_loss=3.5, global_step=9.0]\n", 1, True)
    assert st2.cols["step_time_s"][0] == pytest.approx(0.5)


def test_deepspeed_three_generations(real):
    assert real["deepspeed_old/same_train_time.log"].reason.startswith("too_few_steps: 2 ")
    assert real["deepspeed_new/training_step.log"].reason.startswith("too_few_steps: 1 ")
    r = real["deepspeed_old/v077.log"]
    # 0.7.7 prints CurrSamplesPerSec; with no batch size or N the log cannot be a run yet.
    assert r.reason.startswith("missing_required: n_accelerators")


def test_nanotron_n_from_tokens_per_second_ratio(real):
    f = real["nanotron/log_error.log"].fields
    assert f["n_accelerators"] == 2  # 22.8K / 11.4K
    assert "n_accelerators" in f["derived"].split(";")
    assert f["step_time_s"] == pytest.approx(11.5e3 / 1e3)
    assert f["tflops_per_accelerator"] == pytest.approx(38.3)
    # Iterations 991-993 of 1,000: the log opens mid-run, so 45 ms is no warm-up (a settling
    # of 12 %, not a resume's 2x): three steady steps, median 41.2 ms, N = 15.5K / 1.94K -> 8.
    f = real["nanotron/topology_2024.log"].fields
    assert f["step_time_s"] == pytest.approx(0.0412)
    assert f["n_accelerators"] == 8
    assert "0 warm-up dropped" in f["notes"]


def test_maxtext_three_generations(real):
    """The guide's run: steps 0-3 settle (19.0, 0.32, 1.02, 0.70 s), 6 steady steps at
    1.011-1.012 s; N, sequence length and batch (1 x 2048 x 4) from the log itself."""
    f = real["maxtext/understanding_logs.log"].fields
    assert f["step_time_s"] == pytest.approx(1.012)
    assert f["tflops_per_accelerator"] == pytest.approx(31.497)
    assert f["tokens_per_s"] == pytest.approx(4 * statistics.median(
        [2024.600, 2024.564, 2024.384, 2024.926, 2025.138, 2024.558]))
    assert (f["n_accelerators"], f["seq_len"], f["global_batch_tokens"]) == (4, 2048, 8192)
    assert f["params_b"] == pytest.approx(15.933) and f["framework"] == "MaxText"
    old = real["maxtext/v3_2023.log"].fields  # opens mid-run: no warm-up, 3 steady steps
    assert old["step_time_s"] == pytest.approx(2.166)
    assert old["tflops_per_accelerator"] == pytest.approx(36.739)
    # step 1 (0.63 s) is warm-up: two steady steps are too few, and the reason says so
    assert real["maxtext/absl_prefix.log"].reason.startswith("too_few_steps: 2 ")


def test_torchtune_tokens_per_second_per_gpu(real):
    """Step 1 (57.8 tokens/s per GPU) is warm-up; the median of steps 2-12 is 417.5."""
    f = real["torchtune/codellama_7b.log"].fields
    assert f["tokens_per_s"] == pytest.approx(417.49818620797487)  # x N = 1
    assert f["precision"] == "bf16" and f["framework"] == "torchtune"


def test_composer_block_reads_and_one_block_is_too_few(real):
    """One SpeedMonitor block (1 / 0.0027 batches/s = 370 s a step) on 2 x 8 GPUs: a single
    step is too few, and the reject says how many were steady."""
    r = real["composer/mpt30b_two_nodes.log"]
    assert r.reason.startswith("too_few_steps: 1 steady-state steps < min_steady_steps 3")
    assert "step time median 370.37 s" in r.reason


# Round trips: lines written in each layout above from random numbers parse back to them.
FUZZ = settings(max_examples=80, deadline=None)


def _secs2timedelta(secs: float) -> str:
    """How ``trainer_pt_utils.metrics_format`` prints a runtime (``H:MM:SS.cc``)."""
    msec = int(abs(secs - int(secs)) * 100)
    return f"{datetime.timedelta(seconds=int(secs))}.{msec:02d}"


@FUZZ
@given(runtime=st.floats(1, 3e6), steps_per_s=st.floats(1e-3, 1e3),
       samples_per_s=st.floats(1e-3, 1e5), prefix=st.sampled_from(["", "  ", "[INFO|x] >> "]))
def test_hf_block_round_trip(runtime, steps_per_s, samples_per_s, prefix):
    values = {"epoch": "1.0", "train_loss": "2.9772", "train_runtime": _secs2timedelta(runtime),
              "train_samples_per_second": f"{round(samples_per_s, 4)}",
              "train_steps_per_second": f"{round(steps_per_s, 4)}", "total_flos": "3221945GF"}
    text = f"{prefix}***** train metrics *****\n" + "".join(
        f"{prefix}  {k:<24} = {v:>10}\n" for k, v in values.items())
    st_ = ParseState(fmt="hf_trainer")
    parser = hf_trainer.Parser(st_)
    parser.feed_chunk(text, 1, False)
    parser.finish()
    assert st_.facts["train_runtime"] == pytest.approx(int(runtime) + int(
        abs(runtime - int(runtime)) * 100) / 100, abs=1e-9)
    assert st_.facts["train_steps_per_second"] == pytest.approx(round(steps_per_s, 4))
    assert st_.facts["train_samples_per_second"] == pytest.approx(round(samples_per_s, 4))


@FUZZ
@given(step=st.integers(0, 10**7), running=st.floats(1e-3, 1e6), current=st.floats(1e-3, 1e6),
       prefix=st.sampled_from(["", "stdout: ", "[rank3]:"]))
def test_deepspeed_07_timer_round_trip(step, running, current, prefix):
    line = (f"{prefix}[2022-12-20 08:26:26,101] [INFO] [timer.py:197:stop] 0/{step}, "
            f"RunningAvgSamplesPerSec={running!r}, CurrSamplesPerSec={current!r}, "
            f"MemAllocated=1.75GB, MaxMemAllocated=2.6GB\n")
    st_ = ParseState(fmt="deepspeed")
    FORMATS["deepspeed"].Parser(st_).feed_chunk(line, 1, True)
    assert list(st_.step) == [step]
    assert st_.cols["samples_per_s"][0] == pytest.approx(current)


@FUZZ
@given(step=st.integers(0, 10**6), rate=st.floats(1e-3, 1e4), unit=st.sampled_from(["s/it", "it/s"]),
       loss=st.floats(0, 20))
def test_nemo_progress_bar_rate_round_trip(step, rate, unit, loss):
    line = (f"Epoch 0:   1%|          | {step + 1}/77225 [9:07:58<878:01:48, {rate:.2f}{unit}, "
            f"loss={loss:.3g}, v_num=, reduced_train_loss={loss:.3f}, global_step={step}.0, "
            f"consumed_samples=1.63e+6]\n")
    st_ = ParseState(fmt="nemo")
    nemo.Parser(st_).feed_chunk(line, 1, True)
    printed = float(f"{rate:.2f}")
    if printed == 0:  # a rate printed as 0: no positive step time (the reduction skips it)
        assert len(st_) == 0 or not st_.cols["step_time_s"][0] > 0
        return
    assert list(st_.step) == [step]
    expected = printed if unit == "s/it" else 1 / printed
    assert st_.cols["step_time_s"][0] == pytest.approx(expected)
    assert st_.cols["loss"][0] == pytest.approx(float(f"{loss:.3f}"))


@FUZZ
@given(layers=st.integers(1, 256), pp=st.integers(1, 16), per_stage=st.integers(1, 16),
       vpp=st.one_of(st.none(), st.integers(1, 16)),
       granularity=st.sampled_from(["None", "selective", "full"]), sp=st.booleans(),
       dots=st.integers(3, 40))
def test_megatron_schedule_round_trip(layers, pp, per_stage, vpp, granularity, sp, dots):
    d = "." * dots
    dump = (f"  num_layers {d} {layers}\n  pipeline_model_parallel_size {d} {pp}\n"
            f"  num_layers_per_virtual_pipeline_stage {d} {per_stage}\n"
            f"  virtual_pipeline_model_parallel_size {d} {vpp}\n"
            f"  recompute_granularity {d} {granularity}\n  sequence_parallel {d} {sp}\n")
    st_ = ParseState(fmt="megatron")
    parser = megatron.Parser(st_)
    parser.feed_chunk(dump, 1, True)
    parser.finish()
    assert st_.facts["recompute"] == granularity.lower()
    assert st_.facts["sequence_parallel"] is sp
    if vpp is not None:
        assert st_.facts["virtual_pipeline"] == vpp
    elif layers % (pp * per_stage) == 0:
        assert st_.facts["virtual_pipeline"] == layers // (pp * per_stage)
    else:
        assert "virtual_pipeline" not in st_.facts  # not a whole number of chunks: not guessed


@FUZZ
@given(n=st.integers(1, 4096), per_chip=st.floats(10, 1e5))
def test_n_from_tokens_per_second_ratio(n, per_chip, tmp_path_factory):
    def human(x: float) -> str:  # nanotron's human_format: 3 significant digits and a suffix
        for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
            if x >= scale:
                return f"{x / scale:.3g}{suffix}"
        return f"{x:.3g}"
    folder = tmp_path_factory.mktemp("nt")
    (folder / "run.yaml").write_text("accelerator: H100-SXM5-80GB\n")
    lines = "".join(
        f"01/17/2024 13:47:27 [INFO|DP=0|PP=0|TP=0]: iteration: {i} / 1000 | "
        f"elapsed_time_per_iteration_ms: 45 | tokens_per_sec: {human(per_chip * n)} | "
        f"tokens_per_sec_per_gpu: {human(per_chip)} | global_batch_size: 20 | lm_loss: 10.6\n"
        for i in range(1, 6))
    (folder / "n.log").write_text(lines)
    records, _ = read_logs(folder, PARAMS)
    whole, chip = human_float(human(per_chip * n)), human_float(human(per_chip))
    if records[0].fields is None:
        # N left missing only where the printed ratio is not within 2 % of a whole number
        assert "n_accelerators" in records[0].reason
        assert abs(whole / chip - round(whole / chip)) > 0.02 * whole / chip
    else:
        assert records[0].fields["n_accelerators"] == round(whole / chip)
        assert abs(records[0].fields["n_accelerators"] - n) <= max(1, 0.02 * n)


def test_schedule_columns_reach_runs_parquet(tmp_path):
    """recompute, virtual_pipeline and sequence_parallel from the argument dump are run
    columns (the performance model reads them); a bad sidecar value is a reject naming it."""
    import shutil

    import pandas as pd

    from pipeline.config import PROJ_ROOT, load_params
    from pipeline.ingest import stage as ingest_stage

    logs = tmp_path / "logs" / "c"
    logs.mkdir(parents=True)
    shutil.copy(REAL / "megatron_args" / "qwen2_0p5b_n2.log", logs / "a.log")
    (logs / "run.yaml").write_text("accelerator: H100-SXM5-80GB\nparams_b: 0.63\n")
    (logs / "b.log").write_text((REAL / "nemo2" / "bionemo_esm2.log").read_text())
    (logs / "b.log.yaml").write_text("n_accelerators: 1\nrecompute: sometimes\n")
    params = load_params()
    params["ingest"]["mlperf_roots"] = []
    (tmp_path / "published").mkdir()
    out = tmp_path / "processed"
    ingest_stage.run(params, published_dir=tmp_path / "published", logs_dir=tmp_path / "logs",
                     catalog_dir=PROJ_ROOT / "data" / "catalog", out_dir=out,
                     metrics_path=tmp_path / "ingest.json")
    runs = pd.read_parquet(out / "runs.parquet")
    (r,) = runs.itertuples()
    assert (r.recompute, r.virtual_pipeline, r.sequence_parallel) == ("selective", 1, False)
    assert r.model == "unnamed 0.63B" and "model" in r.derived.split(";")
    rejects = pd.read_parquet(out / "rejects.parquet")
    assert rejects["reason"].str.contains("'recompute' must be one of none, selective, full").any()


@FUZZ
@given(step=st.integers(1, 10**7), ms=st.floats(0.1, 1e6), tflops=st.floats(0.01, 5000),
       loss=st.floats(0.001, 100), sps=st.floats(0.001, 1e5))
def test_gpt_neox_line_round_trip(step, ms, tflops, loss, sps):
    line = (f" samples/sec: {sps:.3f} | iteration {step:8d}/ 10000000 | elapsed time per "
            f"iteration (ms): {ms:.1f} | learning rate: 2.111E-06 | approx flops per GPU: "
            f"{tflops:.1f}TFLOPS | lm_loss: {loss:.6E} | number of skipped iterations:   0 | "
            "number of nan iterations:   0 |\n")
    st_ = ParseState(fmt="megatron")
    megatron.Parser(st_).feed_chunk(line, 1, False)
    assert list(st_.step) == [step]
    assert st_.cols["step_time_s"][0] == pytest.approx(float(f"{ms:.1f}") / 1000)
    assert st_.cols["tflops_per_accelerator"][0] == pytest.approx(float(f"{tflops:.1f}"))
    assert st_.cols["loss"][0] == pytest.approx(float(f"{loss:.6E}"))


@FUZZ
@given(repeats=st.lists(st.integers(1, 8), min_size=1, max_size=30))
def test_unprefixed_rank_repeats_are_one_step_each(repeats):
    """Step k printed repeats[k] times in a row (ranks without a prefix): one step each, the
    rest set aside, never a restart."""
    from pipeline.config import LogsSettings
    from pipeline.ingest.sources.steplogs.reduce import reduce_steps
    st_ = ParseState(fmt="torchtitan")
    line = 0
    for k, times in enumerate(repeats, start=1):
        for _ in range(times):
            line += 1
            st_.add(k, line, step_time_s=1.0, loss=2.0)
    red = reduce_steps(st_, {}, LogsSettings(warmup_steps=0, min_steady_steps=1))
    assert red.n_steady == len(repeats)
    assert int(red.columns["segment"].max()) == 0  # no restart
    extra = sum(repeats) - len(repeats)
    assert (f"{extra} repeated line(s)" in " ".join(red.notes)) == (extra > 0)
