"""Your runs one by one: each of your runs that is in no scaling series, and each of your logs
that did not become a run, for the report's opening section ("Your runs").

A run in no series (one log at one N, or logs that differ in more than N) still says how fast
it went: its step time, tokens/s, MFU, the theory's ideal ceiling for its configuration
(``comparison.parquet`` ``bound_mfu``), where its step time goes (the calibrated model where
the calibrate stage covered the run, else the theory's decomposition: ``focus._decomposition``)
and the closest published runs (same accelerator family, active parameters within
``focus.SIZE_FACTOR``, nearest in model size, then in N). A log that became a reject gets its
reason and what to do about it (``FIXES``, by reject code); ``scalewall validate PATH`` lists
every missing field at once.

"Series" means one listed in ``series.parquet`` (at least two N), everywhere in the report: a
run whose ``series_id`` names no listed series is in no series.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pipeline.report.data import ReportData
from pipeline.report.focus import SIZE_FACTOR, _decomposition, _num, focus_section

PUBLISHED_RUNS_SHOWN = 3
# What to do about a log rejected with each code (the reason itself says what was wrong).
FIXES = {
    "missing_required": "add the missing keys to the log's run.yaml (scalewall validate {path} "
                        "prints every one with an example value)",
    "unknown_accelerator": "write a catalog id or alias as the sidecar's accelerator "
                           "(data/catalog/accelerator_aliases.csv)",
    "conflict": "the log and run.yaml disagree (fix or delete the sidecar key; the log's value "
                "is usually right), or two logs of one configuration give different measures "
                "(correct or remove one, or state what differs, e.g. system:)",
    "implausible": "the MFU is above what the chip can reach: give active_params_b for an MoE "
                   "model, the job's total n_accelerators, or the precision (fp8) it ran at",
    "too_few_steps": "log more steps past warm-up, or lower ingest.logs.min_steady_steps",
    "truncated_log": "the log is cut short or empty: use the complete file",
    "not_a_run": "no step lines of a known format: set format in run.yaml, or convert the log "
                 "to the generic JSONL format (docs/your-logs.md)",
    "no_measure": "the log prints no step time or throughput the ingest can read",
    "bad_value": "a sidecar value has the wrong type or an unknown key: see the reason",
    "malformed_row": "the file could not be read as a log or its sidecar as YAML: see the reason",
    "binary_file": "not a text log (a binary or compressed file under a log name)",
    "unreadable": "the file could not be read (permissions, a corrupt .gz): see the reason",
    "bad_link": "the log is a symbolic link leading outside the logs folder or nowhere",
    "out_of_range": "a value is outside the plausible range: see the reason",
    "unit_slip": "a value looks like the wrong unit (a percentage as a fraction): see the reason",
}


def _listed(d: ReportData) -> set[str]:
    return set(d.series["series_id"]) if not d.series.empty else set()


def in_series(d: ReportData, runs: pd.DataFrame) -> pd.Series:
    """Whether each run is in a listed scaling series (the definition used by every table)."""
    return runs["series_id"].isin(_listed(d))


def _mine(d: ReportData, focus: list[str]) -> pd.DataFrame:
    runs = d.runs
    if runs.empty:
        return runs
    if focus:
        return runs[runs["source"].isin(focus) | runs["series_id"].isin(focus)]
    return runs[runs["source_kind"] == "log"]


def _log_path(row: Any) -> str:
    """The log a run came from: its provenance without the line range and sidecar note."""
    prov = str(getattr(row, "provenance", "") or "")
    return prov.split(" (sidecar", 1)[0].rsplit(":", 1)[0] if prov else ""


def closest_published_runs(d: ReportData, family: str | None, params: float | None,
                           n: float | None, k: int = PUBLISHED_RUNS_SHOWN
                           ) -> list[dict[str, Any]]:
    """Published runs (not logs) on the same accelerator family with active parameters within
    ``SIZE_FACTOR`` of ``params``, nearest in model size, then in N."""
    runs = d.runs
    if runs.empty or not family or not params or not n:
        return []
    pub = runs[(runs["source_kind"] != "log") & (runs["accelerator_family"] == family)
               & (runs["status"].fillna("ok") == "ok") & runs["active_params"].gt(0)
               & runs["n_accelerators"].gt(0)]
    ratio = pub["active_params"] / params
    pub = pub[(ratio <= SIZE_FACTOR) & (ratio >= 1 / SIZE_FACTOR)]
    if pub.empty:
        return []
    pub = pub.assign(size_gap=np.abs(np.log(pub["active_params"] / params)).round(6),
                     n_gap=np.abs(np.log(pub["n_accelerators"] / n)))
    pub = pub.sort_values(["size_gap", "n_gap", "run_id"]).head(k)
    return [{"source": r.source, "model": r.model, "accelerator": r.accelerator,
             "n": _num(r.n_accelerators), "tokens_per_s_per_accelerator":
                 _num(r.tokens_per_s_per_accelerator), "mfu": _num(r.mfu)}
            for r in pub.itertuples()]


def single_runs(d: ReportData, focus: list[str], shown: int | None = None
                ) -> list[dict[str, Any]]:
    """Each of your runs in no listed series (past ``shown`` of them, ``report.runs_shown``,
    the ``shown`` of largest N; None: all), with its measures, ceiling, decomposition, the closest published runs and why it is
    in no series (the ingest's ``logs_without_series``)."""
    mine = _mine(d, focus)
    if mine.empty:
        return []
    alone = mine[~in_series(d, mine)].sort_values(["source", "n_accelerators", "run_id"])
    if shown is not None and len(alone) > shown:   # the largest N, in the usual order
        alone = alone.sort_values(["n_accelerators", "run_id"], ascending=[False, True]) \
            .head(shown).sort_values(["source", "n_accelerators", "run_id"])
    why = {e["path"]: e["reason"] for e in
           d.metrics.get("ingest", {}).get("logs_without_series", {}).get("logs", [])}
    comp = d.comparison
    bound = dict(zip(comp["run_id"], comp["bound_mfu"])) if not comp.empty \
        and "bound_mfu" in comp else {}
    out = []
    for r in alone.itertuples():
        path = _log_path(r)
        dec = _decomposition(d, r.run_id)
        out.append({
            "run_id": r.run_id, "path": path or r.source, "source": r.source, "model": r.model,
            "accelerator": r.accelerator, "n": _num(r.n_accelerators),
            "step_time_s": _num(r.step_time_s), "tokens_per_s": _num(r.tokens_per_s),
            "mfu": _num(r.mfu), "ceiling_mfu": _num(bound.get(r.run_id)),
            "decomposition": dec,
            "published": closest_published_runs(d, r.accelerator_family,
                                                _num(r.active_params), _num(r.n_accelerators)),
            "why": why.get(path, "no other run of its source at another N with the same "
                                 "model, accelerator, precision and layout family"),
        })
    return out


def _your_rejects(d: ReportData, focus: list[str]) -> pd.DataFrame:
    rej = d.rejects
    if rej.empty:
        return rej
    mask = rej["source"].isin(focus) if focus else (
        rej["source"].astype(str).str.match(r"^logs(/|$)"))
    return rej[mask]


def rejected_logs(d: ReportData, focus: list[str], shown: int | None = None
                  ) -> list[dict[str, Any]]:
    """Each of your logs that became a reject (the first ``shown`` by path; None: all): path,
    reason and the fix, by path."""
    rej = _your_rejects(d, focus)
    if rej.empty:
        return []
    out = []
    rej = rej.sort_values(["path", "line"])
    for r in (rej if shown is None else rej.head(shown)).itertuples():
        reason = str(r.reason)
        code = reason.split(":", 1)[0].strip()
        fix = FIXES.get(code, "see the reason; scalewall validate {path} checks the log")
        out.append({"path": r.path, "code": code, "reason": reason,
                    "fix": fix.format(path=r.path)})
    return out


def rejected_by_code(d: ReportData, focus: list[str]) -> list[dict[str, Any]]:
    """Your rejected logs counted by reason code (most first), each with its fix."""
    rej = _your_rejects(d, focus)
    if rej.empty:
        return []
    codes = rej["reason"].astype(str).str.split(":", n=1).str[0].str.strip()
    counts = codes.value_counts()
    return [{"code": c, "count": int(n), "fix": FIXES.get(c, "see each reason; scalewall "
                                                            "validate <log> checks a log")
             .format(path="<log>")}
            for c, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def your_runs_section(d: ReportData, focus: list[str], series_shown: int | None = None,
                      listed_shown: int | None = None) -> dict[str, Any]:
    """The whole "Your runs" section: the series (``focus.focus_section``), then the runs in
    no series and the rejected logs, for the default focus and for ``--focus`` alike; past
    ``series_shown`` series and ``listed_shown`` runs or rejects (a fleet's archive), the
    largest are detailed and the counts say how many there are."""
    section = focus_section(d, focus, series_shown)
    mine = _mine(d, focus)
    section["n_singles"] = 0 if mine.empty else int((~in_series(d, mine)).sum())
    section["singles"] = single_runs(d, focus, listed_shown)
    section["n_rejected"] = len(_your_rejects(d, focus))
    section["rejected"] = rejected_logs(d, focus, listed_shown)
    section["rejected_by_code"] = rejected_by_code(d, focus)
    return section
