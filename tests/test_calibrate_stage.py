"""The calibrate stage on the synthetic upstream: contract columns, shares, determinism, and
its outputs' contracts in pipeline/calibrate/contract.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipeline.calibrate.contract import CALIBRATED_SHARES as SHARES
from pipeline.calibrate.holdout import COLUMNS
from pipeline.calibrate.stage import run
from pipeline.schema import ContractError, check_metrics, check_output
from synthetic_upstream import build

# Reruns the calibrate stage (and compare and report for the last two tests): slow.
pytestmark = pytest.mark.slow

CATALOG = Path(__file__).resolve().parents[1] / "data" / "catalog"


def _run(root: Path, params: dict) -> Path:
    paths = build(root / "processed", root / "metrics")
    run(params, processed_dir=paths["processed"], catalog_dir=CATALOG,
        out_dir=paths["processed"], metrics_path=paths["metrics"] / "calibrate.json",
        plots_dir=root / "plots")
    return paths["processed"]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> Path:
    """The calibrate outputs of the session's one downstream run (``shared_downstream``: the
    synthetic upstream, then calibrate, compare and report): these tests only read them."""
    from synthetic_upstream import shared_downstream
    return shared_downstream(tmp_path_factory)["processed"]


def test_contract_columns(outputs: Path) -> None:
    cal = pd.read_parquet(outputs / "calibration.parquet")
    assert {"parameter", "group", "estimate", "stderr", "ci_low", "ci_high", "n_runs"} <= set(cal)
    eff = cal[cal["group"] == "efficiency"]
    assert (eff["ci_low"].dropna() <= eff["estimate"][eff["ci_low"].notna()]).all()
    runs = pd.read_parquet(outputs / "calibrated.parquet")
    shares = [f"share_{s}" for s in SHARES]
    assert {"run_id", "source", "series_id", "n_accelerators", "measured_mfu", "predicted_mfu",
            "pi_low", "pi_high", *shares} <= set(runs)
    np.testing.assert_allclose(runs[shares].sum(axis=1), 1.0, atol=1e-12)
    assert (runs["pi_low"] <= runs["predicted_mfu"]).all()
    assert (runs["pi_high"] <= runs["ceiling_mfu"] * (1 + 1e-9)).all()
    pred = pd.read_parquet(outputs / "predictions.parquet")
    assert set(COLUMNS) <= set(pred)
    assert {"largest_k1", "largest_k2", "source"} <= set(pred["holdout"])
    assert {"naive_linear", "naive_loglinear", "calibrated", "selected", "family_median",
            "power"} <= set(pred["predictor"])
    scored = pred[pred["predicted"].notna()]
    np.testing.assert_allclose(scored["ape"], (scored["predicted"] - scored["actual"]).abs()
                               / scored["actual"])


def test_selected_is_one_fixed_rule(outputs: Path) -> None:
    """In largest_k, selected equals calibrated where the series states its layout, else the
    naive rule; never a per-point choice of the better one."""
    pred = pd.read_parquet(outputs / "predictions.parquet")
    key = ["holdout", "series_id", "run_id"]
    wide = pred[pred["holdout"].str.startswith("largest")].pivot_table(
        index=key, columns="predictor", values="predicted", aggfunc="first")
    flags = pred[pred["predictor"] == "calibrated"].set_index(key)["assumed_layout"]
    assumed = flags.reindex(wide.index).astype("boolean").fillna(True).to_numpy(bool)
    expect = np.where(assumed | wide["calibrated"].isna().to_numpy(),
                      wide["naive_linear"], wide["calibrated"])
    np.testing.assert_allclose(wide["selected"], expect)


def test_stage_is_deterministic(outputs: Path, tmp_path: Path) -> None:
    """A second run on the same inputs and settings (the shared downstream's) writes the same
    bytes."""
    from synthetic_upstream import downstream_params
    again = _run(tmp_path, downstream_params())
    for name in ("calibration", "calibrated", "predictions"):
        assert (again / f"{name}.parquet").read_bytes() == (outputs / f"{name}.parquet").read_bytes()


def test_report_section_rendered(tmp_path_factory) -> None:
    """The report on the synthetic downstream (which runs calibrate) has the section, its
    tables and figures, and the summary headline."""
    from synthetic_upstream import shared_downstream
    out = shared_downstream(tmp_path_factory)
    md = (out["reports"] / "report.md").read_text(encoding="utf-8")
    html = (out["reports"] / "report.html").read_text(encoding="utf-8")
    section = md.split("## What limits measured scaling", 1)[1].split("\n## ", 1)[0]
    appendix = md.split("## Appendix: tables", 1)[1]
    # Long tables live in the appendix (and reports/tables/*.csv); the section keeps the figures.
    assert "| holdout | predictor | cases | median APE |" in appendix
    assert "| largest_k1 | selected |" in appendix and "| source | calibrated |" in appendix
    assert "figures/calibrate_predicted_actual.png" in section
    assert (out["reports"] / "figures" / "calibrate_predicted_actual.png").stat().st_size > 1000
    assert 'id="calibration"' in html and "figures/calibrate_efficiency.png" not in html  # embedded
    # The decomposition is a key finding's figure, shown once (no figure twice).
    findings = md.split("## Key findings", 1)[1].split("\n## ", 1)[0]
    assert "figures/calibrate_decomposition.png" in findings
    assert md.count("figures/calibrate_decomposition.png") == 1


def test_compare_targets_use_selected(tmp_path_factory) -> None:
    """compare's 10k/100k rows carry selected's prediction and interval where it has one."""
    from synthetic_upstream import shared_downstream
    out = shared_downstream(tmp_path_factory)
    sel = pd.read_parquet(out["processed"] / "selected_targets.parquet")
    curves = pd.read_parquet(out["processed"] / "comparison_curves.parquet")
    assert len(sel)
    # fewer than 19 held-out cases to calibrate on: no finite 95% interval (not a made-up one)
    finite = sel["pi_low"].notna()
    assert (sel.loc[finite, "pi_low"] < sel.loc[finite, "predicted"]).all()
    assert (sel.loc[finite, "predicted"] < sel.loc[finite, "pi_high"]).all()
    joined = curves[curves["kind"] == "target"].merge(
        sel, on=["series_id", "n_accelerators"], suffixes=("", "_sel"))
    assert len(joined) == len(sel)
    np.testing.assert_allclose(joined["predicted"], joined["predicted_sel"])
    np.testing.assert_allclose(joined["pi_high"], joined["pi_high_sel"])  # NaN == NaN here
    assert joined["predictor"].str.startswith("selected:").all()


def test_outputs_pass_their_contracts_and_broken_ones_are_refused(outputs: Path) -> None:
    import json

    for name in ("calibration", "calibrated", "calibrated_forms", "predictions",
                 "calibrated_frontier", "selected_targets"):
        check_output(f"{name}.parquet", pd.read_parquet(outputs / f"{name}.parquet"))
    runs = pd.read_parquet(outputs / "calibrated.parquet")
    # a share moved without the residual taking it back: the shares no longer sum to 1
    bad = runs.assign(share_net_dp=runs["share_net_dp"] + 0.1)
    with pytest.raises(ContractError, match="calibrated.parquet.*shares do not sum to 1"):
        check_output("calibrated.parquet", bad)
    pred = pd.read_parquet(outputs / "predictions.parquet")
    with pytest.raises(ContractError, match="predictions.parquet.*'holdout'"):
        check_output("predictions.parquet", pred.assign(holdout="largest_kx"))
    sel = pd.read_parquet(outputs / "selected_targets.parquet")
    flipped = sel.assign(pi_low=sel["pi_high"], pi_high=sel["pi_low"])
    if flipped["pi_low"].notna().any():
        with pytest.raises(ContractError, match="pi_low <= predicted <= pi_high"):
            check_output("selected_targets.parquet", flipped)
    with pytest.raises(ContractError, match="selected_targets.parquet.*'predictor'"):
        check_output("selected_targets.parquet", sel.assign(predictor="oracle"))
    metrics = json.loads((outputs.parent / "metrics" / "calibrate.json").read_text())
    check_metrics("calibrate", metrics)
    del metrics["frontier"][next(iter(metrics["frontier"]))]["knee_flop_calibrated"]
    with pytest.raises(ContractError, match="(?s)calibrate.json.*knee_flop_calibrated"):
        check_metrics("calibrate", metrics)
