"""``scalewall validate PATH``: what the ingest would make of one input, before it is added.

* A published table (format-v1 CSV): the same reading and normalization as the ingest stage,
  plus the format checks of ``pipeline.ingest.lint`` (required columns, vocabularies, unit slips,
  throughput above the chip's peak, empty files). Every record is a run or a reject with its
  line and reason; above ``LIST_ALL`` rejects the account is a summary by reason with the first
  ``EXAMPLES`` of each. Progress goes to a terminal's stderr.
* A step log, or a folder of them: per log the parser chosen, the run (N, accelerator, model,
  step time, throughput), the sidecar files and the values they set, or the reject reason; then
  the series those logs form and the logs that join none, with the reason. A folder under
  ``data/raw/logs`` is read with that folder's sidecars and campaigns; a folder elsewhere is
  read as one campaign (the topmost folder above it holding a ``run.yaml``, else the folder).

Writes nothing. The command exits 1 when anything would be rejected.
"""

from __future__ import annotations

import csv
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tqdm import tqdm

from pipeline.config import project_relative
from pipeline.ingest.core.series import assign_series, why_alone
from pipeline.ingest.lint import field_problem, run_problem, table_problems
from pipeline.ingest.records import Record
from pipeline.ingest.sources.published import read_file
from pipeline.ingest.sources.steplogs.reader import LOG_SUFFIXES, find_logs, read_logs
from pipeline.ingest.sources.steplogs.sidecar import SidecarError, load_sidecar
from pipeline.ingest.stage import check_accounting, convert, load_catalog, read_options
from pipeline.vocab import PRECISIONS

LIST_ALL = 20
EXAMPLES = 3


def is_log_target(path: Path) -> bool:
    """A folder, or a file with a step-log suffix (``.gz`` included), is checked as logs."""
    path = Path(path)
    suffixes = [s.lower() for s in path.suffixes[-2:]]
    return path.is_dir() or bool(suffixes) and (
        suffixes[-1] in LOG_SUFFIXES or suffixes[-1] == ".gz")


def _header(path: Path) -> list[str] | None:
    """The first non-blank CSV row of ``path`` (None: empty or unreadable file)."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace", newline="") as fh:
            for row in csv.reader(fh):
                if any(cell.strip() for cell in row):
                    return [c.strip() for c in row]
    except (OSError, csv.Error):
        return None
    return None


def _max_peak(catalog: Any, accelerator: str | None, cache: dict) -> float | None:
    """The chip's highest dense peak FLOP/s at any precision (None: not catalogued)."""
    if accelerator not in cache:
        peaks = []
        for precision in PRECISIONS:
            try:
                peaks.append(catalog.peak_flops_per_s(accelerator, precision)[0])
            except (KeyError, ValueError):
                continue
        cache[accelerator] = max((p for p in peaks if p), default=None)
    return cache[accelerator]


def _line_of(row: dict[str, Any]) -> int:
    tail = str(row.get("provenance") or "").rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def validate_table(path: Path, params: dict[str, Any], catalog_dir: Path
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """Runs and rejects (rows as the ingest writes them) of one CSV, and the table's problems."""
    path = Path(path)
    options, _ = read_options(params)
    catalog = load_catalog(Path(catalog_dir))
    n_records = 0

    def linted() -> Iterator[Record]:
        nonlocal n_records
        for record in read_file(path):
            n_records += 1
            problem = field_problem(record.fields) if record.fields is not None else None
            if problem:
                code, detail = problem.split(": ", 1)
                record = Record.reject(record.source, record.path, record.line, record.raw,
                                       code, detail)
            yield record

    stream = tqdm(linted(), desc=f"validate {path.name}", unit="rec", file=sys.stderr,
                  delay=1.0, disable=not sys.stderr.isatty())
    runs, rejects, read = convert(stream, catalog, options)
    check_accounting(read, runs, rejects)
    peaks: dict = {}
    kept = []
    for row in runs:
        problem = run_problem(row, _max_peak(catalog, row["accelerator"], peaks))
        if problem is None:
            kept.append(row)
            continue
        rejects.append({"source": row["source"], "path": row["_path"], "line": _line_of(row),
                        "record": "", "reason": problem})
    exists = path.is_file()
    problems = table_problems(_header(path), n_records) if exists else []
    if exists and path.stat().st_size == 0:
        problems = table_problems(None, 0)
    return kept, rejects, problems


def summary(path: Path, runs: list[dict[str, Any]], rejects: list[dict[str, Any]],
            problems: list[str] = ()) -> str:
    """Counts, table problems, rejects (each, or by reason with the first examples), derived."""
    lines = [f"{path}: {len(runs) + len(rejects)} records -> {len(runs)} runs, "
             f"{len(rejects)} rejects"]
    lines += [f"  table: {p}" for p in problems]
    ordered = sorted(rejects, key=lambda r: r["line"])
    if len(ordered) <= LIST_ALL:
        lines += [f"  line {r['line']}: {r['reason']}" for r in ordered]
    else:
        by_code: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in ordered:
            by_code[r["reason"].split(":", 1)[0]].append(r)
        lines.append(f"  rejects by reason (first {EXAMPLES} of each):")
        for code, rows in sorted(by_code.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            lines.append(f"  {code}: {len(rows)}")
            lines += [f"    line {r['line']}: {r['reason'][:300]}" for r in rows[:EXAMPLES]]
    derived = Counter(name for run in runs for name in (run.get("derived") or "").split(";")
                      if name)
    if derived:
        lines.append("  derived (at transcription or by the ingest), runs: " + ", ".join(
            f"{name} ({count})" for name, count in sorted(derived.items())))
    return "\n".join(lines)


def logs_root(path: Path) -> Path:
    """The folder sidecars are looked for from: ``data/raw/logs`` above ``path`` when there is
    one; elsewhere the parent of the topmost folder above ``path`` holding a ``run.yaml`` (that
    folder is then the campaign), else the folder above ``path`` (or above a log's folder)."""
    path = Path(path).resolve()
    for parent in (path, *path.parents):
        if parent.name == "logs" and parent.parent.name == "raw":
            return parent
    start = path if path.is_dir() else path.parent
    with_sidecar = [f for f in (start, *start.parents) if (f / "run.yaml").is_file()]
    return with_sidecar[-1].parent if with_sidecar else start.parent


def validate_logs(path: Path, params: dict[str, Any], catalog_dir: Path
                  ) -> tuple[list[Record], list[dict[str, Any]], list[dict[str, Any]],
                             list[dict[str, Any]], list[dict[str, Any]]]:
    """(log records, runs, rejects, series, logs in no series) of one log or a folder."""
    path = Path(path).resolve()
    options, _ = read_options(params)
    root = logs_root(path)
    files = find_logs(path) if path.is_dir() else [path]
    records, _ = read_logs(root, params, paths=files)
    runs, rejects, read = convert(iter(records), load_catalog(Path(catalog_dir)), options)
    check_accounting(read, runs, rejects)
    runs.sort(key=lambda r: r["run_id"])
    series = assign_series(runs)
    return records, runs, rejects, series, why_alone(runs, series)


def _sidecar_text(log: Path, root: Path) -> str:
    try:
        side = load_sidecar(log, root, display=project_relative)
    except SidecarError as exc:
        return f"sidecar: {exc}"
    if not side.files:
        return "no sidecar"
    by_file: dict[str, list[str]] = defaultdict(list)
    for key, value in side.values.items():
        by_file[side.origin[key]].append(f"{key}={value}")
    return "sidecar " + "; ".join(f"{f}: {', '.join(v)}" for f, v in by_file.items())


# Notes that say what of a log was left out or changed (shown by validate; the rest are in the
# run's notes column).
_DATA_NOTE_WORDS = ("left out", "skipped", "invisible characters", "decoded from", "restart",
                    "replaced")


def _data_notes(notes: str | None) -> list[str]:
    return [n.strip(" []") for n in (notes or "").split("; ")
            if any(w in n for w in _DATA_NOTE_WORDS)]


def logs_summary(path: Path, records: list[Record], runs: list[dict[str, Any]],
                 rejects: list[dict[str, Any]], series: list[dict[str, Any]],
                 alone: list[dict[str, Any]]) -> str:
    """Per log: parser, run or reject, sidecar values; then series and logs in no series."""
    root = logs_root(path)
    run_by_path = {r["_path"]: r for r in runs}
    reject_by_path = {r["path"]: r for r in rejects}
    lines = [f"{path}: {len(records)} step log(s) -> {len(runs)} runs, {len(rejects)} rejects, "
             f"{len(series)} series"]
    for rec in records:
        log = Path(rec.path) if Path(rec.path).is_absolute() else Path.cwd() / rec.path
        lines.append(f"  {rec.path}")
        row = run_by_path.get(rec.path)
        if row is None:
            reason = reject_by_path.get(rec.path, {}).get("reason", rec.reason)
            lines.append(f"    reject {reason}")
        else:
            fmt = rec.meta.get("format", "?")
            mfu = f", MFU {row['mfu']:.3f}" if row.get("mfu") else ""
            tps = f", {row['tokens_per_s']:.6g} tokens/s" if row.get("tokens_per_s") else ""
            step = f", step {row['step_time_s']:.4g} s" if row.get("step_time_s") else ""
            lines.append(f"    parser {fmt} -> run: N={row['n_accelerators']} "
                         f"{row['accelerator']}, model {row['model']}{step}{tps}{mfu}; "
                         f"source {row['source']}, series {row['series_id']}")
            lines += [f"    note: {n}" for n in _data_notes(row.get("notes"))]
        lines.append(f"    {_sidecar_text(log, root)}")
    for s in series:
        lines.append(f"  series {s['series_id']}: {s['scaling']}, {s['n_points']} logs, "
                     f"N={s['n_min']}..{s['n_max']} ({s['n_distinct']} values)")
    for a in alone:
        lines.append(f"  in no series: {a['path']} (N={a['n']}): {a['reason']}")
    return "\n".join(lines)
