"""Project paths and the loading of ``params.yaml``.

Every stage receives its input and output paths on the command line (from ``dvc.yaml``) and its
settings from ``params.yaml``, grouped by stage. This module only knows where the project root
is (for defaults in notebooks) and how to read and check parameters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

PROJ_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = PROJ_ROOT / "data"
RAW_DIR = DATA_DIR / "raw"
CATALOG_DIR = DATA_DIR / "catalog"
PROCESSED_DIR = DATA_DIR / "processed"
REPORTS_DIR = PROJ_ROOT / "reports"
METRICS_DIR = REPORTS_DIR / "metrics"
PLOTS_DIR = REPORTS_DIR / "plots"
FIGURES_DIR = REPORTS_DIR / "figures"
PARAMS_PATH = PROJ_ROOT / "params.yaml"


class ConfigError(ValueError):
    """A broken configuration. The message names the offending field (dotted path)."""


def load_params(path: str | Path = PARAMS_PATH) -> dict[str, Any]:
    """Read ``params.yaml``; a missing or unparsable file is a ConfigError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"params file {path}: cannot be read ({exc.strerror})") from exc
    try:
        params = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"params file {path}: not valid YAML ({exc})") from exc
    if not isinstance(params, dict):
        raise ConfigError(f"params file {path}: top level must be a mapping of stage names")
    return params


_MISSING = object()


def get(params: dict[str, Any], dotted: str, kind: type | tuple[type, ...] | None = None,
        default: Any = _MISSING) -> Any:
    """Return ``params[a][b]...`` for ``dotted = "a.b..."``, checking its type.

    Raises ConfigError naming ``dotted`` when the field is absent (and no default is given) or
    has the wrong type. ``bool`` is not accepted where a number is asked for.
    """
    node: Any = params
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            if default is not _MISSING:
                return default
            raise ConfigError(f"params: missing field '{dotted}'")
        node = node[part]
    if kind is not None:
        kinds = kind if isinstance(kind, tuple) else (kind,)
        numeric = any(k in (int, float) for k in kinds)
        if (numeric and isinstance(node, bool) and bool not in kinds) or not isinstance(node, kinds):
            if float in kinds and isinstance(node, int) and not isinstance(node, bool):
                return float(node)
            names = " or ".join(k.__name__ for k in kinds)
            raise ConfigError(f"params: field '{dotted}' must be {names}, got {node!r}")
    return node
