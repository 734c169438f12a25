"""The calibrated frontier's knee and wall lie inside their own 95% intervals.

The draws are searched on a coarser grid than the point; ``frontier._interval`` places their
spread around the point by the population values' own coarse result."""

from __future__ import annotations

import json
import math

from pipeline.calibrate.frontier import _interval
from pipeline.config import PROJ_ROOT
from tests.workspace import require_shipped


def test_interval_is_the_draws_spread_moved_to_the_point() -> None:
    # draws on the coarse grid around 4; the point on the fine grid is 5, the population's
    # coarse result 4: the interval moves by 5/4
    low, high = _interval([3.0, 4.0, 4.0, 5.0], coarse=4.0, point=5.0)
    assert math.isclose(low, 3.075 * 1.25) and math.isclose(high, 4.925 * 1.25)
    assert low <= 5.0 <= high


def test_interval_without_a_finite_coarse_result_is_the_draws_own() -> None:
    assert _interval([1.0, 2.0], coarse=float("nan"), point=1.5) == \
        _interval([1.0, 2.0], coarse=1.5, point=1.5)


def test_a_point_past_every_draw_extends_the_interval_to_it() -> None:
    # the population's knee above every draw (the search is nonlinear): the interval reaches it
    low, high = _interval([3.0, 3.5, 4.0], coarse=5.0, point=6.0)
    assert high == 6.0 and math.isclose(low, 3.025 * 1.2)


def test_every_shipped_scenario_point_is_inside_its_interval() -> None:
    require_shipped("reports/metrics/calibrate.json")
    frontier = json.loads((PROJ_ROOT / "reports/metrics/calibrate.json").read_text())["frontier"]
    assert frontier
    for name, row in frontier.items():
        for key in ("knee_flop_calibrated", "wall_flop_calibrated"):
            point, (low, high) = row[key], row[f"{key}_ci"]
            if point is None or not math.isfinite(point) or not math.isfinite(low):
                continue
            assert low * (1 - 1e-9) <= point <= high * (1 + 1e-9), (name, key, low, point, high)
