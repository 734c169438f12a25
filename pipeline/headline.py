"""Headline figures per stage: the few numbers ``dvc metrics show`` prints.

DVC prints one row per metrics file and one column per key of every file, so the stages'
detailed metrics (``reports/metrics/<stage>.json``: nested, hundreds of keys, read by the later
stages, the report and notebooks) are declared as plain outputs, and each stage also writes
``reports/headline/<stage>.json`` with two to three short keys, declared as DVC's metrics: the
whole table stays under 200 characters a line (``tests/test_dvc_shell.py`` checks it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.io import write_json
from pipeline.schema import check_headline


def _ingest(m: dict[str, Any]) -> dict[str, Any]:
    t = m.get("totals", {})
    return {"runs": t.get("runs"), "rejects": t.get("rejects"), "series": t.get("series")}


def _fit(m: dict[str, Any]) -> dict[str, Any]:
    law = m.get("default_law")
    # Energy per token per doubling of N across the power-measured series (fit.json "energy").
    per_token = (((m.get("energy") or {}).get("cross_series") or {})
                 .get("energy_j_per_token") or {})
    return {"fitted": m.get("n_series_fitted"), "law": law,
            "heldout_ape": (m.get("default_law_scores") or {}).get(law),
            "e_tok_x2": per_token.get("n_level_doubling_factor")}


def _theory(m: dict[str, Any]) -> dict[str, Any]:
    name = "baseline" if "baseline" in m else next((k for k in m if not k.startswith("_")), None)
    base = m.get(name) or {}
    return {"knee_flop": base.get("knee_flop"), "wall_flop": base.get("wall_flop")}


def _compare(m: dict[str, Any]) -> dict[str, Any]:
    return {"eff_at_n_max": m.get("strong_median_efficiency_at_n_max"),
            "n_at_threshold": m.get("strong_median_n_at_threshold_law")}


def _selected_k1(m: dict[str, Any]) -> dict[str, Any]:
    """calibrate.json's predictor row of ``selected`` over all sources in largest_k1."""
    return next((r for r in m.get("predictors", []) if r.get("predictor") == "selected"
                 and r.get("holdout") == "largest_k1" and r.get("source") == "all"), {})


def _calibrate(m: dict[str, Any]) -> dict[str, Any]:
    row = _selected_k1(m)
    return {"sel_ape": row.get("median_ape"), "sel_cov": row.get("coverage")}


def _release(m: dict[str, Any]) -> dict[str, Any]:
    return {"runs": m.get("runs"), "sources": m.get("sources")}


PICK = {"ingest": _ingest, "fit": _fit, "theory": _theory, "compare": _compare,
        "calibrate": _calibrate, "release": _release}
# What each headline key means: ``scalewall metrics`` prints it under the table, since DVC's
# column names must stay short for ``dvc metrics show`` to fit a terminal.
LEGEND = {
    "ingest": {"runs": "runs from every source (published tables, MLPerf, your logs)",
               "rejects": "records that did not become runs (rejects.parquet, with reasons)",
               "series": "scaling series: runs of one source differing only in N"},
    "fit": {"fitted": "series with at least one law fitted",
            "law": "the default law (best held-out error)",
            "heldout_ape": "the default law's error on held-out largest N: mean over k of the "
                           "median absolute relative error (0.25 = 25 %)",
            "e_tok_x2": "energy per token multiplies by this per doubling of N (power-measured "
                        "series)"},
    "theory": {"knee_flop": "training FLOP where the baseline scenario's returns begin to fall",
               "wall_flop": "training FLOP at the baseline scenario's latency wall"},
    "compare": {"eff_at_n_max": "median strong-scaling efficiency at each series' largest N",
                "n_at_threshold": "median N where a series' fitted law falls to the threshold "
                                  "efficiency (compare.efficiency_threshold)"},
    "calibrate": {"sel_ape": "median absolute relative error of the selected predictor's MFU "
                             "on each series' largest N held out (0.5 = 50 %)",
                  "sel_cov": "share of those held-out runs inside its 95% interval"},
    "release": {"runs": "runs in the dataset release (data/release: runs.parquet, runs.csv)",
                "sources": "sources released, each with its licence or terms (sources.csv)"},
}


def _short(value: Any) -> Any:
    """Four significant digits: a headline is read, the detail file keeps every digit."""
    if isinstance(value, float):
        return float(f"{value:.4g}")
    return value


def headline(stage: str, metrics: dict[str, Any]) -> dict[str, Any]:
    """The headline keys of one stage's detailed metrics (absent figures are null), checked
    against the stage's headline contract (``pipeline.schema.HEADLINES``)."""
    return check_headline(stage, {k: _short(v) for k, v in PICK[stage](metrics).items()})


def write_headline(stage: str, metrics_path: Path, out: Path) -> dict[str, Any]:
    """Read ``metrics_path`` (the stage's detailed metrics) and write its headline to ``out``."""
    figures = headline(stage, json.loads(Path(metrics_path).read_text(encoding="utf-8")))
    write_json(figures, Path(out))
    return figures


def summary_line(stage: str, m: dict[str, Any]) -> str | None:
    """The one line a stage prints when it ends (ingest prints its own, with rejects)."""
    if stage == "release":
        return (f"release: {m.get('version')}: {m.get('runs')} runs from {m.get('sources')} "
                f"sources in data/release")
    if stage == "fit":
        return (f"fit: {m.get('n_series_fitted')} of {m.get('n_series')} series fitted "
                f"(others: too few distinct N or no law converged), "
                f"{m.get('n_series_extrapolated')} tested on held-out N; default law "
                f"{m.get('default_law')}")
    if stage == "theory":
        scenarios = [k for k in m if not k.startswith("_")]
        b = m.get("_bounds", {})
        h = _theory(m)
        return (f"theory: {len(scenarios)} scenarios (baseline knee {h['knee_flop']:.3g}, wall "
                f"{h['wall_flop']:.3g} FLOP); {b.get('with_bound')} of {b.get('runs')} runs "
                "bounded" if h["knee_flop"] and h["wall_flop"] else
                f"theory: {len(scenarios)} scenarios; {b.get('with_bound')} of {b.get('runs')} "
                "runs bounded")
    if stage == "calibrate":
        row, ins = _selected_k1(m), m.get("in_sample", {})
        ape, cov = row.get("median_ape"), row.get("coverage")
        return (f"calibrate: form {m.get('form')} fitted on {m.get('fit_runs')} runs (in-sample "
                f"median APE of MFU " + (f"{ins['median_ape']:.0%}" if isinstance(
                    ins.get("median_ape"), float) else "n/a") + "); selected on the largest N "
                "held out: median APE " + (f"{ape:.0%}" if isinstance(ape, float) else "n/a")
                + ", 95% coverage " + (f"{cov:.0%}" if isinstance(cov, float) else "n/a"))
    if stage == "compare":
        eff = m.get("strong_median_efficiency_at_n_max")
        return (f"compare: {m.get('n_runs')} runs compared ({m.get('n_runs_with_bound')} with a "
                f"ceiling), {m.get('n_series')} series; median strong-scaling efficiency at the "
                f"largest N " + (f"{eff:.0%}" if isinstance(eff, float) else "n/a"))
    return None


def legend_lines(headline_dir: Path) -> list[str]:
    """Each stage's headline figures with what every key means (``scalewall metrics``)."""
    lines = []
    for stage, keys in LEGEND.items():
        path = Path(headline_dir) / f"{stage}.json"
        values = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        lines.append(f"{stage} ({path.as_posix()}{'' if values else ': not written yet'})")
        width = max(len(k) for k in keys)
        lines += [f"  {k:<{width}}  {values.get(k, '-')!s:>10}  {meaning}"
                  for k, meaning in keys.items()]
    return lines
