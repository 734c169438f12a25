"""Render the measured figures of docs/theory.md §10 and §11 from reports/metrics/calibrate.json
and (the memory model's scores) reports/metrics/theory.json.

The calibration's forms, per-family parameters, in-sample and held-out scores, interval coverage
and width, layout ranking and frontier change with the data, so docs/theory.md does not type
them: each block between ``<!-- begin: NAME -->`` and ``<!-- end: NAME -->`` is written here
from the metrics ``dvc repro`` wrote. Run after ``dvc repro``::

    .venv/bin/python scripts/theory_tables.py          # rewrite the blocks in docs/theory.md
    .venv/bin/python scripts/theory_tables.py --check  # exit 1 if docs/theory.md is stale

tests/test_theory_tables.py runs the check.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "theory.md"
METRICS = ROOT / "reports" / "metrics" / "calibrate.json"
THEORY_METRICS = ROOT / "reports" / "metrics" / "theory.json"
HOLDOUTS = ("largest_k1", "largest_k2")
COLUMNS = ("selected", "calibrated", "naive_linear", "naive_loglinear")
LAWS = ("power", "amdahl", "usl", "comm")
# parameters whose unit is seconds; the rest are fractions
SECONDS = {"fixed_s": "s", "layer_overhead_s": "ms"}


def pct(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{100 * x:.{digits}f} %"


def num(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "–"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.{digits}g}"


def sci(x: float | None) -> str:
    return "–" if x is None else f"{x:.2g}".replace("e+", "e")


def _param(name: str, x: float | None) -> str:
    if x is None:
        return "–"
    if SECONDS.get(name) == "ms":
        return f"{1e3 * x:.2g}"
    return f"{x:.2g}"


def forms_block(m: dict[str, Any]) -> str:
    rows = ["| form | parameters fitted | AICc | BIC | in-sample median APE of step time, production runs |",
            "|---|---|---|---|---|"]
    for f in m["forms"]:
        chosen = f["form"] == m["form"]
        name = f"**{f['form']}**" if chosen else f["form"]
        rows.append(f"| {name} | {f['terms'].replace(',', ', ')} | {num(f['aicc'])} | "
                    f"{num(f['bic'])} | {pct(f['median_ape'])} |")
    best = min(m["forms"], key=lambda f: f["aicc"])["form"]
    rows.append("")
    rows.append(f"Used: **{m['form']}** (bold); lowest AICc: {best}.")
    return "\n".join(rows)


def parameters_block(m: dict[str, Any]) -> str:
    families = sorted({k.split(".", 1)[0] for k in m["parameters"]},
                      key=lambda f: (f != "production", f))
    names = m["parameter_names"]
    head = [f"{n} ({SECONDS[n]})" if n in SECONDS else n for n in names]
    rows = ["| family | " + " | ".join(head) + " |", "|---" * (len(names) + 1) + "|"]
    for fam in families:
        cells = []
        for n in names:
            p = m["parameters"].get(f"{fam}.{n}")
            if p is None:
                cells.append("–")
            elif p["ci_low"] is None and p["ci_high"] is None:
                cells.append(f"{_param(n, p['estimate'])} (held)")
            else:
                cells.append(f"{_param(n, p['estimate'])} ({_param(n, p['ci_low'])}–"
                             f"{_param(n, p['ci_high'])})")
        rows.append(f"| {fam} | " + " | ".join(cells) + " |")
    rows.append("")
    rows.append(f"95 % CI in brackets; held: not fitted by the form. σ_u = {num(m['sigma_u'], 2)} "
                "(log). Schedule defaults: " + ", ".join(m["schedule_defaults"]) + ".")
    return "\n".join(rows)


def in_sample_block(m: dict[str, Any]) -> str:
    ins = m["in_sample"]
    per = "; ".join(f"{s} {pct(v['median_ape'])} (n = {v['n']:,}, coverage "
                    f"{v['coverage']:.2f}, median width {v['median_width']:.2f})"
                    for s, v in sorted(ins["by_source"].items()))
    return (f"In-sample median APE of MFU: {pct(ins['median_ape'])} over all {ins['n']:,} runs "
            f"(mean over sources {pct(ins['median_ape_source_mean'])}); the 95 % intervals "
            f"cover {pct(ins['coverage'])}. Per source: {per}.")


def source_holdout_block(m: dict[str, Any]) -> str:
    sh = m["scores"]["source_holdout"]
    fam = m["against_naive"].get("source", {})
    rows = ["| held-out source | runs | median APE | family median MFU | coverage | "
            "median width |", "|---|---|---|---|---|---|"]
    for s in sorted(sh, key=lambda s: (s == "production", s)):
        v = sh[s]
        fm = pct(fam[s]["family_median"]) if s in fam else "–"
        rows.append(f"| {s} | {v['n']:,} | {pct(v['median_ape'])} | {fm} | "
                    f"{v['coverage']:.2f} | {v['median_width']:.2f} |")
    hw = m["interval_half_width_log"]
    rows.append("")
    rows.append("Interval half-widths (log): " + ", ".join(
        f"{k} {v:.2f}" for k, v in sorted(hw.items())) + ".")
    return "\n".join(rows)


def _row(m: dict[str, Any], holdout: str, predictor: str) -> dict[str, Any] | None:
    return next((r for r in m["predictors"] if r["holdout"] == holdout and r["source"] == "all"
                 and r["predictor"] == predictor), None)


def largest_k_block(m: dict[str, Any]) -> str:
    rows = ["| holdout | " + " | ".join(COLUMNS) + " | best law |", "|---" * 6 + "|"]
    for holdout in HOLDOUTS:
        sel = _row(m, holdout, "selected")
        if sel is None:
            continue
        cells = []
        for p in COLUMNS:
            r = _row(m, holdout, p)
            cells.append("–" if r is None else f"{pct(r['median_ape'])}, {r['coverage']:.2f}")
        laws = [r for r in (_row(m, holdout, law) for law in LAWS) if r]
        best = min(laws, key=lambda r: r["median_ape"], default=None)
        extra = "–" if best is None else (f"{best['predictor']} {pct(best['median_ape'])} "
                                          f"({best['coverage']:.2f}, {int(best['n']):,} cases)")
        rows.append(f"| {holdout} ({int(sel['n']):,}) | " + " | ".join(cells) + f" | {extra} |")
    parts = []
    for holdout, t in sorted(m["scores"]["largest_k"].items()):
        per = ", ".join(f"{s} {pct(v['selected'])} vs {pct(v['best_naive'])} ({v['n']} cases)"
                        for s, v in sorted(t["by_source"].items()))
        a = m["against_naive"]["largest"][holdout]["all"]
        ci = a.get("ratio_ci") or [None, None]
        parts.append(f"{holdout}: per source {per}; macro mean {pct(t['macro_selected'])} vs "
                     f"{pct(t['macro_best_naive'])} (ratio {num(t['macro_ratio'], 2)}); pooled "
                     f"{pct(t['pooled_selected'])} vs {pct(t['pooled_best_naive'])}, ratio "
                     f"{a['ratio']:.2f} (95 % interval resampling series {num(ci[0], 2)}–"
                     f"{num(ci[1], 2)})")
    rows.append("")
    rows.append("Selected against the better naive rule on the same cases: " + "; ".join(parts)
                + ".")
    return "\n".join(rows)


def scores_block(m: dict[str, Any]) -> str:
    t = m["scores"]
    rk = t["ranking"]
    above = t["mfu_above_one"]
    base = m["frontier"]["baseline"]
    llama = base["llama3_compute"]
    lay = llama["layout"]
    prod = t["source_holdout"]["production"]
    knee_ci, wall_ci = base["knee_flop_calibrated_ci"], base["wall_flop_calibrated_ci"]
    rows = ["| measure | measured | compared with |", "|---|---|---|",
            f"| production leave-source-out 95 % intervals: coverage, median width (high/low) | "
            f"{prod['coverage']:.2f}, {prod['median_width']:.2f} | nominal coverage 0.95 |",
            f"| MFU or interval ends above 1 (or the ceiling) | calibrated.parquet "
            f"{above['calibrated']} ({above['calibrated_above_ceiling']} above the ceiling), "
            f"predictions.parquet {above['predictions']} | physically impossible: 0 |",
            f"| Playbook layout ranking ({rk['groups']} (model, N) groups ≥ {rk['min_layouts']} "
            f"layouts): median Spearman, regret | "
            f"{rk['calibrated']['median_spearman']:.2f}, {pct(rk['calibrated']['median_regret'])} "
            f"| ideal ceiling {rk['ceiling']['median_spearman']:.2f}, "
            f"{pct(rk['ceiling']['median_regret'])}; fewest PP then TP "
            f"{rk['fewest_pp_then_tp']['median_spearman']:.2f}, "
            f"{pct(rk['fewest_pp_then_tp']['median_regret'])} |",
            f"| baseline frontier at {sci(llama['training_flop'])} FLOP (Llama 3 405B's "
            f"compute) | {'feasible' if lay['feasible'] else 'infeasible'}, u = "
            f"{llama['utilization']:.3f} ({int(lay['n_accelerators']):,} accelerators, TP "
            f"{int(lay['tp1'])}, PP {int(lay['pp'])}, DP {int(lay['dp'])}) | Llama 3's "
            f"measured MFU (runs.parquet, source llama3) |"]
    rows.append("")
    rows.append(f"Baseline frontier at the calibrated efficiencies: knee "
                f"{sci(base['knee_flop_calibrated'])} FLOP (CI {sci(knee_ci[0])}–"
                f"{sci(knee_ci[1])}), wall {sci(base['wall_flop_calibrated'])} "
                f"({sci(wall_ci[0])}–{sci(wall_ci[1])}), plateau utilization "
                f"{base['plateau_utilization_calibrated']:.2f}; ideal knee "
                f"{sci(base['knee_flop'])}, wall {sci(base['wall_flop'])}. Production layer "
                f"overhead k = {_param('layer_overhead_s', m['parameters']['production.layer_overhead_s']['estimate'])} "
                "ms per layer and microbatch.")
    return "\n".join(rows)


BLOCKS = {"forms": forms_block, "parameters": parameters_block, "in_sample": in_sample_block,
          "source_holdout": source_holdout_block, "largest_k": largest_k_block,
          "scores": scores_block}


def _pct0(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _sizes(per: dict[str, Any]) -> list[str]:
    """Model-size labels ("1B", "80B", ...) smallest first; others last."""
    def key(label: str) -> float:
        try:
            return float(label.rstrip("B"))
        except ValueError:
            return float("inf")
    return sorted(per, key=key)


def memory_block(theory: dict[str, Any]) -> str:
    """§11's scores: the memory model held out by model (theory.json ``_memory``)."""
    m = theory["_memory"]
    p, f = m["peak_memory"], m["fits_memory"]
    o, n = p["overall"], p["naive_overall"]
    src = ", ".join(f"{s} {_pct0(v['median_ape'])} (naive {_pct0(v['naive']['median_ape'])})"
                    for s, v in sorted(p["per_source"].items()))
    size = ", ".join(f"{k} {_pct0(p['per_model_size'][k]['median_ape'])}"
                     for k in _sizes(p["per_model_size"]))
    fo, fn = f["overall"], f["naive_overall"]
    fsize = ", ".join(f"{k} {f['per_model_size'][k]['balanced_accuracy']:.2f}"
                      for k in _sizes(f["per_model_size"]))
    fnaive = ", ".join(f"{f['per_model_size'][k]['naive']['balanced_accuracy']:.2f}"
                       for k in _sizes(f["per_model_size"]))
    return (f"**Scores** (theory.json `_memory`, held out by model: κ and c fitted without the "
            f"model's own runs). Peak memory: median APE {_pct0(o['median_ape'])}, p90 "
            f"{_pct0(o['p90_ape'])} over {o['n']:,} runs (naive weights + gradients + optimizer "
            f"only: {_pct0(n['median_ape'])} and {_pct0(n['p90_ape'])}); by source {src}; by "
            f"model size {size}. `fits_memory` against the Playbook's {fo['n_completed']:,} "
            f"completed and {fo['n_oom']:,} \"crashed/oom\" configurations: balanced accuracy "
            f"{fo['balanced_accuracy']:.3f} (naive {fn['balanced_accuracy']:.3f}); by model size "
            f"{fsize} (naive {fnaive}).{_near_capacity_clause(p)}")


def _near_capacity_clause(peak: dict[str, Any]) -> str:
    """The peaks that may be censored by the chip's capacity, and the APE without them."""
    near = peak.get("near_capacity")
    if not near:
        return ""
    without = near["overall_without"]
    return (f" Peaks with {near['rule']} (possibly the allocator filling the chip): "
            f"{near['n']:,}; without them the median APE is {_pct0(without['median_ape'])} over "
            f"{without['n']:,} runs.")


_BASIS = {"fixed": "fixed at Korthikanti et al.'s count",
          "counted": "the count, not fitted: its published peaks are the allocator's reserved "
                     "bytes, and a fitted factor would absorb what the model misses on its "
                     "70B and 405B rows"}


def memory_overhead_block(theory: dict[str, Any]) -> str:
    """§11's activation factor per framework family and the fixed part (theory.json
    ``_memory.overhead``), and the completed runs predicted not to fit, per source."""
    memory = theory["_memory"]
    o = memory["overhead"]
    c, cc = o["fixed_bytes"], o["fixed_bytes_ci"]
    parts = []
    for family, f in (o.get("by_family") or {}).items():
        k, kc = f["activation_factor"], f["activation_factor_ci"]
        how = (f"fitted, 95% CI {kc[0]:.2f}–{kc[1]:.2f}, {f['n_runs']:,} runs"
               if f["basis"] == "fitted" else _BASIS.get(f["basis"], f["basis"]))
        parts.append(f"{family} κ = {k:.2f} ({how})")
    fitted = sum(f["n_runs"] for f in (o.get("by_family") or {}).values()
                 if f["basis"] in ("fitted", "fixed"))
    over = memory.get("completed_predicted_not_to_fit") or {}
    contradicted = ", ".join(f"{s} {v['predicted_not_to_fit']} of {v['n_completed']:,}"
                             for s, v in over.items())
    return ("; ".join(parts) + f"; c = {c / 1e9:.2f} GB ({cc[0] / 1e9:.2f}–{cc[1] / 1e9:.2f} "
            f"GB), fitted on the {fitted:,} measured peaks of the fitted and fixed families. "
            f"Completed runs predicted not to fit, per source: {contradicted}.")


THEORY_BLOCKS = {"memory_overhead": memory_overhead_block, "memory_scores": memory_block}


def render(doc: str, metrics: dict[str, Any], theory: dict[str, Any] | None = None) -> str:
    """``doc`` with every generated block rewritten from ``metrics`` (calibrate.json) and, when
    given, ``theory`` (theory.json)."""
    if theory is not None:
        for name, block in THEORY_BLOCKS.items():
            doc = _rewrite(doc, name, block(theory))
    for name, block in BLOCKS.items():
        doc = _rewrite(doc, name, block(metrics))
    stale = set(re.findall(r"<!-- begin: (\w+) ", doc)) - set(BLOCKS) - set(THEORY_BLOCKS)
    if stale:
        raise SystemExit(f"docs/theory.md has blocks no renderer writes: {sorted(stale)}")
    return doc


def _rewrite(doc: str, name: str, text: str) -> str:
    pattern = re.compile(rf"(<!-- begin: {name} [^\n]*-->\n)(.*?)(<!-- end: {name} -->)", re.S)
    if len(pattern.findall(doc)) != 1:
        raise SystemExit(f"docs/theory.md needs exactly one block {name!r}")
    return pattern.sub(lambda mt: mt.group(1) + text + "\n" + mt.group(3), doc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the doc is stale")
    args = parser.parse_args(argv)
    doc = DOC.read_text(encoding="utf-8")
    new = render(doc, json.loads(METRICS.read_text(encoding="utf-8")),
                 json.loads(THEORY_METRICS.read_text(encoding="utf-8")))
    if args.check:
        if new != doc:
            print("docs/theory.md §10-11 is stale: run scripts/theory_tables.py",
                  file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
