"""Issue 11: a user's sweep kept one folder per job (``logs/<campaign>/n8/...``), with a single
``run.yaml`` in the campaign folder, becomes one strong scaling series, fitted; sidecar
``series:`` and ``source:`` work at any level; logs in no series are counted with a reason."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from pipeline.config import PROJ_ROOT, load_params
from pipeline.ingest import stage as ingest_stage
from pipeline.fit import stage as fit_stage
from test_e2e_logs import GLOBAL_BATCH, SEQ_LEN, STEP_TIME_MS, megatron_log
from user_logs_chain import CAMPAIGN, write_job_folders


def _ingest(tmp_path: Path, fit: bool = False) -> tuple[Path, dict]:
    params = load_params()
    params["ingest"]["mlperf_roots"] = []
    params["ingest"]["logs"]["workers"] = 1
    out = tmp_path / "processed"
    (tmp_path / "published").mkdir(exist_ok=True)
    metrics = ingest_stage.run(params, published_dir=tmp_path / "published",
                               logs_dir=tmp_path / "logs",
                               catalog_dir=PROJ_ROOT / "data" / "catalog", out_dir=out,
                               metrics_path=tmp_path / "ingest.json")
    if fit:
        fit_stage.run(params, processed_dir=out, out_dir=out,
                      metrics_path=tmp_path / "fit.json", plots_dir=tmp_path / "plots")
    return out, metrics


@pytest.mark.slow
@pytest.mark.parametrize("gz", [False, True])
def test_job_folders_with_one_campaign_sidecar_form_one_fitted_series(tmp_path: Path,
                                                                      gz: bool) -> None:
    write_job_folders(tmp_path / "logs", gz_largest=gz)
    out, metrics = _ingest(tmp_path, fit=True)
    runs = pd.read_parquet(out / "runs.parquet")
    assert sorted(runs["n_accelerators"]) == sorted(STEP_TIME_MS)
    assert set(runs["source"]) == {f"logs/{CAMPAIGN}"}
    series = pd.read_parquet(out / "series.parquet")
    assert len(series) == 1
    s = series.iloc[0]
    assert (s["n_distinct"], s["n_min"], s["n_max"], s["scaling"]) == (4, 16, 128, "strong")
    assert runs["global_batch_tokens"].eq(GLOBAL_BATCH * SEQ_LEN).all()
    assert metrics["logs_without_series"]["count"] == 0
    fits = pd.read_parquet(out / "fits.parquet")
    mine = fits[fits["series_id"] == s["series_id"]]
    assert mine["converged"].any() and (mine["n_points"] == 4).all()


def test_sidecar_series_and_source_work_at_any_level(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    # Two campaigns, one sweep: `source:` in each campaign's run.yaml joins them.
    for camp, ns in (("cluster-a", (16, 32)), ("cluster-b", (64, 128))):
        (logs / camp).mkdir(parents=True)
        (logs / camp / "run.yaml").write_text(
            "accelerator: H100-SXM5-80GB\nmodel: llama3-8b\nsource: my-sweep\n")
        for n in ns:
            (logs / camp / "jobs" / f"job-{n}").mkdir(parents=True)
            (logs / camp / "jobs" / f"job-{n}" / "out.log").write_text(
                megatron_log(n, STEP_TIME_MS[n]))
    # `series:` in a middle folder names a series of its own within the campaign.
    mid = logs / "cluster-c" / "ablation"
    (logs / "cluster-c").mkdir(parents=True)
    (logs / "cluster-c" / "run.yaml").write_text("accelerator: H100-SXM5-80GB\nmodel: llama3-8b\n")
    mid.mkdir()
    (mid / "run.yaml").write_text("series: no-overlap\n")
    for n in (16, 64):
        (mid / f"n{n}").mkdir()
        (mid / f"n{n}" / "x.log").write_text(megatron_log(n, STEP_TIME_MS[n]))
    out, _ = _ingest(tmp_path)
    runs = pd.read_parquet(out / "runs.parquet")
    by_source = runs.groupby("source")["n_accelerators"].apply(sorted).to_dict()
    assert by_source == {"my-sweep": [16, 32, 64, 128], "logs/cluster-c": [16, 64]}
    series = pd.read_parquet(out / "series.parquet").set_index("series_id")
    assert sorted(series.index) == sorted(
        [runs.loc[runs["source"] == "my-sweep", "series_id"].iloc[0],
         "logs-cluster-c/no-overlap"])
    assert series.loc["logs-cluster-c/no-overlap", "n_distinct"] == 2
    assert runs["series_id"].nunique() == 2


def test_logs_in_no_series_are_counted_with_their_reason(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    logs = tmp_path / "logs"
    camp = logs / "mixed"
    camp.mkdir(parents=True)
    (camp / "run.yaml").write_text("accelerator: H100-SXM5-80GB\nmodel: llama3-8b\n")
    for n in (16, 32, 64):
        (camp / f"n{n}").mkdir()
        (camp / f"n{n}" / "a.log").write_text(megatron_log(n, STEP_TIME_MS[n]))
    # a job on another cluster: it differs from the others in system, so it joins no series
    (camp / "n16" / "a.run.yaml").write_text("system: cluster-x\n")
    (logs / "single").mkdir()
    (logs / "single" / "run.yaml").write_text("accelerator: H100-SXM5-80GB\nmodel: llama3-8b\n")
    (logs / "single" / "only.log").write_text(megatron_log(16, STEP_TIME_MS[16]))
    _, metrics = _ingest(tmp_path)
    alone = metrics["logs_without_series"]
    assert alone["count"] == 2
    assert alone["by_reason"] == {"alone": 1, "differs": 1}
    reasons = {Path(e["path"]).parent.name: e["reason"] for e in alone["logs"]}
    assert reasons["single"].startswith("alone: no log at another N in logs/single")
    assert reasons["n16"].startswith("differs: from ")
    assert reasons["n16"].endswith("(N=32) in system (cluster-x vs None)")
    err = capsys.readouterr().err
    assert "2 step log(s) in no scaling series" in err
    assert "  differs: 1, e.g. " in err and "  alone: 1, e.g. " in err
    written = json.loads((tmp_path / "ingest.json").read_text())
    assert written["logs_without_series"] == alone


@pytest.mark.slow
def test_the_report_opens_with_the_users_series(tmp_path_factory: pytest.TempPathFactory,
                                                tmp_path: Path) -> None:
    """Logs in job folders (the largest gzip-compressed) + one published table of the same
    model size and hardware, through every stage (``user_logs_chain``): the report's first
    section is the user's series, fitted, predicted to 4x and 16x, compared with the published
    series, and starred in the figures."""
    from pipeline.report.data import load
    from pipeline.report.focus import predict_multiples
    from user_logs_chain import focused_report, shared_user_chain

    chain = shared_user_chain(tmp_path_factory)
    out = chain.processed
    md = chain.report_md.read_text()
    first = md.index("\n## ") + 1
    assert md[first:].startswith("## Your runs")
    section = md[first:md.index("## Key findings")]
    sid = pd.read_parquet(out / "series.parquet").query("source == @SOURCE")["series_id"]
    assert len(sid) == 1
    assert f"### ★ {sid.iloc[0]}" in section
    assert "strong scaling, N = 16 to 128 (4 runs)" in section
    assert "At 4x the largest N (N = 512) the " in section
    assert "At 16x the largest N (N = 2,048) the " in section
    assert "nvidia_dgxc2024" in section  # published, same family (H100) and size (8B)
    # the prediction is the fit stage's (fits.parquet), for the law compare drew: not a refit
    pred = predict_multiples(load(out, chain.metrics), sid.iloc[0])
    law = pd.read_parquet(out / "comparison_series.parquet").set_index("series_id").loc[
        sid.iloc[0], "law"]
    fit = pd.read_parquet(out / "fits.parquet").query(
        "series_id == @sid.iloc[0] and law == @law").iloc[0]
    assert [p["n"] for p in pred] == [512.0, 2048.0]
    assert [p["predicted"] for p in pred] == [fit["predicted_at_4x_n_max"],
                                              fit["predicted_at_16x_n_max"]]
    assert all(p["pi_low"] < p["predicted"] < p["pi_high"] for p in pred)
    assert chain.focus.is_file()
    html = chain.report_html.read_text()
    assert html.index('id="yours"') < html.index('id="findings"')

    # `scalewall report --focus SOURCE`: the same section for another source, from the outputs
    md = focused_report(chain, "nvidia_dgxc2024", tmp_path / "again")
    section = md[md.index("## Your runs"):md.index("## Key findings")]
    assert "scaling series of nvidia_dgxc2024" in section
    assert "### ★ nvidia_dgxc2024/nvidia_dgxc2024-8b-bf16" in section
    assert sid.iloc[0] not in section


SOURCE = f"logs/{CAMPAIGN}"


def test_focus_decomposition_prefers_the_calibrated_model() -> None:
    """Where the calibrate stage covered the focus run, its shares and predicted MFU are quoted
    (and drawn); otherwise the theory's decomposition with its ceiling."""
    from types import SimpleNamespace

    from pipeline.report.focus import _decomposition

    shares = {f"share_{k}": 0.0 for k in ("compute", "hbm", "net_tp", "net_dp", "net_pp",
                                          "net_ep", "bubble", "latency", "overhead")}
    cal = pd.DataFrame([dict(run_id="r1", predicted_mfu=0.4, pi_low=0.3, pi_high=0.5,
                             **shares | {"share_compute": 0.6, "share_net_tp": 0.1},
                             share_residual=0.3)])
    comp = pd.DataFrame([dict(run_id="r2", bound_mfu=0.95, share_compute=0.2,
                              share_residual=0.8)])
    d = SimpleNamespace(calibrated=cal, comparison=comp)
    got = _decomposition(d, "r1")
    assert got["model"] == "calibrated" and got["predicted_mfu"] == 0.4
    assert got["shares"] == [{"part": "compute", "share": 0.6},
                             {"part": "residual", "share": 0.3},
                             {"part": "net tp", "share": 0.1}]
    # a negative residual (the model predicts a longer step than measured) is kept
    cal.loc[0, ["share_compute", "share_residual"]] = [1.2, -0.3]
    assert _decomposition(d, "r1")["shares"] == [{"part": "compute", "share": 1.2},
                                                 {"part": "net tp", "share": 0.1},
                                                 {"part": "residual", "share": -0.3}]
    got = _decomposition(d, "r2")
    assert got["model"] == "theory" and got["bound_mfu"] == 0.95
    assert [p["part"] for p in got["shares"]] == ["residual", "compute"]
    assert _decomposition(d, "r3") == {"model": None, "shares": [], "bound_mfu": None}
