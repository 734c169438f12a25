"""Interactive Vega-Lite charts for the HTML report, where a figure has too many series to read
as a picture: every other series is there as grey points (a density, not a line each), with a
tooltip naming it, its source and values; hovering a point draws its series as a black line;
the series the text talks about are coloured by accelerator family (``style.family_colour``, as
in the PNGs) and named in a legend by marker.

Each chart replaces the PNG of the same name in the HTML (the PNG stays in the Markdown and as
the HTML's fallback). The specs carry ``usermeta.panels``, the same readability audit as the
PNGs (``style.audit``), for the browser test. The libraries are the ones ``dvc plots`` ships
(``books.vega_script``); without them no chart is made.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from pipeline.config import ReportSettings
from pipeline.report.focus import Focus
from pipeline.report import books
from pipeline.report.data import ReportData
from pipeline.report.figures import scaling_choice, series_label
from pipeline.report.style import CONTEXT_GREY, MAX_SERIES, family_colour

SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"
SHAPES = ("circle", "square", "triangle-up", "diamond", "cross", "triangle-down",
          "triangle-right", "triangle-left")


def _r(x: Any, digits: int = 4) -> Any:
    """Rounded for a small, deterministic spec."""
    return None if pd.isna(x) else float(f"{float(x):.{digits}g}")


def scaling_efficiency(d: ReportData, limit: int, focus: tuple[str, ...] = ()
                       ) -> dict[str, Any] | None:
    """Efficiency against N, strong and weak scaling side by side."""
    c = d.comparison_curves
    if c.empty:
        return None
    m = c[(c["kind"] == "measured") & c["scaling"].isin(["strong", "weak"])]
    m = m.dropna(subset=["efficiency"]).sort_values(["scaling", "series_id", "n_accelerators"])
    if m.empty:
        return None
    chosen = {k: scaling_choice(d, k, limit, focus) for k in ("strong", "weak")}
    rows = []
    for r in m.itertuples():
        hi = r.series_id in chosen.get(r.scaling, [])
        rows.append({"series": r.series_id, "source": r.source, "scaling": r.scaling,
                     "family": r.accelerator_family, "model": r.model,
                     "strategy": r.strategy_family, "N": int(r.n_accelerators),
                     "efficiency": _r(r.efficiency), "highlight": hi,
                     "label": series_label(d, r.series_id) if hi else ""})
    families = sorted({r["family"] for r in rows if r["highlight"]})
    # one marker per highlighted series, distinct within its panel (Vega's eight shapes)
    labels = list(dict.fromkeys(series_label(d, sid) for k in ("strong", "weak")
                                for sid in chosen[k]))
    marker = {series_label(d, sid): SHAPES[i % len(SHAPES)] for k in ("strong", "weak")
              for i, sid in enumerate(chosen[k])}
    panels = [{"title": f"{k} scaling", "series": len(chosen[k]), "labelled": len(chosen[k]),
               "context": int(m.loc[m["scaling"] == k, "series_id"].nunique()) - len(chosen[k])}
              for k in ("strong", "weak") if chosen[k]]
    tooltip = [{"field": "series"}, {"field": "source"}, {"field": "model"},
               {"field": "family", "title": "accelerator"}, {"field": "strategy"},
               {"field": "N", "type": "quantitative", "format": ","},
               {"field": "efficiency", "type": "quantitative", "format": ".0%"}]
    # axes from the data shown: N from the smallest to the largest measured, efficiency to
    # just above the highlighted series (a few grey series far above 100% are clipped at the
    # top; the tooltip still gives their values and the text says why they exceed 100%)
    top = max([1.0] + [r["efficiency"] for r in rows if r["highlight"] and r["efficiency"]])
    x = {"field": "N", "type": "quantitative", "title": "accelerators N",
         "scale": {"type": "log", "nice": False, "padding": 12},
         "axis": {"grid": False, "tickCount": 6}}
    y = {"field": "efficiency", "type": "quantitative", "title": "efficiency",
         "scale": {"domain": [0, round(1.05 * top, 3)]},
         "axis": {"format": "%", "tickCount": 6}}
    hover = {"name": "hover", "select": {"type": "point", "fields": ["series"],
                                         "on": "pointerover", "clear": "pointerout"}}
    layers = [
        {"params": [hover], "transform": [{"filter": "!datum.highlight"}],
         "mark": {"type": "point", "size": 14, "filled": True, "clip": True},
         "encoding": {"x": x, "y": y, "color": {"value": CONTEXT_GREY},
                      "opacity": {"value": 0.45}, "tooltip": tooltip}},
        # the hovered series alone, as a line: the others stay points
        {"transform": [{"filter": {"param": "hover", "empty": False}}],
         "mark": {"type": "line", "point": {"size": 14}, "strokeWidth": 1.2, "clip": True,
                  "color": "#000000"},
         "encoding": {"x": x, "y": y, "detail": {"field": "series"}, "tooltip": tooltip}},
        {"transform": [{"filter": "datum.highlight"}],
         "mark": {"type": "line", "point": {"size": 40, "filled": True}, "strokeWidth": 1.6,
                  "clip": True},
         "encoding": {"x": x, "y": y, "detail": {"field": "series"},
                      "color": {"field": "family", "title": "accelerator family",
                                "scale": {"domain": families,
                                          "range": [family_colour(f) for f in families]}},
                      # the series the text talks about, each with its own marker and name
                      "shape": {"field": "label", "title": "highlighted series",
                                "scale": {"domain": labels,
                                          "range": [marker[lab] for lab in labels]},
                                "legend": {"orient": "bottom", "columns": 2,
                                           "labelLimit": 260}},
                      "tooltip": tooltip}},
    ]
    return {"$schema": SCHEMA, "data": {"values": rows},
            "title": {"text": "Efficiency against N (grey: every other series' points; hover "
                              "one: its series)", "anchor": "start", "fontSize": 12},
            "facet": {"column": {"field": "scaling", "title": None,
                                 "sort": ["strong", "weak"]}},
            "spec": {"width": 330, "height": 300, "layer": layers},
            "resolve": {"scale": {"x": "independent"}},
            "config": {"view": {"stroke": "#dddddd"}},
            "usermeta": {"panels": panels, "max_series": MAX_SERIES}}


def make_all(d: ReportData, cfg: ReportSettings, focus: Focus = Focus()
             ) -> dict[str, dict[str, Any]]:
    """name -> Vega-Lite spec, for the figures shown as charts in the HTML ({} without the
    Vega libraries)."""
    if not books.vega_script():
        return {}
    charts = {"scaling_efficiency": scaling_efficiency(d, cfg.series_per_panel, focus.series)}
    return {k: v for k, v in charts.items() if v is not None}
