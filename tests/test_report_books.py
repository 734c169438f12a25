"""The report's reading rules, without rendering a report: each figure shown once, long tables
to the appendix and to CSV, bands that say nothing not quoted or drawn, curves not drawn past
the law's domain, readable panels (the audit the browser test reads), short key findings."""

from __future__ import annotations

import csv

import numpy as np
import pandas as pd
import pytest

from pipeline.report import books, figures, key_findings, style
from pipeline.report.render import band, pct


def test_a_figure_is_shown_once_and_referred_to_after() -> None:
    book = books.FigureBook({"a": "data:image/png;base64,AAAA", "b": "x"}, markdown=False)
    first = book.show("a", "caption <a>")
    assert 'id="fig-a"' in first and "Figure 1." in first and "caption &lt;a&gt;" in first
    again = book.show("a", "caption")
    assert "<img" not in again and 'href="#fig-a">Figure 1</a> above' in again
    assert "Figure 2." in book.show("b", "other")
    md = books.FigureBook({"a": "figures/a.png"}, markdown=True)
    assert md.show("a", "c") == "![Figure 1](figures/a.png)\n\n*Figure 1. c*"  # caption once
    assert md.show("a", "c") == "(Figure 1 above.)"


def test_long_tables_go_to_the_appendix_and_every_table_to_csv(tmp_path) -> None:
    t = books.TableBook(markdown=False, body_rows=3)
    short = t.table("short", "Short", ["a", "b"], [[1, "x"], [2, "y"]])
    long = t.table("long", "Long", ["a"], [[i] for i in range(5)])
    assert "<table>" in short and 'href="tables/short.csv"' in short
    assert "<table>" not in long and "5 rows" in long and 'href="#t-long"' in long
    appendix = t.appendix()
    assert appendix.count("<details") == 1 and 'id="t-long"' in appendix and "<td>4</td>" in appendix
    (tmp_path / "stale.csv").write_text("old")
    written = t.write_csvs(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["long.csv", "short.csv"]
    assert list(csv.reader(open(written["table:short"]))) == [["a", "b"], ["1", "x"], ["2", "y"]]


@pytest.mark.parametrize("low,high,shown", [
    (0.27, 0.59, "27%–59%"), (0.01, 0.099, "1%–10%"), (0.0, 0.95, None), (0.01, 5.58, None),
    (None, 0.5, None)])
def test_a_band_wider_than_the_rule_is_not_quoted(low, high, shown) -> None:
    text = band(low, high, why="the law is asked for 6x its largest N")
    if shown:
        assert text == shown
    else:
        assert text.startswith("not constrained by the data (the law is asked for 6x")
        assert "%" not in text


def test_law_curve_stops_where_its_band_says_nothing_and_at_16x() -> None:
    n = np.geomspace(8, 1e5, 60)
    lo = np.where(n < 2000, 0.5, 0.01)
    c = pd.DataFrame({"n_accelerators": n, "predicted": 1.0, "pi_low": lo, "pi_high": 1.0})
    d = figures.law_domain(c, n_max=256)
    assert d["n_accelerators"].max() < 2000  # the band widens past a factor 10 there
    d = figures.law_domain(c.assign(pi_low=0.5), n_max=256)
    assert d["n_accelerators"].max() <= 16 * 256 < c["n_accelerators"].max()


def test_band_drawing_leaves_out_what_says_nothing_and_clips_at_the_limit() -> None:
    fig, ax = style.new_figure()
    x = np.array([1, 2, 3, 4.0])
    ratio = style.band(ax, x, [0.5, 0.5, 0.01, 0.5], [0.9, 1.4, 0.9, 0.9], "#000000", "s",
                       upper=1.0)
    assert ratio == pytest.approx(2.0)  # 0.5-1.4 clipped to 0.5-1.0; 0.01-0.9 not drawn
    assert style.audit(fig)[0]["widest_band"] == pytest.approx(2.0)


def test_audit_counts_series_and_their_labels() -> None:
    fig, ax = style.new_figure()
    for i in range(3):
        style.tag(ax.plot([1, 2], [i, i + 1], "o-", color=f"C{i}", label=f"s{i}" if i else None),
                  f"s{i}")
        style.tag(ax.plot([1, 2], [i, i], "--", color=f"C{i}"), f"s{i}")  # same series
    style.context(ax.plot([1, 2], [0, 3], color=style.CONTEXT_GREY))
    ax.plot([1, 2], [5, 5], color="C7")  # untagged, unlabelled: a series of its own
    ax.legend()
    (panel,) = style.audit(fig)
    assert panel["series"] == 4 and panel["labelled"] == 2 and panel["context"] == 1
    assert panel["labels_outside"] == 0
    style.end_label(ax, 2, 0, "s0: a label longer than the margin", "s0", "C0")  # past the axes
    assert style.audit(fig)[0]["labelled"] == 3 and style.audit(fig)[0]["labels_outside"] == 1


def test_key_findings_are_short_sentences() -> None:
    summ = pd.DataFrame({"series_id": ["a/1", "a/2", "b/1"], "source": ["a", "a", "b"],
                         "scaling": ["strong", "strong", "weak"], "n_min": [8, 8, 8],
                         "n_max": [64, 512, 64], "efficiency_at_n_max": [0.5, 0.25, 0.9]})
    loss = key_findings.loss_per_doubling(summ).set_index("series_id")["loss"]
    assert loss["a/1"] == pytest.approx(1 - 0.5 ** (1 / 3))  # three doublings to 50%
    assert loss["a/2"] == pytest.approx(1 - 0.25 ** (1 / 6))

    class D:
        comparison_series = summ
    f = key_findings.scaling_finding(D())
    assert f["figure"] == "scaling_efficiency" and len(f["text"].split()) <= 32
    assert pct(np.median([loss["a/1"], loss["a/2"]])) in f["text"]
