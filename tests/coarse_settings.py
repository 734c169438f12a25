"""Coarser grid settings for tests that run whole stages to check their wiring, not numbers.

The theory frontier, its scenarios, the calibrated forms and the calibrated frontier's draws
cost the same whatever the data: on a few dozen runs they are most of the theory and calibrate
stages' time. Tests that run those stages for what comes out of them downstream (the README's
commands, a user's logs through to the report) run them on the grids below. Every step still
runs (frontier, knee and wall, calibrated frontier and its draws, every report section); the
tests of the frontier's and the calibration's numbers use the shipped settings.

Not a test module (no ``test_`` prefix).
"""

from __future__ import annotations

import copy
from typing import Any

# (group, ..., key): value. On the left-in data of tests/test_dvc_shell.py the six stages took
# 71 CPU-s with the shipped settings and 37 with these (2026-12-01, this machine).
COARSE = {("theory", "frontier", "points"): 9, ("theory", "frontier", "refine_rounds"): 0,
          ("calibrate", "frontier_samples"): 2, ("calibrate", "frontier_ci_points"): 5}


def coarse(params: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``params`` on the coarser grids: ``COARSE``, the baseline scenario alone and
    the first calibrated form alone (``criterion: first`` uses only that one)."""
    out = copy.deepcopy(params)
    for (*group, key), value in COARSE.items():
        node = out
        for name in group:
            node = node[name]
        assert key in node, f"{'.'.join((*group, key))} is not a setting any more"
        node[key] = value
    scenarios = out["theory"]["scenarios"]
    out["theory"]["scenarios"] = {"baseline": scenarios["baseline"]}
    out["report"]["frontier_scenarios"] = ["baseline"]
    out["report"]["baseline_scenario"] = ""
    assert out["calibrate"]["criterion"] == "first", "coarse() keeps only the first form"
    forms = out["calibrate"]["forms"]
    out["calibrate"]["forms"] = {name: forms[name] for name in list(forms)[:1]}
    return out
