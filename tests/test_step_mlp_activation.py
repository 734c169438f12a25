"""The MLP activation's HBM traffic (pipeline/calibrate/critical_path.py MLP_BYTES) and the
catalog's gated/GeLU reading (pipeline/calibrate/step.py _mlp_shape)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from pipeline.calibrate.step import _mlp_shape, rows_of


def test_gated_reading_of_the_catalog(catalog) -> None:
    """Llama 3 (SwiGLU) reads gated; GPT-3 175B (GeLU, f = 4 d) does not."""
    ids = [m for m in catalog.models.index if "llama" in m.lower() and "8b" in m.lower()][:1]
    frame = pd.DataFrame({"model_id": ids + ["gpt3-175b", "no-such-model"]})
    got = _mlp_shape(frame, catalog)
    assert got["gated_mlp"].tolist() == [True, False, False]
    assert got["ffn_size"][1] == 49152 and np.isnan(got["ffn_size"][2])


def test_golden_bytes_per_token(catalog) -> None:
    """GPT-3 175B at tp 8: f / tp = 6144 FFN elements per rank, GeLU 4 + 6 B each = 61,440 B
    per token and layer; full recomputation adds the forward's 4 B again; SwiGLU is 6 + 10."""
    from pipeline.calibrate.estimate import bare_model
    from pathlib import Path
    model = bare_model(catalog, Path(__file__).resolve().parents[1] / "data" / "catalog",
                       {"kernel_latency_s": 3e-6, "scaleup_latency_s": 2e-6}, True, 128.0)
    frame = pd.DataFrame({"model_id": ["gpt3-175b"], "params": [1.75e11], "n_layers": [96],
                          "d_model": [12288], "accelerator": ["A100-SXM4-80GB"],
                          "n_accelerators": [1024], "tp": [8], "pp": [8], "seq_len": [2048],
                          "global_batch_tokens": [3145728], "micro_batch": [1]})
    c = rows_of(frame, model).config
    assert c.mlp_activation_bytes_per_token[0] == pytest.approx(6144 * 10.0)
    full = replace(c, recompute=np.array([2.0]))
    assert full.mlp_activation_bytes_per_token[0] == pytest.approx(6144 * 14.0)
    gated = replace(c, gated_mlp=np.array([True]))
    assert gated.mlp_activation_bytes_per_token[0] == pytest.approx(6144 * 16.0)
    moe = replace(c, expert_fraction=np.array([0.5]))
    assert moe.mlp_activation_bytes_per_token[0] == 0.0


def test_fp8_cast_bytes_golden(catalog) -> None:
    """GPT-3 175B (d 12288, f 49152, GeLU) at tp 8 in FP8: inputs 2d + d/8 + f/8 = 32,256,
    gradients 3d/8 + f/8 + 2d = 35,328 elements, 4 B each = 270,336 B per token and layer;
    nothing in BF16."""
    from pipeline.calibrate.estimate import bare_model
    from pathlib import Path
    model = bare_model(catalog, Path(__file__).resolve().parents[1] / "data" / "catalog",
                       {"kernel_latency_s": 3e-6, "scaleup_latency_s": 2e-6}, True, 128.0)
    frame = pd.DataFrame({"model_id": ["gpt3-175b"] * 2, "params": [1.75e11] * 2,
                          "n_layers": [96] * 2, "d_model": [12288] * 2,
                          "accelerator": ["H100-SXM5-80GB"] * 2, "n_accelerators": [1024] * 2,
                          "tp": [8] * 2, "pp": [8] * 2, "seq_len": [2048] * 2,
                          "global_batch_tokens": [3145728] * 2, "micro_batch": [1] * 2,
                          "precision": ["fp8", "bf16"]})
    c = rows_of(frame, model).config
    assert c.fp8_cast_bytes_per_token.tolist() == pytest.approx([270336.0, 0.0])
