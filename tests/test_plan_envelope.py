"""The planner's measured-envelope flag (pipeline/plan/coverage.py model_mfu_records): per N,
the highest MFU measured for the model on the accelerator family at the precision; an answer
above it is flagged, one below is not, and a scale or model the data never measured has none."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipeline.plan import cli, coverage


def _runs() -> pd.DataFrame:
    return pd.DataFrame({
        "model_id": ["m", "m", "m", "m", "other"],
        "accelerator_family": ["A100", "A100", "A100", "H100", "A100"],
        "accelerator": ["A100-SXM4-80GB"] * 3 + ["H100", "A100-SXM4-80GB"],
        "precision": [None, "bf16", "fp8", None, None],
        "mfu": [0.40, 0.55, 0.70, 0.80, 0.90],
        "n_accelerators": [1024, 1024, 1024, 1024, 1024],
        "source": ["s1", "s2", "s3", "s4", "s5"],
        "citation": ["c1", "c2", "c3", "c4", "c5"]})


def test_record_is_the_highest_of_the_model_family_precision_at_that_n():
    rec = coverage.model_mfu_records(_runs(), "m", "A100", "bf16")
    assert set(rec) == {1024}
    assert rec[1024][0] == 0.55 and "s2: c2" in rec[1024][1]
    assert coverage.model_mfu_records(_runs(), "m", "A100", "fp8")[1024][0] == 0.70
    assert coverage.model_mfu_records(_runs(), "nobody", "A100", "bf16") == {}
    assert coverage.model_mfu_records(pd.DataFrame(), "m", "A100", "bf16") == {}


def test_rows_above_the_record_are_flagged_and_others_not():
    rows = pd.DataFrame({"n_accelerators": [1024, 1024, 512], "mfu": [0.60, 0.50, 0.99]})
    measured = coverage.Measured(pd.DataFrame(), _runs())
    out = cli._envelope(rows, measured, "m", "A100", "bf16")
    assert out["above_measured_envelope"].tolist() == [True, False, False]
    assert out["measured_model_mfu"].iat[0] == 0.55 and np.isnan(out["measured_model_mfu"].iat[2])
    text = cli.footnotes(out.assign(outside_reasons=[()] * 3, above_measured_mfu=False))
    assert "^ above every MFU measured for this model at N = 1,024" in text and "55.0%" in text


def _layout_runs() -> pd.DataFrame:
    return _runs().assign(
        tp=[8, 8, 8, 8, 8], pp=[4, 4, None, 4, 4], cp=[None, 1, 1, 1, 1],
        zero_stage=[None, 3, None, None, None],
        global_batch_tokens=[4e6, 4e6, 4e6, 4e6, 4e6])


def test_a_run_measured_at_the_rows_layout_is_matched_on_n_tp_pp_cp_batch_and_stated_zero():
    """Only runs on this exact chip and precision, with a stated layout, at the row's N, tp, pp,
    cp and batch count; a run's ZeRO stage is matched where it states one; the median MFU of
    the matches is given, with the first one's source."""
    records = coverage.layout_mfu_records(_layout_runs(), "m", "A100-SXM4-80GB", "bf16")
    assert sorted(records["source"]) == ["s1", "s2"]          # s3 fp8, s4 H100, s5 other
    rows = pd.DataFrame({"n_accelerators": [1024, 1024, 1024, 512], "tp": [8, 8, 4, 8],
                         "pp": [4, 4, 4, 4], "cp": [1, 1, 1, 1], "zero_stage": [3, 1, 3, 3],
                         "global_batch_tokens": [4e6, 4e6, 4e6, 4e6]})
    mfu, cited = coverage.measured_at_layout(rows, records)
    assert mfu[0] == pytest.approx(0.475) and cited[0] == "s1: c1 and 1 more"  # s1 (any ZeRO), s2
    assert mfu[1] == 0.40 and cited[1] == "s1: c1"                       # s2 states ZeRO-3
    assert np.isnan(mfu[2:]).all() and cited[2:] == ["", ""]
    wrong_batch = rows.assign(global_batch_tokens=2e6)
    assert np.isnan(coverage.measured_at_layout(wrong_batch, records)[0]).all()


def test_the_answer_says_whether_its_interval_holds_the_run_measured_at_its_layout():
    rows = pd.DataFrame({"n_accelerators": [1024, 1024], "tp": [8, 8], "pp": [4, 4],
                         "cp": [1, 1], "zero_stage": [1, 1], "global_batch_tokens": [4e6, 4e6],
                         "mfu": [0.42, 0.60], "mfu_low": [0.30, 0.50], "mfu_high": [0.55, 0.70]})
    out = cli._at_layout(rows, coverage.Measured(pd.DataFrame(), _layout_runs()), "m",
                         "A100-SXM4-80GB", "bf16")
    assert out["measured_layout_mfu"].tolist() == [0.40, 0.40]
    assert out["measured_layout_inside"].tolist() == [True, False]
    text = cli.footnotes(out.assign(outside_reasons=[()] * 2, above_measured_mfu=False))
    assert "= measured at N = 1,024, tp8 pp4 cp1, this batch and ZeRO-1: 40.0%, inside" in text
    assert "40.0%, OUTSIDE the row's interval (s1: c1)" in text


def _fitted(family: str, n: int, zero: float, precision: str = "bf16", acc: str = "A100",
            pp: float = 1.0) -> pd.DataFrame:
    return pd.DataFrame({"family": [family] * n, "accelerator_family": [acc] * n,
                         "precision": [precision] * n, "zero_stage": [zero] * n,
                         "pp": [pp] * n, "cp": [1.0] * n})


def test_the_default_family_on_a_tie_is_the_one_whose_runs_measured_the_features_most():
    # fsdp has more fitted runs, but 4 of them ran ZeRO-3 on A100 in bf16 against deepspeed's 6
    fitted = pd.concat([_fitted("fsdp", 4, 3.0), _fitted("fsdp", 20, 3.0, acc="H100"),
                        _fitted("deepspeed", 6, 3.0), _fitted("megatron", 50, 1.0, pp=4.0)])
    measured = coverage.Measured(fitted, pd.DataFrame())
    rows = pd.DataFrame({"zero_stage": [3.0, 1.0], "pp": [1.0, 4.0], "cp": [1.0, 1.0],
                         "precision": ["bf16", "bf16"]})
    families = ("megatron", "fsdp", "deepspeed")
    chosen = coverage.covering_family(rows, measured, "A100", families, "megatron")
    assert chosen.tolist() == ["deepspeed", "megatron"]
    # with more fsdp runs at those features, fsdp
    more = pd.concat([fitted, _fitted("fsdp", 3, 3.0)])
    chosen = coverage.covering_family(rows, coverage.Measured(more, pd.DataFrame()), "A100",
                                      families, "megatron")
    assert chosen.tolist() == ["fsdp", "megatron"]


def test_megatron_deepspeed_is_searched_only_where_deepspeeds_pipeline_runs():
    from pipeline.plan.search import runnable
    cand = pd.DataFrame({
        "framework_family": ["megatron_deepspeed"] * 4 + ["megatron"],
        "pp": [8, 8, 8, 1, 8], "virtual_pipeline": [1, 2, 1, 1, 2],
        "zero_stage": [1, 1, 3, 3, 3]})
    # 1F1B and ZeRO <= 1 under a pipeline; without one, or in another family, anything
    assert runnable(cand, {}).tolist() == [True, False, False, True, True]
    # an axis the request fixed is priced as asked
    assert runnable(cand, {"virtual_pipeline": 2, "zero_stage": 3}).all()


def test_interleaved_stages_a_family_never_ran_are_outside_its_measurements():
    fitted = pd.concat([_fitted("megatron", 3, 1.0, pp=4.0).assign(virtual_pipeline=5.0),
                        _fitted("megatron_deepspeed", 3, 1.0, pp=8.0).assign(
                            virtual_pipeline=1.0)], ignore_index=True)
    fitted = fitted.assign(accelerators_per_node=8.0, seq_len=2048.0, ep=1.0)
    measured = coverage.Measured(fitted, pd.DataFrame())
    row = pd.Series({"framework_family": "megatron_deepspeed", "zero_stage": 1.0, "pp": 8.0,
                     "cp": 1.0, "ep": 1.0, "virtual_pipeline": 2.0, "precision": "bf16",
                     "accelerators_per_node": 8.0, "seq_len": 2048.0})
    assert coverage.outside_reasons(row, measured, "A100") == [
        "megatron_deepspeed never measured interleaved stages (v > 1) (megatron did)"]
    plain = row.copy()
    plain["virtual_pipeline"] = 1.0
    assert coverage.outside_reasons(plain, measured, "A100") == []
    mega = row.copy()
    mega["framework_family"] = "megatron"
    assert coverage.outside_reasons(mega, measured, "A100") == []
