"""The planner's measured-envelope flag (pipeline/plan/coverage.py model_mfu_records): per N,
the highest MFU measured for the model on the accelerator family at the precision; an answer
above it is flagged, one below is not, and a scale or model the data never measured has none."""

from __future__ import annotations

import numpy as np
import pandas as pd

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
