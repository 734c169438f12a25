"""One ``Record`` -> one run row (a dict of ``ingest/contract.py: RUN_COLUMNS``) or a reject reason.

Checks, in order (the first failure is the reject reason, ``"<code>: <detail>"``):

* a ``record_kind`` other than ``run`` (claims, statistics, microbenchmarks) -> ``not_a_run``;
* ``status`` in ``vocab.STATUSES`` (``ok`` by default); ``missing_file`` -> ``missing_file``;
* required fields present: source, model (for a step log, params_b instead: the run is then
  named ``unnamed <params_b>B``), accelerator, n_accelerators, params_b (or from the model
  catalog) and one measure -- except runs with status oom/error/aborted/no_run_stop, which
  are kept with no measure;
* numbers parse and are finite (``bad_value``); counts are integers in range, throughputs and
  times are > 0 (``out_of_range``); MFU/HFU in (0, 1], a value in (1, 100] is a percentage given
  as a fraction (``unit_slip``), above 100 ``out_of_range``;
* the accelerator resolves in the hardware catalog (``unknown_accelerator``), never guessed.

Units: ``params = params_b * 1e9``. Shapes missing from the record are filled from the model
catalog, and derived measures come from ``derive``; both are named in ``derived``.

Precision: a run whose source states none gets the default (``ingest.default_precision``) only
when a derived value (MFU, FLOP/s from MFU or HFU) used the peak at that precision, and never on
a chip with fp8 units unless ``ingest.mfu_on_assumed_precision``; otherwise ``precision`` stays
null and ``peak_precision`` (listed in ``derived``) names the precision of the catalog peak.
"""

from __future__ import annotations

import hashlib
import math
import re
from numbers import Real
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from pipeline.bounded import short
from pipeline.plausibility import above_record
from pipeline.plausibility import check_mfu as check_mfu_limit
from pipeline.shapes import microbatches
from pipeline.ingest.core.derive import Reject, derive_measures, strategy_family
from pipeline.ingest.core.derive import append_note as _note
from pipeline.ingest.core.plausible import (check_layout, check_mfu, check_params, check_scale,
                                             check_shape, check_step_time, rounding)
from pipeline.ingest.core.schedule import parse_schedule
from pipeline.ingest.records import Record
from pipeline.ingest.contract import PUBLISHED_MEASURES, RUN_COLUMN_NAMES
from pipeline.numbers import NumberError, parse_number
from pipeline.text import INVISIBLE, strip_invisible
from pipeline.vocab import (POWER_MEASUREMENTS, PRECISIONS, PRECISION_ALIASES, SCALINGS,
                            SOURCE_KINDS, STATUSES)

if TYPE_CHECKING:  # the settings group is passed in as validated; no import at run time
    from pipeline.config import IngestSettings

BILLION = 1e9
# Counts above this are not plausible inputs (and would overflow int64 downstream).
MAX_COUNT = 2**53
# A run needs one measure: a published one, or one that MLPerf and step-log records deliver.
MEASURES = (*PUBLISHED_MEASURES, "hardware_tflops_per_accelerator", "model_flops_per_s",
            "hardware_flops_per_s", "inverse_time_to_train_per_s")
_TEXT = ("citation", "model", "strategy", "notes", "benchmark", "mlperf_version", "system",
         "submitter", "result_path", "framework", "cluster")
_POSITIVE = ("global_batch_tokens", "capacity_factor", "tokens_per_s", "tokens_per_s_per_accelerator",
             "model_flops_per_s", "step_time_s", "time_to_train_s", "inverse_time_to_train_per_s",
             "power_w_per_accelerator", "energy_j_per_token", "olympic_score_s", "energy_j",
             "energy_j_nodes")
# Integer columns and their smallest allowed value.
_COUNTS = {"n_layers": 1, "d_model": 1, "seq_len": 1, "accelerators_per_node": 1, "dp": 1,
           "tp": 1, "pp": 1, "cp": 1, "ep": 1, "micro_batch": 1, "zero_stage": 0,
           "n_experts": 1, "top_k": 1}
_SCALING_WORD = re.compile(r"\b(strong|weak|single|sweep)\b")
# Fields that identify a run within its source (run_id); path only for per-file sources.
ID_FIELDS = ("citation", "model", "accelerator", "n_accelerators", "dp", "tp", "pp", "cp", "ep",
             "zero_stage", "micro_batch", "global_batch_tokens", "seq_len", "strategy",
             "precision", "benchmark", "mlperf_version", "submitter", "system", "result_path")


class CatalogCache:
    """Memoized catalog look-ups: the same alias or model is resolved once per stage run."""

    def __init__(self, catalog: Any, plausibility: bool = True) -> None:
        """``plausibility``: apply the MFU rule of ``pipeline.plausibility`` (read from the
        catalog's folder; a catalog without one, such as a test stub, applies none)."""
        self.catalog = catalog
        directory = getattr(catalog, "directory", None)
        self.plausibility_dir = Path(directory) if plausibility and directory else None
        self._acc: dict[str, str | None] = {}
        self._peak: dict[tuple[str, str], tuple[float | None, str | None]] = {}
        self._family: dict[str, str | None] = {}
        self._bandwidth: dict[str, tuple[float | None, float | None]] = {}
        self._model: dict[tuple[str, float | None], str | None] = {}
        self._shape: dict[str, dict[str, Any]] = {}

    def accelerator(self, name: str) -> str | None:
        if name not in self._acc:
            self._acc[name] = self.catalog.resolve_accelerator(name)
        return self._acc[name]

    def family(self, acc_id: str) -> str | None:
        if acc_id not in self._family:
            self._family[acc_id] = self.catalog.family(acc_id)
        return self._family[acc_id]

    def peak(self, acc_id: str, precision: str) -> tuple[float | None, str | None]:
        key = (acc_id, precision)
        if key not in self._peak:
            self._peak[key] = self.catalog.peak_flops_per_s(acc_id, precision)
        return self._peak[key]

    def bandwidths(self, acc_id: str) -> tuple[float | None, float | None]:
        """(HBM, scale-out) bytes/s per chip from the hardware catalog (None where unlisted)."""
        if acc_id not in self._bandwidth:
            spec = self.catalog.spec(acc_id)
            self._bandwidth[acc_id] = (spec.get("hbm_bytes_per_s"),
                                       spec.get("scaleout_bytes_per_s"))
        return self._bandwidth[acc_id]

    def model(self, name: str, params: float | None) -> str | None:
        key = (name, params)
        if key not in self._model:
            self._model[key] = self.catalog.resolve_model(name, params)
        return self._model[key]

    def shape(self, model_id: str) -> dict[str, Any]:
        """Catalog row of ``model_id`` as plain Python values, missing ones dropped."""
        if model_id not in self._shape:
            row = (self.catalog.model_spec(model_id) if model_id in self.catalog.models.index
                   else {})
            self._shape[model_id] = {k: v for k, v in row.items() if _present(v)}
        return self._shape[model_id]


def _present(value: Any) -> bool:
    """False for the missing values a catalog row may hold: None, NaN, pandas NA, ''."""
    if value is None or value is pd.NA:
        return False
    if isinstance(value, Real):
        return not math.isnan(value)
    return value != ""


# Field parsers ---------------------------------------------------------------------------------
def _text(fields: Any, name: str) -> str | None:
    value = fields.get(name)
    if value is None:
        return None
    text = value.strip() if isinstance(value, str) else str(value)
    return text or None


def _float(fields: Any, name: str) -> float | None:
    """A numeric field through the one number parser (``pipeline.numbers``): never raises on
    size (a 400-digit integer is a reject, not an OverflowError)."""
    value = fields.get(name)
    if value is None:  # not given (most optional fields of most records)
        return None
    try:
        return parse_number(value, name)
    except NumberError as exc:
        raise Reject(exc.code, str(exc)) from None


def _count(fields: Any, name: str, minimum: int) -> int | None:
    number = _float(fields, name)
    if number is None:
        return None
    if number != int(number) or not minimum <= number <= MAX_COUNT:
        raise Reject("out_of_range", f"{name}={_short(fields.get(name))} is not an integer "
                                     f">= {minimum}")
    return int(number)


def _fraction(fields: Any, name: str) -> float | None:
    """MFU/HFU: a fraction in (0, 1]. 1 < x <= 100 is a percentage written as a fraction."""
    number = _float(fields, name)
    if number is None:
        return None
    if 1.0 < number <= 100.0:
        raise Reject("unit_slip", f"{name}={_short(fields.get(name))} looks like a percentage; "
                                  f"expected a fraction in (0, 1]")
    if not 0.0 < number <= 1.0:
        raise Reject("out_of_range", f"{name}={_short(fields.get(name))} not in (0, 1]")
    return number


def _positive(fields: Any, name: str) -> float | None:
    number = _float(fields, name)
    if number is not None and number <= 0:
        raise Reject("out_of_range", f"{name}={_short(fields.get(name))} must be > 0")
    return number


def _short(value: Any) -> str:
    return short(value, 40)


def _vocab(value: str | None, allowed: tuple[str, ...], name: str, aliases: dict[str, str]
           ) -> str | None:
    if value is None:
        return None
    key = value.lower()
    key = aliases.get(key, key)
    if key not in allowed:
        raise Reject("bad_value", f"{name}={_short(value)} not one of {', '.join(allowed)}")
    return key


def parse_scaling(text: str | None) -> str | None:
    """Scaling label from the source's text (``weak (model size grows)`` -> ``weak``)."""
    if text is None:
        return None
    if text.lower() in SCALINGS:
        return text.lower()
    match = _SCALING_WORD.search(text.lower())
    return match.group(1) if match else None


def run_id(source: str, row: dict[str, Any], path: str | None) -> str:
    """Stable short id: sha1 hex[:16] of the source and the fields that identify a run.

    The file path is part of the identity only for per-file sources (MLPerf trees, step logs);
    a published row keeps its id when rows are added or moved in its table.
    """
    get = row.get
    parts = [source] + ["" if (v := get(name)) is None else v if type(v) is str
                        else canonical(v) for name in ID_FIELDS]
    if path is not None:
        parts.append(path)
    return hashlib.sha1("\x1f".join(parts).encode("utf-8")).hexdigest()[:16]


def canonical(value: Any) -> str:
    """A value as ``run_id`` hashes it: "" for None, an integral float as its integer."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _visible(fields: Any) -> tuple[Any, list[tuple[str, list[str]]]]:
    """``fields`` with bidi controls and zero-width characters removed from text values
    (``pipeline.text``; ``Record`` cleans its source itself), and which fields had them."""
    found: list[tuple[str, list[str]]] = []
    cleaned = None
    # One search over all text values finds the common case (none) in one C call.
    if not INVISIBLE.search("\x1f".join(v for v in fields.values() if isinstance(v, str))):
        return fields, found
    for name, value in fields.items():
        if isinstance(value, str) and INVISIBLE.search(value):
            if cleaned is None:
                cleaned = dict(fields)
            cleaned[name], points = strip_invisible(value)
            found.append((name, points))
    return (fields if cleaned is None else cleaned), found


# The record -> run conversion ------------------------------------------------------------------
def normalize(record: Record, catalog: CatalogCache, options: IngestSettings) -> dict[str, Any]:
    """Return the run row of ``record`` (all ``RUN_COLUMN_NAMES``, plus ``_series``).

    Raises ``Reject`` with the reason when the record cannot be a run. ``run_id`` is set; the
    series columns are filled later by ``series.assign_series``. The steps run in a fixed
    order, so a record with several faults is rejected for the first: what the record is
    (``_status``), who and what ran (``_identity``), the numbers as given (``_numbers``), the
    chip and its peak (``_chip``), the model (``_model``), then the derived measures.
    """
    f, invisible = _visible(record.fields or {})
    row: dict[str, Any] = dict.fromkeys(RUN_COLUMN_NAMES)
    derived = [d.strip() for d in (_text(f, "derived") or "").split(";") if d.strip()]
    row["status"] = _status(f)
    acc_name, kind = _identity(f, record, row, options.max_accelerators)
    given = _numbers(f, row)
    precision, assumed, peak, peak_withheld = _chip(f, row, acc_name, catalog, options, derived)
    _model(row, catalog, given["params_b"], given["active_b"], derived)
    filled, from_peak = derive_measures(row, None if peak_withheld else peak, given["tflops"],
                                        options.attention_flops, given["hw_tflops"])
    derived += filled
    _check_stated_mfu(f, row, peak, given["tflops"], filled)
    # An assumed precision becomes the run's only when a derived value rests on its peak;
    # otherwise `precision` stays empty as the source left it, and the peak columns say which
    # precision their (assumed) peak is at.
    if assumed and from_peak:
        # the precision whose peak was used: fp16 on a chip without bf16 units (V100, T4),
        # never a format the chip does not have
        precision = row["peak_precision"] or options.default_precision
        derived.append("precision")
    elif assumed and peak is not None:
        derived.append("peak_precision")
    row["precision"] = precision
    _check_plausible(row, catalog, given["active_b"])
    if peak_withheld and row["mfu"] is None and row["model_flops_per_s"] is not None:
        row["notes"] = _note(row["notes"], "mfu not derived: precision not stated and the chip "
                                           "has fp8 units")
    for name in ("params", "active_params"):
        if not math.isfinite(row[name]):
            raise Reject("out_of_range", f"{name} = {row[name]!r}")

    if invisible:
        row["notes"] = _note(row["notes"], "invisible characters removed: " + ", ".join(
            f"{name} ({' '.join(points)})" for name, points in invisible))
    row["strategy_family"] = strategy_family(row["n_accelerators"], row["dp"], row["tp"],
                                             row["pp"], row["zero_stage"], row["strategy"])
    row["scaling"] = parse_scaling(_text(f, "scaling"))
    row["derived"] = ";".join(dict.fromkeys(derived)) or None
    row["provenance"] = _text(f, "provenance") or f"{record.path}:{record.line}"
    # The id holds the precision as stated, so an assumption cannot change a run's identity.
    row["run_id"] = run_id(record.source, dict(row, precision=None) if assumed else row,
                           record.path if kind != "published" else None)
    row["_series"] = _text(f, "series")
    return row


def _check_stated_mfu(f: dict[str, Any], row: dict[str, Any], peak: float | None,
                      tflops: float | None, filled: list[str]) -> None:
    """A stated MFU must agree with the throughput it could be derived from (``check_mfu``);
    recounted on the project's FLOP count (``flop_count``), the stated one is
    ``mfu_source_count`` and the throughput tokens/s."""
    recounted = "mfu" in filled and "mfu" in f
    stated_mfu = "mfu" in f and ("mfu" not in filled or recounted)
    if stated_mfu and peak is not None and row["model_flops_per_s"] is not None and (
            tflops is not None or row["tokens_per_s"] is not None):
        basis = ("tokens_per_s" if recounted
                 else "tflops_per_accelerator" if tflops is not None
                 and "model_flops_per_s" in filled
                 else "model_flops_per_s" if "model_flops_per_s" not in filled
                 else "tokens_per_s")
        check_mfu(row["mfu_source_count"] if recounted else row["mfu"], row["model_flops_per_s"],
                  row["n_accelerators"], peak, basis, rounding(f["mfu"]))


def _check_plausible(row: dict[str, Any], catalog: CatalogCache, active_b: float | None
                     ) -> None:
    """The run's MFU (stated or derived) against its chip's limit (``pipeline.plausibility``):
    above it a reject naming the likely causes; above the family's record a note."""
    if row["mfu"] is None or catalog.plausibility_dir is None:
        return
    precision = row["precision"] or row["peak_precision"]
    total_only = active_b is None and row["active_params"] >= row["params"]
    reason = check_mfu_limit(row["mfu"], row["accelerator"], precision,
                             total_params_only=total_only, catalog_dir=catalog.plausibility_dir)
    if reason is not None:
        raise Reject("implausible", reason)
    note = above_record(row["mfu"], row["accelerator"], precision, catalog.plausibility_dir)
    if note is not None:
        row["notes"] = _note(row["notes"], note)


def _status(f: dict[str, Any]) -> str:
    """The run's status; a record that is no run (a statistic, a missing log) is a reject."""
    kind_of_record = _text(f, "record_kind")
    if kind_of_record is not None and kind_of_record.lower() != "run":
        raise Reject("not_a_run", f"record_kind={kind_of_record}")
    status = (_text(f, "status") or "ok").lower()
    if status == "missing_file":
        notes = _text(f, "notes")
        raise Reject("missing_file", "the source lists this result but not its log"
                     + (f" (notes: {notes})" if notes else ""))
    if status not in STATUSES:
        raise Reject("bad_value", f"status={_short(status)} not one of {', '.join(STATUSES)}")
    return status


def _identity(f: dict[str, Any], record: Record, row: dict[str, Any],
              max_accelerators: int) -> tuple[str, str]:
    """Source, kind, text fields, model, accelerator name and chip count (all required).
    Returns the accelerator as written and the source kind."""
    # Parsers of per-file inputs may name the source on the Record only.
    source = _text(f, "source") if "source" in f else record.source
    if not source:
        raise Reject("missing_required", "source")
    row["source"] = record.source
    kind = _vocab(_text(f, "source_kind") or "published", SOURCE_KINDS, "source_kind", {})
    row["source_kind"] = kind
    for name in _TEXT:
        if name in f:
            row[name] = _text(f, name)
    # A user's own log may name no model: its parameter count (with the shape) is enough.
    # A published row always names what it measured.
    if row["model"] is None and (kind != "log" or _text(f, "params_b") is None):
        raise Reject("missing_required", "model" + (
            " (a model id of data/catalog/models.csv, or params_b with the shape: n_layers, "
            "d_model, seq_len)" if kind == "log" else ""))
    if kind == "published" and row["citation"] is None:
        raise Reject("missing_required", "citation (a published table says where in its source "
                                         "each row comes from)")
    acc_name = _text(f, "accelerator")
    if acc_name is None:
        raise Reject("missing_required", "accelerator")
    if _text(f, "n_accelerators") is None:
        raise Reject("missing_required", "n_accelerators")
    n = _count(f, "n_accelerators", 1)
    check_scale(n, max_accelerators)
    row["n_accelerators"] = n
    return acc_name, kind


def _numbers(f: dict[str, Any], row: dict[str, Any]) -> dict[str, float | None]:
    """Counts, positive quantities and fractions as given; at least one measure for an ok run.
    Returns the inputs of the derivations that are not run columns."""
    # Only present fields are parsed (row already holds None for the others): keeps a
    # 10k-record ingest within seconds.
    for name, minimum in _COUNTS.items():
        if name in f:
            row[name] = _count(f, name, minimum)
    check_layout(row["n_accelerators"], {k: row[k] for k in ("tp", "pp", "cp", "dp", "ep")})
    if row["zero_stage"] is not None and row["zero_stage"] > 3:
        raise Reject("out_of_range", f"zero_stage={row['zero_stage']} not in 0..3")
    parse_schedule(f, row)
    for name in _POSITIVE:
        if name in f:
            row[name] = _positive(f, name)
    _power(f, row)
    if "peak_memory_bytes_per_accelerator" in f:
        row["peak_memory_bytes"] = _positive(f, "peak_memory_bytes_per_accelerator")
    given = {"tflops": _positive(f, "tflops_per_accelerator"),
             "hw_tflops": _positive(f, "hardware_tflops_per_accelerator")}
    row["hardware_flops_per_s"] = _positive(f, "hardware_flops_per_s")
    row["mfu"] = _fraction(f, "mfu")
    row["hfu"] = _fraction(f, "hfu")
    given["params_b"] = _positive(f, "params_b")
    given["active_b"] = _positive(f, "active_params_b")
    for name in ("params_b", "active_b"):
        if given[name] is not None:
            check_params(given[name], "params_b" if name == "params_b" else "active_params_b")
    check_step_time(row["step_time_s"])

    has_measure = any(_text(f, m) is not None for m in MEASURES)
    if not has_measure and row["status"] == "ok":
        raise Reject("no_measure", "no throughput, utilization, step time or time-to-train")
    return given


def _power(f: dict[str, Any], row: dict[str, Any]) -> None:
    """MLPerf power fields other than the positive energies: the interconnect's energy (0 J
    when the submission logs no switch) and where the power was measured (AC or DC)."""
    if "energy_j_interconnect" in f:
        row["energy_j_interconnect"] = _float(f, "energy_j_interconnect")
        if row["energy_j_interconnect"] is not None and row["energy_j_interconnect"] < 0:
            raise Reject("out_of_range", "energy_j_interconnect < 0")
    if _text(f, "power_measurement") is not None:
        row["power_measurement"] = _vocab(_text(f, "power_measurement"), POWER_MEASUREMENTS,
                                          "power_measurement",
                                          {m.lower(): m for m in POWER_MEASUREMENTS})


def _chip(f: dict[str, Any], row: dict[str, Any], acc_name: str, catalog: CatalogCache,
          options: IngestSettings, derived: list[str]) -> tuple[str | None, bool, float | None, bool]:
    """The catalog accelerator, its peak at the stated (or assumed) precision and its
    compute-to-bandwidth ratios. Returns (precision as stated, whether it was assumed, peak,
    whether derived measures must not use that peak)."""
    acc_id = catalog.accelerator(acc_name)
    if acc_id is None:
        # The catalog says why: not listed at all, or listed as ambiguous (a bare "A100").
        raise Reject("unknown_accelerator",
                     catalog.catalog.explain_accelerator(acc_name).removeprefix("unknown: "))
    row["accelerator"] = acc_id
    row["accelerator_family"] = catalog.family(acc_id)

    precision = _vocab(_text(f, "precision"), PRECISIONS, "precision", PRECISION_ALIASES)
    assumed = precision is None
    peak, peak_precision = catalog.peak(acc_id, precision or options.default_precision)
    row["peak_flops_per_s_per_accelerator"] = peak
    row["peak_precision"] = peak_precision if peak is not None else None
    if precision is not None and peak is not None and peak_precision != precision:
        row["notes"] = _note(row["notes"], f"precision {precision} stated, but the catalog lists "
                                           f"no {precision} peak for {acc_id}: rated at its "
                                           f"{peak_precision} peak")
    # The chip's compute-to-bandwidth ratios (Fernandez et al. 2024: faster chips on the same
    # memory and network expose communication); the fit stage regresses MFU on them.
    hbm, scaleout = catalog.bandwidths(acc_id)
    for name, bandwidth in (("flops_per_hbm_byte", hbm), ("flops_per_scaleout_byte", scaleout)):
        if peak is not None and bandwidth:
            row[name] = peak / bandwidth
            derived.append(name)
    # Measures are derived from a peak at an assumed precision only where it cannot be off by a
    # precision factor: not on chips with fp8 units, where the run may have used fp8 (MLPerf
    # submissions on H100/B200 do) and the bf16 peak would double its MFU.
    peak_withheld = (assumed and not options.mfu_on_assumed_precision
                     and catalog.peak(acc_id, "fp8")[0] is not None)
    return precision, assumed, peak, peak_withheld


def _model(row: dict[str, Any], catalog: CatalogCache, params_b: float | None,
           active_b: float | None, derived: list[str]) -> None:
    """Model id, parameter counts and shape: as given, else from the model catalog."""
    params = params_b * BILLION if params_b is not None else None
    if row["model"] is None:  # params_b with the shape is enough; the name says it is unnamed
        row["model"] = f"unnamed {params_b:g}B"
        derived.append("model")
    model_id = catalog.model(row["model"], params)
    row["model_id"] = model_id
    shape = catalog.shape(model_id) if model_id is not None else {}
    if params is None and shape.get("params"):
        params = float(shape["params"])
        derived.append("params")
    if params is None:
        raise Reject("missing_required", "params_b (model not in the catalog)")
    row["params"] = params
    if active_b is not None:
        row["active_params"] = active_b * BILLION
    elif shape.get("active_params") and float(shape["active_params"]) < params:
        # An MoE model of the catalog: its active count, not the dense default.
        row["active_params"] = float(shape["active_params"])
        derived.append("active_params")
    else:
        row["active_params"] = params
    if row["active_params"] > params:
        raise Reject("out_of_range", f"active_params {row['active_params']:.4g} > params "
                                     f"{params:.4g}")
    for name in ("n_layers", "d_model", "seq_len", "n_experts", "top_k"):
        if row[name] is None and shape.get(name):
            row[name] = int(shape[name])
            derived.append(name)
    check_shape(row["active_params"], row["n_layers"], row["d_model"])
    _check_moe(row)
    _check_flushes(row)


def _check_flushes(row: dict[str, Any]) -> None:
    """Each pipeline schedule runs the same number of microbatches, at least one (a
    gradient-accumulation step each, as the planner's ``flushes=`` requires): ``pipeline_flushes``
    at most the step's microbatches, global_batch_tokens / (seq_len x dp x micro_batch), and a
    divisor of them (``pipeline.shapes.microbatches``), where all four are stated."""
    flushes = row.get("pipeline_flushes")
    given = [row.get(k) for k in ("global_batch_tokens", "seq_len", "dp", "micro_batch")]
    if flushes is None or flushes <= 1 or any(x is None for x in given):
        return
    tokens, seq, dp, micro = given
    exact = tokens / (seq * dp * micro)
    m = int(microbatches(tokens, dp, micro, seq))
    if flushes > exact * (1.0 + 1e-9):
        raise Reject("out_of_range", f"pipeline_flushes={flushes} exceeds the step's "
                                     f"{exact:.4g} microbatches (global_batch_tokens / "
                                     "(seq_len x dp x micro_batch)): each schedule runs one "
                                     "at least")
    if m % flushes:
        raise Reject("out_of_range", f"pipeline_flushes={flushes} does not divide the step's "
                                     f"{m} microbatches: each schedule runs m / flushes of them")


def _check_moe(row: dict[str, Any]) -> None:
    """MoE counts must agree: top_k <= n_experts, ep <= n_experts (an EP rank holds at least
    one expert). A total stated as the active count is the MFU plausibility rule's reject."""
    experts, top_k, ep = row["n_experts"], row["top_k"], row["ep"]
    if experts is not None and top_k is not None and top_k > experts:
        raise Reject("out_of_range", f"top_k {top_k} > n_experts {experts}")
    if experts is not None and ep is not None and ep > experts:
        raise Reject("out_of_range", f"ep {ep} > n_experts {experts} (an expert-parallel rank "
                                     "holds at least one expert)")


