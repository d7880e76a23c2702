"""Headless Chromium driven by Selenium for the dashboard's tests, or a skip saying why."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCREENSHOTS = ROOT / "tests" / "screenshots"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


def _binaries() -> tuple[str | None, str | None]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    return browser, shutil.which("chromedriver")


def missing() -> str | None:
    """Why the browser tests can't run here (None: they can)."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    browser, driver = _binaries()
    if browser is None or driver is None:
        return "Chromium or chromedriver is missing (apt-get install chromium chromium-driver)"
    return None


def need_browser() -> None:
    """Skip with one line, or fail where HUBSVC_TEST_BROWSER=1 says a browser must be there."""
    reason = missing()
    if reason is None:
        return
    if os.environ.get("HUBSVC_TEST_BROWSER") == "1":
        pytest.fail(f"HUBSVC_TEST_BROWSER=1 but {reason}")
    pytest.skip(reason)


def chromium(width: int = 1280, height: int = 800):
    """A new headless Chromium with an empty profile; the caller quits it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = _binaries()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="hubsvc-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={width},{height}")
    # An alert a payload might open stays open, so the test can see it.
    options.set_capability("unhandledPromptBehavior", "ignore")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    session = webdriver.Chrome(options=options, service=Service(driver))
    session.hubsvc_profile = profile
    return session


def quit_chromium(session) -> None:
    try:
        session.quit()
    finally:
        shutil.rmtree(session.hubsvc_profile, ignore_errors=True)
