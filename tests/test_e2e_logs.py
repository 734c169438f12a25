"""Issue 5's promise end to end: a folder of Megatron-LM logs at several N with a run.yaml,
dropped into the logs folder, becomes runs, one strong-scaling series, and fitted laws."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipeline.config import PROJ_ROOT, load_params
from pipeline.ingest import stage as ingest_stage
from pipeline.fit import stage as fit_stage

# Reruns whole stages (compare, report) or reads every real trace: slow.
pytestmark = pytest.mark.slow

# Strong scaling at a fixed global batch of 128 sequences of 4096 tokens (TP 2): the step time
# per N follows an Amdahl-like curve, so the per-GPU throughput falls as N grows.
STEP_TIME_MS = {16: 9200.0, 32: 4800.0, 64: 2600.0, 128: 1500.0}
GLOBAL_BATCH, SEQ_LEN, TP = 128, 4096, 2


def megatron_log(n: int, step_ms: float, steps: int = 12) -> str:
    """A Megatron-LM console log in the layout of ``training_log()`` (fixture megatron/)."""
    dp = n // TP
    head = [
        f"using world size: {n}, data-parallel size: {dp}, context-parallel size: 1, "
        f"tensor-model-parallel size: {TP}, pipeline-model-parallel size: 1",
        "------------------------ arguments ------------------------",
        "  bf16 ............................................ True",
        f"  data_parallel_size .............................. {dp}",
        f"  global_batch_size ............................... {GLOBAL_BATCH}",
        "  hidden_size ..................................... 4096",
        "  micro_batch_size ................................ 1",
        "  num_layers ...................................... 32",
        "  pipeline_model_parallel_size .................... 1",
        f"  seq_length ...................................... {SEQ_LEN}",
        f"  tensor_model_parallel_size ...................... {TP}",
        f"  world_size ...................................... {n}",
        "-------------------- end of arguments ---------------------",
        "training ...",
    ]
    lines = []
    for i in range(1, steps + 1):
        ms = step_ms * (3.0 if i == 1 else 1.0 + 0.002 * (i % 3))  # first step: warm-up
        lines.append(
            f" [2025-08-01 07:{19 + i // 20:02d}:{(3 * i) % 60:02d}] iteration {i:8d}/    5000 | "
            f"consumed samples: {GLOBAL_BATCH * i:12d} | elapsed time per iteration (ms): "
            f"{ms:.1f} | learning rate: 1.0E-05 | global batch size: {GLOBAL_BATCH:5d} | "
            f"lm loss: {10.0 - 0.1 * i:.6E} | loss scale: 1.0 | grad norm: 1.234 | "
            "number of skipped iterations:   0 | number of nan iterations:   0 |")
    return "\n".join(head + lines) + "\n"


@pytest.fixture
def sweep_outputs(tmp_path: Path) -> Path:
    job = tmp_path / "logs" / "llama3-8b-sweep"
    job.mkdir(parents=True)
    (job / "run.yaml").write_text("accelerator: H100-SXM5-80GB\nmodel: llama3-8b\n")
    for n, ms in STEP_TIME_MS.items():
        (job / f"n{n}.log").write_text(megatron_log(n, ms))
    params = load_params()
    params["ingest"]["mlperf_roots"] = []
    out = tmp_path / "processed"
    (tmp_path / "published").mkdir()
    ingest_stage.run(params, published_dir=tmp_path / "published", logs_dir=tmp_path / "logs",
                     catalog_dir=PROJ_ROOT / "data" / "catalog", out_dir=out,
                     metrics_path=tmp_path / "ingest.json")
    fit_stage.run(params, processed_dir=out, out_dir=out,
                  metrics_path=tmp_path / "fit.json", plots_dir=tmp_path / "plots")
    return out


def test_a_dropped_log_folder_becomes_runs_a_series_and_fits(sweep_outputs: Path) -> None:
    runs = pd.read_parquet(sweep_outputs / "runs.parquet")
    assert sorted(runs["n_accelerators"]) == sorted(STEP_TIME_MS)
    assert set(runs["source_kind"]) == {"log"}
    assert set(runs["tp"]) == {TP}
    # Median steady-state step time with the 3x warm-up step dropped: steps 2..12 carry factors
    # 1.000 / 1.002 / 1.004 in turn, whose median is 1.002.
    by_n = runs.set_index("n_accelerators")
    for n, ms in STEP_TIME_MS.items():
        assert by_n.loc[n, "step_time_s"] == pytest.approx(ms * 1.002 / 1000, rel=1e-9)
        assert by_n.loc[n, "tokens_per_s"] == pytest.approx(
            GLOBAL_BATCH * SEQ_LEN / by_n.loc[n, "step_time_s"], rel=1e-9)
    assert runs["mfu"].between(0, 1, inclusive="right").all()  # derived by the ingest core

    series = pd.read_parquet(sweep_outputs / "series.parquet")
    assert len(series) == 1
    s = series.iloc[0]
    assert (s["n_distinct"], s["n_min"], s["n_max"], s["scaling"]) == (4, 16, 128, "strong")
    assert runs["series_id"].eq(s["series_id"]).all()

    fits = pd.read_parquet(sweep_outputs / "fits.parquet")
    mine = fits[fits["series_id"] == s["series_id"]]
    assert set(mine["law"]) >= {"power", "amdahl", "usl", "comm"}
    assert mine["converged"].any() and (mine["n_points"] == 4).all()
    # golden: the power law on log throughput is the least-squares line through log y, log N
    power = mine.set_index("law").loc["power"]
    assert power["converged"] and power["y_metric"] == s["y_metric"]
    y = by_n[s["y_metric"]].astype(float).sort_index()
    slope, intercept = np.polyfit(np.log(y.index.to_numpy(float)), np.log(y.to_numpy()), 1)
    fitted = json.loads(power["params"])
    assert fitted["b"] == pytest.approx(slope, rel=1e-6)
    assert fitted["a"] == pytest.approx(np.exp(intercept), rel=1e-6)
    assert fitted["b"] < 1  # diminishing returns: the step time falls slower than 1/N
    extrapolation = pd.read_parquet(sweep_outputs / "extrapolation.parquet")
    held = extrapolation[(extrapolation["series_id"] == s["series_id"])
                         & (extrapolation["law"] == "power")]
    # k=1 holds out N=128, k=2 N=64 and 128; each scored against its measured value
    assert sorted(held.loc[held["k"] == 1, "n_target"]) == [128]
    assert sorted(held.loc[held["k"] == 2, "n_target"]) == [64, 128]
    for _, row in held.iterrows():
        assert row["actual"] == pytest.approx(y.loc[row["n_target"]], rel=1e-12)
    # k=1 trains on 3 distinct N (fit.min_distinct_n), k=2 on 2: no fit, nothing predicted
    (k1,) = held[held["k"] == 1].to_dict("records")
    assert k1["ape"] == pytest.approx(abs(k1["predicted"] / k1["actual"] - 1), rel=1e-9)
    assert k1["pi_low"] <= k1["predicted"] <= k1["pi_high"]
    assert held.loc[held["k"] == 2, "predicted"].isna().all()
