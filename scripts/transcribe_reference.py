"""One-off converter: ``../shared/reference-data/*.csv`` -> ``data/raw/published/*.csv`` (format v1).

Not part of the pipeline (nothing under ``pipeline/`` imports it); re-run it by hand when the
reference data change::

    .venv/bin/python scripts/transcribe_reference.py [--reference DIR] [--out DIR]

Each ``convert_<source>`` function maps the rows of one reference file to format-v1 rows
(data/raw/published/README.md) plus the extra columns documented in
``data/raw/published/README.md``. Rules kept throughout:

* every row keeps ``source`` and ``citation``; ``reference_row`` names the reference file and the
  1-based data row it came from, so each value can be checked against it;
* ``derived`` lists (``;``-separated) every column computed here rather than printed by the
  source; exact unit conversions (minutes -> s, GB/s -> B/s) are not counted as derivations;
* nothing is filled in to turn a record into a run: claims, microbenchmarks and rows without a
  GPU count stay as records (``record_kind`` says what they are) for the ingest to reject.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import io
import re
from pathlib import Path
from typing import Any, Callable, Iterable

from pipeline.ingest.contract import PUBLISHED_COLUMNS
from pipeline.vocab import KERNEL_COLUMNS, SCHEDULE_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_REFERENCE = ROOT.parent / "shared" / "reference-data"
DEFAULT_OUT = ROOT / "data" / "raw" / "published"

V1_COLUMNS = PUBLISHED_COLUMNS  # the format's one definition (pipeline/ingest/contract.py)
# Extra columns, in output order; a file carries only those that any of its rows fills.
EXTRA_COLUMNS = (
    "record_kind", "evidence", "reference_row", "accelerator_as_published",
    "hardware_tflops_per_accelerator", "aggregate_hardware_flops_per_s",
    "peak_memory_bytes_per_accelerator", "extra_metric", "extra_value", "extra_unit", "figure",
    "benchmark", "mlperf_version", "submitter", "system", "olympic_score_s",
    "accelerators_per_node", "global_batch_sequences", "n_heads", "samples_per_s", "init_s",
    "eval_time_s",
    "result_path", "log_sha1", *SCHEDULE_COLUMNS, "framework", *KERNEL_COLUMNS, "cluster",
    "layout_source",
)
# The software that ran each source's jobs, as the source names it (citations in
# data/raw/published/README.md); a source that names none (fernandez2024) gets none. MLPerf rows
# carry their system description's ``framework`` field instead.
SOURCE_FRAMEWORK = {
    "megatron2021": "Megatron-LM", "llama3": "Meta 4D parallelism (FSDP)",
    "palm2022": "Pathways (JAX, T5X)", "opt2022": "metaseq (FSDP + Megatron-LM tensor parallelism)",
    "bloom2022": "Megatron-DeepSpeed", "torchtitan2024": "torchtitan",
    "nvidia_dgxc2024": "NeMo 24.09", "ultrascale_playbook2025": "nanotron",
}
# megatron2021's Table 2 baselines ran DeepSpeed's ZeRO-3 ("ZeRO-3 (DeepSpeed)" in their strategy).
MEGATRON2021_BASELINE = ("ZeRO-3 (DeepSpeed)", "DeepSpeed")
# Kernels a source's software had where they differ from today's (``KERNEL_COLUMNS``; the step
# model assumes a fused flash-attention core and overlapped TP and DP collectives where a row
# states nothing). megatron2021 (Megatron-LM as of arXiv:2104.04473, NVIDIA/Megatron-LM
# examples/sc21):
# - the attention core is unfused (CoreAttention: baddbmm for QK^T, FusedScaleMaskSoftmax,
#   attention dropout, bmm; FlashAttention, arXiv:2205.14135, came a year later);
# - the TP all-reduces are synchronous on the compute stream (§2.3: "two all-reduce operations
#   in the forward pass and two in the backward pass"; overlapping them came with Transformer
#   Engine's userbuffers, Megatron-core ``tp_comm_overlap``, 2023);
# - its data-parallel gradients are all-reduced after the backward pass (``--DDP-impl`` default
#   ``local``: ``train_step`` calls ``allreduce_gradients`` once the pipeline's backward is done;
#   overlapping it came with Megatron-core's ``overlap_grad_reduce``, 2023). Its Table 2 ZeRO-3
#   baselines ran DeepSpeed's data parallelism, which overlaps: not stated for them.
SOURCE_KERNELS = {"megatron2021": {"fused_attention": False, "tp_comm_overlap": False,
                                   "dp_comm_overlap": False}}
OWN_STACK_ONLY = frozenset({"dp_comm_overlap"})
# The measured network each source ran on (a ``cluster`` of data/catalog/collectives.csv): the
# Playbook's H100 cluster, whose all-reduce bandwidth by node count its own figure gives.
SOURCE_CLUSTER = {"ultrascale_playbook2025": "hf_playbook"}
# Megatron-LM 2021 Table 1: --num-layers-per-virtual-pipeline-stage of NVIDIA/Megatron-LM
# examples/sc21/run_table_1.sh, as chunks per stage (layers / pp / layers-per-chunk), by depth:
# 76B 60/4/5 = 3, 145B 80/8/5 = 2, 310B 96/16/3 = 2, 530B 105/35/1 = 3; unset (1) otherwise.
MEGATRON_TABLE1_V = {60: 3, 80: 2, 96: 2, 105: 3}
# Table 1's micro-batch (--micro-batch-size, MBS in the same run_table_1.sh), by depth: the
# table prints only the global batch.
MEGATRON_TABLE1_MBS = {24: 16, 30: 16, 36: 16, 40: 8, 48: 4, 60: 2, 80: 2, 96: 1, 105: 1, 128: 1}
# Llama 3 405B (arXiv:2407.21783 §3.3.2, "Pipeline parallelism improvements"): "we use an
# interleaved schedule ... with V pipeline stages on one pipeline rank", and to balance the
# pipeline "we reduce one Transformer layer each from the first and the last stages ... the
# first model chunk on the first stage has only the embedding, and the last model chunk on the
# last stage has only output projection and loss". V is not printed; the balancing fixes it:
# a first chunk left with the embedding alone after one layer is removed held one layer, so
# every chunk is one layer, and 126 layers (Table 3) + embedding + output = 128 = PP16 x V
# gives V = 8. The same section: "we could pretrain Llama 3 on sequences of 8K tokens without
# activation checkpointing" (recompute none for the 8K rows; the 128K row does not say).
LLAMA3_V = 8
Row = dict[str, Any]

# --- small helpers ---------------------------------------------------------------------------


def num(text: str | None) -> float | None:
    """The number in a reference cell, or None when the cell is empty."""
    text = (text or "").strip()
    return float(text) if text else None


def integer(text: str | None) -> int | None:
    value = num(text)
    return None if value is None else int(round(value))


def fmt(value: Any) -> str:
    """Deterministic cell text: integral floats without '.0', others with 10 significant digits."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return format(value, ".10g")
    return str(value)


def read_reference(ref_dir: Path, name: str) -> list[dict[str, str]]:
    with open(ref_dir / name, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


# Exact conversions to SI for the extra_metric/extra_value/extra_unit triple.
_UNIT_TO_SI = {
    "days": (86400.0, "s"), "GB/s": (1e9, "B/s"), "TB/s": (1e12, "B/s"), "GB": (1e9, "B"),
    "GiB": (2.0**30, "B"), "percent": (0.01, "fraction"),
}


def extra_triple(ref: dict[str, str]) -> Row:
    """The reference's free metric, in SI where its unit converts exactly."""
    metric, value, unit = ref["extra_metric"], ref["extra_value"], ref["extra_unit"]
    if not metric:
        return {}
    factor_unit = _UNIT_TO_SI.get(unit)
    if factor_unit and value:
        return {"extra_metric": metric, "extra_value": float(value) * factor_unit[0],
                "extra_unit": factor_unit[1]}
    return {"extra_metric": metric, "extra_value": value, "extra_unit": unit}


def base_row(source: str, citation: str, ref: dict[str, str], ref_file: str, line: int,
             accelerator: str | None) -> Row:
    """Fields every published-table row shares: identity, provenance and the plain copies."""
    return {
        "source": source, "citation": citation, "model": ref["model"],
        "params_b": num(ref["params_b"]), "seq_len": integer(ref["seq_len"]),
        "accelerator": accelerator, "n_accelerators": integer(ref["n_gpus"]),
        "global_batch_tokens": num(ref["global_batch_tokens"]),
        "dp": integer(ref["dp"]), "tp": integer(ref["tp"]), "pp": integer(ref["pp"]),
        "cp": integer(ref["cp"]), "strategy": ref["strategy"] or None,
        "tokens_per_s": num(ref["tokens_per_s"]),
        "tokens_per_s_per_accelerator": num(ref["tokens_per_s_per_gpu"]),
        "tflops_per_accelerator": num(ref["tflops_per_gpu"]), "mfu": num(ref["mfu"]),
        "hfu": num(ref["hfu"]), "power_w_per_accelerator": num(ref["power_w_per_gpu"]),
        "step_time_s": num(ref["step_time_s"]), "notes": ref["notes"] or None,
        "record_kind": "run", "evidence": ref["provenance"],
        "reference_row": f"{ref_file}:{line}", "accelerator_as_published": ref["gpu_type"],
        **extra_triple(ref),
    }


def with_derived(row: Row, *names: str) -> Row:
    row["derived"] = ";".join(sorted(set(filter(None, (row.get("derived") or "").split(";")))
                                     | set(names))) or None
    return row


def arxiv(ref: dict[str, str]) -> str:
    """``arXiv:<id> <table>``; ids read back as floats lost trailing zeros (2211.051 = 2211.05100)."""
    prefix, _, suffix = ref["arxiv_id"].partition(".")
    return f"arXiv:{prefix}.{suffix.ljust(5, '0')} {ref['table_or_figure']}"


# --- published papers ------------------------------------------------------------------------


def convert_fernandez2024(refs: list[dict[str, str]]) -> list[Row]:
    """Headline figures only; the per-configuration data are in figures that were not available.

    The two percentage claims and the max-scale statement are claims, not runs; the MFU rows are
    measurements without a GPU count (the ingest rejects them as missing n_accelerators).
    """
    out = []
    for line, ref in enumerate(refs, 1):
        # The summaries name only "H100"/"A100"; the catalog's aliases decide, nothing is guessed.
        row = base_row("fernandez2024", arxiv(ref), ref, "fernandez2024.csv", line, ref["gpu_type"])
        row["record_kind"] = "run" if row["mfu"] is not None else "claim"
        out.append(row)
    return out


# Megatron-LM Eq. 3: FLOPs per token with activation recomputation, vocabulary V = 51,200.
MEGATRON_VOCAB = 51200
# Shapes of the Table-2 models: 96 x 12288 (GPT-3) and 105 x 20480 (Table 1's 529.6B);
# 12*l*h^2 + V*h + s*h reproduces the printed 174.6B and 529.6B.
MEGATRON_TABLE2_SHAPES = {"GPT 174.6B": (96, 12288), "GPT 529.6B": (105, 20480),
                          "GPT-3 175B": (96, 12288)}
MEGATRON_PEAK_TFLOPS = 312.0  # A100 BF16 dense, the paper's "% of theoretical peak" base


def megatron_flops_per_token(n_layers: int, d_model: int, seq_len: int) -> float:
    """Eq. 3 of Narayanan et al. 2021 divided by B*s: 96 l h^2 (1 + s/6h + V/16lh) per token."""
    h, l = float(d_model), float(n_layers)
    return 96.0 * l * h * h * (1.0 + seq_len / (6.0 * h) + MEGATRON_VOCAB / (16.0 * l * h))


def convert_megatron2021(refs: list[dict[str, str]]) -> list[Row]:
    """Tables 1-2 (+ the Sec 5.1 175B point). Per-GPU TF/s there count recompute FLOPs.

    So they go to ``hardware_tflops_per_accelerator`` (not ``tflops_per_accelerator``, which is
    model FLOPs), "% of peak" is ``hfu``, and ``tokens_per_s`` is derived from Eq. 3.
    """
    out = []
    for line, ref in enumerate(refs, 1):
        row = base_row("megatron2021", arxiv(ref), ref, "megatron2021.csv", line, "A100-SXM4-80GB")
        row["hardware_tflops_per_accelerator"] = row.pop("tflops_per_accelerator")
        if ref["aggregate_pflops"]:
            row["aggregate_hardware_flops_per_s"] = float(ref["aggregate_pflops"]) * 1e15
        shape = re.search(r"(\d+) layers, hidden (\d+)", ref["model"])
        table = ref["table_or_figure"]
        if shape:
            row["n_layers"], row["d_model"] = int(shape[1]), int(shape[2])
        elif ref["model"] in MEGATRON_TABLE2_SHAPES and table != "Sec 5.9 (via secondary summary)":
            row["n_layers"], row["d_model"] = MEGATRON_TABLE2_SHAPES[ref["model"]]
            with_derived(row, "n_layers", "d_model")
        derived = ["global_batch_tokens"] if row["global_batch_tokens"] else []
        if table == "Table 1":
            row.update(scaling="weak", series="megatron2021:table1:ptd-p", micro_batch=None)
            derived.append("dp")
        elif table == "Table 2":
            zero = ref["strategy"].startswith("ZeRO-3")
            size = "175b" if ref["params_b"].startswith("174") else "530b"
            row.update(scaling="strong", series=f"megatron2021:table2:{size}:"
                       + ("zero3" if zero else "ptd-p"))
            mb = re.search(r"Microbatch (\d+)", ref["notes"])
            row["micro_batch"] = int(mb[1]) if mb else None
            if zero:  # "no model parallelism": dp = N
                row.update(zero_stage=3)
                derived.append("dp")
            else:
                derived += ["dp", "tp", "pp"]  # the table prints only the model-parallel size
            row["hfu"] = round(row["hardware_tflops_per_accelerator"] / MEGATRON_PEAK_TFLOPS, 4)
            derived.append("hfu")
        elif table.startswith("Sec 5.1"):
            row.update(scaling="single", series="megatron2021:sec5.1:175b")
        else:  # Sec 5.9: effective bisection bandwidth during the 1T run
            row.update(record_kind="statistic", scaling="single")
        if row.get("record_kind", "run") == "run":
            # every run recomputes activations (Eq. 3 counts the recomputed forward; Table 1:
            # --recompute-method uniform); sequence parallelism postdates the paper
            row.update(recompute="full", sequence_parallel=False)
            if row["pp"] == 1:
                row["virtual_pipeline"] = 1
            elif table == "Table 1" and row["pp"]:
                row["virtual_pipeline"] = MEGATRON_TABLE1_V.get(row.get("n_layers"), 1)
            if table == "Table 1" and row.get("n_layers") in MEGATRON_TABLE1_MBS:
                row["micro_batch"] = MEGATRON_TABLE1_MBS[row["n_layers"]]
                derived.append("micro_batch")
        if row["hardware_tflops_per_accelerator"] and row.get("n_layers") and row["seq_len"]:
            per_token = megatron_flops_per_token(row["n_layers"], row["d_model"], row["seq_len"])
            row["tokens_per_s"] = round(
                row["n_accelerators"] * row["hardware_tflops_per_accelerator"] * 1e12 / per_token, 1)
            derived.append("tokens_per_s")
        out.append(with_derived(row, *derived))
    return out


def convert_llama3(refs: list[dict[str, str]]) -> list[Row]:
    out = []
    for line, ref in enumerate(refs, 1):
        row = base_row("llama3", arxiv(ref), ref, "llama3.csv", line, "H100-SXM5-80GB")
        if row["mfu"] is None:
            row["record_kind"] = "statistic"  # reliability figures of the production run
        elif row["cp"] == 16:
            row.update(scaling="single", series="llama3:table4:405b:cp16-128k", precision="bf16")
        else:
            row.update(scaling="strong", series="llama3:table4:405b:8k", precision="bf16")
        if row["record_kind"] == "run":
            row["zero_stage"] = 3  # "FSDP(DP)" in the 4D layout; FSDP = 3 by convention
            row["virtual_pipeline"] = LLAMA3_V
            if row["seq_len"] == 8192:
                row["recompute"] = "none"
            with_derived(row, "global_batch_tokens", "zero_stage", "virtual_pipeline")
        out.append(row)
    return out


PALM_ACCELERATORS = {"V100": "V100", "TPU v3": "TPU-v3", "A100": "A100",
                     "TPU v4": "TPU-v4", "TPU v4 (2 pods x 3072 chips)": "TPU-v4"}


# PaLM (arXiv:2204.02311), checked against the paper: the within-pod split and the sharding are
# §4's, the optimizer §5's ("Adafactor ... without factorization. This is effectively equivalent
# to Adam ... with 'parameter scaling'", with momentum beta1 = 0.9: two moments per parameter,
# the Adam-like states the memory model counts).
PALM_SHARDING_NOTE = (
    " Checked against the paper: §4 states the 12 x 256 split (\"each weight tensor partitioned"
    " over 3072 chips using 12-way model parallelism and 256-way fully sharded data parallelism\","
    " every pod a full copy: zero_stage 3, sharded within the pod) and full rematerialization"
    " (\"one fully sharded activation tensor is saved from each layer. During the backward pass,"
    " the rest of the activations are rematerialized\"); §5: Adafactor without factorization,"
    " \"effectively equivalent to Adam\", with momentum 0.9.")


def convert_palm2022(refs: list[dict[str, str]]) -> list[Row]:
    """PaLM Table 3: PaLM's own run plus the MFU it computes for GPT-3, Gopher and MT-NLG."""
    out = []
    for line, ref in enumerate(refs, 1):
        row = base_row("palm2022", arxiv(ref), ref, "palm2022.csv", line,
                       PALM_ACCELERATORS[ref["gpu_type"]])
        derived = []
        if ref["extra_metric"] == "throughput_relative_to_single_pod":
            row["record_kind"] = "claim"
        else:
            row["scaling"] = "single"
        if row["tokens_per_s_per_accelerator"] is not None:
            derived.append("tokens_per_s_per_accelerator")
        if ref["model"] == "PaLM" and row["record_kind"] == "run":
            derived += ["global_batch_tokens", "dp"]
            if row["dp"] and row["tp"] is None:
                # "12-way model x 256-way data" per pod: tp = N / dp = 6144 / 512 = 12.
                row["tp"] = row["n_accelerators"] // row["dp"]
                derived.append("tp")
            # §4: "each weight tensor partitioned over 3072 chips using 12-way model
            # parallelism and 256-way fully sharded data parallelism" (FSDP = ZeRO-3 by
            # convention, so derived); "During the backward pass, the rest of the activations
            # are rematerialized" (one sharded tensor saved per layer: full recompute).
            row.update(zero_stage=3, recompute="full")
            derived.append("zero_stage")
            row["notes"] = (row["notes"] + PALM_SHARDING_NOTE) if row["notes"] else None
        out.append(with_derived(row, *derived))
    return out


# BLOOM's run as its own training repository states it (github.com/bigscience-workshop/bigscience,
# train/tr11-176B-ml): the README's "Throughput" section says that with activation checkpointing
# the TFLOP/s are hardware TFLOP/s, computed with the 4*2 coefficient instead of the 3*2 of model
# TFLOP/s, so the quoted 156 are 4/3 of the model FLOP/s; the slurm script sets
# MICRO_BATCH_SIZE=2, --checkpoint-activations (full recompute), NLAYERS=70, NHIDDEN=14336,
# NHEADS=112 (TP_SIZE=4, PP_SIZE=12 on 48 nodes, GLOBAL_BATCH_SIZE=2048, as the reference row).
BLOOM_REPO = ("github.com/bigscience-workshop/bigscience@00327f8c train/tr11-176B-ml/README.md "
              "and @003b2505 tr11-176B-ml.slurm")
BLOOM_RUN = {"micro_batch": 2, "recompute": "full", "n_layers": 70, "d_model": 14336,
             "n_heads": 112}
BLOOM_NOTES = (
    "~156 TFLOP/s per GPU 'in the fastest configuration' as quoted by two independent secondary "
    "notes; these are hardware TFLOP/s: the tr11-176B-ml README (Throughput) states that with "
    "activation checkpointing the throughput is computed with the 4*2 coefficient instead of the "
    "3*2 of model TFLOP/s, so model TFLOP/s = 156 x 3/4 = 117 (derived). Layout and batch from "
    "the tr11-176B-ml slurm script: TP_SIZE=4, PP_SIZE=12 on 48 nodes of 8 (DP 8), "
    "MICRO_BATCH_SIZE=2, GLOBAL_BATCH_SIZE=2048 x SEQ_LEN 2048 (4.2M tokens) after the ramp, "
    "--checkpoint-activations (recompute full), --bf16, DeepSpeed ZERO_STAGE=0 with the BF16 "
    "optimizer's own ZeRO-1 equivalent; NLAYERS=70, NHIDDEN=14336, NHEADS=112. 384 GPUs (48 "
    "nodes) + 32 spare; 4 Omni-Path 100 Gbps links per node (README Hardware).")


def _bloom_as_run(row: Row) -> list[str]:
    """The BLOOM row with its repository's facts (``BLOOM_RUN``); the names it derives."""
    hardware = row.pop("tflops_per_accelerator")
    row.update(BLOOM_RUN, hardware_tflops_per_accelerator=hardware,
               tflops_per_accelerator=round(hardware * 3 / 4, 6),
               citation=f"{row['citation']}; {BLOOM_REPO}", notes=BLOOM_NOTES)
    return ["tflops_per_accelerator"]


def convert_single(source: str, accelerator: str, zero_stage: int | None,
                   refs: list[dict[str, str]], ref_file: str,
                   stated: Callable[[Row], list[str]] | None = None) -> list[Row]:
    """OPT and BLOOM: one production run each, at one scale; ``stated`` adds what another
    source states about the run (``_bloom_as_run``) and returns the names it derives."""
    out = []
    for line, ref in enumerate(refs, 1):
        row = base_row(source, arxiv(ref), ref, ref_file, line, accelerator)
        row.update(scaling="single", zero_stage=zero_stage)
        derived = ["global_batch_tokens"] if row["global_batch_tokens"] else []
        if "FSDP" in ref["strategy"]:
            derived.append("zero_stage")  # FSDP = 3 by convention; "ZeRO-1" is printed
        precision = re.search(r"\b(BF16|FP16)\b", ref["strategy"] + " " + ref["notes"])
        row["precision"] = precision[1].lower() if precision else None
        if stated is not None:
            derived += stated(row)
        out.append(with_derived(row, *derived))
    return out


def convert_torchtitan2024(refs: list[dict[str, str]]) -> list[Row]:
    """torchtitan Tables 1-6 (as mirrored in the repo's docs/performance.md)."""
    out = []
    for line, ref in enumerate(refs, 1):
        row = base_row("torchtitan2024", arxiv(ref) + " (pytorch/torchtitan docs/performance.md)",
                       ref, "torchtitan2024.csv", line, "H100-HBM2e-96GB")
        table = ref["table_or_figure"].split(" (")[0].replace(" ", "").lower()
        local = re.search(r"Local batch (\d+)", ref["notes"])
        # Tables 2, 4, 5 and 6 run Float8 on every row (their captions say so; docs/performance.md).
        float8 = "Float8" in ref["strategy"] or table in ("table2", "table4", "table5", "table6")
        row.update(micro_batch=int(local[1]) if local else None, zero_stage=3,
                   precision="fp8" if float8 else None)
        notes = (row.get("notes") or "").lower()
        # Tables 1-3 spell it "full activation checkpointing", Tables 4-5 "full AC"
        row["recompute"] = ("selective" if "selective" in notes else
                            "full" if re.search(r"\bfull (activation checkpointing|ac)\b", notes)
                            else None)
        if row["pp"] == 1:
            row["virtual_pipeline"] = 1
        derived = ["tokens_per_s", "zero_stage"]  # FSDP = 3 by convention
        if local and row["pp"] and row["pp"] > 1 and int(local[1]) % row["pp"] == 0:
            # with a pipeline the local batch is split into microbatches, by default as many as
            # stages (torchtitan's experimental.pipeline_parallel_microbatches: "The default
            # value will be the number of pipeline stages"); the tables state no other count
            row["micro_batch"] = int(local[1]) // row["pp"]
            row["notes"] = (row.get("notes") or "") + (
                f" micro_batch = local batch / PP = {local[1]}/{row['pp']} (derived: torchtitan "
                "splits the local batch into as many pipeline microbatches as stages by default).")
            derived.append("micro_batch")
        if ref["extra_metric"] == "peak_memory" and ref["extra_unit"] == "GiB":
            row["peak_memory_bytes_per_accelerator"] = float(ref["extra_value"]) * 2.0**30
            for key in ("extra_metric", "extra_value", "extra_unit"):
                row.pop(key, None)
        if table in ("table1", "table3"):
            slug = ref["strategy"].lower().replace("torch.", "").replace(" + ", "+")
            row.update(scaling="weak", series=f"torchtitan2024:8b:{slug}")
        elif table in ("table2", "table6"):
            row.update(scaling="sweep", series=f"torchtitan2024:{table}:cp-seq-len")
        else:
            row["scaling"] = "single"
        out.append(with_derived(row, *derived))
    return out


# Llama 3 herd paper (arXiv:2407.21783) Table 3, 405B: 126 layers, d 16384, FFN 53248,
# 128 query heads, 8 KV heads (head dim 128), vocabulary 128,000, untied input/output embeddings.
LLAMA31_405B = {"d_model": 16384, "ffn": 53248, "kv_dim": 8 * 128, "vocab": 128000}


def llama31_405b_params(n_layers: int) -> float:
    """Parameter count of a Llama-3.1-405B-shaped model cut to ``n_layers`` (126 gives 405.8e9)."""
    d, f, kv, v = (LLAMA31_405B[k] for k in ("d_model", "ffn", "kv_dim", "vocab"))
    per_layer = 2 * d * d + 2 * d * kv + 3 * d * f + 2 * d  # q,o + k,v + SwiGLU MLP + 2 norms
    return float(n_layers * per_layer + 2 * v * d + d)


def convert_nvidia_dgxc2024(refs: list[dict[str, str]]) -> list[Row]:
    """DGX Cloud recipes. The 405B rows below 576 GPUs run a model cut to 7/21/42 layers."""
    out = []
    for line, ref in enumerate(refs, 1):
        citation = "NVIDIA/dgxc-benchmarking (NeMo 24.09) " + ref["table_or_figure"]
        row = base_row("nvidia_dgxc2024", citation, ref, "nvidia_dgxc2024.csv", line,
                       "H100-SXM5-80GB")
        precision = "fp8" if "(FP8)" in ref["strategy"] else "bf16"
        layers = re.search(r"Layers=(\d+)", ref["notes"])
        size = ref["model"].split()[2].lower()  # "Llama 3.1 405B ..." -> 405b
        family = size
        derived = ["dp", "tokens_per_s_per_accelerator", "global_batch_tokens"]
        if layers:
            row["n_layers"] = int(layers[1])
            if "proxy" in ref["model"]:
                family = f"{size}-proxy"
                row["params_b"] = round(llama31_405b_params(row["n_layers"]) / 1e9, 2)
                # The proxy keeps the 405B width, so model FLOPs keep their attention term.
                row["d_model"] = LLAMA31_405B["d_model"]
                derived += ["params_b", "d_model"]
                row["notes"] += (f" params_b and d_model derived for the {row['n_layers']}-layer"
                                 " proxy from the Llama 3.1 405B shape (arXiv:2407.21783 Table"
                                 " 3); the README prints 405.")
        row.update(micro_batch=1, precision=precision, scaling="weak",
                   series=f"nvidia_dgxc2024:{family}:{precision}")
        vp = re.search(r"VP=(\d+)", ref["notes"])  # the recipe's virtual pipeline size
        row["virtual_pipeline"] = 1 if row["pp"] == 1 else (int(vp[1]) if vp else None)
        out.append(with_derived(row, *derived))
    return out


PLAYBOOK = "ultrascale_playbook2025"
PLAYBOOK_CITATION = "Hugging Face Ultra-Scale Playbook (2025), figure "
# Playbook text above the benchmark heatmap: "All the following benchmarks were conducted with a
# sequence length of 4096 and a global batch size of 1M tokens" (256 x 4096 = 1,048,576).
PLAYBOOK_SEQ_LEN = 4096
PLAYBOOK_MIN_ROUNDED_TPA = 50.0
_STRATEGY = re.compile(r"DP(\d+) TP(\d+) PP(\d+) ZeRO-(\d) MBS(\d+) GA(\d+)(?: GBS(\d+))?")


def parse_playbook_strategy(text: str) -> dict[str, int]:
    """``DP8 TP1 PP1 ZeRO-0 MBS2 GA16 GBS256`` -> dp, tp, pp, zero_stage, micro_batch, ga, gbs."""
    match = _STRATEGY.fullmatch(text.strip())
    if not match:
        raise ValueError(f"not a Playbook strategy string: {text!r}")
    keys = ("dp", "tp", "pp", "zero_stage", "micro_batch", "ga", "gbs")
    return {k: int(v) for k, v in zip(keys, match.groups()) if v is not None}


def _figure_key(model: str, n: str, strategy: str, tps_per_gpu: str) -> tuple:
    return (model, int(n), strategy.replace(" GBS256", ""), round(float(tps_per_gpu)))


def figure_index(figure_refs: list[dict[str, str]]) -> dict[tuple, list[str]]:
    """Which all-configs rows the figure file repeats (same model, N, config and tok/s/GPU)."""
    index: dict[tuple, list[str]] = {}
    for ref in figure_refs:
        fig = ref["table_or_figure"]
        if "best config" in fig and ref["strategy"]:
            index.setdefault(_figure_key(ref["model"], ref["n_gpus"], ref["strategy"],
                                         ref["tokens_per_s_per_gpu"]), []).append("benchmarks_best")
        elif "Data Parallelism" in fig:
            # DP-scaling points are the 1B pure-DP ZeRO-0 rows of the sweep (matched on tok/s/GPU).
            key = ("1B", int(ref["n_gpus"]), None, round(float(ref["tokens_per_s_per_gpu"])))
            index.setdefault(key, []).append("dp_scaling")
    return index


def convert_playbook_all_configs(refs: list[dict[str, str]],
                                 figure_refs: list[dict[str, str]]) -> list[Row]:
    """Every configuration of the Playbook sweep, OOM/crashed ones kept with status ``oom``."""
    index = figure_index(figure_refs)
    # A few configuration strings appear 2-3 times at one N with different throughput and memory
    # (something the hover text does not show differs); the citation numbers the repeats so the
    # rows stay distinct runs.
    seen: dict[tuple, int] = {}
    counts: dict[tuple, int] = {}
    for ref in refs:
        key = (ref["model"], ref["n_gpus"], ref["strategy"])
        counts[key] = counts.get(key, 0) + 1
    out = []
    for line, ref in enumerate(refs, 1):
        row = base_row(PLAYBOOK, PLAYBOOK_CITATION + "'benchmarks' "
                       "(fragments/benchmarks_interactive.html), every configuration", ref,
                       "ultrascale_playbook2025_all_configs.csv", line, "H100 80GB")
        key = (ref["model"], ref["n_gpus"], ref["strategy"])
        if counts[key] > 1:
            seen[key] = seen.get(key, 0) + 1
            row["citation"] += (f"; listed {counts[key]} times for this model, N and configuration"
                                f" (what differs is not shown), this is listing {seen[key]}")
        cfg = parse_playbook_strategy(ref["strategy"])
        if (cfg["dp"], cfg["tp"], cfg["pp"]) != (row["dp"], row["tp"], row["pp"]):
            raise ValueError(f"line {line}: strategy {ref['strategy']!r} disagrees with dp/tp/pp")
        row.update(zero_stage=cfg["zero_stage"], micro_batch=cfg["micro_batch"],
                   seq_len=PLAYBOOK_SEQ_LEN, global_batch_tokens=float(cfg["gbs"] * PLAYBOOK_SEQ_LEN),
                   scaling="strong")
        mismatch = cfg["dp"] * cfg["micro_batch"] * cfg["ga"] != cfg["gbs"]
        row["series"] = (f"{PLAYBOOK}:{ref['model']}:tp{cfg['tp']}-pp{cfg['pp']}"
                         f"-zero{cfg['zero_stage']}-mbs{cfg['micro_batch']}"
                         + ("-gbs-mismatch" if mismatch else ""))
        for key in ("extra_metric", "extra_value", "extra_unit"):
            row.pop(key, None)
        tpa = row["tokens_per_s_per_accelerator"]
        if tpa is not None and tpa < PLAYBOOK_MIN_ROUNDED_TPA:
            # tok/s/GPU is printed as an integer; below 50 that rounding is over 1%, so keep the
            # whole-job value (more digits) alone rather than two figures that disagree.
            row["tokens_per_s_per_accelerator"] = None
            row["notes"] += f" tok/s/GPU printed rounded ({tpa:g}); only the job total is kept."
        if row["mfu"] == 0.0:  # hover text rounds MFU to 3 decimals: 0.000 means < 0.0005
            row["mfu"] = None
            row["notes"] += " MFU printed as 0.000 (rounded); left empty."
        if ref["extra_metric"] == "status":
            row["status"] = "oom"
            row["notes"] += " Source status 'crashed/oom' (OOM and crash not distinguished)."
        elif ref["extra_metric"] == "gpu_memory":
            row["peak_memory_bytes_per_accelerator"] = float(ref["extra_value"]) * 1e9
        if row["tokens_per_s_per_accelerator"] is not None:
            tps = str(row["tokens_per_s_per_accelerator"])
            figs = index.get(_figure_key(ref["model"], ref["n_gpus"], ref["strategy"], tps), [])
            if ref["model"] == "1B" and cfg["tp"] == cfg["pp"] == 1 and cfg["zero_stage"] == 0:
                figs = figs + index.get(("1B", row["n_accelerators"], None, round(float(tps))), [])
            row["figure"] = ";".join(sorted(figs)) or None
        out.append(with_derived(row, "global_batch_tokens"))
    return out


def convert_playbook_figures(figure_refs: list[dict[str, str]]) -> list[Row]:
    """The figure-data rows that are NOT repeats of the sweep: the TP-scaling experiment (3B,
    TP = GPUs, largest batch that fits) and the NCCL bandwidth microbenchmark (not runs).

    The figure's best-config and DP-scaling points are rows of the sweep; they are flagged there
    (``figure`` column) instead of being written twice.
    """
    out = []
    for line, ref in enumerate(figure_refs, 1):
        fig = ref["table_or_figure"]
        if "best config" in fig or "Data Parallelism" in fig:
            continue
        row = base_row(PLAYBOOK, PLAYBOOK_CITATION + fig.removeprefix("Figure "), ref,
                       "ultrascale_playbook2025.csv", line, "H100 80GB")
        if "TP" in fig:
            row.update(scaling="sweep", series=f"{PLAYBOOK}:tp_scaling:3B")
            with_derived(row, "n_accelerators")  # the figure's x-axis is TP; N = TP assumed
        else:
            row["record_kind"] = "microbenchmark"
        out.append(row)
    return out


# --- MLPerf Training --------------------------------------------------------------------------
# Reference model of each LLM benchmark (MLPerf Training rules / reference implementations).
MLPERF_LLM = {
    "gpt3": ("GPT-3 175B", 175.0, True),
    "llama2_70b_lora": ("Llama 2 70B (LoRA fine-tuning)", 70.0, False),
    "llama31_405b": ("Llama 3.1 405B", 405.0, True),
    "llama31_8b": ("Llama 3.1 8B", 8.0, True),
}  # (model, params_b, pretraining: tokens/s = samples/s x sequence length is meaningful)
MLPERF_STATUS = {"success": "ok", "aborted": "aborted", "no_run_stop": "no_run_stop",
                 "missing_file": "missing_file"}


# The submissions' own configuration files (data/raw/mlperf_configs/layouts.csv, written by
# scripts/extract_mlperf_configs.py; README.md there): one row per (round, submitter, system,
# benchmark), joined to every run of that system.
MLPERF_LAYOUTS = ROOT / "data" / "raw" / "mlperf_configs" / "layouts.csv"
LayoutKey = tuple[str, str, str, str]
# Precisions the step model prices (pipeline/vocab.py PRECISIONS); a layout stated at another
# (NVFP4, MLPerf v5.1) stays in layouts.csv and is not joined: the run keeps no layout.
JOINED_PRECISIONS = ("bf16", "fp16", "fp8", "")
# Runs whose layout the join leaves out although layouts.csv states it, and why (README.md).
MLPERF_LAYOUT_LEFT_OUT: dict[tuple[str, str, str], str] = {}
# Benchmarks whose layouts are not joined. llama31_8b (v5.1; 160 runs, global batch 16-128
# sequences, 1-2 microbatches per step): joined, the calibrate fit degenerated (dvc repro on
# r3-data 4eaf532: Megatron compute efficiency 0.31, every Megatron source's effect -0.6 to
# -0.9, between-source sd 0.54, leave-source-out median error of the production sources 46.6%
# against 12.5% without; each 8B system alone was predicted within 0.3-37% in-sample).
MLPERF_BENCHMARK_LEFT_OUT: dict[str, str] = {
    "llama31_8b": "the step model cannot yet explain the 8B runs' one-or-two-microbatch steps"
                  " together with the other sources (data/raw/mlperf_configs/README.md)"}


def read_layouts(path: Path = MLPERF_LAYOUTS) -> dict[LayoutKey, dict[str, str]]:
    """layouts.csv by (round, submitter, system, benchmark); a repeated key is an error."""
    out: dict[LayoutKey, dict[str, str]] = {}
    with open(path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            key = (row["round"], row["submitter"], row["system"], row["benchmark"])
            if key in out:
                raise ValueError(f"{path.name}: {key} twice")
            out[key] = row
    return out


def _flag(text: str) -> bool | None:
    return {"True": True, "False": False}.get((text or "").strip())


def with_layout(row: Row, layout: dict[str, str] | None) -> list[str]:
    """Fill ``row`` from its system's configuration (tp, pp, cp, virtual_pipeline, micro_batch,
    precision, sequence_parallel, tp_comm_overlap; dp = N / (tp pp cp)); returns the names it
    derived. The result log's global batch stays (a launch may override the script's MINIBS)."""
    if layout is None:
        return []
    why = MLPERF_LAYOUT_LEFT_OUT.get((row["mlperf_version"], row["system"], row["benchmark"])) \
        or MLPERF_BENCHMARK_LEFT_OUT.get(row["benchmark"])
    if layout["precision"] not in JOINED_PRECISIONS or why:
        why = why or f"{layout['precision'].upper()}, a precision the step model does not price"
        row["notes"] = "; ".join(filter(None, [row.get("notes"), (
            f"layout stated in data/raw/mlperf_configs/layouts.csv ({layout['config_path']})"
            f" not joined: {why}")]))
        return []
    row.update(tp=int(layout["tp"]), pp=int(layout["pp"]), cp=int(layout["cp"]),
               dp=int(layout["dp"]), micro_batch=int(layout["micro_batch"]),
               virtual_pipeline=int(layout["virtual_pipeline"]),
               precision=layout["precision"] or None,
               sequence_parallel=_flag(layout["sequence_parallel"]),
               tp_comm_overlap=_flag(layout["tp_comm_overlap"]),
               layout_source=(f"{layout['repository']}@{layout['commit'][:12]} "
                              f"{layout['config_path']} (read: {layout['files_read']})"))
    if row["dp"] * row["tp"] * row["pp"] * row["cp"] != row["n_accelerators"]:
        raise ValueError(f"{row['system']}: layout does not multiply to N")
    return [d for d in layout["derived"].split(";") if d in ("dp", "precision")]


def mlperf_cluster(system_name: str) -> str | None:
    """``gb200-nvl72``/``gb300-nvl72`` (data/catalog/clusters.csv: one NVLink domain of 72 GPUs)
    where the system description's ``system_name`` says the machine is built of such racks
    ("Tyche (8x NVIDIA GB200 NVL72)", "SRS-GB300-NVL72-M1 (...)"); else None (the 4-GPU
    ``accelerators_per_node`` of a GB200 tray would be taken as its NVLink domain)."""
    m = re.search(r"\b(GB[23]00)[ -]NVL72\b", system_name or "")
    return f"{m.group(1).lower()}-nvl72" if m else None


def convert_mlperf(refs: list[dict[str, str]],
                   layouts: dict[LayoutKey, dict[str, str]] | None = None) -> list[Row]:
    """One row per LLM-benchmark run; re-published duplicates (``dup_of`` set) are dropped;
    a run whose system's configuration ``layouts`` states gets its layout (``with_layout``)."""
    layouts = read_layouts() if layouts is None else layouts
    out = []
    for line, ref in enumerate(refs, 1):
        if ref["benchmark"] not in MLPERF_LLM or ref["dup_of"]:
            continue
        model, params_b, pretraining = MLPERF_LLM[ref["benchmark"]]
        version = ref["version"]
        gbs, seq = num(ref["global_batch_size"]), integer(ref["max_sequence_length"])
        step = num(ref["step_time_s_median"])
        samples_per_s = num(ref["samples_per_s_step"])
        ttt_min, score_min = num(ref["time_to_train_min"]), num(ref["olympic_score_min"])
        row: Row = {
            "source": "mlperf_training",
            "citation": f"mlcommons/training_results_{version} {ref['path']}",
            "model": model, "params_b": params_b, "seq_len": seq,
            "accelerator": ref["accelerator_model"] or None,
            "n_accelerators": integer(ref["n_accelerators"]),
            "global_batch_tokens": gbs * seq if gbs and seq else None,
            "step_time_s": step, "time_to_train_s": None if ttt_min is None else ttt_min * 60.0,
            "status": MLPERF_STATUS[ref["run_status"]],
            "record_kind": "run", "evidence": "mlperf_result_log",
            "reference_row": f"mlperf_results.csv:{line}",
            "accelerator_as_published": ref["accelerator_model"],
            "benchmark": ref["benchmark"], "mlperf_version": version,
            "submitter": ref["submitter"], "system": ref["system"],
            "olympic_score_s": None if score_min is None else score_min * 60.0,
            "accelerators_per_node": integer(ref["accelerators_per_node"]),
            "global_batch_sequences": None if gbs is None else int(gbs),
            "samples_per_s": samples_per_s,
            "init_s": None if not ref["init_min"] else float(ref["init_min"]) * 60.0,
            "eval_time_s": None if not ref["eval_time_min"] else float(ref["eval_time_min"]) * 60.0,
            "result_path": ref["path"], "log_sha1": ref["log_sha1"] or None,
            "framework": ref["framework"].strip() or None,
        }
        derived = ["params_b"]  # from the benchmark's reference model, not from the log
        notes = []
        if row["global_batch_tokens"] is not None:
            derived.append("global_batch_tokens")
        if samples_per_s is not None:
            derived.append("samples_per_s")
            if pretraining and seq:
                row["tokens_per_s"] = round(samples_per_s * seq, 1)
                derived.append("tokens_per_s")
        if not pretraining:
            notes.append("tokens_per_s left empty: LoRA fine-tuning on padded sequences, not"
                         " comparable with pretraining tokens")
        if ref["run_status"] == "missing_file":
            notes.append("result log absent from the copied tree (file >= 4 MiB)")
        row["notes"] = "; ".join(notes) or None
        row["cluster"] = mlperf_cluster(ref["system_name"])
        derived += with_layout(row, layouts.get(
            (version, ref["submitter"], ref["system"], ref["benchmark"])))
        out.append(with_derived(row, *derived))
    return out


# --- driver -----------------------------------------------------------------------------------


def with_framework(rows: list[Row]) -> list[Row]:
    """Each row's ``framework``: its source's (``SOURCE_FRAMEWORK``), unless already set."""
    for row in rows:
        if row.get("framework") is None:
            row["framework"] = SOURCE_FRAMEWORK.get(row["source"])
        words, stack = MEGATRON2021_BASELINE
        if row["source"] == "megatron2021" and words in (row.get("strategy") or ""):
            row["framework"] = stack
    return rows


def with_software_facts(rows: list[Row]) -> list[Row]:
    """Each row's kernel facts (``SOURCE_KERNELS``; ``OWN_STACK_ONLY`` ones only on the rows of
    the source's own software, not on its baselines of other stacks) and its ``cluster``
    (``SOURCE_CLUSTER``), unless already set."""
    for row in rows:
        own = row.get("framework") == SOURCE_FRAMEWORK.get(row["source"])
        for name, value in SOURCE_KERNELS.get(row["source"], {}).items():
            if row.get(name) is None and (own or name not in OWN_STACK_ONLY):
                row[name] = value
        if row.get("cluster") is None:
            row["cluster"] = SOURCE_CLUSTER.get(row["source"])
    return rows


def _more_labs() -> Any:
    """``scripts/transcribe_more_labs.py`` (the seven further labs), loaded by its path."""
    spec = importlib.util.spec_from_file_location(
        "transcribe_more_labs", Path(__file__).with_name("transcribe_more_labs.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def converted(ref_dir: Path) -> dict[str, list[Row]]:
    """Output file name -> its rows, for every source (the more-labs tables last)."""
    out = {name: with_software_facts(with_framework(rows))
           for name, rows in _converted(ref_dir).items()}
    out.update(_more_labs().converted(ref_dir))
    return out


def _converted(ref_dir: Path) -> dict[str, list[Row]]:
    r: Callable[[str], list[dict[str, str]]] = lambda name: read_reference(ref_dir, name)
    figures = r("ultrascale_playbook2025.csv")
    return {
        "fernandez2024.csv": convert_fernandez2024(r("fernandez2024.csv")),
        "megatron2021.csv": convert_megatron2021(r("megatron2021.csv")),
        "llama3.csv": convert_llama3(r("llama3.csv")),
        "palm2022.csv": convert_palm2022(r("palm2022.csv")),
        "opt2022.csv": convert_single("opt2022", "A100 80GB", 3, r("opt2022.csv"), "opt2022.csv"),
        "bloom2022.csv": convert_single("bloom2022", "A100 80GB", 1, r("bloom2022.csv"),
                                        "bloom2022.csv", stated=_bloom_as_run),
        "torchtitan2024.csv": convert_torchtitan2024(r("torchtitan2024.csv")),
        "nvidia_dgxc2024.csv": convert_nvidia_dgxc2024(r("nvidia_dgxc2024.csv")),
        "ultrascale_playbook2025.csv": convert_playbook_figures(figures),
        "ultrascale_playbook2025_all_configs.csv": convert_playbook_all_configs(
            r("ultrascale_playbook2025_all_configs.csv"), figures),
        "mlperf_training.csv": convert_mlperf(r("mlperf_results.csv")),
    }


def columns_for(rows: Iterable[Row]) -> list[str]:
    """Format-v1 columns (all of them), then the extra columns some row fills, in fixed order."""
    rows = list(rows)
    used = {k for row in rows for k, v in row.items() if v is not None}
    unknown = used - set(V1_COLUMNS) - set(EXTRA_COLUMNS)
    if unknown:
        raise ValueError(f"undocumented columns: {sorted(unknown)}")
    return list(V1_COLUMNS) + [c for c in EXTRA_COLUMNS if c in used]


def render(rows: list[Row]) -> str:
    """The CSV text of ``rows`` (deterministic: fixed columns, row order as converted)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    cols = columns_for(rows)
    writer.writerow(cols)
    for row in rows:
        writer.writerow([fmt(row.get(c)) for c in cols])
    return buf.getvalue()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, rows in converted(args.reference).items():
        (args.out / name).write_text(render(rows), encoding="utf-8")
        print(f"{name}: {len(rows)} rows")


if __name__ == "__main__":
    main()
