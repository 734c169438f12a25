"""Render the findings and figures through the jinja2 templates into HTML and Markdown.

The HTML is one self-contained file: figures are base64 ``data:`` URIs, CSS is inline, there is
no script and no external font or request. The Markdown links ``figures/*.png`` next to it.
"""

from __future__ import annotations

import base64
import math
import numbers
import re
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
from markupsafe import Markup

from pipeline.io import write_text
from pipeline.report import books
from pipeline.report.markdown import md_escape
from pipeline.report.sections import SECTIONS, has_user_runs
from pipeline.report.style import BAND_SPAN, STRATEGY_NAMES
from pipeline.text import escape_invisible

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _finite(x: Any) -> bool:
    """A finite real number: Python's or numpy's (an Int64 column's values are numpy.int64)."""
    return (isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_))
            and math.isfinite(x))


def pct(x: Any, digits: int = 0) -> str:
    """0.4321 -> '43%'; missing -> 'n/a'."""
    return f"{100 * x:.{digits}f}%" if _finite(x) else "n/a"


def sci(x: Any, digits: int = 1) -> str:
    """2.04e28 -> '2.0e28' (exponent without '+' or leading zeros)."""
    if not _finite(x):
        return "n/a"
    mant, exp = f"{x:.{digits}e}".split("e")
    return f"{mant}e{int(exp)}"


def num(x: Any, sig: int = 3) -> str:
    """Integers with thousands separators; other values to ``sig`` significant digits."""
    if not _finite(x):
        return "n/a"
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    if abs(x) >= 1e6 or abs(x) < 1e-3:
        return sci(x, sig - 1)
    return f"{x:,.{sig}g}" if abs(x) < 10 ** sig else f"{x:,.0f}"


def times(x: Any, digits: int = 2) -> str:
    """1.5 -> '×1.50'."""
    return f"×{x:.{digits}f}" if _finite(x) else "n/a"


def band(low: Any, high: Any, fmt: Any = pct, why: str = "") -> str:
    """An interval as 'low–high' where it constrains something; where its top is more than
    ``BAND_SPAN`` times its bottom (or the bottom is not positive) it says so instead, with
    ``why`` (the reason it is that wide) when given."""
    if _finite(low) and _finite(high) and low > 0 and high / low <= BAND_SPAN:
        return f"{fmt(low)}–{fmt(high)}"
    reason = f"{why}; " if why else ""
    span = (f"the interval spans a factor of {high / low:,.0f}" if _finite(low) and
            _finite(high) and low > 0 else "the interval reaches zero")
    return f"not constrained by the data ({reason}{span})"


def strategy(family: Any) -> str:
    """'fsdp' -> 'FSDP/ZeRO-3'; an unlisted family is shown as it is."""
    return STRATEGY_NAMES.get(str(family), str(family))


def _md_join(value: Any, d: str = "", attribute: Any = None) -> Markup:
    items = list(value)
    if attribute is not None:
        items = [item[attribute] if isinstance(item, dict) else getattr(item, attribute)
                 for item in items]
    return Markup(d).join(md_escape(item) for item in items)  # the separator is the template's


def environment(autoescape: bool, markdown: bool = False) -> jinja2.Environment:
    """The jinja2 environment: HTML (``autoescape``) or Markdown (``markdown``), where every
    value printed from data goes through ``md_escape`` (a source named ``<script>`` or a
    citation with a line break prints as text)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             autoescape=autoescape or markdown,
                             finalize=md_escape if markdown else None,
                             undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(pct=pct, sci=sci, num=num, times=times, strategy=strategy)
    env.globals.update(band=band, times_fmt=times)
    if markdown:
        env.filters["join"] = _md_join
    return env


def data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


_SCRIPT = re.compile(r"(<script\b.*?</script>)", re.S | re.I)


def _visible_html(html: str) -> str:
    parts = _SCRIPT.split(html)
    return "".join(p if i % 2 else escape_invisible(p) for i, p in enumerate(parts))


def render(context: dict[str, Any], figures: dict[str, Path], out_dir: Path,
           charts: dict[str, dict] | None = None, audits: dict[str, Any] | None = None
           ) -> dict[str, Path]:
    """Write ``report.html``, ``report.md`` and ``tables/*.csv`` under ``out_dir``; returns
    their paths. ``charts``: Vega-Lite specs drawn in the HTML in place of the PNG of the same
    name; ``audits``: each figure's readability audit (``style.audit``), carried on its
    ``<figure>`` for the browser test."""
    out_dir = Path(out_dir)
    html_figs = {k: data_uri(p) for k, p in figures.items()}
    md_figs = {k: Path(p).relative_to(out_dir).as_posix() if Path(p).is_relative_to(out_dir)
               else Path(p).as_posix() for k, p in figures.items()}
    sections = [s for s in SECTIONS if s.shown(context)]
    context = {**context, "has_user_runs": has_user_runs(context)}
    html_book = books.FigureBook(html_figs, markdown=False, charts=charts, audits=audits)
    html_tables = books.TableBook(markdown=False)
    html = environment(True).get_template("report.html.j2").render(
        **context, fig=html_book, tables=html_tables, sections=sections,
        vega_script=Markup(books.vega_script()) if charts else "")
    md_book = books.FigureBook(md_figs, markdown=True)
    md_tables = books.TableBook(markdown=True)
    md = environment(False, markdown=True).get_template("report.md.j2").render(
        **context, fig=md_book, tables=md_tables, sections=sections)
    paths = {"html": out_dir / "report.html", "md": out_dir / "report.md"}
    # Bidi controls and zero-width characters in any name shown are shown escaped
    # (pipeline.text); embedded scripts (the Vega bundle) are left as they are.
    write_text(_visible_html(html), paths["html"])
    write_text(escape_invisible(md), paths["md"])
    paths.update(html_tables.write_csvs(out_dir / "tables"))
    return paths
