"""Series formation: grouping, strong/weak labels from the batch policy, y metric, ids."""

from __future__ import annotations

from typing import Any

from pipeline.ingest.core.series import assign_series, slug
from pipeline.ingest.contract import RUN_COLUMN_NAMES


def _run(n: int, gbt: float | None, **kw: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(RUN_COLUMN_NAMES)
    row.update(source="paper", model="GPT 175B", model_id=None, accelerator="A100-SXM4-80GB",
               precision="bf16", strategy_family="fsdp", status="ok", n_accelerators=n,
               global_batch_tokens=gbt, model_flops_per_s=1e15 * n, tokens_per_s=1e4 * n,
               _series=None)
    row.update(kw)
    return row


def test_fixed_batch_is_strong_and_growing_batch_is_weak() -> None:
    strong = [_run(n, 4e6) for n in (64, 128, 256)]
    weak = [_run(n, 1e4 * n, accelerator="H100-SXM5-80GB") for n in (64, 128, 256)]
    table = assign_series(strong + weak)
    assert {r["scaling"] for r in strong} == {"strong"}
    assert {r["scaling"] for r in weak} == {"weak"}
    assert all("scaling" in r["derived"].split(";") for r in strong + weak)
    assert strong[0]["series_id"] == "paper/gpt-175b/A100-SXM4-80GB/bf16/fsdp/strong"
    assert weak[0]["series_id"] == "paper/gpt-175b/H100-SXM5-80GB/bf16/fsdp/weak"
    assert [(s["series_id"].split("/")[-1], s["n_points"], s["n_min"], s["n_max"], s["y_metric"])
            for s in table] == [("strong", 3, 64, 256, "model_flops_per_s"),
                                ("weak", 3, 64, 256, "model_flops_per_s")]


def test_mixed_batches_split_into_strong_series() -> None:
    runs = [_run(64, 4e6), _run(128, 4e6), _run(64, 8e6), _run(128, 8e6), _run(256, 2e6)]
    table = assign_series(runs)
    ids = sorted({r["series_id"] for r in runs})
    assert ids == ["paper/gpt-175b/A100-SXM4-80GB/bf16/fsdp/strong/gbt-2000000",
                   "paper/gpt-175b/A100-SXM4-80GB/bf16/fsdp/strong/gbt-4000000",
                   "paper/gpt-175b/A100-SXM4-80GB/bf16/fsdp/strong/gbt-8000000"]
    # the single-N group keeps its id but is no series of series.parquet
    assert [s["n_distinct"] for s in table] == [2, 2]


def test_unknown_batch_and_source_labels() -> None:
    unknown = [_run(n, None) for n in (8, 16)]
    given = [_run(n, None, scaling="weak", model="Other") for n in (8, 16)]
    assign_series(unknown + given)
    assert {r["scaling"] for r in unknown} == {"unknown"}
    assert {r["scaling"] for r in given} == {"weak"} and given[0]["derived"] is None
    assert unknown[0]["series_id"].endswith("/unknown")


def test_explicit_series_overrides_grouping_and_y_metric_falls_back() -> None:
    a = _run(8, 1e6, _series="table2:175b", model="GPT 175B")
    b = _run(16, 1e6, _series="table2:175b", model="GPT-3 175B", model_flops_per_s=None)
    table = assign_series([a, b])
    assert a["series_id"] == b["series_id"] == "paper/table2-175b"
    assert table[0]["y_metric"] == "tokens_per_s"  # model FLOP/s missing on one run


def test_failed_and_measureless_runs_get_no_series() -> None:
    ok = [_run(n, 4e6) for n in (8, 16)]
    oom = _run(32, 4e6, status="oom", model_flops_per_s=None, tokens_per_s=None)
    no_y = _run(64, 4e6, model_flops_per_s=None, tokens_per_s=None, mfu=0.4)
    table = assign_series(ok + [oom, no_y])
    assert oom["series_id"] is None and no_y["series_id"] is None
    assert table[0]["n_points"] == 2 and table[0]["n_max"] == 16


def test_slug() -> None:
    assert slug("GPT (1.7B; 24 layers)") == "gpt-1.7b-24-layers"
    assert slug("A100-SXM4-80GB", lower=False) == "A100-SXM4-80GB"
    assert slug("///") == "na"


def test_mlperf_rounds_and_submitters_form_separate_series() -> None:
    """MLPerf: GBS is the submitter's choice per system. A batch that grows with N is labelled
    weak; runs of another round or submitter never join the series."""
    def ml(n: int, gbt: float, version: str, submitter: str = "nvidia") -> dict[str, Any]:
        return _run(n, gbt, source="mlperf_training", submitter=submitter, mlperf_version=version,
                    precision=None, strategy_family="unknown")
    v40 = [ml(512, 2 ** 22, "v4.0"), ml(1024, 2 ** 23, "v4.0")]
    v41 = [ml(512, 2 ** 22, "v4.1"), ml(2048, 2 ** 22, "v4.1")]
    other = [ml(512, 2 ** 22, "v4.0", submitter="google")]
    table = assign_series(v40 + v41 + other)
    assert v40[0]["series_id"] == ("mlperf_training/nvidia/v4.0/gpt-175b/A100-SXM4-80GB/"
                                   "unstated/unknown/weak")
    assert {r["series_id"] for r in v40} & {r["series_id"] for r in v41 + other} == set()
    assert {r["scaling"] for r in v41} == {"strong"}
    assert [(s["series_id"].split("/")[2], s["scaling"], s["n_min"], s["n_max"])
            for s in table] == [("v4.0", "weak", 512, 1024), ("v4.1", "strong", 512, 2048)]
