"""Write ``.dvc/plots/page.html``: the page ``dvc plots show`` fills, with Vega, Vega-Lite and
Vega-Embed inlined so the plots render offline (DVC's own page loads them from a CDN), and the
plot templates ``.dvc/plots/log_<mark>_by_<field>.json`` that ``dvc.yaml`` names: log axes
(the data span decades: N, training FLOP, throughput) and one colour per value of ``<field>``
(a series, a scenario, an accelerator family, a law), no legend where there are hundreds.

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


# template name -> (mark, colour field, legend shown)
TEMPLATES = {
    "log_lines_by_series": ("line", "series_id", False),
    "log_lines_by_scenario": ("line", "scenario", True),
    "log_points_by_family": ("point", "accelerator_family", True),
    "log_points_by_law": ("point", "law", True),
}


def template(mark: str, colour: str, legend: bool) -> dict:
    """A Vega-Lite 6 spec with DVC's anchors: log x and y (non-positive values dropped), one
    colour per ``colour`` value, each point's row in its tooltip."""
    x, y = "<DVC_METRIC_X>", "<DVC_METRIC_Y>"
    axis = {"type": "quantitative", "scale": {"type": "log"}}
    mark_spec = ({"type": "line", "point": True, "strokeWidth": 1, "opacity": 0.8}
                 if mark == "line" else {"type": "point", "filled": True, "opacity": 0.7})
    mark_spec["tooltip"] = {"content": "data"}
    colour_spec = {"field": colour, "type": "nominal"}
    if not legend:
        colour_spec["legend"] = None
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v6.json",
        "data": {"values": "<DVC_METRIC_DATA>"},
        "title": {"text": "<DVC_METRIC_TITLE>", "anchor": "middle"},
        "width": 480, "height": 320,
        "transform": [{"filter": {"field": x, "gt": 0}}, {"filter": {"field": y, "gt": 0}}],
        "mark": mark_spec,
        "encoding": {
            "x": {"field": x, "title": "<DVC_METRIC_X_LABEL>", **axis},
            "y": {"field": y, "title": "<DVC_METRIC_Y_LABEL>", **axis},
            "color": colour_spec,
            "detail": {"field": "rev", "type": "nominal"},
        },
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
    for name, args in TEMPLATES.items():
        path = PAGE.parent / f"{name}.json"
        path.write_text(json.dumps(template(*args), indent=2) + "\n", encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write_all():
        print(f"wrote {path} ({path.stat().st_size / 1e3:.1f} kB)")
