"""Mixture of experts end to end: a NeMo 2 Qwen3-30B-A3B log with the documented sidecar keys,
the same run stated on its total parameters (rejected), and the catalog's MoE FLOP count.

The log is built from issue 32's figures (tests/fixtures/moe/ORIGIN.md): 16 H100, PP 2,
EP 8, the log's own 85.8 TFLOP/s per GPU = 8.67 % of the 989.5 TFLOP/s bf16 peak.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.catalog import load_catalog
from pipeline.config import load_params
from pipeline.ingest.sources.steplogs.reader import read_logs
from pipeline.ingest.stage import convert, read_options

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "moe"
LOG = "qwen3_30b_a3b_nemo2.log"
PEAK_BF16 = 989.5e12
LOG_MFU = 85.8e12 / PEAK_BF16      # what the log's own TFLOP/s imply: 0.0867


def _ingest(folder: Path):
    params = load_params()
    records, _ = read_logs(folder, params)
    options, _ = read_options(params)
    runs, rejects, _ = convert(iter(records), load_catalog(ROOT / "data" / "catalog"), options)
    return runs, rejects


def test_qwen3_log_with_documented_sidecar_gets_the_logs_own_mfu() -> None:
    runs, rejects = _ingest(FIXTURE)
    assert not rejects
    (run,) = runs
    assert run["model_id"] == "qwen3-30b-a3b"
    assert (run["active_params"], run["n_experts"], run["top_k"], run["ep"]) == (3.3e9, 128, 8, 8)
    assert run["mfu"] == pytest.approx(LOG_MFU, rel=0.10)        # the target
    assert run["mfu"] == pytest.approx(0.0867, abs=5e-4)         # the printed TFLOP/s, median


def test_same_log_stated_on_total_params_is_rejected_naming_active_params(tmp_path) -> None:
    """Without the log's TFLOP/s and with only the 30.5 B total, the FLOP would count every
    expert: MFU ~0.9 on H100, above the highest measured, a reject naming the key."""
    text = (FIXTURE / LOG).read_text().replace(" | TFLOPS_per_GPU:", " | other:")
    (tmp_path / LOG).write_text(text)
    (tmp_path / "run.yaml").write_text(
        "accelerator: H100-SXM5-80GB\nn_accelerators: 16\nparams_b: 30.5\nn_layers: 48\n"
        "d_model: 2048\nseq_len: 4096\npp: 2\nep: 8\nprecision: bf16\n")
    runs, rejects = _ingest(tmp_path)
    assert not runs
    (reject,) = rejects
    assert "implausible" in reject["reason"] and "active_params_b" in reject["reason"]


def test_same_log_with_active_params_from_the_sidecar_is_kept(tmp_path) -> None:
    """The unnamed run with ``active_params_b`` (no TFLOP/s printed): MFU on 3.3 B active plus
    attention, 6 x 3.3e9 + 12 x 48 x 2048 x 4096 FLOP per token at 512 x 4096 tokens per
    26.9 s step on 16 GPUs."""
    text = (FIXTURE / LOG).read_text().replace(" | TFLOPS_per_GPU:", " | other:")
    (tmp_path / LOG).write_text(text)
    (tmp_path / "run.yaml").write_text(
        "accelerator: H100-SXM5-80GB\nn_accelerators: 16\nparams_b: 30.5\nactive_params_b: 3.3\n"
        "n_experts: 128\ntop_k: 8\nn_layers: 48\nd_model: 2048\nseq_len: 4096\npp: 2\nep: 8\n"
        "precision: bf16\n")
    (run,), rejects = _ingest(tmp_path)
    assert not rejects and (run["n_experts"], run["top_k"]) == (128, 8)
    per_token = 6 * 3.3e9 + 12 * 48 * 2048 * 4096
    tokens_per_gpu_s = 512 * 4096 / 16 / run["step_time_s"]
    assert run["step_time_s"] == pytest.approx(26.9, abs=0.05)
    assert run["mfu"] == pytest.approx(per_token * tokens_per_gpu_s / PEAK_BF16, rel=1e-6)


def test_sidecar_top_k_above_experts_is_rejected(tmp_path) -> None:
    shutil.copy(FIXTURE / LOG, tmp_path / LOG)
    (tmp_path / "run.yaml").write_text(
        "accelerator: H100-SXM5-80GB\nn_accelerators: 16\nmodel: Qwen3-30B-A3B\nn_experts: 4\n"
        "top_k: 8\npp: 2\nep: 4\nseq_len: 4096\nprecision: bf16\n")
    runs, rejects = _ingest(tmp_path)
    assert not runs and "top_k 8 > n_experts 4" in rejects[0]["reason"]
