"""Scenarios: a named accelerator and precision plus overrides of the baseline constants.

``params.yaml: theory`` holds the baseline constants (``laws``, ``model``, ``latency``,
``search``, ``bytes_per_value``) and ``scenarios``: each scenario names an ``accelerator``
(catalog id) and may override ``precision``, ``hardware`` fields (e.g. a scale-out bandwidth the
catalog lacks), ``laws``, ``model``, ``moe``, ``latency_scale`` and ``duration_days``. A missing
or mistyped field raises ConfigError naming it; a catalog field still empty after overrides
raises ValueError naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Mapping

from pipeline.config import ConfigError, get
from pipeline.theory.inputs import Constants, Hardware, hardware_from_spec
from pipeline.theory.laws import SECONDS_PER_DAY, Laws

LATENCY_FIELDS = ("kernel_latency_s", "scaleup_latency_s", "scaleout_latency_s")


@dataclass(frozen=True)
class Moe:
    """Sparse mixture of experts: E routed experts, top-k routing, and the share of the active
    parameters that sit in experts. The tokens-per-parameter rule applies to N_act [R]."""

    n_experts: int = 1
    top_k: int = 1
    expert_fraction: float = 0.0

    @property
    def total_per_active(self) -> float:
        """N / N_act = (1 - f) + f E / k."""
        return (1.0 - self.expert_fraction) + self.expert_fraction * self.n_experts / self.top_k


@dataclass(frozen=True)
class Search:
    """Layout-search settings (``theory.search``).

    Attributes:
        min_microbatch_tokens: smallest b_mu allowed (tokens per microbatch per replica).
        min_shard_width: smallest matmul width a tensor shard may keep (tp1 <= h d / this,
            tp2 <= d / this) [C: transformer.py uses 1024].
        two_d_tp: search tp2 > 1 (2-D TP) as well.
        max_log2_degree: largest log2 of any single degree searched.
        max_microbatches_per_stage: m is searched over 1 and pp * 2^j up to this multiple.
        interleave: "max" (v = L/pp when m >= pp, ml_par_sim's maximal interleaving) or "none".
        max_accelerators: cap on G (0 = none).
        memory_check: drop layouts whose weights, gradients and optimizer states exceed HBM.
        optimizer_bytes_per_param: optimizer-state bytes per parameter (fp32 master + Adam).
        zero_stage: ZeRO stage of every searched layout (1: optimizer states sharded over dp).
        dp_steps_per_octave: dp runs over floor(2^(j/q)); 1 = powers of two only. dp needs no
            divisibility (a batch of B tokens splits over any dp), so q = 4 removes most of the
            power-of-two saw-tooth from the frontier.
    """

    min_microbatch_tokens: float = 1.0
    min_shard_width: float = 128.0
    two_d_tp: bool = True
    max_log2_degree: int = 24
    max_microbatches_per_stage: int = 64
    interleave: str = "max"
    max_accelerators: float = 0.0
    memory_check: bool = False
    optimizer_bytes_per_param: float = 12.0
    zero_stage: int = 1
    dp_steps_per_octave: int = 4


@dataclass(frozen=True)
class Scenario:
    name: str
    accelerator: str
    precision: str
    hardware: Hardware
    laws: Laws
    constants: Constants
    moe: Moe
    search: Search
    duration_s: float
    #: measured efficiencies (pipeline.calibrate.frontier.Efficiencies): the search then costs
    #: layouts with the calibrated step time instead of the ideal one; None = ideal
    efficiency: Any = None


def _dataclass_from(cls, params: Mapping[str, Any], section: str, base=None):
    """Fill dataclass ``cls`` from ``params[section]``, type-checked field by field."""
    base = base if base is not None else cls()
    values = {}
    for f in fields(cls):
        default = getattr(base, f.name)
        kind = (int, float) if isinstance(default, float) else type(default)
        values[f.name] = get(params, f"{section}.{f.name}", kind, default=default)
        if isinstance(default, float):
            values[f.name] = float(values[f.name])
    known = {f.name for f in fields(cls)}
    node = get(params, section, dict, default={})
    for key in node:
        if key not in known:
            raise ConfigError(f"params: unknown field '{section}.{key}' "
                              f"(known: {', '.join(sorted(known))})")
    return cls(**values)


def baseline_constants(params: Mapping[str, Any]) -> tuple[Laws, Constants, Search, dict]:
    """The baseline laws, model constants, search settings and latencies from ``theory``."""
    laws = _dataclass_from(Laws, params, "theory.laws")
    const = _dataclass_from(Constants, params, "theory.model")
    if const.dp_overlap not in ("step", "microbatch"):
        raise ConfigError("params: field 'theory.model.dp_overlap' must be 'step' or 'microbatch'")
    if const.fsdp_gather not in ("step", "microbatch"):
        raise ConfigError("params: field 'theory.model.fsdp_gather' must be 'step' or 'microbatch'")
    search = _dataclass_from(Search, params, "theory.search")
    if search.interleave not in ("max", "none"):
        raise ConfigError("params: field 'theory.search.interleave' must be 'max' or 'none'")
    latency = {k: float(get(params, f"theory.latency.{k}", (int, float))) for k in LATENCY_FIELDS}
    return laws, const, search, latency


def bytes_per_value(params: Mapping[str, Any], precision: str) -> float:
    """w for a precision, from ``theory.bytes_per_value``."""
    return float(get(params, f"theory.bytes_per_value.{precision}", (int, float)))


def load_scenarios(params: Mapping[str, Any], catalog) -> list[Scenario]:
    """Every scenario of ``theory.scenarios``, in the order written."""
    laws, const, search, latency = baseline_constants(params)
    duration_days = float(get(params, "theory.duration_days", (int, float)))
    scenarios = get(params, "theory.scenarios", dict)
    if not scenarios:
        raise ConfigError("params: field 'theory.scenarios' is empty")
    out = []
    for name, node in scenarios.items():
        where = f"theory.scenarios.{name}"
        if not isinstance(node, dict):
            raise ConfigError(f"params: field '{where}' must be a mapping")
        allowed = {"accelerator", "precision", "hardware", "laws", "model", "moe", "search",
                   "latency_scale", "duration_days", "description"}
        for key in node:
            if key not in allowed:
                raise ConfigError(f"params: unknown field '{where}.{key}'")
        accel = get(params, f"{where}.accelerator", str)
        precision = get(params, f"{where}.precision", str, default="bf16")
        if accel not in catalog.hardware.index:
            raise ConfigError(f"params: field '{where}.accelerator': {accel!r} is not a catalog id")
        peak, used = catalog.peak_flops_per_s(accel, precision)
        if peak is None:
            raise ConfigError(f"params: field '{where}.precision': catalog has no {precision} "
                              f"peak for {accel}")
        scale = float(get(params, f"{where}.latency_scale", (int, float), default=1.0))
        lat = {k: v * scale for k, v in latency.items()}
        try:  # a catalog gap is a configuration problem here: name the field, exit 2
            hw = hardware_from_spec(catalog.spec(accel), peak, lat,
                                    get(params, f"{where}.hardware", dict, default={}),
                                    where=f"{where}.hardware")
        except ConfigError:
            raise
        except ValueError as exc:
            raise ConfigError(f"params: {exc}") from exc
        s_laws = _dataclass_from(Laws, params, f"{where}.laws", base=laws)
        s_const = _dataclass_from(Constants, params, f"{where}.model", base=const)
        s_const = replace(s_const, bytes_per_value=bytes_per_value(params, used))
        if "model" in node and "bytes_per_value" in node["model"]:
            s_const = replace(s_const, bytes_per_value=float(node["model"]["bytes_per_value"]))
        moe = _dataclass_from(Moe, params, f"{where}.moe")
        if moe.top_k > moe.n_experts or moe.top_k < 1:
            raise ConfigError(f"params: field '{where}.moe.top_k' must lie in [1, n_experts]")
        s_search = _dataclass_from(Search, params, f"{where}.search", base=search)
        days = float(get(params, f"{where}.duration_days", (int, float), default=duration_days))
        out.append(Scenario(name=name, accelerator=accel, precision=used, hardware=hw,
                            laws=s_laws, constants=s_const, moe=moe, search=s_search,
                            duration_s=days * SECONDS_PER_DAY))
    return out
