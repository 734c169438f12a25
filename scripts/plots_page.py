"""Write ``.dvc/plots/page.html``: the page ``dvc plots show`` fills, with Vega, Vega-Lite and
Vega-Embed inlined so the plots render offline (DVC's own page loads them from a CDN), and the
plot templates ``.dvc/plots/<kind>_by_<field>.json`` that ``dvc.yaml`` names (``TEMPLATES``):
one quantity per axis, log where it spans decades (N, training FLOP, a ratio), at most a
handful of labelled series per panel.

``.dvc/config`` names the page (``plots.html_template``). The libraries come from the
``vl-convert-python`` wheel (a dev dependency, pinned), as one bundle for Vega-Lite 6 (the
schema of our templates; plot titles must not hold a quote: DVC writes them into a JS string
unescaped). Re-run after changing the pin:

    .venv/bin/python scripts/plots_page.py

``tests/test_dvc_plots.py`` checks the page is what this script writes.
"""

from __future__ import annotations

from pathlib import Path

VEGA_LITE = "v6.4"
PAGE = Path(__file__).resolve().parents[1] / ".dvc" / "plots" / "page.html"
STYLE = ("body{font-family:sans-serif;margin:1.5em;max-width:1200px}"
         "div[id]{display:inline-block;margin:0 1em 1.5em 0;vertical-align:top}"
         "img{max-width:560px}")


# template name -> (kind, colour field). Every template puts one quantity on each axis and at
# most a handful of labelled series in a panel (the report's rule, pipeline/report/style.py):
#   lines_by_family: the series the report highlights (reports/plots/report_scaling.csv), one
#     colour per accelerator family, one marker per series, named in the legend, one panel
#     per scaling regime; log N, linear efficiency;
#   lines_by_scenario: utilization (0..1, linear) against log training compute, per scenario;
#   points_by_family: MFU (0..1, linear) against log training compute, per family;
#   ratio_by_<field>: predicted / actual (log), one box per <field>, one panel per holdout:
#     held-out throughput and MFU are different quantities, their ratio is one.
TEMPLATES = {
    "lines_by_family": ("lines", "accelerator_family"),
    "lines_by_scenario": ("utilization", "scenario"),
    "points_by_family": ("mfu", "accelerator_family"),
    "ratio_by_predictor": ("ratio", "predictor"),
    "ratio_by_law": ("ratio", "law"),
}
# the panel field of the ratio templates, per colour field (the CSV's column)
RATIO_PANEL = {"predictor": "holdout", "law": "k"}


def template(kind: str, colour: str) -> dict:
    """A Vega-Lite 6 spec with DVC's anchors (see ``TEMPLATES``); each point's row in its
    tooltip."""
    x, y = "<DVC_METRIC_X>", "<DVC_METRIC_Y>"
    log_x = {"field": x, "title": "<DVC_METRIC_X_LABEL>", "type": "quantitative",
             "scale": {"type": "log"}}
    unit_y = {"field": y, "title": "<DVC_METRIC_Y_LABEL>", "type": "quantitative",
              "scale": {"domain": [0, 1], "clamp": True}}
    spec: dict = {
        "$schema": "https://vega.github.io/schema/vega-lite/v6.json",
        "data": {"values": "<DVC_METRIC_DATA>"},
        "title": {"text": "<DVC_METRIC_TITLE>", "anchor": "middle"},
    }
    colour_spec = {"field": colour, "type": "nominal"}
    if colour == "accelerator_family":  # the report's colours (pipeline/report/style.py)
        from pipeline.report.style import FAMILY_COLOURS

        colour_spec["scale"] = {"domain": list(FAMILY_COLOURS),
                                "range": list(FAMILY_COLOURS.values())}
    if kind == "lines":
        enc = {"x": {**log_x, "scale": {"type": "log", "nice": False}}, "y": {**unit_y, "scale": {"zero": True}}, "color": colour_spec,
               "detail": {"field": "label", "type": "nominal"},
               "shape": {"field": "label", "type": "nominal", "title": "series"},
               "tooltip": [{"field": "label"}, {"field": x}, {"field": y}]}
        return spec | {"transform": [{"filter": {"field": x, "gt": 0}}],
                       "facet": {"column": {"field": "scaling", "type": "nominal"}},
                       "spec": {"width": 360, "height": 300, "layer": [
                           {"mark": {"type": "line", "strokeWidth": 1.2}, "encoding": enc},
                           {"mark": {"type": "point", "filled": True}, "encoding": enc}]},
                       "resolve": {"scale": {"x": "independent"}}}
    if kind in ("utilization", "mfu"):
        mark = ({"type": "line", "strokeWidth": 1.4} if kind == "utilization"
                else {"type": "point", "filled": True, "opacity": 0.7})
        return spec | {"width": 480, "height": 320,
                       "transform": [{"filter": {"field": x, "gt": 0}}],
                       "mark": {**mark, "tooltip": {"content": "data"}},
                       "encoding": {"x": log_x, "y": unit_y, "color": colour_spec}}
    ratio = {"field": "ratio", "type": "quantitative", "scale": {"type": "log"},
             "title": "predicted / actual (<DVC_METRIC_Y_LABEL> over <DVC_METRIC_X_LABEL>)"}
    return spec | {
        "transform": [{"filter": {"field": x, "gt": 0}}, {"filter": {"field": y, "gt": 0}},
                      {"calculate": f"datum['{y}'] / datum['{x}']", "as": "ratio"}],
        "facet": {"column": {"field": RATIO_PANEL[colour], "type": "nominal"}},
        "spec": {"width": 220, "height": 280,
                 "mark": {"type": "boxplot", "extent": 1.5, "outliers": False},
                 "encoding": {"x": {"field": colour, "type": "nominal"}, "y": ratio,
                              "color": colour_spec}},
    }


def page_html() -> str:
    import vl_convert as vlc

    bundle = vlc.javascript_bundle(vl_version=VEGA_LITE).replace("</script", "<\\/script")
    return ("<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n"
            "<title>scalewall: DVC plots</title>\n"
            f"<!-- Vega {vlc.get_vega_version()}, Vega-Lite {VEGA_LITE}, Vega-Embed "
            f"{vlc.get_vega_embed_version()}: bundled by vl-convert-python; "
            "scripts/plots_page.py -->\n"
            f"<script>{bundle}</script>\n<style>{STYLE}</style>\n</head>\n<body>\n"
            "<h1>scalewall: DVC plots</h1>\n{plot_divs}\n</body>\n</html>\n")


def write_all() -> list[Path]:
    import json

    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(page_html(), encoding="utf-8")
    written = [PAGE]
    for old in PAGE.parent.glob("*.json"):
        if old.stem not in TEMPLATES:
            old.unlink()  # a template no plot names any more
    for name, args in TEMPLATES.items():
        path = PAGE.parent / f"{name}.json"
        path.write_text(json.dumps(template(*args), indent=2) + "\n", encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write_all():
        print(f"wrote {path} ({path.stat().st_size / 1e3:.1f} kB)")
