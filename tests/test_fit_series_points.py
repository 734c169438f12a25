"""pipeline.fit.series.series_points (arrays over a series' runs) against the frame-by-frame
selection it replaced, written out below as the reference: the same runs in the same order, the
same points to the bit, the same context and notes, on fuzzed runs tables (failed and missing
statuses, missing, zero, negative, infinite and text values, N missing or below 1, repeated N and
run ids, other series' rows, weak, strong and unknown scaling, run ids or statuses absent)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.fit.base import SeriesContext
from pipeline.fit.series import point_columns, series_points, work_per_step
from pipeline.vocab import Y_METRICS


def _ref_positive(values: pd.Series) -> pd.Series:
    v = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return pd.Series(np.where(np.isfinite(v) & (v > 0), v, np.nan), index=values.index)


def _ref_work(runs: pd.DataFrame, metric: str, scaling: str) -> float | None:
    if metric == "inverse_time_to_train_per_s":
        return 1.0
    y = _ref_positive(runs[metric])
    work = y * _ref_positive(runs.get("step_time_s", pd.Series(np.nan, index=runs.index)))
    if work.isna().all() and {"global_batch_tokens", "tokens_per_s"} <= set(runs.columns):
        work = y * _ref_positive(runs["global_batch_tokens"]) / _ref_positive(runs["tokens_per_s"])
    if scaling == "weak":
        work = work / runs["n_accelerators"].astype(float)
    work = work.dropna()
    return float(work.median()) if len(work) else None


def _reference(runs: pd.DataFrame, srow: pd.Series):
    """The selection as pandas operations on frames (the fit stage's code before arrays)."""
    sid = str(srow["series_id"])
    mine = runs[runs["series_id"] == sid]
    notes = []
    ok = mine[mine["status"].fillna("ok") == "ok"] if "status" in mine.columns else mine
    if len(ok) < len(mine):
        notes.append(f"{len(mine) - len(ok)} run(s) not ok (oom/error/aborted) left out")
    declared, metric = srow.get("y_metric"), None
    if isinstance(declared, str) and declared in ok.columns:
        metric = declared
    else:
        for m in Y_METRICS:
            if m in ok.columns and _ref_positive(ok[m]).notna().all() and len(ok):
                metric = m
                break
    scaling = str(srow.get("scaling") or "unknown")
    if metric is None:
        notes.append("no y metric: none of " + ", ".join(Y_METRICS) + " is measured")
        return sid, "", np.zeros(0), np.zeros(0), SeriesContext(), ok.iloc[0:0], notes, ""
    y = _ref_positive(ok[metric])
    n = pd.to_numeric(ok["n_accelerators"], errors="coerce")
    keep = y.notna() & n.notna() & (n >= 1)
    if (~keep).any():
        notes.append(f"{int((~keep).sum())} run(s) without a positive {metric} or N left out")
    kept = ok[keep].sort_values(["n_accelerators", "run_id"] if "run_id" in ok else
                                ["n_accelerators"])
    comm_note = (f"scaling '{scaling}' treated as strong for comm"
                 if scaling not in ("strong", "weak") else "")
    ctx_scaling = ("weak" if scaling == "weak" and metric != "inverse_time_to_train_per_s"
                   else "strong")
    ctx = SeriesContext(scaling=ctx_scaling,
                        work_per_step=_ref_work(kept, metric, ctx_scaling) if len(kept) else None)
    return (sid, metric, kept["n_accelerators"].to_numpy(float),
            _ref_positive(kept[metric]).to_numpy(float), ctx, kept, notes, comm_note)


def _bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _same(runs: pd.DataFrame, srow: pd.Series) -> None:
    sid, metric, n, y, ctx, kept, notes, comm_note = _reference(runs, srow)
    got = series_points(runs, srow)
    assert (got.series_id, got.y_metric, got.notes, got.comm_note) == (sid, metric, notes,
                                                                        comm_note)
    assert _bits(got.n, n) and _bits(got.y, y)
    assert got.ctx.scaling == ctx.scaling
    assert (got.ctx.work_per_step == ctx.work_per_step
            or (got.ctx.work_per_step is not None and ctx.work_per_step is not None
                and np.isnan(got.ctx.work_per_step) and np.isnan(ctx.work_per_step)))
    pd.testing.assert_frame_equal(got.runs, kept, check_exact=True)
    assert got.runs.index.equals(kept.index)
    if len(kept):
        assert work_per_step(kept, metric, ctx.scaling) == _ref_work(kept, metric, ctx.scaling)


POSITIVE = st.floats(0.5, 1e6)
# mostly measured values, so that most series keep runs; now and then a bad one
VALUES = st.one_of(POSITIVE, POSITIVE, POSITIVE, POSITIVE, POSITIVE, POSITIVE,
                   st.sampled_from([0.0, -3.0, np.nan, np.inf]))
ROW = st.fixed_dictionaries({
    "series_id": st.sampled_from(["s1", "s1", "s1", "s2"]),
    "status": st.sampled_from(["ok", "ok", "ok", "oom", "error", None]),
    "run_id": st.sampled_from(["r2", "r10", "r1", "b", "a"]),
    # few N, so that N repeats and the run ids decide the order
    "n_accelerators": st.one_of(st.sampled_from([1, 8, 8, 64]), st.sampled_from([0, None])),
    "model_flops_per_s": VALUES, "tokens_per_s": VALUES, "inverse_time_to_train_per_s": VALUES,
    "step_time_s": VALUES, "global_batch_tokens": VALUES, "energy_j_per_token": VALUES,
    "power_w_per_accelerator": VALUES, "mfu": VALUES})


def _frame(rows: list[dict], drop: list[str]) -> pd.DataFrame:
    runs = pd.DataFrame(rows)
    runs["n_accelerators"] = runs["n_accelerators"].astype("Int64")
    return runs.drop(columns=[c for c in drop if c in runs.columns])


@settings(max_examples=300, deadline=None)
@given(st.lists(ROW, min_size=1, max_size=40),
       st.sampled_from([None, "model_flops_per_s", "tokens_per_s", "inverse_time_to_train_per_s",
                        "hardware_flops_per_s"]),
       st.sampled_from(["strong", "weak", "unknown", None]),
       st.lists(st.sampled_from(["status", "run_id", "step_time_s", "model_flops_per_s",
                                 "global_batch_tokens"]), max_size=2),
       st.booleans())
def test_series_points_match_the_frame_by_frame_selection(rows, declared, scaling, drop, narrow):
    runs = _frame(rows, drop)
    srow = pd.Series({"series_id": "s1", "y_metric": declared, "scaling": scaling})
    if narrow:  # the fit stage passes only the columns it reads
        runs = point_columns(runs, [declared])
    _same(runs, srow)
    _same(runs[runs["series_id"] == "s1"], srow)  # the series' runs alone


def test_text_values_and_repeated_run_ids_sort_as_pandas_does():
    runs = pd.DataFrame({"series_id": "s1", "status": ["ok", None, "ok", "ok", "ok"],
                         "run_id": ["c", "a", "b", "a", "b"],
                         "n_accelerators": pd.array([8, 8, 8, 4, 8], dtype="Int64"),
                         "tokens_per_s": ["100", "x", 90.0, 50.0, 120.0],
                         "step_time_s": [1.0, 2.0, 3.0, 4.0, 5.0]})
    srow = pd.Series({"series_id": "s1", "y_metric": "tokens_per_s", "scaling": "strong"})
    _same(runs, srow)
    points = series_points(runs, srow)
    assert points.y_metric == "tokens_per_s"
    assert points.notes == ["1 run(s) without a positive tokens_per_s or N left out"]
    assert points.n.tolist() == [4.0, 8.0, 8.0, 8.0]
    assert points.runs["run_id"].tolist() == ["a", "b", "b", "c"]
    assert points.y.tolist() == [50.0, 90.0, 120.0, 100.0]
    # work per step: median of y * step time over the kept runs = median(200, 100, 270, 600)
    assert points.ctx.work_per_step == 235.0
