"""Project paths, and ``params.yaml`` read into typed settings.

Every stage receives its input and output paths on the command line (from ``dvc.yaml``) and its
settings from ``params.yaml``, grouped by stage. This module knows where the project root is (for
defaults in notebooks and for project-relative paths in outputs) and holds one pydantic model per
``params.yaml`` group: ``extra="forbid"`` (a mistyped key stops the stage), strict types (``true``
is not a number, ``"3"`` is not an integer) and a range for every numeric setting (grid sizes
have upper bounds so the frontier search cannot exhaust memory).

A stage reads its settings with ``settings(params, "fit")`` (or a sub-group such as
``"ingest.logs"``) and gets the validated model; any bad value raises ``ConfigError`` naming the
dotted field, which the CLI turns into exit status 2. The CLI validates the whole file first
(``load_settings``), including the references between groups (scenario names in ``report``).

A value used by several stages lives in one group and every stage that reads it lists it in
``dvc.yaml``: ``ingest.attention_flops`` and ``ingest.default_precision`` (ingest, theory),
``fit.interval`` (fit, compare), ``theory.duration_days`` (theory, compare),
``compare.extrapolate_n``, ``compare.curve_points`` and ``compare.efficiency_threshold`` (the
grid and threshold of the curves: fit, theory, compare; ``extrapolate_n`` also calibrate, whose
``selected`` compare quotes there), ``theory.frontier`` and ``theory.scenarios`` (theory,
calibrate), ``fit.default_law_min_success`` (fit, report).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping

import yaml
from pipeline import yaml12
from pipeline.vocab import PRECISIONS
from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, ValidationError,
                      ValidationInfo, field_validator)

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


def project_relative(path: str | Path, root: Path = PROJ_ROOT) -> str:
    """``path`` relative to the project root (POSIX separators) when it lies inside it, else
    absolute: the one rule for paths that outputs record (provenance, rejects), so that they do
    not depend on where the checkout lies."""
    resolved = Path(path).resolve()
    try:
        return resolved.relative_to(root.resolve()).as_posix()
    except ValueError:
        return resolved.as_posix()


def strip_project_root(text: str, root: Path = PROJ_ROOT) -> str:
    """``text`` with every absolute path inside the project made project-relative (parsers
    may quote absolute paths in a reject's record or reason)."""
    return text.replace(f"{root.as_posix()}/", "")


def load_params(path: str | Path = PARAMS_PATH) -> dict[str, Any]:
    """Read ``params.yaml`` (YAML 1.2 core, as DVC reads it: ``pipeline.yaml12``); a missing or
    unparsable file, or a key given twice, is a ConfigError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"params file {path}: cannot be read ({exc.strerror})") from exc
    try:
        params = yaml12.load(text)
    except yaml12.DuplicateKeyError as exc:
        raise ConfigError(f"params file {path}: {exc}") from exc
    except (yaml.YAMLError, RecursionError) as exc:
        raise ConfigError(f"params file {path}: not valid YAML ({str(exc)[:300]})") from exc
    if not isinstance(params, dict):
        raise ConfigError(f"params file {path}: top level must be a mapping of stage names")
    return params


# -- models ------------------------------------------------------------------------------------
class _Group(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


Passes = Annotated[float, Field(ge=0, le=100)]
# A hardware figure (bytes/s, FLOP/s, bytes, seconds, a domain size): the largest, FLOP/s of a
# chip, is ~1e16 today.
HardwareValue = Annotated[float, Field(ge=0, le=1e21)]
Fraction = Annotated[float, Field(gt=0, lt=1)]
Precision = Literal[PRECISIONS]  # type: ignore[valid-type]
# the k of the largest-k holdouts (fit, calibrate)
HoldoutKs = Annotated[list[Annotated[int, Field(ge=1, le=100)]], Field(min_length=1)]
Gather = Literal["step", "microbatch"]
Interleave = Literal["max", "none"]


class LogsSettings(_Group):
    """``ingest.logs``: warm-up detection and parallel reading of step logs."""

    warmup_steps: Literal["auto"] | Annotated[int, Field(ge=0, le=10_000_000)] = "auto"
    max_warmup_fraction: Annotated[float, Field(ge=0, lt=1)] = 0.5
    min_steady_steps: Annotated[int, Field(ge=1, le=10_000_000)] = 3
    settle_tolerance: Annotated[float, Field(gt=0, le=10)] = 0.05
    workers: Annotated[int, Field(ge=1, le=256)] = 1


class IngestSettings(_Group):
    """``ingest``: input roots and the rules of MFU derivation."""

    mlperf_roots: list[Annotated[str, Field(min_length=1)]]
    # Folders outside the project are not versioned with it: refused unless this is true.
    allow_mlperf_roots_outside_project: bool = False
    # Largest plausible job (plausible.MAX_ACCELERATORS); a record above it is rejected.
    max_accelerators: Annotated[int, Field(ge=1, le=10**12)] = 10_000_000
    default_precision: Precision
    attention_flops: bool
    mfu_on_assumed_precision: bool
    # Processes reading the MLPerf power logs (pipeline.processes caps it at the CPUs).
    power_workers: Annotated[int, Field(ge=1, le=256)] = 1
    # runs/steps of more rows are written as folders of parts by run_id prefix (io_parts)
    partition_rows: Annotated[int, Field(ge=1, le=10**12)] = 10_000_000
    logs: LogsSettings


FitLaw = Literal["power", "amdahl", "usl", "comm"]


class FitSettings(_Group):
    """``fit``: laws fitted per series, their scale, the holdout scoring and the interval."""

    laws: Annotated[list[FitLaw], Field(min_length=1)]
    scale: Literal["log", "linear"]
    score_other_scale: bool
    min_distinct_n: Annotated[int, Field(ge=2, le=1000)]
    extrapolation_min_distinct_n: Annotated[int, Field(ge=3, le=1000)]
    holdout_k: HoldoutKs
    interval: Fraction
    default_law_min_success: Annotated[float, Field(ge=0, le=1)]
    flag_peak_beyond: Annotated[float, Field(ge=1, le=1e6)]
    workers: Annotated[int, Field(ge=1, le=256)] = 1


class LawsSettings(_Group):
    """``theory.laws``: the scaling laws that turn training compute into a model (theory.md §1)."""

    tokens_per_param: Annotated[float, Field(gt=0, le=1e6)]
    anchor_flop: Annotated[float, Field(gt=0, le=1e60)]
    layers_anchor: Annotated[float, Field(gt=0, le=1e6)]
    layers_exponent: Annotated[float, Field(ge=0, le=1)]
    width_ratio: Annotated[float, Field(gt=0, le=1e3)]
    batch_anchor_tokens: Annotated[float, Field(gt=0, le=1e15)]
    batch_exponent: Annotated[float, Field(ge=0, le=1)]


class ModelSettings(_Group):
    """``theory.model``: data-movement constants of the cost model (theory.md §2)."""

    weight_passes: Passes
    activation_passes: Passes
    blocks_per_layer: Annotated[float, Field(gt=0, le=100)]
    kernels_per_layer: Annotated[float, Field(ge=0, le=10_000)]
    dp_overlap: Gather
    alltoall_passes: Passes
    fsdp_gather: Gather


class LatencySettings(_Group):
    """``theory.latency``: per-kernel and per-message latencies, seconds."""

    kernel_latency_s: Annotated[float, Field(ge=0, le=1)]
    scaleup_latency_s: Annotated[float, Field(ge=0, le=1)]
    scaleout_latency_s: Annotated[float, Field(ge=0, le=1)]


class SearchSettings(_Group):
    """``theory.search``: the layout search (see ``pipeline.theory.scenarios.Search``). The
    degree and microbatch bounds cap the number of layouts evaluated per grid point."""

    min_microbatch_tokens: Annotated[float, Field(ge=1, le=1e9)]
    min_shard_width: Annotated[float, Field(ge=1, le=1e6)]
    two_d_tp: bool
    max_log2_degree: Annotated[int, Field(ge=1, le=30)]
    max_microbatches_per_stage: Annotated[int, Field(ge=1, le=1024)]
    interleave: Interleave
    max_accelerators: Annotated[float, Field(ge=0, le=1e15)]
    memory_check: bool
    zero_stage: Annotated[int, Field(ge=0, le=3)]
    dp_steps_per_octave: Annotated[int, Field(ge=1, le=16)]


class FrontierSettings(_Group):
    """``theory.frontier``: the compute grid and the knee/wall refinement. ``points``,
    ``refine_rounds`` and ``refine_points`` are bounded: each point is a full layout search,
    evaluated at once. With every grid and search bound at its maximum (points 401, 8 rounds
    of 64 points, max_log2_degree 30, 1024 microbatches, 16 dp steps per octave) the baseline
    scenario peaked at 1.07 GB and 16 s CPU (1001 points: 2.5 GB) and the MoE scenario, the
    heaviest, at 4.4 GB and 92-98 s CPU (docs/architecture.md)."""

    min_flop: Annotated[float, Field(gt=0, le=1e60)]
    max_flop: Annotated[float, Field(gt=0, le=1e60)]
    points: Annotated[int, Field(ge=2, le=401)]
    knee_fraction: Fraction
    refine_rounds: Annotated[int, Field(ge=0, le=8)]
    refine_points: Annotated[int, Field(ge=1, le=64)]

    @field_validator("max_flop")
    @classmethod
    def _ordered(cls, value: float, info: ValidationInfo) -> float:
        if "min_flop" in info.data and not value > info.data["min_flop"]:
            raise ValueError("must exceed min_flop")
        return value


def _partial(model: type[_Group], name: str, **extra: Any) -> type[_Group]:
    """``model`` with every field optional (``None`` = inherit the baseline): the overrides a
    scenario may give, with the same types and ranges."""
    from pydantic import create_model

    fields = {k: (f.annotation | None, Field(None, **_constraints(f)))
              for k, f in model.model_fields.items()}
    return create_model(name, __base__=_Group, **fields, **extra)


def _constraints(field: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for meta in field.metadata:
        for key in ("gt", "ge", "lt", "le"):
            if getattr(meta, key, None) is not None:
                out[key] = getattr(meta, key)
    return out


LawsOverride = _partial(LawsSettings, "LawsOverride")
ModelOverride = _partial(ModelSettings, "ModelOverride",
                         bytes_per_value=(Annotated[float, Field(gt=0, le=64)] | None, None))
SearchOverride = _partial(SearchSettings, "SearchOverride")


class MoeSettings(_Group):
    """A scenario's mixture of experts: E routed experts, top-k, share of active parameters."""

    n_experts: Annotated[int, Field(ge=1, le=100_000)] = 1
    top_k: Annotated[int, Field(ge=1, le=100_000)] = 1
    expert_fraction: Annotated[float, Field(ge=0, le=1)] = 0.0

    @field_validator("top_k")
    @classmethod
    def _top_k(cls, value: int, info: ValidationInfo) -> int:
        if value > info.data.get("n_experts", 1 << 62):
            raise ValueError("must lie in [1, n_experts]")
        return value


class ScenarioSettings(_Group):
    """``theory.scenarios.<name>``: an accelerator (catalog id, checked against the catalog by
    the theory stage) and overrides of the baseline constants."""

    accelerator: Annotated[str, Field(min_length=1)]
    precision: Precision = "bf16"
    description: str | None = None
    hardware: dict[str, HardwareValue] = {}
    laws: LawsOverride | None = None  # type: ignore[valid-type]
    model: ModelOverride | None = None  # type: ignore[valid-type]
    moe: MoeSettings | None = None
    search: SearchOverride | None = None  # type: ignore[valid-type]
    latency_scale: Annotated[float, Field(ge=0, le=1000)] = 1.0
    duration_days: Annotated[float, Field(gt=0, le=36_500)] | None = None


BoundHardware = Literal["hbm_bytes_per_s", "scaleup_bytes_per_s", "scaleup_domain_size",
                        "scaleout_bytes_per_s"]


class BoundsSettings(_Group):
    """``theory.bounds``: stand-ins for fields a run does not report (per-run ceilings). The
    precision assumed is ``ingest.default_precision``."""

    seq_len: Annotated[float, Field(ge=1, le=10_000_000)]
    micro_batch_sequences: Annotated[float, Field(gt=0, le=1_000_000)]
    aspect_ratio: Annotated[float, Field(gt=0, le=100_000)]
    blocks_per_layer: Annotated[float, Field(gt=0, le=100)]
    interleave: Interleave
    fsdp_gather: Gather
    moe_expert_fraction: Annotated[float, Field(ge=0, le=1)]
    moe_top_k: Annotated[float, Field(ge=1, le=100_000)]
    tolerance: Annotated[float, Field(ge=0, le=1)]
    search_max_log2: Annotated[int, Field(ge=0, le=12)]
    hardware: dict[BoundHardware, Annotated[float, Field(gt=0, le=1e21)]] = {}


# the framework families of pipeline/frameworks.py (kept literal here: config imports no pandas)
FrameworkFamily = Literal["megatron", "fsdp", "deepspeed", "megatron_deepspeed", "playbook"]


class MemorySettings(_Group):
    """``theory.memory``: the memory model (pipeline/theory/memory.py, docs/theory.md §11) and
    the bounds of its fitted allocator overhead."""

    weight_bytes_per_param: Annotated[float, Field(gt=0, le=64)]
    gradient_bytes_per_param: Annotated[float, Field(ge=0, le=64)]
    optimizer_bytes_per_param: Annotated[float, Field(ge=0, le=1000)]
    activation_bytes_per_value: Annotated[float, Field(gt=0, le=64)]
    logits_bytes_per_value: Annotated[float, Field(ge=0, le=64)]
    flash_attention: bool
    dropout: bool
    fsdp_prefetch_layers: Annotated[float, Field(ge=0, le=1000)]
    fsdp_pipeline_keeps_weights: bool
    runtime_reserve_bytes: Annotated[float, Field(ge=0, le=1e11)]
    # framework family -> bytes per logit value its loss holds at its peak (others: logits_...)
    loss_bytes_per_logit: dict[FrameworkFamily, Annotated[float, Field(ge=0, le=64)]] = {}
    # families whose `selective` recompute is torchtitan's per-operator policy
    op_selective_families: list[FrameworkFamily] = []
    # sources whose pipeline (torch.distributed.pipelining over FSDP2) holds each stage's
    # unsharded gradients until the last microbatch
    pipeline_unsharded_grads_sources: list[Annotated[str, Field(min_length=1)]] = []
    # sources whose recipe keeps every state in bf16; whose MoE recipes keep bf16 gradients
    bf16_state_sources: list[Annotated[str, Field(min_length=1)]] = []
    bf16_grad_moe_sources: list[Annotated[str, Field(min_length=1)]] = []
    # a measured peak at or above this fraction of the driver's capacity may be the allocator
    # filling the chip: the scores report the APE without such peaks beside the APE of all
    near_capacity_fraction: Annotated[float, Field(gt=0, le=1)] = 0.95
    # held-out scores: one fit per model left out, up to this many models; past it, the models
    # are dealt into this many folds (each still predicted without its own runs): linear cost
    max_holdout_folds: Annotated[int, Field(ge=2, le=10_000)] = 16
    max_activation_factor: Annotated[float, Field(ge=1, le=100)]
    max_fixed_bytes: Annotated[float, Field(ge=0, le=1e12)]
    # framework family (pipeline/frameworks.py) -> activation factor held at a cited value
    fixed_activation_factors: dict[FrameworkFamily, Annotated[float, Field(ge=1, le=100)]] = {}
    # families whose measured peaks fit their own factor (others: Korthikanti's count, 1)
    fitted_activation_families: list[FrameworkFamily] = []
    min_family_runs: Annotated[int, Field(ge=1, le=100_000)]


class TheorySettings(_Group):
    """``theory``: constants of the data-movement model, the frontier grid and the scenarios."""

    duration_days: Annotated[float, Field(gt=0, le=36_500)]
    laws: LawsSettings
    bytes_per_value: dict[Precision, Annotated[float, Field(gt=0, le=64)]]
    model: ModelSettings
    latency: LatencySettings
    search: SearchSettings
    frontier: FrontierSettings
    memory: MemorySettings
    scenarios: Annotated[dict[Annotated[str, Field(min_length=1)], ScenarioSettings],
                         Field(min_length=1)]
    bounds: BoundsSettings
    workers: Annotated[int, Field(ge=1, le=256)] = 1


class CompareSettings(_Group):
    """``compare``: extrapolation targets, the efficiency threshold and the curve resolution.
    The interval is ``fit.interval`` and the frontier horizon ``theory.duration_days``."""

    extrapolate_n: Annotated[list[Annotated[int, Field(ge=2, le=10**12)]], Field(min_length=1)]
    efficiency_threshold: Fraction
    curve_points: Annotated[int, Field(ge=4, le=10_000)]


class ReportSettings(_Group):
    """``report``: what the report shows. Scenario names must be ``theory.scenarios`` keys."""

    title: str
    series_per_panel: Annotated[int, Field(ge=1, le=50)]
    series_table_per_source: Annotated[int, Field(ge=1, le=10_000)]
    gap_runs: Annotated[int, Field(ge=1, le=10_000)]
    strategy_sources: list[Annotated[str, Field(min_length=1)]]
    strategy_models: dict[str, list[str]] = {}
    baseline_scenario: str = ""
    frontier_scenarios: list[Annotated[str, Field(min_length=1)]] = []
    workers: Annotated[int, Field(ge=1, le=256)] = 1
    # Sources or series ids the report opens with and stars in every figure (empty: every
    # source of step logs); `scalewall report --focus` replaces it for one rendering.
    focus: Annotated[list[Annotated[str, Field(min_length=1, max_length=500)]],
                     Field(max_length=1000)] = []
    # "Your runs" details this many series (the largest N first) and lists this many runs in
    # no series and rejected logs; a fleet's others are counted (``--focus`` details any)
    series_shown: Annotated[int, Field(ge=1, le=10_000)] = 10
    runs_shown: Annotated[int, Field(ge=1, le=1_000_000)] = 50

    @field_validator("strategy_models")
    @classmethod
    def _listed_sources(cls, value: dict[str, list[str]], info: ValidationInfo
                        ) -> dict[str, list[str]]:
        unknown = sorted(set(value) - set(info.data.get("strategy_sources", value)))
        if unknown:
            raise ValueError(f"source {unknown[0][:80]!r} is not in report.strategy_sources")
        return value


# Terms of the calibrated step-time model (docs/theory.md §10; their meanings are
# pipeline/calibrate/features.py TERMS, which a test keeps equal to this list).
# the family parameters of the step model (pipeline/calibrate/critical_path.py PARAMETERS)
CalibrateTerm = Literal["compute_efficiency", "tp_overlap", "dp_overlap", "fixed_s",
                        "layer_overhead_s", "attention_efficiency", "expert_overhead_s"]
CalibratePredictor = Literal["naive_linear", "naive_loglinear", "calibrated"]
IntervalMethod = Literal["analytic", "conformal"]


def _compute_first(terms: list[str]) -> list[str]:
    if terms[0] != "compute_efficiency":
        raise ValueError("a form's first parameter must be 'compute_efficiency' (every run "
                         "computes)")
    return terms


CalibrateForm = Annotated[list[CalibrateTerm], Field(min_length=1, max_length=7),
                          AfterValidator(_compute_first)]


class CalibrateIntervalMethods(_Group):
    """``calibrate.interval_method``: how each holdout scheme's 95% intervals are made."""

    largest: IntervalMethod
    source: IntervalMethod


class CalibrateSelected(_Group):
    """``calibrate.selected``: the rule of the ``selected`` predictor, fixed on the shipped data
    (docs/theory.md §10.4): in largest_k ``largest`` for series with a stated layout,
    ``assumed_layout`` where the theory assumed it, ``fallback`` where that predicts nothing;
    ``source`` in the source holdout."""

    largest: CalibratePredictor
    assumed_layout: CalibratePredictor
    fallback: CalibratePredictor
    source: CalibratePredictor


class CalibrateSettings(_Group):
    """``calibrate``: the calibrated data-movement model, its source holdout, interval methods,
    the ``selected`` rule and the calibrated frontier (docs/theory.md §10). Shared with other
    groups, so read from there: the interval level and the largest-N holdout scheme
    (``fit.interval``, ``fit.holdout_k``, ``fit.extrapolation_min_distinct_n``: calibrate scores
    the laws on the fit stage's own cases), the frontier's grid and scenarios
    (``theory.frontier``, ``theory.scenarios``) and the N ``selected`` is predicted at beyond
    the data (``compare.extrapolate_n``)."""

    forms: Annotated[dict[Annotated[str, Field(min_length=1)], CalibrateForm],
                     Field(min_length=1, max_length=32)]
    criterion: Literal["aicc", "bic", "first"]
    balance: Annotated[float, Field(ge=0, le=1)]
    em_rounds: Annotated[int, Field(ge=1, le=100)]
    min_source_runs: Annotated[int, Field(ge=1, le=1_000_000)]
    # refits per holdout scheme: past this many sources, sources are held out in this many
    # folds (each source still predicted only from the others), so the cost stays linear
    max_holdout_folds: Annotated[int, Field(ge=2, le=10_000)]
    # processes for the held-out refits (pipeline/processes.py; results do not depend on it)
    workers: Annotated[int, Field(ge=1, le=256)] = 1
    interval_method: CalibrateIntervalMethods
    selected: CalibrateSelected
    # each draw is one frontier search per scenario on frontier_ci_points points
    frontier_samples: Annotated[int, Field(ge=1, le=200)]
    frontier_ci_points: Annotated[int, Field(ge=2, le=401)]
    seed: Annotated[int, Field(ge=0, le=2**32 - 1)]


ExecutorKind = Literal["local", "dask", "local-cluster"]


class ExecutorSettings(_Group):
    """``executor``: where the stages' maps over independent items run (pipeline/processes.py,
    docs/cluster.md). Outputs do not depend on it (no stage lists it in dvc.yaml): ``local``
    is this machine's process pool, ``dask`` the scheduler at ``address``, ``local-cluster`` a
    ``dask.distributed.LocalCluster`` of ``cluster_workers`` processes started for the stage."""

    kind: ExecutorKind = "local"
    # scheduler of a running Dask cluster (kind dask), e.g. tcp://10.0.0.5:8786
    address: Annotated[str, Field(max_length=500, validate_default=True)] = ""
    connect_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60.0
    # reruns of a task that raised (a transient read error); a worker's death is the
    # scheduler's allowed-failures, not this
    retries: Annotated[int, Field(ge=0, le=10)] = 2
    # kind local-cluster: worker processes, one thread each, and each one's memory limit
    # (past 80% it spills, past 95% the nanny restarts it and its tasks rerun elsewhere)
    cluster_workers: Annotated[int, Field(ge=1, le=256)] = 2
    worker_memory_bytes: Annotated[int, Field(ge=2**28, le=2**40)] = 2**31

    @field_validator("address")
    @classmethod
    def _address(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("kind") == "dask" and not value:
            raise ValueError("kind dask needs the scheduler's address (e.g. tcp://host:8786)")
        if value and not re.fullmatch(r"((tcp|tls|ucx|ws|wss)://)?[\w.\-\[\]:]+:\d{1,5}", value):
            raise ValueError("must be a scheduler address such as tcp://host:8786")
        return value


class Settings(_Group):
    """The whole of ``params.yaml``."""

    ingest: IngestSettings
    fit: FitSettings
    theory: TheorySettings
    compare: CompareSettings
    report: ReportSettings
    calibrate: CalibrateSettings
    executor: ExecutorSettings = ExecutorSettings()


def check_scenario_names(report: ReportSettings, known: set[str]) -> None:
    """Scenario names quoted by ``report`` must exist (an unknown one is a ConfigError, not a
    silent fallback)."""
    if report.baseline_scenario and report.baseline_scenario not in known:
        raise ConfigError(f"params: field 'report.baseline_scenario': no scenario "
                          f"{report.baseline_scenario[:80]!r} in theory.scenarios "
                          f"(known: {', '.join(sorted(known))})")
    for i, name in enumerate(report.frontier_scenarios):
        if name not in known:
            raise ConfigError(f"params: field 'report.frontier_scenarios.{i}': no scenario "
                              f"{name[:80]!r} in theory.scenarios "
                              f"(known: {', '.join(sorted(known))})")


# -- validation --------------------------------------------------------------------------------
def _group_model(dotted: str) -> type[BaseModel]:
    model: type[BaseModel] = Settings
    for part in dotted.split("."):
        field = model.model_fields.get(part)
        if field is None or not (isinstance(field.annotation, type)
                                 and issubclass(field.annotation, BaseModel)):
            raise KeyError(f"no settings group {dotted!r}")
        model = field.annotation
    return model


def _where(node: Any, loc: tuple) -> list[str]:
    """The part of a pydantic error location that names keys of the input (drops the tags
    pydantic adds for union members and validators)."""
    parts = []
    for key in loc:
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
            node = node[key]
        elif isinstance(node, Mapping) or isinstance(node, list):
            # a missing or unknown key: name it, then stop
            if isinstance(key, (str, int)) and not str(key).startswith(("literal[", "constrained")):
                parts.append(str(key))
            break
        else:
            break
        parts.append(str(key))
    return parts


def _message(prefix: str, data: Any, exc: ValidationError) -> str:
    out = []
    for err in exc.errors()[:5]:
        dotted = ".".join([p for p in (prefix,) if p] + _where(data, tuple(err["loc"])))
        if err["type"] == "missing":
            out.append(f"missing field '{dotted}'")
        elif err["type"] == "extra_forbidden":
            out.append(f"unknown field '{dotted}'")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            shown = repr(err.get("input"))
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            out.append(f"field '{dotted}': {msg}, got {shown}")
    more = len(exc.errors()) - len(out)
    return "params: " + "; ".join(out) + (f" (and {more} more)" if more > 0 else "")


def _validate(model: type[BaseModel], data: Any, prefix: str) -> Any:
    if data is None:
        raise ConfigError(f"params: missing field '{prefix}'")
    if isinstance(data, model):
        return data
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_message(prefix, data, exc)) from None


def settings(params: Mapping[str, Any] | Settings, group: str) -> Any:
    """The validated settings of ``group`` (``"fit"``, ``"theory"``, ``"ingest.logs"``, ...).

    ``params`` is the dict of ``params.yaml`` (or a validated ``Settings``). Only that group is
    read, so tests and notebooks may pass just the groups a function needs. Raises ConfigError
    naming the dotted field.
    """
    node: Any = params
    for part in group.split("."):
        if isinstance(node, BaseModel):
            node = getattr(node, part)
        elif isinstance(node, Mapping) and part in node:
            node = node[part]
        else:
            raise ConfigError(f"params: missing field '{group}'")
    return _validate(_group_model(group), node, group)


def load_settings(params: Mapping[str, Any]) -> Settings:
    """The whole file validated, references between groups included (the CLI runs this first,
    so a broken file stops any stage with exit status 2)."""
    valid = _validate(Settings, params, "")
    check_scenario_names(valid.report, set(valid.theory.scenarios))
    return valid
