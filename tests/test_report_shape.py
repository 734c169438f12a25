"""The shipped report reads as findings first (pipeline/report/sections.py): a body of at most
``BODY_CHARACTERS`` characters before the appendix, figures whose panels draw a few named series
(the rest as a band), no line-end label past its axes, a self-contained HTML page.

These read the outputs of ``make report`` (reports/), and skip where it has not run; the same
rules on a synthetic run are in test_report.py and test_report_books.py."""

from __future__ import annotations

import json
import re

import pytest

from pipeline.config import PROJ_ROOT
from pipeline.report.sections import APPENDIX, BODY_CHARACTERS
from pipeline.report.style import MAX_SERIES

REPORTS = PROJ_ROOT / "reports"
MD = REPORTS / "report.md"
# figures whose context (grey) is one band or one set of points, never a line per series
SUMMARISED = ("scaling_throughput", "scaling_efficiency", "power_cost")

needs_report = pytest.mark.skipif(not MD.exists(), reason="run `make report` first")


def body_characters(markdown: str) -> int:
    """Characters of the report's Markdown before its first appendix section."""
    cut = markdown.find(f"\n## {APPENDIX}")
    return len(markdown if cut < 0 else markdown[:cut])


def test_the_body_is_what_precedes_the_appendix():
    md = "# t\n\nintro\n\n## Key findings\n\nabc\n\n## Appendix: data\n\nxyz\n"
    assert body_characters(md) == len("# t\n\nintro\n\n## Key findings\n\nabc\n")
    assert body_characters("# t\n\nno appendix\n") == len("# t\n\nno appendix\n")


@needs_report
def test_the_shipped_body_is_short():
    md = MD.read_text(encoding="utf-8")
    assert f"\n## {APPENDIX}" in md
    assert body_characters(md) <= BODY_CHARACTERS


@needs_report
def test_panels_draw_few_lines_and_no_label_past_the_axes():
    audits = {p.name.removesuffix(".audit.json"): json.loads(p.read_text(encoding="utf-8"))
              for p in sorted((REPORTS / "figures").glob("*.audit.json"))}
    assert audits
    for name, panels in audits.items():
        for panel in panels:
            where = f"{name}: {panel['title']!r}"
            assert panel["series"] <= MAX_SERIES, where
            assert panel["labels_outside"] == 0, where
            if name in SUMMARISED:
                assert panel["context"] <= 3, where


@needs_report
def test_the_html_is_self_contained():
    html = (REPORTS / "report.html").read_text(encoding="utf-8")
    html = re.sub(r"<script[^>]*>.*?</script>", "", html, flags=re.S)
    assert not re.search(r"(src|href)=\"(https?:)?//", html)
    assert all(s.startswith("data:") for s in re.findall(r'src="([^"]*)"', html))
