"""Mondrian split-conformal intervals per class on leave-source-out scores
(pipeline/calibrate/intervals.py, pipeline/calibrate/classes.py)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from pipeline.calibrate import intervals as iv
from pipeline.calibrate.classes import class_chain, interval_class, workload_kind
from pipeline.calibrate.step import StepModel, interval_half_width


def test_min_scores_is_the_finite_quantile_threshold() -> None:
    assert iv.min_scores(0.95) == 19
    scores = np.arange(1.0, 20.0)
    assert np.isfinite(iv.conformal_quantile(scores, 0.95))
    assert np.isnan(iv.conformal_quantile(scores[:-1], 0.95))


def test_workload_kind_priority_and_cells() -> None:
    kind = workload_kind(np.array(["fp8", "bf16", None, "mxfp8", "fp8"], dtype=object),
                         np.array([4096, 32768, 2048, 8192, 65536.0]),
                         np.array([False, False, False, False, True]))
    assert kind.tolist() == ["fp8", "long_context", "dense_bf16", "fp8", "moe"]
    cells = interval_class(np.array(["H100", None, "A100", "B200", "GB200"], dtype=object), kind,
                           np.array(["Hopper", None, "Ampere", "Blackwell", "Blackwell"], object))
    assert cells.tolist() == ["Hopper/H100/fp8", "?/?/long_context", "Ampere/A100/dense_bf16",
                              "Blackwell/B200/fp8", "Blackwell/GB200/moe"]
    assert class_chain("Hopper/H100/fp8") == ("class:H100/fp8", "class:Hopper/fp8", "class:fp8",
                                                "production")


def test_a_repeated_configuration_counts_once() -> None:
    """Ten rows of one configuration with a large score are one calibration case, not ten."""
    scores = np.r_[np.full(10, 5.0), np.linspace(0.1, 0.2, 19)]
    config = np.r_[np.full(10, "same", dtype=object), [f"c{i}" for i in range(19)]]
    source = np.array(["a", "b", "c"] * 9 + ["a", "b"], dtype=object)
    s, src, cell = iv.per_configuration(scores, config, source, np.full(29, "X/X/fp8", object))
    assert s.size == 20 and src.size == 20 and cell.size == 20
    # the 95% quantile of 20 scores is the 20th (largest): 5.0 once; with the repeats
    # counted, the quantile of 29 would be 5.0 too, but over 19 distinct configs it is 0.2
    assert iv.conformal_quantile(s[s < 5.0], 0.95) == pytest.approx(0.2)


def test_mondrian_falls_back_along_the_chain_and_leaves_the_source_out() -> None:
    """A cell with scores from too few other sources uses its kind, then all production; the
    held-out source's own scores never set its interval."""
    n = 60
    source = np.array([f"s{i % 4}" for i in range(n)], dtype=object)
    cells = np.array(["Ampere/A100/dense_bf16"] * 40 + ["Hopper/H100/fp8"] * 20, dtype=object)
    scores = np.r_[np.full(40, 0.1), np.full(20, 0.5)]
    # s0's A100 rows are badly predicted: must not widen s0's own interval
    scores[(source == "s0") & (cells == "Ampere/A100/dense_bf16")] = 3.0
    scores[(source == "s0") & (cells == "Hopper/H100/fp8")] = 9.0
    config = np.array([f"c{i}" for i in range(n)], dtype=object)
    prod = np.ones(n, bool)
    half, q = iv.mondrian_half_widths(scores, config, source, cells, prod, class_chain, 0.95)
    a100_s0 = (source == "s0") & (cells == "Ampere/A100/dense_bf16")
    assert np.allclose(half[a100_s0], 0.1)            # 30 configs of s1-s3: the cell's own
    h100_s0 = (source == "s0") & (cells == "Hopper/H100/fp8")
    # H100/fp8 without s0: 15 configs < 19: class:fp8 (the same 15) too: all production
    # without s0 (30 x 0.1, 15 x 0.5: the 44th of 45 is 0.5), never s0's own 9.0
    assert np.allclose(half[h100_s0], 0.5)
    assert q["class:A100/dense_bf16"] == pytest.approx(3.0)
    assert q["class:H100/fp8"] == pytest.approx(9.0)
    assert "production" in q


def test_planner_interval_walks_the_class_chain(base_model) -> None:
    m = copy.copy(base_model)
    m.interval_q = {"production": 0.6, "megatron": 0.6, "class:fp8": 0.3,
                    "class:H100/fp8": 0.2, "playbook": 2.0}
    fam = np.array(["megatron", "megatron", "megatron", "playbook", "megatron"], dtype=object)
    cells = np.array(["Hopper/H100/fp8", "Blackwell/B200/fp8", "Ampere/A100/dense_bf16",
                      "Hopper/H100/fp8", None],
                     dtype=object)
    got = interval_half_width(m, fam, 0.95, cells)
    assert got.tolist() == pytest.approx([0.2, 0.3, 0.6, 2.0, 0.6])


@pytest.fixture(scope="module")
def base_model(catalog) -> StepModel:
    from pathlib import Path

    from pipeline.calibrate.estimate import bare_model
    root = Path(__file__).resolve().parents[1] / "data" / "catalog"
    return bare_model(catalog, root, {"kernel_latency_s": 3e-6, "scaleup_latency_s": 2e-6},
                      True, 128.0)



def test_a_kind_too_thin_to_calibrate_takes_the_widest_calibrated_kind() -> None:
    """MoE with its main source left out: its few scores from two other sources cannot set a
    95% quantile; it gets the widest calibrated kind's (here dense BF16's), not production's,
    which the well-predicted FP8 rows pull down; the held-out source's own scores never count."""
    n_dense, n_fp8 = 30, 60
    source = np.array([f"s{i % 3}" for i in range(n_dense + n_fp8)]
                      + ["m0"] * 6 + ["s0", "s1"] * 3, dtype=object)
    cells = np.array(["Ampere/A100/dense_bf16"] * n_dense + ["Hopper/H100/fp8"] * n_fp8
                     + ["Hopper/H100/moe"] * 12, dtype=object)
    scores = np.r_[np.linspace(0.1, 1.0, n_dense), np.full(n_fp8, 0.1), np.full(6, 9.0),
                   np.full(6, 0.05)]
    config = np.array([f"c{i}" for i in range(source.size)], dtype=object)
    half, q = iv.mondrian_half_widths(scores, config, source, cells, np.ones(source.size, bool),
                                      class_chain, 0.95)
    held = source == "m0"
    # m0 left out, class:moe has 6 configurations from 2 sources: the widest calibrated kind,
    # dense BF16 (its 30th of 30: 1.0), over production (the 93rd of 96: below 1.0)
    others = iv.mondrian_quantiles(*iv.per_configuration(scores, config, source, cells),
                                   class_chain, 0.95, exclude="m0")
    assert others["production"] < others["class:dense_bf16"] == pytest.approx(1.0)
    assert np.allclose(half[held], 1.0)
    assert iv.unseen_kind_quantile([0.1, 0.5], [0.3]) == pytest.approx(0.5)
    assert iv.unseen_kind_quantile([0.1], [0.3]) == pytest.approx(0.3)   # never below production
    assert np.isnan(iv.unseen_kind_quantile([], []))
    # over every source class:moe still has 12 configurations: the unseen-kind value is keyed
    # for the planner too
    assert q["class:moe"] == pytest.approx(max(q["class:dense_bf16"], q["class:fp8"],
                                               q["production"]))


def test_a_chip_family_too_thin_falls_back_to_its_architecture_before_its_kind() -> None:
    """H200 dense runs from one source: their interval is the Hopper dense runs' of the other
    sources (H100 here), not the dense runs' of every chip (A100's errors are larger)."""
    cells = np.array(["Hopper/H200/dense_bf16"] * 10 + ["Hopper/H100/dense_bf16"] * 30
                     + ["Ampere/A100/dense_bf16"] * 60, dtype=object)
    source = np.array(["h200lab"] * 10 + [f"h{i % 3}" for i in range(30)]
                      + [f"a{i % 3}" for i in range(60)], dtype=object)
    scores = np.r_[np.full(10, 0.05), np.full(30, 0.2), np.full(60, 1.5)]
    config = np.array([f"c{i}" for i in range(100)], dtype=object)
    half, q = iv.mondrian_half_widths(scores, config, source, cells, np.ones(100, bool),
                                      class_chain, 0.95)
    assert np.allclose(half[source == "h200lab"], 0.2)   # class:Hopper/dense_bf16 of h0-h2
    assert q["class:Hopper/dense_bf16"] == pytest.approx(0.2)
    assert q["class:dense_bf16"] == pytest.approx(1.5)
