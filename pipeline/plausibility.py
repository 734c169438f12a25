"""One plausibility rule for a model-FLOP utilization (MFU), shared by ingest and ``plan``.

An MFU is implausible when it exceeds the *limit* of its chip and precision:

``limit = min(gemm, RECORD_MARGIN x record)`` (``gemm`` alone where no record is listed)

* ``gemm``: the chip's largest measured GEMM throughput as a fraction of its dense peak
  (``data/catalog/gemm_efficiency.csv``, Bekman's maximum-achievable-matmul table, its
  sources per row). Every model FLOP of a training step is a matmul FLOP or slower (attention,
  norms, optimizer and communication only add time), so no step reaches more model FLOP/s than
  the best single GEMM on the same chip: an MFU above it is a counting error, not a record.
* ``record``: the highest MFU measured on the accelerator *family* at that precision in the
  shipped published tables (``data/catalog/mfu_ceilings.csv``, one cited run per row; written
  by ``scripts/mfu_ceilings.py`` and checked against the tables by
  ``tests/test_plausibility.py``). ``RECORD_MARGIN = 1.2`` is a stated tolerance, not a
  measurement: a run up to a fifth above the best published on the same chip is kept (with a
  note that it is above the record), since a well-tuned job may set a new one; beyond that it
  is far more often the FLOPs counted on the wrong parameter count, too few chips, or a
  lower precision than stated.

The likely causes are named with the input key that fixes each:

* ``active_params_b`` -- a mixture-of-experts model whose FLOPs were counted on its total
  parameters (FLOPs per token are ``6 x active`` parameters, Kaplan et al. 2020,
  arXiv:2001.08361 eq. 2.1, with only the routed experts active: Fedus et al. 2021,
  arXiv:2101.03961 Sec. 2); named when the run states no active count below its total;
* ``precision`` -- an fp8 run rated at the 16-bit peak (twice the MFU); named when the chip has
  fp8 units, the run does not state fp8, and the fp8 peak would bring the MFU under the limit;
* ``n_accelerators`` -- fewer chips than ran (a per-node count, one replica's count).
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import CATALOG_DIR
from pipeline.vocab import PRECISION_ALIASES

CEILINGS_FILE = "mfu_ceilings.csv"
GEMM_FILE = "gemm_efficiency.csv"
HARDWARE_FILE = "hardware.csv"
RECORD_MARGIN = 1.2
CEILING_COLUMNS = ("accelerator_family", "precision", "max_mfu", "source", "model",
                   "n_accelerators", "citation", "derived", "notes")
# The 16-bit formats share one tensor rate on every catalogued chip (pipeline.catalog:
# PRECISION_FALLBACK), so a record at one stands for the other when only one is listed.
_SIXTEEN_BIT = {"bf16": "fp16", "fp16": "bf16"}


@dataclass(frozen=True)
class Ceiling:
    """The highest MFU measured on ``family`` at ``precision`` (``citation``: the run's source
    and where in it); ``value`` None when the shipped data has no MFU there."""

    value: float | None
    citation: str
    family: str
    precision: str


@dataclass(frozen=True)
class Limit:
    """The reject threshold of a chip and precision, and what it rests on."""

    value: float
    gemm: float
    gemm_source: str
    ceiling: Ceiling


@dataclass(frozen=True)
class Tables:
    """The catalog tables the rule reads: records, GEMM efficiencies, chip families and the
    chips with fp8 units (ratio of the fp8 to the 16-bit peak)."""

    ceilings: dict[tuple[str, str], Ceiling]
    gemm: dict[tuple[str, str], tuple[float, str]]
    family: dict[str, str]
    fp8_gain: dict[str, float]


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _float(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and value > 0 else None


@functools.lru_cache(maxsize=4)
def load_tables(catalog_dir: Path = CATALOG_DIR) -> Tables:
    """Read the three catalog files under ``catalog_dir`` (cached per folder)."""
    catalog_dir = Path(catalog_dir)
    ceilings: dict[tuple[str, str], Ceiling] = {}
    path = catalog_dir / CEILINGS_FILE
    for row in _rows(path) if path.exists() else []:
        value = _float(row.get("max_mfu"))
        if value is not None:
            citation = (f"{row['model']} on {row['n_accelerators']} {row['accelerator_family']}, "
                        f"{row['source']}: {row['citation']}")
            ceilings[(row["accelerator_family"], row["precision"])] = Ceiling(
                value, citation, row["accelerator_family"], row["precision"])
    gemm = {(r["accelerator"], r["precision"]): (float(r["max_gemm_efficiency"]),
                                                 r.get("sources") or "")
            for r in _rows(catalog_dir / GEMM_FILE)}
    family: dict[str, str] = {}
    fp8_gain: dict[str, float] = {}
    for r in _rows(catalog_dir / HARDWARE_FILE):
        family[r["accelerator"]] = r.get("family") or r["accelerator"]
        fp8 = _float(r.get("peak_fp8_flops_per_s"))
        sixteen = _float(r.get("peak_bf16_flops_per_s")) or _float(r.get("peak_fp16_flops_per_s"))
        if fp8 and sixteen:
            fp8_gain[r["accelerator"]] = fp8 / sixteen
    return Tables(ceilings, gemm, family, fp8_gain)


def _precision(precision: str | None) -> str:
    text = (precision or "bf16").strip().lower()
    return PRECISION_ALIASES.get(text, text)


def mfu_ceiling(accelerator: str, precision: str | None,
                catalog_dir: Path = CATALOG_DIR) -> Ceiling:
    """The highest MFU measured on the family of ``accelerator`` (a hardware.csv id or a
    family name) at ``precision`` (None: bf16) in the shipped data."""
    tables = load_tables(Path(catalog_dir))
    family = tables.family.get(accelerator, accelerator)
    prec = _precision(precision)
    for key in ((family, prec), (family, _SIXTEEN_BIT.get(prec, prec))):
        if key in tables.ceilings:
            return tables.ceilings[key]
    return Ceiling(None, f"no MFU measured on {family} at {prec} in the shipped data",
                   family, prec)


def mfu_limit(accelerator: str, precision: str | None,
              catalog_dir: Path = CATALOG_DIR) -> Limit:
    """``min(gemm, RECORD_MARGIN x record)`` (module docstring)."""
    tables = load_tables(Path(catalog_dir))
    prec = _precision(precision)
    gemm, source = tables.gemm.get((accelerator, prec)) or tables.gemm.get(
        (accelerator, "bf16")) or tables.gemm[("*", "*")]
    ceiling = mfu_ceiling(accelerator, prec, catalog_dir)
    value = gemm if ceiling.value is None else min(gemm, RECORD_MARGIN * ceiling.value)
    return Limit(value, gemm, source, ceiling)


def likely_causes(mfu: float, limit: float, accelerator: str, precision: str | None,
                  total_params_only: bool, catalog_dir: Path = CATALOG_DIR) -> list[str]:
    """The causes that would explain ``mfu`` above ``limit``, each with the key that fixes it."""
    causes = []
    if total_params_only:
        causes.append("a mixture-of-experts model with FLOPs counted on its total parameters "
                      "(give active_params_b)")
    gain = load_tables(Path(catalog_dir)).fp8_gain.get(accelerator)
    if gain and _precision(precision) != "fp8" and mfu / gain <= limit:
        causes.append(f"an fp8 run rated at the {_precision(precision)} peak (give precision: "
                      "fp8)")
    causes.append("fewer chips than ran, e.g. a per-node count (give the job's total "
                  "n_accelerators)")
    return causes


def check_mfu(mfu: float, accelerator: str, precision: str | None, *,
              total_params_only: bool = True, catalog_dir: Path = CATALOG_DIR) -> str | None:
    """None when ``mfu`` is plausible on ``accelerator`` at ``precision``; else the reason:
    the value, the limit and what it rests on, and the likely causes with the keys that fix
    them. ``total_params_only``: the FLOPs rest on a parameter count that may be an MoE
    model's total (no active count below it was given)."""
    limit = mfu_limit(accelerator, precision, catalog_dir)
    if mfu <= limit.value:
        return None
    ceiling = limit.ceiling
    if ceiling.value is not None and RECORD_MARGIN * ceiling.value < limit.gemm:
        basis = (f"{RECORD_MARGIN:g} x the highest MFU measured on {ceiling.family} "
                 f"{ceiling.precision}, {ceiling.value:.4g} ({ceiling.citation})")
    else:
        basis = (f"the chip's best measured GEMM efficiency {limit.gemm:.4g} "
                 f"(data/catalog/{GEMM_FILE})")
    causes = likely_causes(mfu, limit.value, accelerator, precision, total_params_only,
                           catalog_dir)
    return (f"mfu={mfu:.4g} on {accelerator} at {_precision(precision)} is above the plausible "
            f"{limit.value:.4g} = {basis}; likely " + "; or ".join(causes))


def above_record(mfu: float, accelerator: str, precision: str | None,
                 catalog_dir: Path = CATALOG_DIR) -> str | None:
    """A note for a plausible MFU above the family's record (None at or below it)."""
    ceiling = mfu_ceiling(accelerator, precision, catalog_dir)
    if ceiling.value is None or mfu <= ceiling.value:
        return None
    return (f"mfu {mfu:.4g} above the highest measured on {ceiling.family} "
            f"{ceiling.precision} in the shipped data, {ceiling.value:.4g} ({ceiling.citation})")
