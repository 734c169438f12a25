"""Render the measured figures of docs/theory.md §10.3-10.4 from reports/metrics/calibrate.json.

The calibration's forms, estimates, in-sample errors and held-out scores change with the data,
so docs/theory.md does not type them: each block between ``<!-- begin: NAME -->`` and
``<!-- end: NAME -->`` is written here from the metrics ``dvc repro`` wrote. Run after
``dvc repro``::

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
LAWS = ("power", "amdahl", "usl", "comm")
# terms whose coefficient is seconds (per step, per doubling, per layer and microbatch)
SECONDS = {"overhead": "s per step", "sync": "s per step per doubling of N",
           "launch": "per layer and microbatch"}
HOLDOUTS = ("largest_k1", "largest_k2", "source")
COLUMNS = ("selected", "calibrated", "naive_linear", "naive_loglinear")


def pct(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{100 * x:.{digits}f} %"


def cov(x: float | None) -> str:
    return "no interval" if x is None else f"{x:.2f}"


def num(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "–"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.{digits}g}"


def _value(term: str, x: float | None) -> str:
    if x is None:
        return "–"
    if term == "launch":
        return f"{1e3 * x:.2g} ms"
    return num(x)


def forms_block(m: dict[str, Any]) -> str:
    rows = ["| form | terms kept | AICc | in-sample median APE |", "|---|---|---|---|"]
    for f in m["forms"]:
        name = f"**{f['form']}**" if f["form"] == m["form"] else f["form"]
        aicc = f"**{num(f['aicc'])}**" if f["form"] == m["form"] else num(f["aicc"])
        rows.append(f"| {name} | {f['terms'].replace(',', ', ')} | {aicc} | "
                    f"{pct(f['median_ape'])} |")
    return "\n".join(rows)


def estimates_block(m: dict[str, Any]) -> str:
    kept, dropped = [], []
    for term, p in sorted(m["parameters"].items(), key=lambda kv: kv[0] != "compute"):
        if p["ci_low"] is None and p["ci_high"] is None:
            dropped.append(term)
            continue
        unit = f" {SECONDS[term]}" if term in SECONDS else ""
        kept.append(f"{term} {_value(term, p['estimate'])}{unit} "
                    f"({_value(term, p['ci_low'])}–{_value(term, p['ci_high'])})")
    text = f"Estimates ({m['form']}, 95 % CI): " + "; ".join(kept)
    if dropped:
        text += ("; not estimated (no run exercises them, or dropped by the form): "
                 + ", ".join(dropped))
    return text + f". σ_u = {num(m['sigma_u'], 2)} (log)."


def in_sample_block(m: dict[str, Any]) -> str:
    ins = m["in_sample"]
    per = ", ".join(f"{s} {pct(v['median_ape'])} ({v['n']} runs)"
                    for s, v in sorted(ins["by_source"].items()))
    return (f"In-sample median APE of MFU: {pct(ins['median_ape'])} over all {ins['n']:,} runs; "
            f"per source {per}; the 95 % intervals cover {pct(ins['coverage'])}.")


def _row(m: dict[str, Any], holdout: str, predictor: str) -> dict[str, Any] | None:
    return next((r for r in m["predictors"] if r["holdout"] == holdout and r["source"] == "all"
                 and r["predictor"] == predictor), None)


def holdouts_block(m: dict[str, Any]) -> str:
    rows = ["| holdout | selected | calibrated | naive_linear | naive_loglinear | best law or "
            "family median |", "|---|---|---|---|---|---|"]
    for holdout in HOLDOUTS:
        sel = _row(m, holdout, "selected")
        if sel is None:
            continue
        cells = []
        for p in COLUMNS:
            r = _row(m, holdout, p)
            cells.append("–" if r is None else f"{pct(r['median_ape'])}, {cov(r['coverage'])}")
        others = [r for r in (_row(m, holdout, law) for law in (*LAWS, "family_median")) if r]
        best = min(others, key=lambda r: r["median_ape"], default=None)
        extra = "–" if best is None else (
            f"{best['predictor']} {pct(best['median_ape'])} ({cov(best['coverage'])}, "
            f"{int(best['n']):,} cases)")
        rows.append(f"| {holdout} ({int(sel['n']):,}) | " + " | ".join(cells) + f" | {extra} |")
    return "\n".join(rows)


def against_naive_block(m: dict[str, Any]) -> str:
    scored = m["against_naive"]
    parts = []
    for holdout, by in sorted(scored["largest"].items()):
        a = by.get("all")
        if not a:
            continue
        ci = a.get("ratio_ci") or [None, None]
        per = ", ".join(f"{s} {v['ratio']:.2f}" for s, v in sorted(by.items()) if s != "all")
        parts.append(f"{holdout}: {a['ratio']:.2f} (95 % interval resampling series "
                     f"{num(ci[0], 2)}–{num(ci[1], 2)}; per source {per})")
    text = ("Selected's median APE over the better naive rule's, on the same cases: "
            + "; ".join(parts) + ".")
    src = scored.get("source", {})
    if src:
        text += " Held-out sources, calibrated against the hardware family's median MFU: " + \
            ", ".join(f"{s} {pct(v['calibrated'])} ({pct(v['family_median'])})"
                      for s, v in sorted(src.items())) + "."
    return text


BLOCKS = {"forms": forms_block, "estimates": estimates_block, "in_sample": in_sample_block,
          "holdouts": holdouts_block, "against_naive": against_naive_block}


def render(doc: str, metrics: dict[str, Any]) -> str:
    """``doc`` with every generated block rewritten from ``metrics``."""
    for name, block in BLOCKS.items():
        pattern = re.compile(rf"(<!-- begin: {name} [^\n]*-->\n)(.*?)(<!-- end: {name} -->)",
                             re.S)
        if not pattern.search(doc):
            raise SystemExit(f"docs/theory.md has no block {name!r}")
        doc = pattern.sub(lambda mt: mt.group(1) + block(metrics) + "\n" + mt.group(3), doc)
    return doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the doc is stale")
    args = parser.parse_args(argv)
    doc = DOC.read_text(encoding="utf-8")
    new = render(doc, json.loads(METRICS.read_text(encoding="utf-8")))
    if args.check:
        if new != doc:
            print("docs/theory.md §10 is stale: run scripts/theory_tables.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
