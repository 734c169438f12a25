"""What an MLPerf system is and what it scored: chips from the system description, and the
olympic score of its runs (data/raw/mlperf/README.md).

* Chips = ``number_of_nodes`` x ``accelerators_per_node`` from ``<submitter>/systems/<system>.json``
  (strings or numbers). 0 (CPU-only systems) is a reject, not a run with N = 0.
* Google system names count TensorCores (``v5p-1024`` is 512 chips): the name is checked against
  the JSON; a JSON that counted cores is corrected, any other disagreement is a ``conflict``.
* Framework: the description's ``framework`` field as written (the software stack the
  submitter names, e.g. ``NVIDIA NeMo Framework Release 24.09``), empty when absent.
* Score: ``mlperf_logging.result_summarizer`` (``_compute_strong_score_standalone``) in seconds.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.bounded import short
from pipeline.ingest.sources.common import READ_ERRORS, existing, read_error, read_text

# TensorCores per chip: Google system names count cores (v5p-1024 is 512 chips).
TPU_CORES_PER_CHIP = {"v2": 2, "v3": 2, "v4": 2, "v5p": 2, "v5e": 1, "v6e": 1, "trillium": 1}
_TPU_NAME_RE = re.compile(r"tpu-(v\d+[a-z]*|trillium)-(\d+)", re.IGNORECASE)


def _result_file_counts() -> dict[str, int]:
    """Runs required per benchmark, from the official package where installed."""
    try:
        from mlperf_logging.benchmark_meta import get_result_file_counts
        return dict(get_result_file_counts("training"))
    except Exception:  # noqa: BLE001 - any import/API change: fall back to mlperf.md §1
        return {"gpt3": 3, "llama31_405b": 3, "resnet": 5, "ssd": 5, "maskrcnn": 5,
                "retinanet": 5, "unet3d": 40}


REQUIRED_RUNS = _result_file_counts()


@dataclass
class SystemInfo:
    """Chips of one system; ``derived``/``notes`` travel into each run's record."""

    accelerator: str
    n_accelerators: int
    per_node: int
    derived: list[str]
    notes: list[str]
    framework: str | None = None


def _to_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value.strip())
    return None


def load_system(json_path: Path, system: str) -> SystemInfo | tuple[str, str]:
    """The system's accelerator and chip count, or a (reject code, detail)."""
    found = existing(json_path)
    if found is None:
        return "missing_required", f"system description {json_path} is absent"
    json_path = found
    try:
        desc = json.loads(read_text(json_path))
    except READ_ERRORS as exc:
        return "unreadable", f"system description {json_path}: {read_error(exc)}"
    except (ValueError, RecursionError, MemoryError) as exc:
        return "malformed_row", (f"system description {json_path} is not valid JSON "
                                 f"({short(exc, 200)})")
    if not isinstance(desc, dict):
        return "malformed_row", f"system description {json_path} is not a JSON object"
    nodes = _to_int(desc.get("number_of_nodes"))
    per_node = _to_int(desc.get("accelerators_per_node"))
    for name, val in (("number_of_nodes", nodes), ("accelerators_per_node", per_node)):
        if val is None:
            return "bad_value", f"{json_path}: {name}={short(desc.get(name))} is not a whole number"
    accel = str(desc.get("accelerator_model_name") or "").strip()
    if nodes < 0 or per_node < 0:
        return "out_of_range", f"{json_path}: {nodes} nodes x {per_node} per node is negative"
    if nodes * per_node == 0:
        return "out_of_range", (f"{json_path}: {nodes} nodes x {per_node} accelerators per node = "
                                f"0 accelerators (CPU-only system, accelerator {short(accel or 'N/A')})")
    if nodes * per_node > 10**7:  # beyond any machine built; also keeps int64 columns safe
        return "out_of_range", f"{json_path}: {nodes} x {per_node} accelerators is implausible"
    if not accel or accel.upper() == "N/A":
        return "missing_required", f"{json_path}: accelerator_model_name is empty"
    n, derived, notes = nodes * per_node, ["n_accelerators"], []
    m = _TPU_NAME_RE.search(system) or _TPU_NAME_RE.search(str(desc.get("system_name", "")))
    if m and "tpu" in (accel + system).lower():
        gen, cores = m.group(1).lower(), int(m.group(2))
        per_chip = TPU_CORES_PER_CHIP.get(gen)
        if per_chip is None:
            notes.append(f"TPU generation {short(gen)}: cores per chip unknown; chips from JSON")
        elif cores % per_chip == 0 and n == cores // per_chip:
            notes.append(f"TPU name counts TensorCores: {m.group(0)} = {n} chips "
                         f"({per_chip} cores/chip), as nodes x per-node in the JSON")
        elif per_chip > 1 and n == cores and per_node % per_chip == 0:
            n, per_node = cores // per_chip, per_node // per_chip
            notes.append(f"JSON counts TensorCores ({cores}); {m.group(0)} = {n} chips "
                         f"at {per_chip} cores/chip")
        else:
            return "conflict", (f"{json_path}: {nodes} x {per_node} = {nodes * per_node} "
                                f"accelerators, but {m.group(0)} implies {cores // per_chip} chips")
    framework = desc.get("framework")
    framework = framework.strip()[:200] if isinstance(framework, str) else None
    return SystemInfo(accel, n, per_node, derived, notes, framework or None)


def finite_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        v = float(value)
    except OverflowError:
        return None
    return v if math.isfinite(v) else None


def read_scaling_factor(folder: Path) -> tuple[float | None, str]:
    """RCP factor from ``scaling.json`` (1.0 when absent), or None with the reason."""
    path = existing(folder / "scaling.json")
    if path is None:
        return 1.0, ""
    try:
        value = json.loads(read_text(path))["scaling_factor"]
    except (*READ_ERRORS, ValueError, KeyError, TypeError, RecursionError) as exc:
        return None, f"{path} unreadable ({short(exc, 200)})"
    v = finite_number(value)
    if v is None or v <= 0:
        return None, f"{path}: scaling_factor={short(value)} is not a positive number"
    return v, ""


def olympic_score_s(ttt_ok_s: list[float], n_runs: int, benchmark: str,
                    factor: float) -> tuple[float | None, str]:
    """``mlperf_logging.result_summarizer._compute_strong_score_standalone``, in seconds.

    ``ttt_ok_s``: time-to-train of the runs that ended with a successful run_stop; the other
    ``n_runs - len(ttt_ok_s)`` runs count as dropped slowest runs.
    """
    required = REQUIRED_RUNS.get(benchmark, 10)
    if n_runs < required:
        return None, f"no olympic score: {n_runs} of {required} required runs present"
    k = 4 if benchmark == "unet3d" else 1
    dropped = n_runs - len(ttt_ok_s)
    if dropped > k:
        return None, f"no olympic score: {dropped} runs did not converge (at most {k})"
    scores = sorted(ttt_ok_s)
    countable = scores[k:len(scores) - (k - dropped)]
    if not countable:
        return None, "no olympic score: no runs left after dropping"
    return statistics.fmean(countable) * factor, (
        f"olympic mean of {len(countable)} of {n_runs} runs x scaling factor {factor:.6g}")
