"""``dvc plots show`` renders offline: the page DVC fills (``.dvc/plots/page.html``) carries the
Vega libraries, the templates put the axes on log scales with one colour per series; in headless
Chromium every plot draws and the page requests nothing but local files."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from pipeline.report.style import MAX_SERIES

PROJ_ROOT = Path(__file__).resolve().parents[1]
PLOTS_DIR = PROJ_ROOT / ".dvc" / "plots"
sys.path.insert(0, str(PROJ_ROOT / "scripts"))
import plots_page  # noqa: E402


def _vega_plots() -> list[dict]:
    spec = yaml.safe_load((PROJ_ROOT / "dvc.yaml").read_text())
    return [next(iter(p.values())) for p in spec["plots"] if isinstance(p, dict)]


def test_config_names_the_offline_page() -> None:
    config = (PROJ_ROOT / ".dvc" / "config").read_text()
    assert re.search(r"^\[plots\]\n\s+html_template = plots/page.html$", config, re.M)
    page = (PLOTS_DIR / "page.html").read_text()
    assert "{plot_divs}" in page and "{scripts}" not in page  # DVC's CDN tags have no place
    assert "<script src=" not in page and "vegaEmbed" in page


def test_templates_are_those_the_script_writes() -> None:
    for name, args in plots_page.TEMPLATES.items():
        written = json.loads((PLOTS_DIR / f"{name}.json").read_text())
        assert written == plots_page.template(*args)
    assert sorted(p.stem for p in PLOTS_DIR.glob("*.json")) == sorted(plots_page.TEMPLATES)
    used = {p["template"] for p in _vega_plots()}
    # DVC writes each title into `vegaEmbed('#<title>')` unescaped: a quote breaks the plot
    spec = yaml.safe_load((PROJ_ROOT / "dvc.yaml").read_text())
    titles = [next(iter(p)) for p in spec["plots"] if isinstance(p, dict)]
    assert not [t for t in titles if "'" in t or '"' in t]
    assert used == set(plots_page.TEMPLATES)


def _plot_frames() -> list[tuple[str, str, pd.DataFrame, str, str]]:
    """(title, template, data, x field, y field) of every Vega plot dvc.yaml names."""
    spec = yaml.safe_load((PROJ_ROOT / "dvc.yaml").read_text())
    out = []
    for entry in spec["plots"]:
        if not isinstance(entry, dict):
            continue
        title, p = next(iter(entry.items()))
        (path, y), = p["y"].items()
        out.append((title, p["template"], pd.read_csv(PROJ_ROOT / path), p["x"], y))
    return out


def test_each_axis_holds_one_quantity_and_each_panel_a_few_labelled_series() -> None:
    """What `dvc plots show` draws: no axis spanning more than six decades (two quantities on
    one axis: throughput ~1e16 and MFU ~0.01), no panel with more series than the report's
    rule, and a series is named in its legend."""
    for title, template, frame, x, y in _plot_frames():
        kind, colour = plots_page.TEMPLATES[template]
        panel = plots_page.RATIO_PANEL.get(colour) if kind == "ratio" else (
            "scaling" if kind == "lines" else None)
        values = frame[y] / frame[x] if kind == "ratio" else frame[y]
        frame = frame.assign(_v=values)
        for _, g in (frame.groupby(panel) if panel else [(None, frame)]):
            v = g["_v"][g["_v"] > 0]
            assert len(v), title
            if kind in ("utilization", "mfu"):
                assert v.max() <= 1.0 + 1e-9, title  # a linear 0..1 axis
            else:
                assert v.max() / v.min() < 1e6, f"{title}: {v.min():.3g} to {v.max():.3g}"
            if kind == "lines":
                assert g["label"].nunique() <= MAX_SERIES, title
            else:
                assert g[colour].nunique() <= 2 * MAX_SERIES, title


def test_the_page_is_the_one_the_script_writes() -> None:
    pytest.importorskip("vl_convert", reason="vl-convert-python (dev extra) is not installed")
    assert (PLOTS_DIR / "page.html").read_text() == plots_page.page_html()


@pytest.mark.browser
@pytest.mark.slow
def test_dvc_plots_show_renders_every_plot_offline(tmp_path: Path) -> None:
    from test_browser import _driver, requested_urls

    dvc = Path(sys.executable).with_name("dvc")
    out = tmp_path / "plots"
    shown = subprocess.run([str(dvc), "plots", "show", "-o", str(out)], cwd=PROJ_ROOT,
                           capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    html = (out / "index.html").read_text()
    n_vega = len(_vega_plots())
    assert html.count("vegaEmbed('#") == n_vega
    driver = _driver()
    try:
        url = (out / "index.html").resolve().as_uri()
        driver.get(url)
        deadline = time.time() + 60
        drawn: list = []
        while time.time() < deadline:
            drawn = driver.execute_script(
                "return Array.from(document.querySelectorAll('.vega-embed')).map(e => {"
                " const c = e.querySelector('canvas, svg');"
                " if (!c) return null; const r = c.getBoundingClientRect();"
                " return [r.width, r.height]; });")
            if len(drawn) == n_vega and all(d and d[0] > 100 and d[1] > 100 for d in drawn):
                break
            time.sleep(0.5)
        assert len(drawn) == n_vega and all(d and d[0] > 100 and d[1] > 100 for d in drawn), drawn
        console = driver.get_log("browser")
        errors = [e for e in console if e["level"] in ("SEVERE", "ERROR", "WARNING")]
        assert not errors, f"console errors and warnings: {errors}"
        requests = requested_urls(driver)
        assert url in requests
        outside = [u for u in requests if not u.startswith(("file://", "data:", "blob:"))]
        assert not outside, f"network requests: {outside}"
    finally:
        driver.quit()
