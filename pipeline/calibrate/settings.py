"""``params.yaml: calibrate``, read through the typed model of ``pipeline/config.py`` (a broken
field stops the stage naming it), with the values calibrate shares with the fit stage."""

from __future__ import annotations

from typing import Any, Mapping

from pipeline.config import CalibrateSettings, settings

__all__ = ["CalibrateRun", "load_settings"]


class CalibrateRun(CalibrateSettings):
    """The ``calibrate`` group plus the interval level and largest-N holdout scheme, whose one
    home is ``fit`` (calibrate scores the laws of ``extrapolation.parquet`` on the same cases)."""

    interval: float
    holdout_k: list[int]
    min_distinct_n: int


def load_settings(params: Mapping[str, Any]) -> CalibrateRun:
    """The validated ``calibrate`` group with ``fit.interval``, ``fit.holdout_k`` and
    ``fit.extrapolation_min_distinct_n`` (both groups already validated: no second check)."""
    cal, fit = settings(params, "calibrate"), settings(params, "fit")
    return CalibrateRun.model_construct(**dict(cal), interval=fit.interval,
                                        holdout_k=list(fit.holdout_k),
                                        min_distinct_n=fit.extrapolation_min_distinct_n)
