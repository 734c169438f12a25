"""Read report.html as a reader would, in headless Chromium: every figure and chart renders, no
console error, no request other than the file itself and its data: URIs, no band wider than the
report's rule, no figure twice (same image bytes or same chart data), no panel with more
coloured series than the rule or with a series nobody labelled. Screenshots of the first screen
and of each section go to reports/screens/ (CI keeps them as artefacts; not in git).

The report checked is the one rendered from the synthetic upstream; ``SCALEWALL_REPORT_HTML``
names another (``SCALEWALL_REPORT_HTML=reports/report.html`` checks the project's own).

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` apt-installs them); the test
skips with a message where they are absent.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from pipeline.report.style import BAND_SPAN, MAX_SERIES
from synthetic_upstream import shared_downstream

PROJ_ROOT = Path(__file__).resolve().parents[1]
SCREENS = PROJ_ROOT / "reports" / "screens"
pytestmark = [pytest.mark.browser, pytest.mark.slow]

# "95% band 27%–59%", "interval ×1.00–×1.19": a range a band or interval is quoted as
_RANGE = re.compile(r"(×?)(\d[\d,]*\.?\d*)(%?)\s*[–-]\s*×?(\d[\d,]*\.?\d*)%?")
_BAND_WORDS = re.compile(r"(band|interval)[^.;:]{0,40}$", re.I)


def _driver():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    chromedriver = shutil.which("chromedriver")
    if not chromium or not chromedriver:
        pytest.skip("headless Chromium is not installed (apt-get install chromium chromium-driver; "
                    ".ci/run does this): browser check skipped")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1000,1400", "--disable-extensions", "--no-first-run",
                "--hide-scrollbars"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    try:
        return webdriver.Chrome(service=Service(chromedriver), options=opts)
    except Exception as exc:  # a broken install is reported, not hidden
        pytest.skip(f"headless Chromium could not start: {exc}")


def requested_urls(driver) -> list[str]:
    """Every URL the page asked for (Chrome's performance log; needs ``_driver``'s logging)."""
    urls = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg["method"] == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
    return urls


def wide_bands(text: str) -> list[str]:
    """Ranges quoted as a band or interval whose top is more than ``BAND_SPAN`` times their
    bottom (or whose bottom is zero)."""
    bad = []
    for m in _RANGE.finditer(text):
        if not _BAND_WORDS.search(text[max(0, m.start() - 60):m.start()]):
            continue
        low, high = (float(g.replace(",", "")) for g in (m.group(2), m.group(4)))
        if high > 0 and (low <= 0 or high / low > BAND_SPAN):
            bad.append(text[max(0, m.start() - 60):m.end()])
    return bad


def crowded_panels(figures: dict[str, list[dict]]) -> list[str]:
    """Panels with more coloured series than ``MAX_SERIES`` or with a series without a label."""
    return [f"{name}: {p['title']!r} has {p['series']} series, {p['labelled']} labelled"
            for name, panels in sorted(figures.items()) for p in panels
            if p["series"] > MAX_SERIES or p["labelled"] < p["series"]]


def test_wide_bands_are_caught() -> None:
    assert wide_bands("median 90%, 95% band 0%–59697%")
    assert wide_bands("interval ×0.05–×1.19")
    assert not wide_bands("95% band 27%–59%") and not wide_bands("interquartile 3%–25%")
    assert not wide_bands("N = 8 to 512, interval ×1.00–×1.19")


def test_crowded_panels_are_caught() -> None:
    assert crowded_panels({"f": [{"title": "t", "series": 9, "labelled": 9}]})
    assert crowded_panels({"f": [{"title": "t", "series": 3, "labelled": 2}]})
    assert not crowded_panels({"f": [{"title": "t", "series": 8, "labelled": 8}]})


@pytest.fixture(scope="module")
def report_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    named = os.environ.get("SCALEWALL_REPORT_HTML")
    if named:
        return (PROJ_ROOT / named).resolve()
    return shared_downstream(tmp_path_factory)["reports"] / "report.html"


_PAGE_STATE = """
const figs = Array.from(document.querySelectorAll('figure')).map(f => ({
  id: f.id, audit: JSON.parse(f.dataset.audit || '[]'),
  img: f.querySelector(':scope > img') ? f.querySelector(':scope > img').src : null}));
const charts = Array.from(document.querySelectorAll('.vchart')).map(c => {
  const svg = c.querySelector('svg'); const r = svg ? svg.getBoundingClientRect() : null;
  const spec = JSON.parse(document.getElementById('spec-' + c.dataset.chart).textContent);
  return {name: c.dataset.chart, rendered: c.dataset.rendered || '', width: r ? r.width : 0,
          marks: svg ? svg.querySelectorAll('path, text').length : 0,
          panels: (spec.usermeta || {}).panels || [], data: JSON.stringify(spec.data)};
});
const images = Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.alt,
                                                       i.src.length]);
return {figs, charts, images, text: document.body.innerText};
"""


def test_report_reads_well_in_headless_chromium(report_html: Path) -> None:
    driver = _driver()
    try:
        url = report_html.resolve().as_uri()
        driver.get(url)
        deadline, state = time.time() + 60, {}
        while time.time() < deadline:  # the charts draw after load
            state = driver.execute_script(_PAGE_STATE)
            if all(c["rendered"] for c in state["charts"]):
                break
            time.sleep(0.5)
        images = state["images"]
        assert len(images) >= 8
        broken = [alt for complete, width, alt, _ in images if not complete or width <= 0]
        assert not broken, f"figures that did not decode: {broken}"
        undrawn = [c["name"] for c in state["charts"]
                   if c["rendered"] != "1" or c["width"] < 100 or c["marks"] < 10]
        assert not undrawn, f"charts that did not render: {undrawn}"
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert not errors, f"console errors: {errors}"
        requests = requested_urls(driver)
        outside = [u for u in requests if not u.startswith("data:") and u != url]
        assert not outside, f"network requests besides the file itself: {outside}"
        assert url in requests  # performance logging works, so the check above means something

        assert not wide_bands(state["text"]), f"bands wider than the rule: {wide_bands(state['text'])}"
        too_wide = [f"{f['id']}: {p['title']!r} band ×{p['widest_band']}" for f in state["figs"]
                    for p in f["audit"] if p.get("widest_band", 0) > BAND_SPAN]
        assert not too_wide, f"figures drawing bands wider than the rule: {too_wide}"
        digests = {}
        for f in state["figs"]:
            if f["img"]:
                digests.setdefault(hashlib.sha256(f["img"].encode()).hexdigest(), []).append(f["id"])
        for c in state["charts"]:
            digests.setdefault(hashlib.sha256(c["data"].encode()).hexdigest(), []).append(
                "chart-" + c["name"])
        twice = [ids for ids in digests.values() if len(ids) > 1]
        assert not twice, f"the same figure twice: {twice}"
        panels = {f["id"]: f["audit"] for f in state["figs"]}
        panels.update({"chart-" + c["name"]: c["panels"] for c in state["charts"]})
        assert not crowded_panels(panels), crowded_panels(panels)

        SCREENS.mkdir(parents=True, exist_ok=True)
        assert driver.save_screenshot(str(SCREENS / "00_first_screen.png"))
        from selenium.webdriver.common.by import By

        sections = driver.find_elements(By.CSS_SELECTOR, "section[data-section]")
        assert sections
        for i, sec in enumerate(sections, start=1):
            name = sec.get_attribute("data-section")
            path = SCREENS / f"{i:02d}_{name}.png"
            # a window as tall as the section, scrolled to it: headless Chromium paints only
            # what lies in the window, so a section past a fixed-size window came out blank
            driver.set_window_size(1000, min(int(sec.size["height"]) + 200, 16000))
            driver.execute_script("arguments[0].scrollIntoView(true);", sec)
            assert sec.screenshot(str(path)), name
            assert path.stat().st_size > 2000, name
    finally:
        driver.quit()
