"""Figures and tables as the report places them: each figure shown once, numbered, and later
mentions pointing back to it; long tables moved to a collapsed appendix, every table also
written to ``reports/tables/<name>.csv``.

The templates call ``fig.show(name, caption)`` and ``tables.table(name, title, headers,
rows)``; both return finished HTML or Markdown.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

from markupsafe import Markup, escape

from pipeline.io import write_text
from pipeline.report.markdown import md_escape

# Tables with more rows or columns than these leave the body for the appendix (their CSV stays
# linked): the body keeps a section's claim, its figure and a short table that fits the page.
BODY_ROWS = 10
BODY_COLUMNS = 7
PROJ_ROOT = Path(__file__).resolve().parents[2]
# The Vega, Vega-Lite and Vega-Embed bundle `dvc plots show` uses (scripts/plots_page.py writes
# it): the report's interactive charts run on the same libraries, offline.
VEGA_PAGE = PROJ_ROOT / ".dvc" / "plots" / "page.html"
_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)


def vega_script(page: Path = VEGA_PAGE) -> str:
    """The inlined Vega libraries of ``page`` ('' when the page is absent)."""
    if not page.exists():
        return ""
    found = _SCRIPT.search(page.read_text(encoding="utf-8"))
    return found.group(1) if found else ""


def _md_cell(value: Any) -> str:
    return str(md_escape(value))


class FigureBook:
    """Shows each figure once: the first ``show`` of a name places it (numbered), a later one
    gives a reference to that number. ``charts`` (HTML only) replace a PNG by an interactive
    Vega-Lite chart of the same data; the PNG stays as its fallback for readers without
    scripts."""

    def __init__(self, figures: dict[str, str], markdown: bool,
                 charts: dict[str, dict] | None = None, audits: dict[str, Any] | None = None):
        self.figures, self.markdown = figures, markdown
        self.charts = charts or {}
        self.audits = audits or {}
        self.shown: dict[str, int] = {}

    def __getitem__(self, name: str) -> str:
        return self.figures[name]

    def __contains__(self, name: str) -> bool:
        return name in self.figures

    def number(self, name: str) -> int | None:
        return self.shown.get(name)

    def ref(self, name: str) -> Markup:
        """'Figure k' for a figure already shown (a link in HTML), else ''."""
        k = self.shown.get(name)
        if k is None:
            return Markup("")
        return Markup(f"Figure {k}") if self.markdown else \
            Markup(f'<a href="#fig-{escape(name)}">Figure {k}</a>')

    def show(self, name: str, caption: str, source: str = "") -> Markup:
        if name not in self.figures:
            return Markup("")
        if name in self.shown:
            return Markup(f"({self.ref(name)} above.)") if self.markdown else \
                Markup(f'<p class="figref">({self.ref(name)} above.)</p>')
        k = self.shown[name] = len(self.shown) + 1
        src = f" Source: {source}" if source else ""
        if self.markdown:
            # the caption is printed under the image: the alt text only names the figure
            return Markup(f"![Figure {k}]({self.figures[name]})\n\n"
                          f"*Figure {k}. {_md_cell(caption)}{_md_cell(src)}*")
        audit = escape(json.dumps(self.audits.get(name, []), sort_keys=True))
        img = (f'<img src="{self.figures[name]}" alt="{escape(caption)}" width="880" '
               f'data-figure="{escape(name)}">')
        chart = self.charts.get(name)
        if chart is not None:
            # as JSON escapes, "<", ">" and "&" cannot end the script element or open a tag
            spec = (json.dumps(chart, sort_keys=True, separators=(",", ":"))
                    .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
            body = (f'<div class="vchart" id="chart-{escape(name)}" data-chart="{escape(name)}">'
                    f'</div><script type="application/json" id="spec-{escape(name)}">{spec}'
                    f'</script><details class="png"><summary>static image</summary>{img}'
                    f'</details>')
        else:
            body = img
        return Markup(f'<figure id="fig-{escape(name)}" data-audit="{audit}">{body}'
                      f'<figcaption><b>Figure {k}.</b> {escape(caption)}{escape(src)}'
                      f'</figcaption></figure>')


class TableBook:
    """Tables of at most ``BODY_ROWS`` rows and ``BODY_COLUMNS`` columns are printed where they
    are used; longer or wider ones are listed there by name and printed in the appendix. Every
    table is kept for its CSV."""

    def __init__(self, markdown: bool, body_rows: int = BODY_ROWS):
        self.markdown, self.body_rows = markdown, body_rows
        self.kept: dict[str, tuple[str, list[str], list[list[Any]]]] = {}
        self.long: list[str] = []

    def _render(self, headers: list[str], rows: list[list[Any]]) -> str:
        if self.markdown:
            head = "| " + " | ".join(_md_cell(h) for h in headers) + " |\n"
            head += "|" + "---|" * len(headers) + "\n"
            return head + "".join("| " + " | ".join(_md_cell(c) for c in r) + " |\n"
                                  for r in rows)
        cells = "".join(f"<th>{escape(h)}</th>" for h in headers)
        body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>\n"
                       for r in rows)
        return f"<table><thead><tr>{cells}</tr></thead>\n<tbody>\n{body}</tbody></table>"

    def table(self, name: str, title: str, headers: list[str], rows: list[list[Any]]) -> Markup:
        if not rows:
            return Markup("")
        if name in self.kept:  # the same name twice: number it, never overwrite
            name = f"{name}_{sum(k.startswith(name) for k in self.kept) + 1}"
        self.kept[name] = (title, list(headers), [list(r) for r in rows])
        csv_link = f"tables/{name}.csv"
        if len(rows) <= self.body_rows and len(headers) <= BODY_COLUMNS:
            table = self._render(headers, rows)
            if self.markdown:
                return Markup(f"{table}\n*{_md_cell(title)}* ([CSV]({csv_link}))\n")
            return Markup(f'<div class="table" id="t-{escape(name)}">{table}<p class="tcap">'
                          f'{escape(title)} (<a href="{csv_link}">CSV</a>)</p></div>')
        self.long.append(name)
        if self.markdown:
            return Markup(f"*{_md_cell(title)}*: {len(rows):,} rows x {len(headers)} columns, "
                          f"in the appendix and in [{csv_link}]({csv_link}).\n")
        return Markup(f'<p class="tablelink">{escape(title)}: {len(rows):,} rows x '
                      f'{len(headers)} columns, in the <a href="#t-{escape(name)}">appendix</a> '
                      f'and in <a href="{csv_link}">{csv_link}</a>.</p>')

    def appendix(self) -> Markup:
        """The long tables, collapsed in HTML."""
        parts = []
        for name in self.long:
            title, headers, rows = self.kept[name]
            table = self._render(headers, rows)
            if self.markdown:
                parts.append(f"### {_md_cell(title)}\n\n{table}\n[CSV](tables/{name}.csv)\n")
            else:
                parts.append(f'<details id="t-{escape(name)}"><summary>{escape(title)} '
                             f'({len(rows):,} rows; <a href="tables/{name}.csv">CSV</a>)'
                             f'</summary>{table}</details>')
        return Markup("\n".join(parts))

    def write_csvs(self, out: Path) -> dict[str, Path]:
        """Every table as ``out/<name>.csv`` (cells as shown); CSVs of tables no longer in the
        report are removed so the folder matches the report."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        written = {}
        for name, (_title, headers, rows) in sorted(self.kept.items()):
            buf = io.StringIO()
            w = csv.writer(buf, lineterminator="\n")
            w.writerow(headers)
            w.writerows([str(c) for c in r] for r in rows)
            write_text(buf.getvalue(), out / f"{name}.csv")
            written[f"table:{name}"] = out / f"{name}.csv"
        for stale in sorted(out.glob("*.csv")):
            if stale not in written.values():
                stale.unlink()
        return written
