"""MLPerf Training result trees -> one ``Record`` per result log.

Layout (data/raw/mlperf/README.md): ``<round>/<submitter>/results/<system>/<benchmark>/
result_*.txt`` with ``<round>/<submitter>/systems/<system>.json`` and an optional
``scaling.json`` (RCP factor) next to the logs. ``read_tree`` accepts a round folder (one
``training_results_vX.Y`` repository) or a folder of rounds (``v3.1/``, ``v4.0/`` ...).

Decisions (each is tested in ``tests/test_mlperf_*.py``):

* Only files exactly 5 components below the round are runs; ``result_*.txt.gz`` (``.zst``) are
  read as ``result_*.txt`` (streamed, ``pipeline.ingest.sources.common``). Power logs
  (``<benchmark>/power/result_*/node_*.txt``) are not runs and yield no record of their own
  (``pipeline.ingest.sources.mlperf.power`` reads them); they are counted in
  ``stats["power_logs"]`` when the caller passes a ``stats`` dict.
* Time-to-train follows ``mlperf_logging.result_summarizer``: the last ``run_start`` before the
  first ``run_stop``; ``(stop - start) / 1000`` seconds.
* ``run_stop`` status ``success`` -> ``ok``, ``aborted`` (or anything else) -> ``aborted``
  (time-to-train kept: the run ended). A log that starts a run and ends cleanly without
  ``run_stop`` (a crash) is a run with status ``no_run_stop`` and no time-to-train; a log that
  ends inside a broken event line is ``truncated_log`` (we cannot tell a crash from a cut copy).
* Rejects: ``binary_file``, ``unreadable``, ``no_run_start``, ``truncated_log``, a missing or
  unparseable system description (``missing_required`` / ``malformed_row``, naming the file),
  a CPU-only system with 0 accelerators (``out_of_range``), a TPU name that contradicts the
  JSON (``conflict``), ``run_stop`` not after ``run_start`` (``out_of_range``).
* Fields: published-format-v1 names plus ``RUN_EXTRAS``, and ``submitter``, ``result_path``,
  ``log_sha1`` (first 16 hex digits of the file's SHA-1, as in the reference CSV), which the
  ingest core reads. Computed values are named in ``derived``. Parse counts, GBS in samples,
  throughput and its unit, and ``dedup_key`` (benchmark:run_start:run_stop ms, which the ingest
  stage uses to reject the same run re-published in an edited file) go to ``Record.meta``.
  ``params_b`` is the benchmark's reference model size (``LLM_MODELS``), so it is derived.
* Olympic score per (round, submitter, system, benchmark) (``mlperf_system``), as the
  summarizer: sort the runs' TTT, drop the fastest and slowest (4 each for unet3d); runs without
  a successful ``run_stop`` count as dropped slow runs; more than 1 (4) of those, or fewer
  result files than the benchmark requires, gives no score. Times the ``scaling.json`` factor.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from pipeline.bounded import short
from pipeline.ingest.sources.common import (READ_ERRORS, logical_name, logical_stem,
                                            logical_suffix, read_error)
from pipeline.ingest.sources.links import candidates, entry_problem
from pipeline.ingest.sources.mlperf import mllog, power
from pipeline.ingest.sources.mlperf.system import (SystemInfo, finite_number, load_system,
                                          olympic_score_s, read_scaling_factor)
from pipeline.ingest.records import Record
from pipeline.processes import map_in_order

# benchmark -> (model name, total parameters in billions); other benchmarks keep their name.
LLM_MODELS: dict[str, tuple[str, float]] = {
    "gpt3": ("GPT-3 175B", 175.0),
    "llama31_405b": ("Llama 3.1 405B", 405.0),
    "llama2_70b_lora": ("Llama 2 70B (LoRA)", 70.0),
    "llama31_8b": ("Llama 3.1 8B", 8.0),
}
# Unit of tracked_stats["throughput"] per benchmark (mlperf.md §1). Checked against GBS / step
# time when both are logged (``_throughput_unit``).
THROUGHPUT_UNITS = {"gpt3": "tokens", "llama31_405b": "samples", "llama31_8b": "samples",
                    "llama2_70b_lora": "samples", "bert": "sequences", "resnet": "images"}
# Pre-training benchmarks whose samples are packed full-length sequences, so samples/s times
# max_sequence_length is tokens/s. LoRA samples are padded documents: not converted.
PACKED_PRETRAINING = frozenset({"gpt3", "llama31_405b", "llama31_8b"})
# Sequence length of benchmarks whose logs state none as an MLLOG event: the LoRA benchmark
# pads every sample to 8192 tokens (MLCommons training reference llama2_70b_lora, config
# `max_seq_length: 8192`, as the v4.0 SMC logs print it).
REFERENCE_SEQ_LEN = {"llama2_70b_lora": 8192}
# Unit of the trained amount logged at the end of a run (run_stop's samples_count, or a
# `train_samples` event at run_stop): gpt3 logs tokens (it equals the last eval's epoch_num, in
# tokens), the others samples.
TRAINED_UNITS = {"gpt3": "tokens"}
STEP_TIME_KEYS = ("train_step_time", "train_step_timing in s", "train_step_timing")
_VERSION_RE = re.compile(r"v(\d+\.\d+)")
_STATUS = {"success": "ok", "aborted": "aborted"}


@dataclass
class _Run:
    """One parsed result log on its way to a Record."""

    path: Path
    fields: dict[str, Any] | None = None
    reject: tuple[str, str] | None = None  # (code, detail)
    line: int = 0
    raw: str = ""
    ttt_s: float | None = None
    log_sha1: str = ""
    derived: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


# --- tree walking -----------------------------------------------------------------------------

def _dirs(path: Path) -> list[Path]:
    try:
        return sorted(p for p in path.iterdir() if p.is_dir())
    except OSError:
        return []


def is_round(path: Path) -> bool:
    """A round folder holds ``<submitter>/results/``."""
    return any((sub / "results").is_dir() for sub in _dirs(path))


def find_rounds(root: Path) -> list[tuple[Path, str | None]]:
    """(round folder, version such as ``v3.1``) for a round or a folder of rounds."""
    root = Path(root)
    rounds = [root] if is_round(root) else [d for d in _dirs(root) if is_round(d)]
    out = []
    for r in rounds:
        m = _VERSION_RE.search(r.name) or _VERSION_RE.search(r.resolve().name)
        out.append((r, f"v{m.group(1)}" if m else None))
    return out


def _result_groups(round_dir: Path, stats: dict[str, int]
                   ) -> Iterator[tuple[str, str, str, Path, list[Path]]]:
    """(submitter, system, benchmark, folder, result files) for every benchmark folder."""
    for sub in _dirs(round_dir):
        for system in _dirs(sub / "results"):
            for bench in _dirs(system):
                # links too (a dangling one included): each is read or a bad_link reject
                files = sorted(p for p in candidates(list(bench.glob("result_*")))
                               if _is_result_name(p))
                power = bench / "power"
                if power.is_dir():
                    stats["power_logs"] += sum(1 for p in power.glob("result_*/*")
                                               if logical_suffix(p) == ".txt")
                if files:
                    yield sub.name, system.name, bench.name, bench, files


def _is_result_name(path: Path) -> bool:
    """``result_<id>.txt``, plain or compressed (``.gz``, ``.zst``)."""
    return logical_suffix(path) == ".txt" and logical_name(path).startswith("result_")


# --- one log ----------------------------------------------------------------------------------

def _pos_int(events: list[mllog.Event], run: _Run, key: str) -> int | None:
    """First positive whole-number value of ``key``; a note when it is ill-typed."""
    for ev in events:
        if ev.key == key:
            v = finite_number(ev.value)
            if v is not None and v > 0 and v.is_integer() and v < 2**53:
                return int(v)
            run.notes.append(f"{key}={short(ev.value)} ignored (not a positive whole number)")
            return None
    return None


def _median_stat(stats: list[dict], key: str) -> tuple[float | None, int]:
    vals = [v for s in stats if (v := finite_number(s.get(key))) is not None and v > 0]
    return (statistics.median(vals), len(vals)) if vals else (None, 0)


def _throughput_unit(bench: str, thr: float, step_s: float | None, gbs: int | None,
                     seq: int | None) -> str | None:
    """Unit of a throughput figure: checked against GBS/step time when possible (3% agreement in
    mlperf.md §1; a factor-2 window tells samples from tokens), else the benchmark's table."""
    if step_s and gbs:
        ratio = thr / (gbs / step_s)
        if 0.5 <= ratio <= 2:
            return "samples"
        if seq and 0.5 <= ratio / seq <= 2:
            return "tokens"
    return THROUGHPUT_UNITS.get(bench)


def _rates(run: _Run, log: mllog.ParsedLog, bench: str, gbs: int | None, seq: int | None) -> None:
    f = run.fields
    stats = [e.value for e in log.events if e.key == "tracked_stats" and isinstance(e.value, dict)]
    step_s, step_key = None, None
    for key in STEP_TIME_KEYS:
        step_s, n = _median_stat(stats, key)
        if step_s is not None:
            step_key = key
            f["step_time_s"] = step_s
            run.meta["step_time_n"] = n
            break
    thr, n_thr = _median_stat(stats, "throughput")
    if thr is None:  # older logs (resnet) log throughput as a top-level key
        vals = [v for e in log.events
                if e.key == "throughput" and (v := finite_number(e.value)) is not None and v > 0]
        thr, n_thr = (statistics.median(vals), len(vals)) if vals else (None, 0)
    if step_key:
        run.notes.append(f"step_time_s: median of tracked_stats[{short(step_key)}] over "
                         f"{run.meta['step_time_n']}")
    if thr is None:
        return
    unit = _throughput_unit(bench, thr, step_s, gbs, seq)
    run.meta.update(throughput_median=thr, throughput_unit=unit, throughput_n=n_thr)
    if unit == "tokens":
        f["tokens_per_s"] = thr
        run.notes.append(f"tokens_per_s: median tracked throughput (tokens/s) over {n_thr}")
    elif unit == "samples" and bench in PACKED_PRETRAINING and seq:
        f["tokens_per_s"] = thr * seq
        run.derived.append("tokens_per_s")
        run.notes.append(f"tokens_per_s = median throughput {thr:.6g} samples/s x seq_len {seq}")
    else:
        run.notes.append(f"throughput median {thr:.6g} {unit or 'unknown-unit'}/s over {n_thr} "
                         "(not tokens/s)")


def _parallel(run: _Run, log: mllog.ParsedLog, n_acc: int) -> None:
    names = {"tp": "tensor_model_parallel_size", "pp": "pipeline_model_parallel_size",
             "cp": "context_parallel_size", "micro_batch": "micro_batch_size"}
    for col, name in names.items():
        v = _pos_int(log.events, run, name)
        if v is None:
            hint = log.hints.get(name, set())
            if len(hint) == 1:
                v = next(iter(hint))
            elif len(hint) > 1:
                run.notes.append(f"{name} logged with several values {sorted(hint)}: not set")
        if v is not None and v > 0:
            run.fields[col] = v
    tp, pp, cp = (run.fields.get(k) for k in ("tp", "pp", "cp"))
    if tp and pp and cp and n_acc % (tp * pp * cp) == 0:
        run.fields["dp"] = n_acc // (tp * pp * cp)
        run.derived.append("dp")


def extract_run(path: Path, log: mllog.ParsedLog, bench: str, sysinfo: SystemInfo) -> _Run:
    """Fields of one run from its parsed log (see the module docstring for the rules)."""
    run = _Run(path=path)
    run.log_sha1 = (log.sha1 or "")[:16]  # the reference CSV's fingerprint format
    run.meta.update(event_lines=log.n_event_lines, bad_lines=log.n_bad,
                    interleaved_lines=log.n_interleaved,
                    lines_without_metadata=log.n_without_metadata, bytes=log.n_bytes)
    if log.bad_examples:
        run.raw = log.bad_examples[0][1]
    start = stop = None
    for ev in log.events:
        if ev.key == "run_start":
            start = ev
        elif ev.key == "run_stop":
            if start is not None:
                stop = ev
                break
            run.notes.append(f"run_stop at line {ev.lineno} before any run_start ignored")
    if start is None:
        if log.truncated:
            run.reject = ("truncated_log",
                          f"log ends mid-line before any run_start ({log.n_bytes} bytes)")
        else:
            run.reject = ("no_run_start", f"no run_start among {log.n_event_lines} :::MLLOG lines")
        return run
    if stop is None and log.truncated:
        run.reject = ("truncated_log", f"log ends mid-line after run_start (line {start.lineno}) "
                                       "and before run_stop")
        return run
    run.line = start.lineno
    f: dict[str, Any] = {}
    run.fields = f
    if stop is None:
        f["status"] = "no_run_stop"
        run.notes.append("no run_stop: the run did not finish")
    else:
        if stop.time_ms <= start.time_ms:
            run.fields, run.reject = None, ("out_of_range", (
                f"run_stop ({stop.time_ms:.0f} ms, line {stop.lineno}) not after run_start "
                f"({start.time_ms:.0f} ms)"))
            return run
        raw_status = stop.metadata.get("status")
        status = _STATUS.get(raw_status) if isinstance(raw_status, str) else None
        f["status"] = status or "aborted"
        if status is None:
            run.notes.append(f"run_stop status {short(raw_status)} read as aborted")
        run.ttt_s = (stop.time_ms - start.time_ms) / 1000.0
        f["time_to_train_s"] = run.ttt_s
        f["inverse_time_to_train_per_s"] = 1.0 / run.ttt_s
        run.derived.append("inverse_time_to_train_per_s")
        run.meta["dedup_key"] = f"{bench}:{start.time_ms:.0f}:{stop.time_ms:.0f}"
        run.meta["run_window_ms"] = (start.time_ms, stop.time_ms)
        run.meta["trained"] = _trained(log, stop)
    logged = log.first("submission_benchmark")
    if logged is not None and isinstance(logged.value, str) and logged.value != bench:
        run.notes.append(f"log says submission_benchmark={short(logged.value)}")
    gbs = _pos_int(log.events, run, "global_batch_size")
    seq = _pos_int(log.events, run, "max_sequence_length")
    run.meta.update(global_batch_size=gbs, max_sequence_length=seq, hints=log.hints)
    if seq:
        f["seq_len"] = seq
    if gbs and seq:
        f["global_batch_tokens"] = float(gbs * seq)
        run.derived.append("global_batch_tokens")
    _rates(run, log, bench, gbs, seq)
    _parallel(run, log, sysinfo.n_accelerators)
    if log.n_bad or log.n_interleaved or log.n_without_metadata:
        run.notes.append(f"broken :::MLLOG lines skipped: {log.n_bad} undecodable among those "
                         f"read, {log.n_interleaved} interleaved, {log.n_without_metadata} "
                         "without metadata (cut) in the whole log")
    return run


def _trained(log: mllog.ParsedLog, stop: mllog.Event) -> float | None:
    """Samples (tokens for gpt3) trained: run_stop's samples_count, else a ``train_samples``
    event logged at or after run_stop (before it, LoRA logs the dataset's size)."""
    v = finite_number(stop.metadata.get("samples_count"))
    if v is None:
        v = next((finite_number(e.value) for e in log.events
                  if e.key == "train_samples" and e.time_ms >= stop.time_ms), None)
    return v if v is not None and v > 0 else None


def _tokens(run: _Run, log_hints: dict[str, set[int]], bench: str) -> tuple[float | None, str]:
    """Tokens trained and where the figure comes from."""
    trained = run.meta.get("trained")
    if not trained:
        return None, "no trained samples logged"
    if TRAINED_UNITS.get(bench) == "tokens":
        return trained, f"tokens = trained amount logged at run_stop ({trained:.0f} tokens)"
    seq = run.meta.get("max_sequence_length")
    origin = "max_sequence_length"
    if not seq and len(log_hints.get("max_seq_length", ())) == 1:
        seq, origin = next(iter(log_hints["max_seq_length"])), "the log's max_seq_length"
    if not seq and bench in REFERENCE_SEQ_LEN:
        seq, origin = REFERENCE_SEQ_LEN[bench], "the benchmark's padded length"
    if not seq:
        return None, "no sequence length"
    return trained * seq, (f"tokens = samples_count {trained:.0f} x {origin} {seq} (padding "
                           "included)" if bench in REFERENCE_SEQ_LEN else
                           f"tokens = samples {trained:.0f} x {origin} {seq}")


def _power_task(run: _Run, folder: Path, sysinfo: SystemInfo, names: tuple[str, ...],
                root: Path) -> tuple[Any, ...] | None:
    """``power.measure``'s arguments for the run's ``folder/power/result_<id>/``; None when
    the run has no power measurement."""
    window = run.meta.get("run_window_ms")
    pdir = folder / "power" / logical_stem(run.path)
    if run.fields is None or window is None or not pdir.is_dir():
        return None
    n_nodes = sysinfo.n_accelerators // sysinfo.per_node if sysinfo.per_node else None
    return pdir, window[0], window[1], n_nodes, names, root


def _measure(task: tuple[Any, ...]) -> power.Measurement:
    return power.measure(*task)


def _attach_power(run: _Run, m: power.Measurement, bench: str, sysinfo: SystemInfo,
                  stats: dict[str, int]) -> None:
    """Energy columns from the run's power measurement ``m``."""
    window = run.meta["run_window_ms"]
    stats["power_measurements"] = stats.get("power_measurements", 0) + 1
    ttt_s = (window[1] - window[0]) / 1000.0
    tokens, token_note = _tokens(run, run.meta.pop("hints", {}), bench)
    fields, notes = power.energy_fields(m, sysinfo.n_accelerators, ttt_s, tokens)
    run.fields.update(fields)
    run.derived += [k for k in fields if k != "power_measurement"]
    if fields.get("energy_j_per_token"):
        notes.append(f"energy_j_per_token: {token_note}")
    run.notes += notes
    row = power.measurement_row(m, fields, ttt_s, tokens)
    row["power_folder"] = m.folder
    run.meta["power"] = row


# --- the tree ---------------------------------------------------------------------------------

def _group_runs(files: list[Path], bench: str, sysinfo: SystemInfo | tuple[str, str],
                root: Path) -> list[_Run]:
    runs = []
    for path in files:
        problem = entry_problem(path, root)
        if problem is not None:
            runs.append(_Run(path=path, reject=problem))
            continue
        if not isinstance(sysinfo, SystemInfo):
            runs.append(_Run(path=path, reject=sysinfo))
            continue
        try:
            log = mllog.parse_file(path, sha1=True)
        except READ_ERRORS as exc:
            runs.append(_Run(path=path, reject=("unreadable", read_error(exc))))
            continue
        if log.is_binary:
            runs.append(_Run(path=path, reject=("binary_file", f"{log.n_bytes} bytes, not text")))
            continue
        runs.append(extract_run(path, log, bench, sysinfo))
    return runs


def read_tree(root: Path, source: str = "mlperf_logs",
              stats: dict[str, int] | None = None, workers: int = 1) -> Iterator[Record]:
    """One Record per result log under ``root`` (a round or a folder of rounds), sorted by path.

    ``stats``, when given, is filled with ``result_files``, ``groups``, ``power_logs``. The
    result logs are read first, then every run's power logs (most of the bytes: a node's log
    for every result) by ``workers`` processes (``pipeline.processes.map_in_order``: the
    measurements come back in input order, so the records do not depend on ``workers``).
    """
    counts = stats if stats is not None else {}
    for key in ("result_files", "groups", "power_logs"):
        counts.setdefault(key, 0)
    root = Path(root)
    groups, tasks = [], []
    for round_dir, version in find_rounds(root):
        for submitter, system, bench, folder, files in _result_groups(round_dir, counts):
            counts["groups"] += 1
            counts["result_files"] += len(files)
            sysinfo = load_system(round_dir / submitter / "systems" / f"{system}.json", system)
            runs = _group_runs(files, bench, sysinfo, root)
            measured = []
            if isinstance(sysinfo, SystemInfo):
                for run in runs:
                    task = _power_task(run, folder, sysinfo, (submitter, system), root)
                    if task is not None:
                        measured.append(run)
                        tasks.append(task)
            groups.append((version, submitter, system, bench, folder, sysinfo, runs, measured))
    measurements = iter(map_in_order(_measure, tasks, workers))
    for version, submitter, system, bench, folder, sysinfo, runs, measured in groups:
        for run in measured:
            _attach_power(run, next(measurements), bench, sysinfo, counts)
        for run in runs:
            run.meta.pop("hints", None)
        factor, factor_note = read_scaling_factor(folder)
        ok = [r.ttt_s for r in runs if r.fields and r.fields.get("status") == "ok"]
        score, score_note = (None, factor_note) if factor is None else \
            olympic_score_s(ok, len(runs), bench, factor)
        for run in runs:
            yield _to_record(run, source, version, submitter, system, bench, sysinfo,
                             score, score_note, factor)


def _to_record(run: _Run, source: str, version: str | None, submitter: str, system: str,
               bench: str, sysinfo: SystemInfo | tuple[str, str], score: float | None,
               score_note: str, factor: float | None) -> Record:
    path = str(run.path)
    if run.reject is not None:
        return Record.reject(source, path, run.line, run.raw, run.reject[0], run.reject[1])
    assert isinstance(sysinfo, SystemInfo) and run.fields is not None
    model, params_b = LLM_MODELS.get(bench, (bench, None))
    f = run.fields
    f.update(source=source, source_kind="mlperf", benchmark=bench, mlperf_version=version,
             submitter=submitter, system=system, model=model, accelerator=sysinfo.accelerator,
             result_path=f"{submitter}/results/{system}/{bench}/{logical_name(run.path)}",
             n_accelerators=sysinfo.n_accelerators, accelerators_per_node=sysinfo.per_node,
             citation=" ".join(p for p in ("MLPerf Training", version, submitter, system, bench,
                                           logical_stem(run.path)) if p),
             provenance=f"{path}:{run.line}")
    if sysinfo.framework:
        f["framework"] = sysinfo.framework
    if params_b is not None:
        f["params_b"] = params_b
        run.derived.append("params_b")  # the benchmark's reference size, not read from the log
    if run.log_sha1:
        f["log_sha1"] = run.log_sha1  # the ingest core drops byte-identical re-publications
    if score is not None:
        f["olympic_score_s"] = score
        run.derived.append("olympic_score_s")
    notes = sysinfo.notes + run.notes + ([score_note] if score_note else [])
    if version is None:
        notes.append("MLPerf round not in the folder name")
    f["derived"] = ";".join(sorted(set(sysinfo.derived + run.derived)))
    f["notes"] = "; ".join(notes)
    meta = dict(run.meta, submitter=submitter, scaling_factor=factor)
    return Record(source=source, path=path, line=run.line, raw=run.raw, fields=f, meta=meta)
