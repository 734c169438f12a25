"""Scenarios: a named accelerator and precision plus overrides of the baseline constants.

``params.yaml: theory`` holds the baseline constants (``laws``, ``model``, ``latency``,
``search``, ``bytes_per_value``) and ``scenarios``: each scenario names an ``accelerator``
(catalog id) and may override ``precision``, ``hardware`` fields (e.g. a scale-out bandwidth the
catalog lacks), ``laws``, ``model``, ``moe``, ``latency_scale`` and ``duration_days``. A missing
or mistyped field raises ConfigError naming it (the types and ranges are
``pipeline.config.ScenarioSettings``); a catalog field still empty after overrides raises
ConfigError naming it too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from pipeline.config import ConfigError, MoeSettings, settings
from pipeline.theory.inputs import Constants, Hardware, hardware_from_spec
from pipeline.theory.laws import SECONDS_PER_DAY, Laws
from pipeline.theory.memory import MemoryConstants, Overhead

LATENCY_FIELDS = ("kernel_latency_s", "scaleup_latency_s", "scaleout_latency_s")


@dataclass(frozen=True)
class Moe:
    """Sparse mixture of experts: E routed experts, top-k routing, and the share of the active
    parameters that sit in experts. The tokens-per-parameter rule applies to N_act [R]. Built
    from a scenario's ``moe`` (``pipeline.config.MoeSettings``, whose defaults are a dense
    model)."""

    n_experts: int
    top_k: int
    expert_fraction: float

    @property
    def total_per_active(self) -> float:
        """N / N_act = (1 - f) + f E / k."""
        return (1.0 - self.expert_fraction) + self.expert_fraction * self.n_experts / self.top_k


@dataclass(frozen=True)
class Search:
    """Layout-search settings (``theory.search``), in the paper's terms. No defaults here: the
    values are ``params.yaml``'s, validated by ``pipeline.config.SearchSettings``.

    Attributes:
        min_microbatch_tokens: smallest b_mu allowed (tokens per microbatch per replica).
        min_shard_width: smallest matmul width a tensor shard may keep (tp1 <= h d / this,
            tp2 <= d / this) [C: transformer.py uses 1024].
        two_d_tp: search tp2 > 1 (2-D TP) as well.
        max_log2_degree: largest log2 of any single degree searched.
        max_microbatches_per_stage: m is searched over 1 and pp * 2^j up to this multiple.
        interleave: "max" (v = L/pp when m >= pp, ml_par_sim's maximal interleaving) or "none".
        max_accelerators: cap on G (0 = none).
        memory_check: search only layouts whose predicted peak memory (the memory model,
            pipeline.theory.memory, with full recompute) fits in HBM; false searches all.
        zero_stage: ZeRO stage of every searched layout (1: optimizer states sharded over dp).
        dp_steps_per_octave: dp runs over floor(2^(j/q)); 1 = powers of two only. dp needs no
            divisibility (a batch of B tokens splits over any dp), so q = 4 removes most of the
            power-of-two saw-tooth from the frontier.
    """

    min_microbatch_tokens: float
    min_shard_width: float
    two_d_tp: bool
    max_log2_degree: int
    max_microbatches_per_stage: int
    interleave: str
    max_accelerators: float
    memory_check: bool
    zero_stage: int
    dp_steps_per_octave: int


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
    #: the memory model's constants (theory.memory) and its fitted overhead (the theory stage's
    #: fit, theory metrics ``_memory.overhead``; none until fitted)
    memory_constants: MemoryConstants = MemoryConstants()
    memory_overhead: Overhead = Overhead()


def _overrides(model: Any, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """The fields a scenario sets (``None`` = inherit the baseline)."""
    if model is None:
        return {}
    return {k: v for k, v in model.model_dump(exclude_none=True).items() if k not in exclude}


def baseline_constants(params: Mapping[str, Any]) -> tuple[Laws, Constants, Search, dict]:
    """The baseline laws, model constants, search settings and latencies from ``theory``."""
    cfg = settings(params, "theory")
    return (Laws(**cfg.laws.model_dump()), Constants(**cfg.model.model_dump()),
            Search(**cfg.search.model_dump()), cfg.latency.model_dump())


def bytes_per_value(params: Mapping[str, Any], precision: str) -> float:
    """w for a precision, from ``theory.bytes_per_value``."""
    table = settings(params, "theory").bytes_per_value
    if precision not in table:
        raise ConfigError(f"params: missing field 'theory.bytes_per_value.{precision}'")
    return float(table[precision])


def load_scenarios(params: Mapping[str, Any], catalog) -> list[Scenario]:
    """Every scenario of ``theory.scenarios``, in the order written."""
    cfg = settings(params, "theory")
    laws, const, search, latency = baseline_constants(params)
    mem = cfg.memory
    memory_const = MemoryConstants(**{k: getattr(mem, k)
                                      for k in MemoryConstants.__dataclass_fields__})
    out = []
    for name, node in cfg.scenarios.items():
        where = f"theory.scenarios.{name}"
        accel, precision = node.accelerator, node.precision
        if accel not in catalog.hardware.index:
            raise ConfigError(f"params: field '{where}.accelerator': {accel[:80]!r} is not a "
                              f"catalog id")
        peak, used = catalog.peak_flops_per_s(accel, precision)
        if peak is None:
            raise ConfigError(f"params: field '{where}.precision': catalog has no {precision} "
                              f"peak for {accel}")
        lat = {k: v * node.latency_scale for k, v in latency.items()}
        try:  # a catalog gap is a configuration problem here: name the field, exit 2
            hw = hardware_from_spec(catalog.spec(accel), peak, lat, node.hardware,
                                    where=f"{where}.hardware")
        except ConfigError:
            raise
        except ValueError as exc:
            raise ConfigError(f"params: {exc}") from exc
        s_const = replace(const, **_overrides(node.model, exclude=("bytes_per_value",)))
        width = getattr(node.model, "bytes_per_value", None)
        s_const = replace(s_const, bytes_per_value=bytes_per_value(params, used)
                          if width is None else float(width))
        days = cfg.duration_days if node.duration_days is None else node.duration_days
        out.append(Scenario(name=name, accelerator=accel, precision=used, hardware=hw,
                            laws=replace(laws, **_overrides(node.laws)), constants=s_const,
                            moe=Moe(**(node.moe or MoeSettings()).model_dump()),
                            search=replace(search, **_overrides(node.search)),
                            duration_s=days * SECONDS_PER_DAY,
                            memory_constants=memory_const))
    return out
