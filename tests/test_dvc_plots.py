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

import pytest
import yaml

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
        enc = written["encoding"]
        assert enc["x"]["scale"] == {"type": "log"} and enc["y"]["scale"] == {"type": "log"}
        assert enc["color"]["type"] == "nominal"
    used = {p["template"] for p in _vega_plots()}
    # DVC writes each title into `vegaEmbed('#<title>')` unescaped: a quote breaks the plot
    spec = yaml.safe_load((PROJ_ROOT / "dvc.yaml").read_text())
    titles = [next(iter(p)) for p in spec["plots"] if isinstance(p, dict)]
    assert not [t for t in titles if "'" in t or '"' in t]
    assert used == set(plots_page.TEMPLATES)


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
