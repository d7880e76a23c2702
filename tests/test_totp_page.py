"""An authenticator app set up, used and turned off on the dashboard, in Chromium.

The codes come from pyotp with the secret the page shows; the QR code is the page's
<img>, compared with what segno draws for the same otpauth:// URI.
"""

from __future__ import annotations

import secrets
import urllib.parse

from .dashboard import (  # noqa: F401 (server and browser are fixtures)
    PASSWORD,
    browser,
    server,
    shoot,
    sign_in,
    wait_for,
    wait_text,
)
from .test_two_factor import code_of, drawn


def test_enrol_sign_in_with_a_code_and_turn_off_on_the_page(server, browser):
    import pyotp
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    name = "t" + secrets.token_hex(4)
    auth = {"Authorization": f"Bearer {server.sign_up(name, PASSWORD)['token']}"}
    sign_in(browser, server, name)
    browser.find_element(By.CSS_SELECTOR, "#nav a[href='#/security']").click()
    wait_for(browser, "#totp-setup").click()
    secret = wait_for(browser, "#totp-secret").text
    totp = pyotp.TOTP(secret)

    # The QR code is the otpauth:// URI as segno draws it, and the browser rendered it.
    uri = totp.provisioning_uri(name=name, issuer_name="hubsvc")
    qr = browser.find_element(By.ID, "totp-qr")
    prefix = "data:image/svg+xml;charset=utf-8,"
    src = qr.get_attribute("src")
    assert src.startswith(prefix), src[:60]
    svg = urllib.parse.unquote(src[len(prefix) :])
    assert svg == drawn(uri)
    loaded = "return arguments[0].complete && arguments[0].naturalWidth"
    WebDriverWait(browser, 10).until(lambda b: b.execute_script(loaded, qr) > 0)
    shoot(browser, "totp-setup")

    # A wrong code is said so and the secret stays pending; a right one shows ten codes.
    wrong = "000000" if totp.now() != "000000" else "111111"
    browser.find_element(By.ID, "totp-code").send_keys(wrong)
    browser.find_element(By.CSS_SELECTOR, "#totp-confirm button").click()
    wait_text(browser, "#totp-message", "not accepted")
    browser.find_element(By.ID, "totp-code").clear()
    # The step before: the sign-in below takes the current one, which stays unused.
    browser.find_element(By.ID, "totp-code").send_keys(code_of(secret, -1, margin=10))
    browser.find_element(By.CSS_SELECTOR, "#totp-confirm button").click()
    wait_for(browser, "#recovery-codes")
    codes = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#recovery-codes li")]
    assert len(codes) == 10 and len(set(codes)) == 10, codes
    shoot(browser, "totp-recovery-codes")
    browser.find_element(By.ID, "totp-done").click()
    wait_text(browser, "#totp-on", "10 recovery codes left")
    state = server.request("GET", "/api/users/me/2fa", None, auth)[1]
    assert state["totp"] is True and state["recoveryCodesLeft"] == 10, state

    # Signed out, the password alone asks for a code; the app's current code signs in.
    browser.find_element(By.ID, "sign-out").click()
    wait_for(browser, "#login")
    browser.find_element(By.ID, "login").send_keys(name)
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "#sign-in button").click()
    wait_for(browser, "#code").send_keys(totp.now())
    browser.find_element(By.CSS_SELECTOR, "#second-factor button[type=submit]").click()
    wait_for(browser, "#events")
    wait_text(browser, "#who", name)

    # Turning it off takes the password and a code: here a recovery code (the app's
    # current code is spent); a wrong password is said so first.
    browser.find_element(By.CSS_SELECTOR, "#nav a[href='#/security']").click()
    wait_for(browser, "#totp-off-password").send_keys("not the password")
    browser.find_element(By.ID, "totp-off-code").send_keys(codes[0])
    browser.find_element(By.CSS_SELECTOR, "#totp-off button").click()
    wait_text(browser, "#totp-message", "currentPassword")
    browser.find_element(By.ID, "totp-off-password").clear()
    browser.find_element(By.ID, "totp-off-password").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "#totp-off button").click()
    wait_for(browser, "#totp-setup")
    assert server.request("GET", "/api/users/me/2fa", None, auth)[1]["totp"] is False
    refused = [e for e in browser.get_log("browser") if "Content Security Policy" in e["message"]]
    assert refused == []
