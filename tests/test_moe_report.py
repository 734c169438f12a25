"""The report's MoE finding: the exposed all-to-all share against EP and against N
(pipeline/report/moe.py ``share_by``)."""

from __future__ import annotations

import pytest

from pipeline.report.moe import share_by


def test_share_by_ep_and_n_takes_medians_and_skips_unknowns() -> None:
    shares = [dict(ep=8.0, n=8, share=0.10), dict(ep=8.0, n=64, share=0.30),
              dict(ep=8.0, n=64, share=0.20), dict(ep=64.0, n=64, share=0.50),
              dict(ep=None, n=8, share=0.90), dict(ep=32.0, n=256, share=None)]
    by_ep = share_by(shares, "ep")
    assert [r["ep"] for r in by_ep] == [8, 64]
    assert by_ep[0]["share"] == pytest.approx(0.20) and by_ep[0]["n_runs"] == 3
    by_n = share_by(shares, "n")
    assert [(r["n"], r["n_runs"]) for r in by_n] == [(8, 2), (64, 3)]
    assert by_n[0]["share"] == pytest.approx(0.50)
