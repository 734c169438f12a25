"""The planner's search prices only the recompute policies that can reach the answer
(``pipeline.plan.search._priced_bounded``): its top 1, 5 and 12 are the full search's, row for
row, and it prices fewer rows. The bound rests on recompute only adding time at one layout;
the full search checks that too."""

from __future__ import annotations

import pandas as pd
import pytest

from pipeline.config import PROJ_ROOT
from pipeline.plan import search
from pipeline.plan.cli import Paths, plan_rows

PATHS = Paths(PROJ_ROOT / "data/processed", PROJ_ROOT / "data/catalog",
              PROJ_ROOT / "reports/metrics/theory.json", PROJ_ROOT / "params.yaml")
pytestmark = pytest.mark.skipif(
    not all(p.exists() for p in (PATHS.processed / "calibration.parquet", PATHS.theory_metrics)),
    reason="pipeline outputs absent (run dvc repro)")
REQUESTS = {
    "gpt3-a100": dict(model="gpt3-175b", accelerator="A100-SXM4-80GB", n=[768, 1536],
                      global_batch_tokens=3145728.0, precision=None),
    "llama70b-h100": dict(model="llama-3-70b", accelerator="H100", n=[512],
                          global_batch_tokens=None, precision=None),
    "mixtral-h100": dict(model="mixtral-8x7b", accelerator="H100", n=[64],
                         global_batch_tokens=None, precision=None),
    "deepseek-h800-fp8": dict(model="deepseek-v3", accelerator="H800", n=[2048],
                              global_batch_tokens=None, precision="fp8"),
}
COLUMNS = ["n_accelerators", "tp", "pp", "cp", "dp", "ep", "virtual_pipeline", "micro_batch",
           "zero_stage", "recompute", "framework_family", "mfu", "step_time_s"]


def _plan(request: dict, top: int) -> pd.DataFrame:
    rows, *_ = plan_rows(seq_len=None, layout=None, top=top, train_tokens=None, shape={},
                         paths=PATHS, framework=None, kernels={}, **request)
    return rows


def _counting(monkeypatch) -> list[int]:
    priced: list[int] = []
    real = search.predict

    def counted(rows, model, *args, **kwargs):
        priced.append(len(rows))
        return real(rows, model, *args, **kwargs)
    monkeypatch.setattr(search, "predict", counted)
    return priced


@pytest.mark.parametrize("name", REQUESTS)
def test_the_bounded_search_answers_as_the_full_search(name, monkeypatch):
    request = REQUESTS[name]
    priced = _counting(monkeypatch)
    bounded = {top: _plan(request, top) for top in (1, 5, 12)}
    bounded_rows = sum(priced) / 3
    monkeypatch.setattr(search, "_priced_bounded",
                        lambda ok, ctx, top: search._priced(ok, ctx))
    priced.clear()
    for top in (1, 5, 12):
        full = _plan(request, top)
        pd.testing.assert_frame_equal(bounded[top][COLUMNS], full[COLUMNS])
    assert bounded_rows < sum(priced) / 3, (bounded_rows, sum(priced) / 3)


def test_recompute_only_adds_time_at_one_layout(monkeypatch):
    """The bound's premise, on the full search's priced candidates: at equal layout, none <=
    selective <= full in step time."""
    seen: list[pd.DataFrame] = []
    real = search._priced

    def keep(rows, ctx):
        out = real(rows, ctx)
        seen.append(out)
        return out
    monkeypatch.setattr(search, "_priced", keep)
    monkeypatch.setattr(search, "_priced_bounded", lambda ok, ctx, top: search._priced(ok, ctx))
    for name in ("gpt3-a100", "mixtral-h100"):
        _plan(REQUESTS[name], 1)
    rows = pd.concat(seen, ignore_index=True)
    key = [c for c in search.LAYOUT_AXES if c in rows] + ["n_accelerators", "model_id"]
    rows = rows.assign(_rc=rows["recompute"].map(search.RECOMPUTE_ORDER))
    rows = rows.sort_values([*key, "_rc"], kind="mergesort")
    same = (rows[key].fillna(-1).shift() == rows[key].fillna(-1)).all(axis=1).to_numpy()
    t = rows["step_time_s"].to_numpy(float)
    later = same[1:]                       # row i+1 is the same layout with more recompute
    assert later.sum() > 100
    assert (t[1:][later] >= t[:-1][later] * (1 - 1e-12)).all()
