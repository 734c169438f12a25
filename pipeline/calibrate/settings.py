"""``params.yaml: calibrate``, checked: a broken field stops the stage naming it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from pipeline.calibrate.features import TERMS
from pipeline.config import ConfigError, get

PREDICTORS = ("naive_linear", "naive_loglinear", "calibrated")
INTERVAL_METHODS = ("analytic", "conformal")


@dataclass(frozen=True)
class CalibrateSettings:
    forms: dict[str, list[str]]
    criterion: str
    balance: float
    em_rounds: int
    interval: float
    holdout_k: tuple[int, ...]
    min_distinct_n: int
    min_source_runs: int
    interval_method: dict[str, str]
    selected: dict[str, str]
    frontier_samples: int
    frontier_ci_points: int
    extrapolate_n: list[int]
    seed: int


def _targets(params: Mapping[str, Any]) -> list[int]:
    ns = get(params, "calibrate.extrapolate_n", list)
    if not ns or any(not isinstance(n, int) or isinstance(n, bool) or n < 2 for n in ns):
        raise ConfigError("params: field 'calibrate.extrapolate_n' must be a list of integers >= 2")
    return sorted(ns)


def load_settings(params: Mapping[str, Any]) -> CalibrateSettings:
    get(params, "calibrate", dict)
    forms = get(params, "calibrate.forms", dict)
    if not forms:
        raise ConfigError("params: field 'calibrate.forms' must name at least one model form")
    checked = {}
    for name, terms in forms.items():
        terms = get(params, f"calibrate.forms.{name}", list)
        bad = [t for t in terms if t not in TERMS]
        if bad or not terms or terms[0] != "compute":
            raise ConfigError(f"params: field 'calibrate.forms.{name}' must start with 'compute' "
                              f"and use terms of {', '.join(TERMS)} (got {bad or terms})")
        checked[str(name)] = [str(t) for t in terms]
    criterion = get(params, "calibrate.criterion", str)
    if criterion not in ("aicc", "bic"):
        raise ConfigError("params: field 'calibrate.criterion' must be 'aicc' or 'bic'")
    balance = float(get(params, "calibrate.balance", (int, float)))
    if not 0.0 <= balance <= 1.0:
        raise ConfigError("params: field 'calibrate.balance' must be in [0, 1]")
    interval = float(get(params, "calibrate.interval", (int, float)))
    if not 0.5 < interval < 1.0:
        raise ConfigError("params: field 'calibrate.interval' must be in (0.5, 1)")
    ks = get(params, "calibrate.holdout_k", list)
    if not ks or any(not isinstance(k, int) or isinstance(k, bool) or k < 1 for k in ks):
        raise ConfigError("params: field 'calibrate.holdout_k' must be a list of integers >= 1")
    methods = {}
    for scheme in ("largest", "source"):
        m = get(params, f"calibrate.interval_method.{scheme}", str)
        if m not in INTERVAL_METHODS:
            raise ConfigError(f"params: field 'calibrate.interval_method.{scheme}' must be one of "
                              f"{', '.join(INTERVAL_METHODS)}")
        methods[scheme] = m
    selected = {}
    for key in ("largest", "assumed_layout", "fallback", "source"):
        value = get(params, f"calibrate.selected.{key}", str)
        if value not in PREDICTORS:
            raise ConfigError(f"params: field 'calibrate.selected.{key}' must be one of "
                              f"{', '.join(PREDICTORS)}")
        selected[key] = value
    return CalibrateSettings(
        forms=checked, criterion=criterion, balance=balance,
        em_rounds=int(get(params, "calibrate.em_rounds", int)), interval=interval,
        holdout_k=tuple(ks), min_distinct_n=int(get(params, "calibrate.min_distinct_n", int)),
        min_source_runs=int(get(params, "calibrate.min_source_runs", int)),
        interval_method=methods, selected=selected,
        frontier_samples=int(get(params, "calibrate.frontier_samples", int)),
        frontier_ci_points=int(get(params, "calibrate.frontier_ci_points", int)),
        extrapolate_n=_targets(params),
        seed=int(get(params, "calibrate.seed", int)))
