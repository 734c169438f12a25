"""A planner's request, checked: the model, the accelerator, the chip counts and a fixed layout.

Every problem is a :class:`PlanError` naming the field, quoting what was given and saying the
real reason; the command line turns it into exit status 2. The ranges are the ingest's for the
same quantities (``pipeline/ingest/lint.py`` ``UNIT_LIMITS``: parameters up to 1e5 billion,
sequences up to 1e7 tokens), so a value ``plan`` takes is one a run table could state.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from pipeline.catalog import Catalog
from pipeline.theory.memory import RECOMPUTE

# --layout keys and the column each one fixes
LAYOUT_KEYS = {"tp": "tp", "pp": "pp", "cp": "cp", "dp": "dp", "ep": "ep", "v": "virtual_pipeline",
               "vp": "virtual_pipeline", "zero": "zero_stage", "mb": "micro_batch",
               "recompute": "recompute", "gbs": "global_batch_sequences",
               "sp": "sequence_parallel", "shard": "shard_group",
               "node": "accelerators_per_node", "flushes": "pipeline_flushes"}
BOOL_WORDS = {"1": True, "true": True, "on": True, "yes": True,
              "0": False, "false": False, "off": False, "no": False}
# The largest values taken: the ingest's unit limits (pipeline/ingest/lint.py) for parameters
# and sequence length; 1e7 accelerators (above any machine built or announced: xAI's Colossus
# at 2e5 GPUs, 2025); layout axes up to the accelerator count.
MAX_PARAMS_B = 1e5
MAX_SEQ_LEN = 1e7
MAX_ACCELERATORS = 10_000_000
MAX_LAYERS = 100_000
MAX_D_MODEL = 10_000_000
MAX_BATCH_TOKENS = 1e12


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

    @property
    def is_moe(self) -> bool:
        """Routed experts (more than one): a mixture of experts, else dense."""
        return bool(np.isfinite(self.n_experts) and self.n_experts > 1)


@dataclass(frozen=True)
class Request:
    model: ModelShape
    accelerator: str
    n_values: tuple[int, ...]
    layout: dict[str, Any] = field(default_factory=dict)


def finite(name: str, value: float | None, low: float, high: float, *,
           integer: bool = False, low_open: bool = False) -> float | None:
    """``value`` checked: finite, inside [low, high] (low excluded with ``low_open``), a whole
    number with ``integer``; None passes through (not given)."""
    if value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise PlanError(name, f"{value!r} is not a number") from None
    if not math.isfinite(x):
        raise PlanError(name, f"must be a finite number, got {value!r}")
    if integer and x != math.floor(x):
        raise PlanError(name, f"must be a whole number, got {value!r}")
    if (x <= low if low_open else x < low) or x > high:
        lo = f"> {low:g}" if low_open else f">= {low:g}"
        raise PlanError(name, f"must be {lo} and <= {high:g}, got {value!r}")
    return x


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
    if out.is_moe and out.active_params >= out.params:
        raise PlanError("--active-params-b", "an MoE model needs its active parameters (below "
                        "the total): FLOP count only the top-k experts a token uses")
    return out


def resolve_model(catalog: Catalog, name: str, shape: dict[str, float | None],
                  moe: dict[str, float | None] | None = None) -> ModelShape:
    """A catalog model (id or alias), or the shape given with --params-b/--layers/--d-model;
    --heads overrides or completes either; the MoE flags applied (:func:`with_moe`)."""
    return with_moe(_resolve_model(catalog, name, shape), moe)


def _resolve_model(catalog: Catalog, name: str, shape: dict[str, float | None]) -> ModelShape:
    if not isinstance(name, str) or not name.strip():
        raise PlanError("MODEL", "empty model name: give a catalog id (e.g. llama-3-70b) or a "
                        "label with --params-b, --layers and --d-model")
    checked = _check_shape(shape)
    given = {k: v for k, v in checked.items() if v is not None and k != "heads"}
    if given:
        missing = [k for k in ("params_b", "layers", "d_model") if k not in given]
        if missing:
            raise PlanError(f"--{missing[0].replace('_', '-')}", "a model given by its shape "
                            "needs --params-b, --layers and --d-model")
        params = float(given["params_b"]) * 1e9
        model = ModelShape(model_id=name, params=params, active_params=params,
                           n_layers=int(given["layers"]), d_model=int(given["d_model"]),
                           n_heads=_f(checked.get("heads")))
    else:
        model = _catalog_model(catalog, name)
        if checked.get("heads") is not None:
            model = ModelShape(**{**model.__dict__, "n_heads": float(checked["heads"])})
    _check_heads(model)
    return model


def _check_shape(shape: dict[str, float | None]) -> dict[str, float | None]:
    limits = {"params_b": (0.0, MAX_PARAMS_B, False), "layers": (1, MAX_LAYERS, True),
              "d_model": (1, MAX_D_MODEL, True), "heads": (1, MAX_D_MODEL, True)}
    out = {}
    for k, v in shape.items():
        low, high, integer = limits.get(k, (0.0, math.inf, False))
        out[k] = finite(f"--{k.replace('_', '-')}", v, low, high, integer=integer,
                        low_open=not integer)
    return out


def _check_heads(model: ModelShape) -> None:
    if np.isfinite(model.n_heads) and model.d_model % int(model.n_heads):
        raise PlanError("--heads", f"{int(model.n_heads)} heads do not divide d_model = "
                        f"{model.d_model} (each head needs d_model / heads dimensions)")


def _catalog_model(catalog: Catalog, name: str) -> ModelShape:
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
        finite("--n", v, 1, MAX_ACCELERATORS, integer=True)
    return tuple(dict.fromkeys(int(v) for v in values))


def parse_layout(text: str | None) -> dict[str, Any]:
    """``tp=8,pp=16,cp=1,recompute=full`` -> {column: value}; each key once."""
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
        if col in out:
            raise PlanError("--layout", f"{key} given twice ({part!r}); give each axis once")
        out[col] = _layout_value(key, col, value)
    return out


def _layout_value(key: str, col: str, value: str) -> Any:
    if col == "recompute":
        if value not in RECOMPUTE:
            raise PlanError("--layout", f"recompute={value!r}: one of {', '.join(RECOMPUTE)}")
        return value
    if col == "sequence_parallel":
        if value.lower() not in BOOL_WORDS:
            raise PlanError("--layout", f"sp={value!r}: one of true, false (1, 0)")
        return BOOL_WORDS[value.lower()]
    try:
        number = int(value)
    except ValueError:
        raise PlanError("--layout", f"{key}={value!r} is not an integer") from None
    if col == "zero_stage":
        if not 0 <= number <= 3:
            raise PlanError("--layout", f"zero={number} out of range (0-3: ZeRO stages)")
        return number
    if not 1 <= number <= MAX_ACCELERATORS:
        raise PlanError("--layout", f"{key}={number} out of range (1 to {MAX_ACCELERATORS:,})")
    return number


def check_layout_fits_model(layout: dict[str, Any], model: ModelShape) -> None:
    """Axes the model's shape cannot take: tp above or not dividing the heads, pp above the
    layers, v chunks without a layer, ep on a dense model or above its experts."""
    heads = model.n_heads if np.isfinite(model.n_heads) else None
    tp, pp = layout.get("tp"), layout.get("pp", 1)
    if tp is not None and heads is not None and (tp > heads or heads % tp):
        raise PlanError("--layout", f"tp={tp} must divide the {int(heads)} attention heads of "
                        f"{model.model_id} (each TP rank holds whole heads)")
    if pp > model.n_layers:
        raise PlanError("--layout", f"pp={pp} exceeds the {model.n_layers} layers of "
                        f"{model.model_id} (each stage needs a layer)")
    v = layout.get("virtual_pipeline", 1)
    if v > 1 and pp == 1:
        raise PlanError("--layout", f"v={v} interleaves pipeline stages: it needs pp > 1")
    flushes = layout.get("pipeline_flushes", 1)
    if flushes > 1 and pp == 1:
        raise PlanError("--layout", f"flushes={flushes} counts pipeline schedules per step: it "
                        "needs pp > 1")
    if v * pp > model.n_layers + 2:
        raise PlanError("--layout", f"pp x v = {pp} x {v} = {pp * v} chunks exceed the "
                        f"{model.n_layers} layers and the embedding and output layers (each "
                        "chunk needs one; Llama 3 gave the first and last chunk to those two)")
    ep = layout.get("ep", 1)
    moe = model.is_moe
    if ep > 1 and not moe:
        raise PlanError("--layout", f"ep={ep} shards experts, but {model.model_id} is dense "
                        "(no n_experts in data/catalog/models.csv)")
    if moe and ep > model.n_experts:
        raise PlanError("--layout", f"ep={ep} exceeds the {int(model.n_experts)} experts")


def check_layout_divides(layout: dict[str, Any], n: int) -> None:
    """A fixed layout must divide N (tp pp cp, and equal it with dp)."""
    shown = [f"{k}={layout[k]}" for k in ("tp", "pp", "cp", "dp") if k in layout]
    if not shown:
        return
    product = math.prod(int(layout[k]) for k in ("tp", "pp", "cp", "dp") if k in layout)
    if n % product:
        raise PlanError("--layout", f"{'*'.join(shown)} = {product} does not divide N = {n}")
    if all(k in layout for k in ("tp", "pp", "cp", "dp")) and product != n:
        raise PlanError("--layout", f"{'*'.join(shown)} = {product}, not N = {n} (dp is "
                        "implied by N: leave it out, or make the axes multiply to N)")


def _f(x: Any) -> float:
    return float(x) if x is not None else np.nan
