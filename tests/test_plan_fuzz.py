"""``scalewall plan`` fuzzed over the catalog: any model, accelerator, N (odd factors
included), precision, family, sequence length and batch is answered (exit 0, every figure finite,
the layout's axes multiplying to N and its microbatches to the batch) or refused (exit 2 with an
``error: FIELD:`` line), never a traceback; on the pipeline's shipped outputs."""

from __future__ import annotations

import json
import math

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pipeline.__main__ import app
from pipeline.config import PROJ_ROOT
from tests.workspace import shipped_mark

pytestmark = shipped_mark("data/processed/calibration.parquet", "reports/metrics/theory.json")

CATALOG = PROJ_ROOT / "data/catalog"
MODELS = sorted(pd.read_csv(CATALOG / "models.csv")["model_id"])
ACCELERATORS = sorted(pd.read_csv(CATALOG / "hardware.csv")["accelerator"])
NS = (1, 3, 8, 24, 72, 96, 100, 144, 296, 512, 576, 1000, 1536, 6144, 16384, 100_000)

REQUEST = st.tuples(
    st.sampled_from(MODELS), st.sampled_from(ACCELERATORS), st.sampled_from(NS),
    st.sampled_from([None, "bf16", "fp8", "mxfp8", "FP16"]),
    st.sampled_from([None, "megatron", "fsdp", "deepspeed", "megatron_deepspeed"]),
    st.sampled_from([None, 2048, 8192, 131072]),
    st.sampled_from([None, 1048576, 3145728, 4194304]))


def _args(model, accelerator, n, precision, family, seq_len, batch) -> list[str]:
    args = ["plan", model, accelerator, "--n", str(n), "--json", "--top", "2"]
    for flag, value in (("--precision", precision), ("--framework", family),
                        ("--seq-len", seq_len), ("--global-batch-tokens", batch)):
        if value is not None:
            args += [flag, str(value)]
    return args


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(REQUEST)
def test_any_request_is_answered_or_refused_by_name(request_):
    result = CliRunner().invoke(app, _args(*request_))
    assert result.exit_code in (0, 2), (request_, result.output)
    if result.exit_code == 2:
        assert result.stderr.startswith("error: "), result.stderr
        return
    rows = json.loads(result.stdout)
    assert rows
    n = request_[2]
    for row in rows:
        for key, value in row.items():
            assert not (isinstance(value, float) and not math.isfinite(value)), key
        assert 0 < row["mfu_low"] <= row["mfu"] <= row["mfu_high"] <= 1
        assert row["tp"] * row["pp"] * row["cp"] * row["dp"] == n
        assert row["dp"] * row["micro_batch"] * row["microbatches"] \
            == row["global_batch_sequences"]
        if request_[6] is not None:  # a given batch is the batch planned
            assert row["global_batch_tokens"] == request_[6]
