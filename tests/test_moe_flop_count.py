"""A source's own FLOP count (NVIDIA's performance summaries print "model TFLOP/s per GPU" on
Megatron-Bridge's count): the calibration converts the MFU read from them to ours, so that the
measured step time is the one the source printed (pipeline/calibrate/estimate.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline.calibrate.estimate import SOURCE_COUNT_TOLERANCE, source_count_ratio

OURS = 36e9 * 4096 * 8 / 64        # our FLOP per rank per step: 36 GFLOP/token, 8 x 4K tokens
                                   # per step over 64 ranks


def _rows(source: str, tokens_per_s: list[float], their_flop_per_token: float) -> pd.DataFrame:
    n = len(tokens_per_s)
    tps = np.array(tokens_per_s)
    return pd.DataFrame({"source": [source] * n, "model": ["GPT OSS 120B"] * n,
                         "seq_len": [4096] * n, "n_accelerators": [64] * n,
                         "global_batch_tokens": [8 * 4096] * n, "tokens_per_s": tps,
                         "model_flops_per_s": tps * their_flop_per_token})


def test_their_count_over_ours_recovers_the_printed_step_time() -> None:
    runs = _rows("megatron_bridge2025", [1e6, 1.2e6, 0.9e6], 27.2e9)
    ratio = source_count_ratio(runs, np.full(len(runs), OURS))
    assert np.allclose(ratio, 27.2 / 36)
    # MFU on their count / ratio = MFU on ours: our FLOP per step over the printed step time
    step_s = runs["global_batch_tokens"] / runs["tokens_per_s"]
    mfu_theirs = runs["model_flops_per_s"] / 64 / 1e15
    assert np.allclose(mfu_theirs / ratio, OURS / step_s / 1e15)


def test_a_misprinted_row_takes_its_groups_count() -> None:
    runs = _rows("megatron_bridge2025", [1e6, 1.1e6, 0.95e6, 1e6], 27.2e9)
    runs.loc[3, "tokens_per_s"] = 0.5e6          # tokens/s misprinted: implies twice the count
    ratio = source_count_ratio(runs, np.full(len(runs), OURS))
    assert abs(27.2e9 * 2 / 36e9 / (27.2 / 36) - 1) > SOURCE_COUNT_TOLERANCE
    assert np.allclose(ratio, 27.2 / 36)


def test_other_sources_and_rows_without_throughput_are_left_alone() -> None:
    runs = pd.concat([_rows("torchtitan2024", [1e6], 27.2e9),
                      _rows("megatron_bridge2025", [1e6], 27.2e9)], ignore_index=True)
    runs.loc[1, "tokens_per_s"] = np.nan
    assert np.allclose(source_count_ratio(runs, np.full(2, OURS)), 1.0)
