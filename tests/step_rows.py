"""The step model's inputs for GPT-3 175B rows on A100 (``rows_of`` on a bare model: the
catalog's hardware, no fitted values), for tests that price one layout several ways."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pipeline.calibrate.estimate import bare_model
from pipeline.calibrate.step import Rows, rows_of

CATALOG = Path(__file__).resolve().parents[1] / "data" / "catalog"
LATENCY = {"kernel_latency_s": 3e-6, "scaleup_latency_s": 2e-6}


def gpt3_175b_rows(catalog, n: int, **columns) -> Rows:
    """``n`` rows of GPT-3 175B (96 layers, d 12,288, 2,048-token sequences) on A100-SXM4-80GB;
    ``columns`` give the layout, each a scalar (every row) or a list of ``n`` values."""
    model = bare_model(catalog, CATALOG, LATENCY, True, 128.0)
    base = {"model_id": "gpt3-175b", "params": 1.75e11, "n_layers": 96, "d_model": 12288,
            "accelerator": "A100-SXM4-80GB", "seq_len": 2048}
    frame = pd.DataFrame({k: v if isinstance(v, list) else [v] * n
                          for k, v in {**base, **columns}.items()})
    return rows_of(frame, model)


def deepseek_v3_rows(catalog, n: int, **columns) -> Rows:
    """``n`` rows of DeepSeek-V3 (the catalog's shape: 61 layers, 58 with 256 routed experts of
    width 2,048, top-8) on H100-SXM5-80GB at 4,096-token sequences; ``columns`` as above."""
    model = bare_model(catalog, CATALOG, LATENCY, True, 128.0)
    base = {"model_id": "deepseek-v3", "params": 6.71e11, "active_params": 3.7e10,
            "n_layers": 61, "d_model": 7168, "accelerator": "H100-SXM5-80GB", "seq_len": 4096}
    frame = pd.DataFrame({k: v if isinstance(v, list) else [v] * n
                          for k, v in {**base, **columns}.items()})
    return rows_of(frame, model)
