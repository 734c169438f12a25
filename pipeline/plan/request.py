"""A planner's request, checked: the model, the accelerator, the chip counts and a fixed layout.

Every problem is a :class:`PlanError` naming the field and quoting what was given; the command
line turns it into exit status 2.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from pipeline.catalog import Catalog
from pipeline.theory.memory import RECOMPUTE

# --layout keys and the column each one fixes
LAYOUT_KEYS = {"tp": "tp", "pp": "pp", "cp": "cp", "dp": "dp", "ep": "ep", "v": "virtual_pipeline",
               "vp": "virtual_pipeline", "zero": "zero_stage", "mb": "micro_batch",
               "recompute": "recompute"}


class PlanError(ValueError):
    """A bad request: ``field`` names what to fix."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


@dataclass(frozen=True)
class ModelShape:
    """What the planner needs of a model (catalog row or a shape given on the command line)."""

    model_id: str
    params: float
    active_params: float
    n_layers: int
    d_model: int
    n_heads: float = np.nan
    n_experts: float = np.nan
    seq_len: float = np.nan
    # MoE (NaN: dense or not stated; pipeline/calibrate/moe.py prices them)
    top_k: float = np.nan
    expert_ffn_size: float = np.nan
    shared_experts: float = np.nan
    moe_dense_layers: float = np.nan


@dataclass(frozen=True)
class Request:
    model: ModelShape
    accelerator: str
    n_values: tuple[int, ...]
    layout: dict[str, Any] = field(default_factory=dict)


# --experts/--top-k/--expert-ffn/--shared-experts/--active-params-b: (ModelShape field, flag)
MOE_FLAGS = {"experts": "n_experts", "top_k": "top_k", "expert_ffn": "expert_ffn_size",
             "shared_experts": "shared_experts", "active_params_b": "active_params"}


def with_moe(model: ModelShape, moe: dict[str, float | None] | None) -> ModelShape:
    """The model with the MoE flags given (they override the catalog's), checked: experts >= 2,
    1 <= top-k <= experts, active parameters positive and at most the total."""
    given = {k: v for k, v in (moe or {}).items() if v is not None}
    for key, value in given.items():
        low = 0 if key == "shared_experts" else 1
        count = key != "active_params_b"
        if not (value >= low if count else value > 0) or (count and value != int(value)):
            what = f"an integer >= {low}" if count else "positive"
            raise PlanError(f"--{key.replace('_', '-')}", f"must be {what}, got {value!r}")
    fields = {MOE_FLAGS[k]: float(v) * (1e9 if k == "active_params_b" else 1.0)
              for k, v in given.items()}
    out = replace(model, **fields)
    if "n_experts" in fields and not out.n_experts >= 2:
        raise PlanError("--experts", f"an MoE model has at least 2 experts, got {out.n_experts:g}")
    if np.isfinite(out.top_k) and np.isfinite(out.n_experts) and out.top_k > out.n_experts:
        raise PlanError("--top-k", f"{out.top_k:g} > --experts {out.n_experts:g}")
    if out.active_params > out.params:
        raise PlanError("--active-params-b", f"{out.active_params / 1e9:g} B is more than the "
                        f"model's {out.params / 1e9:g} B parameters")
    if np.isfinite(out.n_experts) and out.n_experts > 1 and out.active_params >= out.params:
        raise PlanError("--active-params-b", "an MoE model needs its active parameters (below "
                        "the total): FLOP count only the top-k experts a token uses")
    return out


def resolve_model(catalog: Catalog, name: str, shape: dict[str, float | None],
                  moe: dict[str, float | None] | None = None) -> ModelShape:
    """A catalog model (id or alias), or the shape given with --params-b/--layers/--d-model;
    with the MoE flags applied (:func:`with_moe`)."""
    return with_moe(_resolve_model(catalog, name, shape), moe)


def _resolve_model(catalog: Catalog, name: str, shape: dict[str, float | None]) -> ModelShape:
    given = {k: v for k, v in shape.items() if v is not None}
    if given:
        missing = [k for k in ("params_b", "layers", "d_model") if k not in given]
        if missing:
            raise PlanError(f"--{missing[0].replace('_', '-')}", "a model given by its shape "
                            "needs --params-b, --layers and --d-model")
        for k, v in given.items():
            if not v > 0:
                raise PlanError(f"--{k.replace('_', '-')}", f"must be positive, got {v!r}")
        params = float(given["params_b"]) * 1e9
        return ModelShape(model_id=name, params=params, active_params=params,
                          n_layers=int(given["layers"]), d_model=int(given["d_model"]),
                          n_heads=float(given.get("heads", np.nan)))
    model_id = name if name in catalog.models.index else catalog.resolve_model(name)
    if model_id is None:
        close = difflib.get_close_matches(name.lower(), list(catalog.models.index), n=3,
                                          cutoff=0.4)
        hint = f"; closest catalog ids: {', '.join(close)}" if close else ""
        raise PlanError("MODEL", f"unknown model {name!r}{hint}. Add a row to "
                        "data/catalog/models.csv (columns in data/catalog/README.md) or give "
                        "the shape with --params-b, --layers and --d-model")
    spec = catalog.model_spec(model_id)
    for k in ("params", "n_layers", "d_model"):
        if spec.get(k) is None:
            raise PlanError("MODEL", f"catalog model {model_id!r} has no {k}; give the shape "
                            "with --params-b, --layers and --d-model")
    active = spec.get("active_params") or spec["params"]
    return ModelShape(model_id=model_id, params=float(spec["params"]),
                      active_params=float(active), n_layers=int(spec["n_layers"]),
                      d_model=int(spec["d_model"]), n_heads=_f(spec.get("n_heads")),
                      n_experts=_f(spec.get("n_experts")), seq_len=_f(spec.get("seq_len")),
                      **{k: _f(spec.get(k)) for k in ("top_k", "expert_ffn_size",
                                                      "shared_experts", "moe_dense_layers")})


def resolve_accelerator(catalog: Catalog, name: str) -> str:
    acc = catalog.resolve_accelerator(name)
    if acc is None:
        close = difflib.get_close_matches(name, list(catalog.hardware.index), n=3, cutoff=0.4)
        hint = f"; closest catalog ids: {', '.join(close)}" if close else ""
        raise PlanError("ACCELERATOR", f"{catalog.explain_accelerator(name)}{hint}")
    return acc


def check_n(values: list[int]) -> tuple[int, ...]:
    if not values:
        raise PlanError("--n", "give at least one accelerator count, e.g. --n 512 2048")
    for v in values:
        if v < 1:
            raise PlanError("--n", f"N must be >= 1, got {v}")
    return tuple(dict.fromkeys(int(v) for v in values))


def parse_layout(text: str | None) -> dict[str, Any]:
    """``tp=8,pp=16,cp=1,recompute=full`` -> {column: value}."""
    if not text:
        return {}
    out: dict[str, Any] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition("=")
        key, value = key.strip().lower(), value.strip()
        if not sep or key not in LAYOUT_KEYS:
            raise PlanError("--layout", f"{part!r} is not key=value with key one of "
                            f"{', '.join(sorted(set(LAYOUT_KEYS)))}")
        col = LAYOUT_KEYS[key]
        if col == "recompute":
            if value not in RECOMPUTE:
                raise PlanError("--layout", f"recompute={value!r}: one of {', '.join(RECOMPUTE)}")
            out[col] = value
            continue
        try:
            number = int(value)
        except ValueError:
            raise PlanError("--layout", f"{key}={value!r} is not an integer") from None
        low = 0 if col == "zero_stage" else 1
        if number < low or (col == "zero_stage" and number > 3):
            raise PlanError("--layout", f"{key}={number} out of range"
                            + (" (0-3)" if col == "zero_stage" else f" (>= {low})"))
        out[col] = number
    return out


def check_layout_divides(layout: dict[str, Any], n: int) -> None:
    """A fixed layout must divide N (tp pp cp, and dp when given)."""
    product = 1
    shown = []
    for k in ("tp", "pp", "cp", "dp"):
        if k in layout:
            product *= int(layout[k])
            shown.append(f"{k}={layout[k]}")
    if product == 1 and not shown:
        return
    if n % product != 0 or ("dp" in layout and product != n and all(
            k in layout for k in ("tp", "pp", "cp"))):
        raise PlanError("--layout", f"{'*'.join(shown)} = {product} does not divide N = {n}"
                        if n % product else f"{'*'.join(shown)} = {product}, not N = {n}")


def _f(x: Any) -> float:
    return float(x) if x is not None else np.nan
