"""Step-log parsing throughput and peak memory over generated ~1 GB log sets.

Generates, in a temporary folder (deleted afterwards, never committed), one log per format
(Megatron, torchtitan with ANSI colours, nanotron, NeMo 2, DeepSpeed, generic JSONL), about
``TOTAL_BYTES`` in all, and runs ``read_logs`` over it with 2 worker processes, the per-step
rows streamed to one file per log (``steps_dir``), as the issue asks: memory must not grow
with the size of the logs. Two mixes:

- ``realistic``: each logged step is followed by the other output a 32-rank job prints
  meanwhile (one NCCL INFO line and one Python warning per rank, ~3.6 KB): a log only grows
  to a gigabyte through such output, since a job logs ~10^4-10^5 steps of ~300 bytes.
- ``dense``: every line a step line (JSONL: every line), the parser's worst case: ~5 million
  steps in 1 GB.

Printed: MB/s of wall clock (with the load average before the run: the machine may be
shared), MB per CPU-second of all processes (what 2 free cores would give, halved), and the
peak resident memory (``ru_maxrss`` of this process and of the largest worker). Run:
``python -m benchmarks.bench_steplogs`` (``make bench`` runs it with the others).
``SCALEWALL_BENCH_LOG_BYTES`` / ``SCALEWALL_BENCH_DENSE_BYTES`` change the sizes.
"""

from __future__ import annotations

import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

TOTAL_BYTES = int(os.environ.get("SCALEWALL_BENCH_LOG_BYTES", 1 << 30))
DENSE_BYTES = int(os.environ.get("SCALEWALL_BENCH_DENSE_BYTES", TOTAL_BYTES))
WORKERS = 2
NOISE = "".join(
    f"gpu-node-{r // 8:03d}:{4000 + r}:{4100 + r} [{r % 8}] NCCL INFO Channel 03/32 : {r}[{r % 8}]"
    f" -> {(r + 1) % 32}[{(r + 1) % 8}] via P2P/CUMEM/read\n"
    f"[default{r}]:/usr/lib/python3/dist-packages/torch/utils/checkpoint.py:91: UserWarning: "
    "None of the inputs have requires_grad=True. Gradients will be None\n" for r in range(32))


def _clock(i: int) -> str:
    """``MM:SS`` of step ``i``: one step a second, wrapping each hour."""
    return f"{(i // 60) % 60:02d}:{i % 60:02d}"


def _megatron(i: int) -> str:
    return (f" [2025-08-01 07:{_clock(i)}] iteration {i:8d}/{10**7:8d} |"
            f" consumed samples: {i * 128:12d} | elapsed time per iteration (ms): "
            f"{2400 + i % 17:.1f} | throughput per GPU (TFLOP/s/GPU): {108 + i % 3:.1f} |"
            f" learning rate: {3e-4:.6E} | global batch size: {128:5d} | lm loss: "
            f"{2.5 + (i % 7) / 10:.6E} | loss scale: 1.0 | grad norm: 0.912 | number of skipped"
            f" iterations: {0:3d} | number of nan iterations: {0:3d} |\n")


def _titan(i: int) -> str:
    return (f"[rank0]:[titan] 2025-03-01 12:{_clock(i)},"
            f"{i % 1000:03d} - root - INFO - \033[31mstep: {i:2}  \033[32mloss: "
            f"{2.5 + (i % 7) / 10:7.4f}  \033[38;2;180;60;0mgrad_norm: {1.2345:7.4f}  "
            f"\033[38;2;54;234;195mmemory: 40.12GiB(50.00%)  \033[34mtps: {6543 + i % 9:,}  "
            f"\033[36mtflops: 301.12  \033[35mmfu: 30.45%\033[39m\n")


def _nanotron(i: int) -> str:
    return (f"12/01 10:{_clock(i)} [INFO|DP=0|PP=0|TP=0]: iteration: {i} /"
            f" 10000000 | consumed_tokens: 1.31M | elapsed_time_per_iteration_ms: 1.23K | "
            f"tokens_per_sec: 106K | tokens_per_sec_per_gpu: 13.3K | global_batch_size: 32 | "
            f"lm_loss: 2.{i % 10} | lr: 0.0003 | model_tflops_per_gpu: 123 | "
            f"hardware_tflops_per_gpu: 125 | grad_norm: 0.512\n")


def _nemo(i: int) -> str:
    return (f"Training epoch 0, iteration {i}/10000000 | lr: 2.999e-05 | global_batch_size: 128"
            f" | global_step: {i} | reduced_train_loss: 2.{i % 10} | train_step_timing in s: "
            f"{1.5 + (i % 5) / 100:.4g} | consumed_samples: {128 * (i + 1)}\n")


def _deepspeed(i: int) -> str:
    return (f"[2024-05-01 10:{_clock(i)},001] [INFO] [timer.py:260:stop] "
            f"epoch=0/micro_step={i * 4}/global_step={i}, RunningAvgSamplesPerSec=63.9, "
            f"CurrSamplesPerSec={64 + (i % 5) / 10}, MemAllocated=12.3GB, MaxMemAllocated=14.1GB\n")


def _jsonl(i: int) -> str:
    return (f'{{"step": {i}, "step_time_s": {3.9 + (i % 5) / 100}, "tokens_per_s": '
            f'{268000 + i % 100}, "loss": 2.{i % 10}, "mfu": 0.41}}\n')


WRITERS = {"megatron.log": _megatron, "torchtitan.log": _titan, "nanotron.log": _nanotron,
           "nemo.log": _nemo, "deepspeed.log": _deepspeed, "generic.jsonl": _jsonl}
SIDECAR = "accelerator: H100-SXM5-80GB\nn_accelerators: 64\nseq_len: 4096\nmodel: llama3-8b\n"


def generate(folder: Path, total: int, dense: bool = False) -> int:
    """Write the log set; returns its size in bytes.

    The text formats share ``total`` equally; the JSONL log (no other output: it is written
    by the training loop itself) gets as many steps as each text log.
    """
    per_file = total // (len(WRITERS) - (0 if dense else 1))
    written, steps_per_log = 0, 0
    for name, line in WRITERS.items():
        sub = folder / Path(name).stem
        sub.mkdir(parents=True)
        (sub / "run.yaml").write_text(SIDECAR)
        jsonl = name.endswith(".jsonl")
        noise = "" if dense or jsonl else NOISE
        with open(sub / name, "w", encoding="utf-8", buffering=1 << 20) as fh:
            size, step = 0, 1
            while (size < per_file) if (dense or not jsonl) else (step <= steps_per_log):
                block = "".join(noise + line(i) for i in range(step, step + 200))
                fh.write(block)
                size += len(block)
                step += 200
        steps_per_log = max(steps_per_log, step - 1)
        written += size
    return written


def _cpu_s() -> float:
    """CPU seconds used so far by this process and its reaped worker processes."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _rows(path: Path) -> int:
    """Rows in an Arrow IPC file, read memory-mapped (its data pages are never touched)."""
    with pa.memory_map(str(path)) as source:
        reader = ipc.open_file(source)
        return sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))


def measure(label: str, total: int, dense: bool) -> None:
    """Generate one mix, parse it (rows streamed to per-log files), print its figures."""
    from pipeline.ingest.sources.steplogs.reader import read_logs

    tmp = Path(tempfile.mkdtemp(prefix="scalewall-bench-"))
    try:
        t0 = time.perf_counter()
        size = generate(tmp / "logs", total, dense)
        gen_s = time.perf_counter() - t0
        params = {"ingest": {"logs": {"warmup_steps": "auto", "max_warmup_fraction": 0.5,
                                      "min_steady_steps": 3, "workers": WORKERS}}}
        load = os.getloadavg()[0]
        cpu0 = _cpu_s()
        t0 = time.perf_counter()
        records, _ = read_logs(tmp / "logs", params, steps_dir=tmp / "steps")
        parse_s = time.perf_counter() - t0
        cpu_s = _cpu_s() - cpu0
        n_steps = sum(_rows(f) for f in (tmp / "steps").glob("*.arrow"))
        runs = sum(r.reason is None for r in records)
        print(f"steplogs_{label}_generated: {size / 1e6:.0f} MB, {n_steps} steps, {runs} runs of "
              f"{len(records)} logs ({len(WRITERS)} formats; {gen_s:.1f} s to write)")
        print(f"steplogs_{label}_MB_per_s: {size / 1e6 / parse_s:.1f} MB/s (target >= 100 on "
              f"2 cores; {WORKERS} workers, {parse_s:.1f} s wall, load average "
              f"{load:.2f} before)")
        print(f"steplogs_{label}_MB_per_cpu_s: {size / 1e6 / cpu_s:.1f} MB per CPU-second "
              f"({cpu_s:.1f} CPU-s in all processes; >= 50 gives >= 100 MB/s on 2 free cores)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    measure("realistic", TOTAL_BYTES, dense=False)
    measure("dense", DENSE_BYTES, dense=True)
    self_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"steplogs_peak_rss_MB: {max(self_mb, child_mb):.0f} MB (target < 500; main process "
          f"{self_mb:.0f} MB, largest worker {child_mb:.0f} MB, over both mixes)")


if __name__ == "__main__":
    sys.exit(main())
