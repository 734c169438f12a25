"""Open report.html in headless Chromium: every figure decodes, no console error, no request
other than the file itself and its data: URIs; save a screenshot to reports/screenshots/.

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` apt-installs them); the test
skips with a message where they are absent.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from synthetic_upstream import shared_downstream

PROJ_ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = PROJ_ROOT / "reports" / "screenshots"
pytestmark = [pytest.mark.browser, pytest.mark.slow]


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
                "--window-size=1000,1400", "--disable-extensions", "--no-first-run"):
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


@pytest.fixture(scope="module")
def report_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_downstream(tmp_path_factory)["reports"] / "report.html"


def test_report_in_headless_chromium(report_html: Path) -> None:
    driver = _driver()
    try:
        url = report_html.resolve().as_uri()
        driver.get(url)
        images = driver.execute_script(
            "return Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.alt]);")
        assert len(images) >= 8
        broken = [alt for complete, width, alt in images if not complete or width <= 0]
        assert not broken, f"figures that did not decode: {broken}"
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert not errors, f"console errors: {errors}"
        requests = requested_urls(driver)
        outside = [u for u in requests if not u.startswith("data:") and u != url]
        assert not outside, f"network requests besides the file itself: {outside}"
        assert url in requests  # performance logging works, so the check above means something
        height = driver.execute_script("return document.body.scrollHeight")
        driver.set_window_size(1000, min(int(height) + 100, 16000))
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        assert driver.save_screenshot(str(SCREENSHOTS / "report.png"))
        assert (SCREENSHOTS / "report.png").stat().st_size > 10000
    finally:
        driver.quit()
