"""What the dashboard's browser tests share: a server, a Chromium, API calls, waits, shots."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from .browser import SCREENSHOTS, chromium, need_browser, quit_chromium
from .gitcli import ENV
from .server import ServerProcess

PASSWORD = "correct horse battery"
XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">'
SVG = '<svg onload="window.__xss=3"><a href="javascript:window.__xss=4">x</a></svg>'


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    need_browser()
    proc = ServerProcess(tmp_path_factory.mktemp("dash") / "data").start()
    yield proc
    if proc.proc is not None and proc.proc.poll() is None:
        proc.stop()


@pytest.fixture
def browser():
    need_browser()
    session = chromium()
    yield session
    quit_chromium(session)


def sign_up(server: ServerProcess, username: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.sign_up(username, PASSWORD)['token']}"}


def create(server: ServerProcess, auth: dict, path: str, body: dict) -> dict:
    status, answer = server.request("POST", path, body, auth)
    assert status in (200, 201), answer
    return answer


def push(server: ServerProcess, username: str, repo: str, files: dict[str, str], work: Path):
    """Commit files and push them with the git CLI over smart HTTP."""

    def run(*args: str) -> None:
        subprocess.run(["git", *args], cwd=work, env={**os.environ, **ENV}, check=True)

    work.mkdir()
    run("init", "-q", "-b", "main")
    for name, text in files.items():
        (work / name).write_text(text)
    run("add", ".")
    run("commit", "-qm", "files")
    host = server.url.replace("http://", f"http://{username}:{PASSWORD.replace(' ', '%20')}@")
    run("push", "-q", f"{host}/{username}/{repo}.git", "main")
    return run


def sign_in(browser, server: ServerProcess, username: str) -> None:
    from selenium.webdriver.common.by import By

    browser.get(server.url + "/#/sign-in")
    wait_for(browser, "#login")
    for field, value in (("login", username), ("password", PASSWORD)):
        browser.find_element(By.ID, field).clear()
        browser.find_element(By.ID, field).send_keys(value)
    browser.find_element(By.CSS_SELECTOR, "#sign-in button").click()
    wait_for(browser, "#events")
    wait_text(browser, "#status", "live")
    # One socket: a second route of the same page would open one and close it unopened.
    logged = [e["message"] for e in browser.get_log("browser")]
    assert not [m for m in logged if "closed before the connection" in m], logged
    assert not [m for m in logged if "Content Security Policy" in m], logged


def wait_for(browser, css: str, timeout: float = 10):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, timeout, poll_frequency=0.05).until(
        lambda b: b.find_element(By.CSS_SELECTOR, css)
    )


def wait_text(browser, css: str, text: str, timeout: float = 10) -> None:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    # The page replaces what it shows: an element found a moment ago may be gone already.
    ignored = (NoSuchElementException, StaleElementReferenceException)
    WebDriverWait(browser, timeout, poll_frequency=0.05, ignored_exceptions=ignored).until(
        lambda b: text in b.find_element(By.CSS_SELECTOR, css).text
    )


def lines(browser) -> list[str]:
    from selenium.webdriver.common.by import By

    return [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#events li")]


def no_script_ran(browser) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018
    assert browser.execute_script("return window.__xss === undefined")
    # Nothing was fetched from anywhere but this server.
    origin = browser.execute_script("return location.origin")
    names = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    # The page works under its CSP: nothing of its own was refused by it.
    refused = [e for e in browser.get_log("browser") if "Content Security Policy" in e["message"]]
    assert refused == []
    ours = (origin, origin.replace("http", "ws", 1))
    assert all(n.startswith(ours) for n in names), names


def shoot(browser, name: str, bottom: str | None = None) -> None:
    """The current page at a laptop's and a phone's width, for a person to look at."""
    SCREENSHOTS.mkdir(exist_ok=True)
    for width, height in ((1280, 800), (390, 844)):
        # The viewport itself at that size (a window's size includes the browser's frame).
        browser.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
        )
        time.sleep(0.2)  # let the layout settle after the resize
        if bottom:  # the element at the viewport's foot, wherever the new width put it
            browser.execute_script(
                "document.querySelector(arguments[0]).scrollIntoView({block: 'end'})", bottom
            )
        browser.save_screenshot(str(SCREENSHOTS / f"{name}-{width}x{height}.png"))
    browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    print(f"screenshots: {SCREENSHOTS}/{name}-*.png")
