"""Headline metrics (the files `dvc metrics show` prints) and the one-line stage summaries."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.headline import headline, summary_line, write_headline

FIT = {"n_series": 503, "n_series_fitted": 347, "n_series_extrapolated": 200,
       "default_law": "amdahl", "default_law_scores": {"amdahl": 0.253502893741, "power": 0.43}}
THEORY = {"_bounds": {"runs": 5588, "with_bound": 5408},
          "a100": {"knee_flop": 1e27, "wall_flop": 1e30},
          "baseline": {"knee_flop": 1.22190386082e28, "wall_flop": 2.09107866198e31}}
COMPARE = {"n_runs": 4080, "n_runs_with_bound": 1806, "n_series": 503,
           "strong_median_efficiency_at_n_max": 0.4936117927,
           "strong_median_n_at_threshold_law": 256.245302167}
CALIBRATE = {"form": "full_launch", "fit_runs": 1804, "in_sample": {"median_ape": 0.587150939081},
             "predictors": [
                 {"holdout": "largest_k2", "predictor": "selected", "source": "all",
                  "median_ape": 0.33, "coverage": 0.97},
                 {"holdout": "largest_k1", "predictor": "selected", "source": "llama3",
                  "median_ape": 0.1, "coverage": 1.0},
                 {"holdout": "largest_k1", "predictor": "calibrated", "source": "all",
                  "median_ape": 0.51, "coverage": 0.9},
                 {"holdout": "largest_k1", "predictor": "selected", "source": "all",
                  "median_ape": 0.503456747686, "coverage": 0.908333333333}]}


def test_headlines_are_few_short_keys_at_four_digits(tmp_path: Path) -> None:
    assert headline("fit", FIT) == {"fitted": 347, "law": "amdahl", "heldout_ape": 0.2535,
                                    "e_tok_x2": None}
    with_energy = FIT | {"energy": {"cross_series": {"energy_j_per_token": {
        "doubling_factor": 1.0895, "n_level_doubling_factor": 1.08951716835}}}}
    assert headline("fit", with_energy)["e_tok_x2"] == 1.09
    assert headline("theory", THEORY) == {"knee_flop": 1.222e28, "wall_flop": 2.091e31}
    assert headline("compare", COMPARE) == {"eff_at_n_max": 0.4936, "n_at_threshold": 256.2}
    # calibrate: selected over all sources in largest_k1, not another row
    assert headline("calibrate", CALIBRATE) == {"sel_ape": 0.5035, "sel_cov": 0.9083}
    assert headline("calibrate", {}) == {"sel_ape": None, "sel_cov": None}
    assert headline("ingest", {"totals": {"runs": 5, "rejects": 1, "series": 1}}) == {
        "runs": 5, "rejects": 1, "series": 1}
    src = tmp_path / "fit.json"
    src.write_text(json.dumps(FIT))
    write_headline("fit", src, tmp_path / "h" / "fit.json")
    assert json.loads((tmp_path / "h" / "fit.json").read_text())["fitted"] == 347


def test_summary_lines() -> None:
    assert summary_line("fit", FIT) == (
        "fit: 347 of 503 series fitted (others: too few distinct N or no law converged), 200 "
        "tested on held-out N; default law amdahl")
    assert summary_line("theory", THEORY) == (
        "theory: 2 scenarios (baseline knee 1.22e+28, wall 2.09e+31 FLOP); 5408 of 5588 runs "
        "bounded")
    assert summary_line("compare", COMPARE) == (
        "compare: 4080 runs compared (1806 with a ceiling), 503 series; median strong-scaling "
        "efficiency at the largest N 49%")
    assert summary_line("calibrate", CALIBRATE) == (
        "calibrate: form full_launch fitted on 1804 runs (in-sample median APE of MFU 59%); "
        "selected on the largest N held out: median APE 50%, 95% coverage 91%")
    assert summary_line("ingest", {}) is None


def test_headline_contracts_refuse_extra_keys_and_impossible_values() -> None:
    """reports/headline/*.json are checked against pipeline.schema.HEADLINES when written."""
    import pytest

    from pipeline.schema import HEADLINES, ContractError, check_headline
    assert set(HEADLINES) == {"ingest", "fit", "theory", "compare", "calibrate", "release"}
    with pytest.raises(ContractError, match=r"(?s)headline/calibrate\.json.*sel_cov"):
        check_headline("calibrate", {"sel_ape": 0.5, "sel_cov": 1.5})
    with pytest.raises(ContractError, match=r"(?s)headline/fit\.json.*extra"):
        check_headline("fit", {"fitted": 3, "law": "power", "heldout_ape": 0.1, "n": 1})
    with pytest.raises(ContractError, match=r"(?s)headline/ingest\.json.*runs"):
        check_headline("ingest", {"runs": -1, "rejects": 0, "series": 0})
    with pytest.raises(ContractError, match=r"(?s)headline/compare\.json.*eff_at_n_max"):
        headline("compare", {**COMPARE, "strong_median_efficiency_at_n_max": -0.5})
    with pytest.raises(ContractError, match=r"headline/ingest\.json"):
        check_headline("ingest", {"runs": "5", "rejects": 0, "series": 0})  # strict: no strings


def test_shipped_headlines_follow_their_contracts() -> None:
    from pipeline.config import PROJ_ROOT
    from pipeline.schema import check_headline
    for stage in ("ingest", "fit", "theory", "compare", "calibrate"):
        shipped = json.loads((PROJ_ROOT / "reports" / "headline" / f"{stage}.json").read_text())
        assert check_headline(stage, shipped) == shipped
        detail = json.loads((PROJ_ROOT / "reports" / "metrics" / f"{stage}.json").read_text())
        assert headline(stage, detail) == shipped


def test_every_headline_key_has_a_legend_entry():
    """``scalewall metrics`` explains every column ``dvc metrics show`` prints."""
    from pipeline.headline import LEGEND, PICK
    for stage, pick in PICK.items():
        assert set(pick({})) == set(LEGEND[stage]), stage


def test_metrics_command_prints_values_with_meanings(tmp_path):
    import json

    from typer.testing import CliRunner

    from pipeline.__main__ import app
    (tmp_path / "fit.json").write_text(json.dumps({"fitted": 3, "law": "amdahl",
                                                   "heldout_ape": 0.25, "e_tok_x2": None}))
    out = CliRunner().invoke(app, ["metrics", "--headline-dir", str(tmp_path)]).output
    line = next(x for x in out.splitlines() if x.strip().startswith("heldout_ape"))
    assert "0.25" in line and "held-out largest N" in line
    assert "ingest (" in out and "not written yet" in out
