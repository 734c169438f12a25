"""``params.yaml: calibrate``, read through the typed model of ``pipeline/config.py`` (a broken
field stops the stage naming it)."""

from __future__ import annotations

from typing import Any, Mapping

from pipeline.config import CalibrateSettings, settings

__all__ = ["CalibrateSettings", "load_settings"]


def load_settings(params: Mapping[str, Any]) -> CalibrateSettings:
    """The validated ``calibrate`` group."""
    return settings(params, "calibrate")
