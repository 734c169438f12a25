"""What one step log gives, what it lacks and how to fix it, all in one pass (``validate``).

The ingest rejects a log for its first fault; a user fixing a folder of logs needs them all at
once. ``diagnose`` reads the log as the ingest does (sidecars, parser, step reduction) and
accounts for every field the ingest and the report use:

* ``facts``: each value with where it came from (``log line 12``, ``sidecar run.yaml``, or
  ``derived``, with the derivation: N from world size or tokens/s over tokens/s per chip,
  precision from the argument dump, tokens/s from step time x global batch x sequence length);
* ``conflicts``: every fact where the log and a sidecar disagree (the ingest rejects the log);
* ``needs``: each missing field as the exact sidecar key, an example value and what it unlocks;
* ``not_derived``: each measure (tokens/s, MFU) that cannot be worked out, and why.

Nothing is written; the log is read once more than the ingest reads it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.bounded import short
from pipeline.config import settings as load_group
from pipeline.catalog import name_key
from pipeline.ingest.sources.common import READ_ERRORS, open_text_bytes, read_error
from pipeline.ingest.sources.links import entry_problem
from pipeline.ingest.sources.steplogs.formats import hf_trainer
from pipeline.ingest.sources.steplogs.reader import (FORMATS, conflicts, merged_facts, parse_file,
                                                     sniff)
from pipeline.ingest.sources.steplogs.reduce import reduce_steps
from pipeline.ingest.sources.steplogs.sidecar import SidecarError, load_sidecar

# What to write for a sidecar key the log gives no value for: a placeholder naming what the
# value is, never a made-up value (a pasted "H100" or "llama3-8b" would become a wrong run).
# A value the log itself names (``hints``) replaces the placeholder.
EXAMPLES = {"accelerator": "<chip id of data/catalog/hardware.csv>",
            "n_accelerators": "<chips in the job>",
            "model": "<model id of data/catalog/models.csv>",
            "params_b": "<parameters, billions>", "seq_len": "<tokens per sequence>",
            "global_batch_tokens": "<tokens per optimizer step>",
            "precision": "<bf16, fp16 or fp8: the matmuls' format>"}
# Chip names as logs print them (nvidia-smi, torch.cuda.get_device_name, JAX's device kind,
# the user's own echo): a vendor word, a model number, then size/form-factor words.
_CHIP_RE = re.compile(
    r"\b(?:(?:NVIDIA|Tesla|AMD|Instinct|Intel|Google)[ -])*(?:[A-Z]{1,3}\d{2,4}[A-Za-z]?|"
    r"TPU[ _-]?v\d[a-z]?|Gaudi\d|Trainium\d?)(?:[ -](?:SXM\d?|PCIe|NVL|OAM|GCD|HBM\d?e?|"
    r"\d+ ?GB|lite|[A-Z]?\d+GB))*")
_MODEL_RE = re.compile(r"(?:model[_ -]?name|Running Model|--model(?:-name)?|model)\s*[:=]?\s*"
                       r"['\"]?([A-Za-z][\w.-]*\d[\w.-]*)")
HINT_BYTES = 1 << 20
PARSER_ERRORS = (RecursionError, MemoryError, ValueError, TypeError, IndexError, KeyError,
                 OverflowError)
SHOWN_FACTS = ("accelerator", "n_accelerators", "model", "params_b", "seq_len", "batch_samples",
               "global_batch_tokens", "precision", "tp", "pp", "cp", "dp", "recompute",
               "virtual_pipeline", "sequence_parallel")


@dataclass
class Need:
    """One missing field: the sidecar key that supplies it, an example and what it unlocks."""

    key: str
    example: str
    why: str


@dataclass
class Diagnosis:
    """The account of one log (see module docstring)."""

    path: str
    fmt: str | None = None
    facts: dict[str, tuple[Any, str]] = field(default_factory=dict)
    measures: dict[str, float] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)
    needs: list[Need] = field(default_factory=list)
    not_derived: list[tuple[str, str]] = field(default_factory=list)
    problem: str | None = None  # a fault no sidecar key fixes (unreadable, no steps, ...)
    # values the log names for keys it does not state as facts: key -> (value, why)
    hints: dict[str, tuple[str, str]] = field(default_factory=dict)


def _chip_hint(line: str, lineno: int, catalog: Any) -> tuple[str, str] | None:
    """The first chip name of ``line`` the catalog knows: (id, why), or for a name it knows as
    ambiguous (bare "A100") a placeholder with the catalog's question; longest name first."""
    for m in _CHIP_RE.finditer(line):
        words = m.group(0).replace("-", " ").split()
        for end in range(len(words), 0, -1):
            name = " ".join(words[:end])
            acc = catalog.resolve_accelerator(name)
            if acc is not None:
                return acc, f"the log names '{name}' at line {lineno}"
            if name_key(name) in getattr(catalog, "accelerator_aliases", {}):  # known, but ambiguous
                return (EXAMPLES["accelerator"], f"the log names '{name}' at line {lineno}: "
                        + catalog.explain_accelerator(name))
    return None


def log_hints(text: str, catalog: Any) -> dict[str, tuple[str, str]]:
    """Accelerator and model the log names (the first the catalog knows), each with the line
    that names it (module ``EXAMPLES``: these replace the placeholders)."""
    hints: dict[str, tuple[str, str]] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if "accelerator" not in hints and (chip := _chip_hint(line, lineno, catalog)):
            hints["accelerator"] = chip
        if "model" not in hints:
            for m in _MODEL_RE.finditer(line):
                model = catalog.resolve_model(m.group(1))
                if model is not None:
                    hints["model"] = (model, f"the log names '{m.group(1)}' at line {lineno}")
                    break
        if len(hints) == 2:
            break
    return hints


def diagnose(path: Path, logs_dir: Path, params: dict[str, Any], catalog: Any,
             display: Any = str) -> Diagnosis:
    """Account for one log (see module docstring); ``catalog`` is a ``pipeline.catalog``
    catalog, ``display`` names files."""
    path = Path(path)
    out = Diagnosis(path=display(path))
    problem = entry_problem(path, logs_dir)  # a FIFO is never opened: it would block
    if problem:
        out.problem = f"{problem[0]}: {problem[1]}"
        return out
    try:
        side = load_sidecar(path, logs_dir, display=display)
        kind, fmt, whole, _encoding = sniff(path)
    except SidecarError as exc:
        out.problem = f"{exc.code}: {exc.detail}"
        return out
    except READ_ERRORS as exc:
        out.problem = f"unreadable: {read_error(exc)}"
        return out
    fmt = side.values.get("format", fmt)
    if kind != "text" or fmt not in FORMATS:
        out.problem = (f"{kind} file" if kind != "text" else
                       "no step lines of a known format (set 'format:' in the sidecar)")
        return out
    out.fmt = fmt
    try:
        state, _, _ = parse_file(path, fmt, whole)
    except READ_ERRORS as exc:
        out.problem = f"unreadable: {read_error(exc)}"
        return out
    except PARSER_ERRORS as exc:  # the ingest's reject says so too (reader._read_guarded)
        out.problem = f"malformed_row: the parser failed on this file ({type(exc).__name__})"
        return out
    out.conflicts = conflicts(state, side)
    head = (whole[:HINT_BYTES] if whole is not None else _head(path)).decode("utf-8", "replace")
    out.hints = log_hints(head, catalog)
    facts = merged_facts(state, side)
    s = load_group(params, "ingest.logs")
    red = reduce_steps(state, facts, s)
    for key, value in red.implied.items():
        facts.setdefault(key, value)
    how = {**state.derivations, **red.implied_how}
    for key in SHOWN_FACTS:
        if facts.get(key) is None:
            continue
        if key in red.implied or (key in state.facts and key in how):
            origin = f"derived {how[key]}"
        elif key in state.facts:
            origin = f"log line {state.fact_lines.get(key, 0)}"
        else:
            origin = f"sidecar {side.origin.get(key, '?')}"
        out.facts[key] = (facts[key], origin)
    out.measures = dict(red.measures)
    if fmt == hf_trainer.NAME and not red.n_steady:
        try:
            out.measures = hf_trainer.summary_measures(state, facts, s)[0]
        except SidecarError as exc:
            out.problem = f"{exc.code}: {exc.detail}"
    elif red.n_steady < s.min_steady_steps:
        out.problem = (f"too_few_steps: {red.n_steady} steady-state steps < min_steady_steps "
                       f"{s.min_steady_steps}")
    batch = red.columns.get("batch_samples")
    if not facts.get("batch_samples") and batch is not None and len(batch):
        steady = red.columns["used"]
        printed = batch[steady][np.isfinite(batch[steady])]
        if len(printed):
            facts["batch_samples"] = float(np.median(printed))
    if fmt == hf_trainer.NAME:
        facts["_per_device_tokens_per_s"] = state.facts.get("train_tokens_per_second")
        facts["_samples_per_s"] = state.facts.get("train_samples_per_second")
    _needs(out, facts, side.values, catalog)
    return out


def _head(path: Path) -> bytes:
    """The first ``HINT_BYTES`` of a log (compressed logs decompressed), b"" if unreadable."""
    try:
        with open_text_bytes(path, HINT_BYTES) as fh:
            return fh.read(HINT_BYTES)
    except READ_ERRORS:
        return b""


def _needs(out: Diagnosis, facts: dict[str, Any], side: dict[str, Any], catalog: Any) -> None:
    """Fill ``needs`` and ``not_derived`` from the merged facts and the measures."""
    def need(key: str, why: str, example: str | None = None) -> None:
        hint = out.hints.get(key)
        if example is None and hint is not None:
            example, why = hint[0], f"{why}; {hint[1]}"
        out.needs.append(Need(key, example or EXAMPLES.get(key, "..."), why))

    acc = facts.get("accelerator")
    acc_id = catalog.resolve_accelerator(acc) if acc else None
    if not acc:
        need("accelerator", "required: which chip ran (its peak FLOP/s and bandwidths); ids "
                            "and aliases in data/catalog/accelerator_aliases.csv")
    elif acc_id is None:
        need("accelerator", "required: " + catalog.explain_accelerator(acc))
    n = facts.get("n_accelerators")
    if not n:
        need("n_accelerators", "required: the number of chips (the log prints no world size "
                               "and no whole-job and per-chip throughput to divide)")
    model, params_b = facts.get("model"), facts.get("params_b")
    model_id = catalog.resolve_model(model, params_b * 1e9 if params_b else None) \
        if model else None
    if model is None and params_b is None:
        need("model", "required: a model id of data/catalog/models.csv; or params_b (with "
                      "n_layers, d_model, seq_len for the attention FLOPs) instead")
    elif model_id is None and params_b is None:
        need("params_b", f"required: model '{model}' is not in data/catalog/models.csv, so "
                         "its parameter count (billions) must be given")
    m = out.measures
    gbt = side.get("global_batch_tokens") or m.get("global_batch_tokens")
    if "tokens_per_s" not in m:
        if facts.get("_per_device_tokens_per_s") and not n:
            out.not_derived.append(("tokens_per_s", "train_tokens_per_second is per device: "
                                                    "x n_accelerators once that is given"))
        elif facts.get("_samples_per_s") and not facts.get("seq_len"):
            need("seq_len", f"tokens/s = train_samples_per_second "
                            f"({facts['_samples_per_s']:g}) x seq_len")
            out.not_derived.append(("tokens_per_s", "samples/s without a sequence length"))
        elif "step_time_s" in m and not gbt:
            batch = facts.get("batch_samples")
            if batch and not facts.get("seq_len"):
                need("seq_len", f"tokens/s = global batch ({batch:g} sequences) x seq_len / step "
                                "time; the log prints no sequence length")
            else:
                need("global_batch_tokens", "tokens/s = global_batch_tokens / step time; the "
                                            "log prints no global batch")
            out.not_derived.append(("tokens_per_s", "step time without tokens per step"))
        elif "step_time_s" not in m:
            out.not_derived.append(("tokens_per_s", "no step time or throughput in the log"))
    has_flops = "tflops_per_accelerator" in m or "mfu" in m
    if "mfu" in m:
        return
    reasons = []
    if not has_flops and "tokens_per_s" not in m and not ("step_time_s" in m and gbt):
        reasons.append("no throughput")
    if not has_flops and model_id is None and params_b is None:
        reasons.append("no parameter count")
    if acc_id is not None and not facts.get("precision") and \
            catalog.peak_flops_per_s(acc_id, "fp8")[0] is not None:
        sixteen = catalog.peak_flops_per_s(acc_id, "bf16")[1] or "bf16"
        reasons.append(f"precision not stated and {acc_id} has fp8 units (its {sixteen} and "
                       "fp8 peaks differ 2x)")
        need("precision", "MFU: which precision's peak the run is measured against",
             f"<{sixteen} or fp8: the matmuls' format>")
    if acc_id is None:
        reasons.append("no known accelerator (no peak)")
    if reasons:
        out.not_derived.append(("mfu", "; ".join(reasons)))


def render(d: Diagnosis, indent: str = "    ") -> list[str]:
    """Lines for ``scalewall validate``: facts with origins, conflicts, the sidecar lines to
    add (a YAML block to paste), measures not derived."""
    lines = []
    if d.facts:
        lines.append(indent + "read: " + ", ".join(
            f"{k}={short(v, 40)} ({origin})" for k, (v, origin) in d.facts.items()))
    lines += [f"{indent}conflict: {c}" for c in d.conflicts]
    if d.problem:
        lines.append(f"{indent}problem (no sidecar key fixes it): {d.problem}")
    if d.needs:
        lines.append(f"{indent}add to the sidecar (run.yaml), all at once:")
        width = max(len(f"{n.key}: {n.example}") for n in d.needs)
        lines += [f"{indent}  {f'{n.key}: {n.example}':<{width}}  # {n.why}" for n in d.needs]
    lines += [f"{indent}not derived: {name}: {why}" for name, why in d.not_derived]
    return lines
