"""Data strings in the report (issue 13, items 1 and 6): mathtext in any figure label cannot
raise, and report.md prints every data string as literal Markdown text."""

from __future__ import annotations

import re

import sys
from pathlib import Path

import pandas as pd
import pytest

from pipeline.calibrate.stage import run as calibrate_run
from pipeline.compare.stage import run as compare_run
from pipeline.config import CATALOG_DIR, load_params
from pipeline.io import write_parquet
from pipeline.report.render import md_escape
from pipeline.report.stage import run as report_run

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import synthetic_upstream as su  # noqa: E402
from coarse_settings import coarse  # noqa: E402

# A source name that is HTML, Markdown table syntax and broken mathtext at once; a model name
# with broken mathtext (both raise in matplotlib's parser); a citation with line breaks.
SOURCE = "mega$\\frac{tron$</script><script>alert(1)</script>|x*y*_z_ [a](b)"
MODEL = "GPT-$x^$175B"
CITATION = "arXiv:2104.04473\nTable 1\r\n| a | b |"


@pytest.mark.parametrize("text, escaped", [
    ("<script>", "\\<script\\>"),
    ("a|b", "a\\|b"),
    ("line\nbreak\r\n  here", "line break here"),
    ("tp_pp and _x_", "tp_pp and \\_x\\_"),
    ("# title", "\\# title"),
    ("[x](javascript:y)", "\\[x\\](javascript:y)"),
    ("`code` *em* ~~s~~ &amp;", "\\`code\\` \\*em\\* \\~\\~s\\~\\~ \\&amp;"),
])
def test_md_escape(text: str, escaped: str) -> None:
    assert str(md_escape(text)) == escaped


@pytest.mark.slow
def test_hostile_names_render(tmp_path: Path) -> None:
    processed, metrics, out = tmp_path / "processed", tmp_path / "metrics", tmp_path / "reports"
    su.build(processed, metrics)
    runs = pd.read_parquet(processed / "runs.parquet")
    hit = runs["source"] == "megatron2021"
    runs.loc[hit, "source"] = SOURCE
    runs.loc[hit, "model"] = MODEL
    runs.loc[hit, "citation"] = CITATION
    write_parquet(runs, processed / "runs.parquet")
    for name in ("series", "rejects"):
        frame = pd.read_parquet(processed / f"{name}.parquet")
        frame.loc[frame["source"] == "megatron2021", "source"] = SOURCE
        write_parquet(frame, processed / f"{name}.parquet")
    params = coarse(load_params())   # the grids do not matter to how names render
    # The strategy comparison names its sources; it must follow the renamed one.
    params["report"]["strategy_sources"] = [SOURCE if s == "megatron2021" else s
                                            for s in params["report"]["strategy_sources"]]
    params["report"]["focus"] = [SOURCE]  # the "your runs" section shows the hostile names too
    # calibrate too: its section names sources in tables and figure labels
    calibrate_run(params, processed_dir=processed, catalog_dir=CATALOG_DIR, out_dir=processed,
                  metrics_path=metrics / "calibrate.json", plots_dir=tmp_path / "plots")
    compare_run(params, processed_dir=processed, metrics_dir=metrics, out_dir=processed,
                metrics_path=metrics / "compare.json", plots_dir=tmp_path / "plots")
    report_run(params, processed_dir=processed, metrics_dir=metrics, out_dir=out)

    # 8, focus.png (your runs), energy.png (measured MLPerf energy, issue 10), the calibrate
    # section's 4 and coverage.png (what the data cover)
    assert len(list((out / "figures").glob("*.png"))) == 15
    yours = (out / "report.md").read_text(encoding="utf-8").split("## Your runs", 1)[1]
    yours = yours.split("## Key findings", 1)[0]
    assert "2 scaling series of mega$\\\\frac{tron$\\</script\\>\\<script\\>" in yours
    assert "<script>" not in yours
    section = (out / "report.md").read_text(encoding="utf-8").split(
        "## What limits measured scaling", 1)[1].split("## Appendix", 1)[0]
    assert md_escape(SOURCE) in section and SOURCE not in section
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "<script>" not in md and "\\<script\\>" in md
    assert "\\$" not in md and "mega$\\\\frac{tron" in md  # "$" is no Markdown: kept as is
    # Every table row has as many cells as its header: no "|" or line break from data.
    for block in md.split("\n\n"):
        rows = [r for r in block.splitlines() if r.startswith("|")]
        if rows:
            cells = {len(r.replace("\\|", "").split("|")) for r in rows}
            assert len(cells) == 1, block
    html = (out / "report.html").read_text(encoding="utf-8")
    # the report's own scripts: the Vega libraries, the charts' JSON specs (data escaped as
    # \u003c...) and the call that draws them; nothing from the data opens a tag
    assert "<script>alert(1)" not in html and "</script><script>" not in html
    assert "\\u003c/script\\u003e\\u003cscript\\u003ealert(1)" in html  # in the chart's data
    html = re.sub(r"<script[^>]*>.*?</script>", "", html, flags=re.S)
    assert "<script>" not in html
