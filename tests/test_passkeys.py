"""Passkeys (WebAuthn) in Chromium with its virtual authenticator: register, sign in, refusals.

Every credential and assertion here is made by Chromium's virtual authenticator through
navigator.credentials, from the options the server answered; the page's own
/ui/webauthn.js converts them. The server runs with base_url http://localhost:PORT, the
origin the browser is on (an IP address is no relying party id).
"""

from __future__ import annotations

import secrets

import pytest

from .browser import chromium, need_browser, quit_chromium
from .dashboard import PASSWORD, wait_for, wait_text
from .server import ServerProcess
from .test_two_factor import code_of

# A credential from the page's options: arguments[0] options JSON, [1] "create" or "get".
CEREMONY = """
const [options, kind, done] = arguments;
import("/ui/webauthn.js").then(async (w) => {
  try {
    const cred = kind === "create"
      ? await navigator.credentials.create({ publicKey: w.creationOptions(options) })
      : await navigator.credentials.get({ publicKey: w.requestOptions(options) });
    done({ credential: w.credentialJSON(cred) });
  } catch (err) {
    done({ error: String(err && err.name) });
  }
});
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    need_browser()
    proc = ServerProcess(tmp_path_factory.mktemp("passkeys") / "data")
    proc.origin = f"http://localhost:{proc.port}"
    proc.settings["server"] = {"base_url": proc.origin}
    proc.start()
    yield proc
    if proc.proc is not None and proc.proc.poll() is None:
        proc.stop()


@pytest.fixture
def browser(server):
    from selenium.webdriver.common.virtual_authenticator import (
        Protocol,
        Transport,
        VirtualAuthenticatorOptions,
    )

    need_browser()
    session = chromium()
    session.set_script_timeout(30)
    session.get(server.origin + "/")
    session.add_virtual_authenticator(
        VirtualAuthenticatorOptions(
            protocol=Protocol.CTAP2,
            transport=Transport.INTERNAL,
            has_resident_key=True,
            has_user_verification=True,
            is_user_verified=True,
        )
    )
    yield session
    quit_chromium(session)


def account(server: ServerProcess) -> tuple[str, dict[str, str]]:
    name = "u" + secrets.token_hex(4)
    token = server.sign_up(name, PASSWORD)["token"]
    return name, {"Authorization": f"Bearer {token}"}


def ceremony(browser, options: dict, kind: str) -> dict:
    """What the virtual authenticator answers to options (a toJSON()-shaped credential)."""
    answer = browser.execute_async_script(CEREMONY, options, kind)
    assert "credential" in answer, answer
    return answer["credential"]


def register(server, browser, auth: dict, name: str = "key") -> dict:
    status, options = server.request("POST", "/api/users/me/2fa/webauthn/register", None, auth)
    assert status == 200, options
    credential = ceremony(browser, options, "create")
    status, body = server.request(
        "POST",
        "/api/users/me/2fa/webauthn/register/finish",
        {"credential": credential, "name": name},
        auth,
    )
    assert status == 201, body
    return body["webauthn"]


def test_register_finish_refuses_a_replay_and_another_accounts_challenge(server, browser):
    alice, alice_auth = account(server)
    bob, bob_auth = account(server)
    # Bob's options, made into a credential: Alice cannot finish it with her session.
    status, options = server.request("POST", "/api/users/me/2fa/webauthn/register", None, bob_auth)
    assert status == 200
    assert options["rp"]["id"] == "localhost" and options["user"]["name"] == bob
    credential = ceremony(browser, options, "create")
    finish = "/api/users/me/2fa/webauthn/register/finish"
    status, body = server.request("POST", finish, {"credential": credential}, alice_auth)
    assert status == 400 and "challenge" in body["error"], body
    # Her attempt did not use Bob's challenge up: he finishes, once.
    status, body = server.request("POST", finish, {"credential": credential}, bob_auth)
    assert status == 201, body
    assert body["webauthn"]["name"] == "Passkey" and body["webauthn"]["lastUsedAt"] is None
    status, body = server.request("POST", finish, {"credential": credential}, bob_auth)
    assert status == 400 and "challenge" in body["error"], body
    status, listed = server.request("GET", "/api/users/me/2fa/webauthn", None, bob_auth)
    assert [p["name"] for p in listed["webauthn"]] == ["Passkey"]
    status, listed = server.request("GET", "/api/users/me/2fa/webauthn", None, alice_auth)
    assert listed == {"webauthn": []}


def test_register_refuses_malformed_and_foreign_credentials(server, browser):
    _, auth = account(server)
    finish = "/api/users/me/2fa/webauthn/register/finish"
    for bad in ({}, {"credential": "x"}, {"credential": {"id": "x"}}, {"credential": []}):
        status, body = server.request("POST", finish, bad, auth)
        assert status == 400 and body["error"].startswith("credential"), (bad, body)
    # A credential for options this server never gave (a challenge made up here).
    status, options = server.request("POST", "/api/users/me/2fa/webauthn/register", None, auth)
    forged = dict(options, challenge="A" * 43)
    credential = ceremony(browser, forged, "create")
    status, body = server.request("POST", finish, {"credential": credential}, auth)
    assert status == 400 and "challenge" in body["error"], body
    # Options for another relying party id: the browser itself refuses to make it.
    answer = browser.execute_async_script(
        CEREMONY, dict(options, rp={"id": "example.com", "name": "x"}), "create"
    )
    assert answer == {"error": "SecurityError"}


def test_registering_and_removing_need_a_session(server, browser):
    name, auth = account(server)
    status, body = server.request(
        "POST", "/api/users/me/tokens", {"name": "ci", "scopes": ["user:write"]}, auth
    )
    pat = {"Authorization": f"Bearer {body['secret']}"}
    for method, path in (
        ("POST", "/api/users/me/2fa/webauthn/register"),
        ("POST", "/api/users/me/2fa/webauthn/register/finish"),
        ("DELETE", "/api/users/me/2fa/webauthn/1"),
    ):
        status, body = server.request(method, path, {}, pat)
        assert status == 403 and "session" in body["error"], (path, body)
    passkey = register(server, browser, auth)
    remove = f"/api/users/me/2fa/webauthn/{passkey['id']}"
    status, body = server.request("DELETE", remove, {"currentPassword": "wrong password"}, auth)
    assert status == 403, body
    _, other = account(server)
    status, body = server.request("DELETE", remove, {"currentPassword": PASSWORD}, other)
    assert status == 404, body
    status, body = server.request("DELETE", remove, {"currentPassword": PASSWORD}, auth)
    assert status == 204, body
    assert server.request("GET", "/api/users/me/2fa/webauthn", None, auth)[1] == {"webauthn": []}


def test_registration_on_the_settings_page(server, browser):
    from selenium.webdriver.common.by import By

    name, auth = account(server)
    sign_in_page(server, browser, name)
    wait_for(browser, "#events")
    browser.find_element(By.CSS_SELECTOR, "#nav a[href='#/security']").click()
    wait_for(browser, "#no-passkeys")
    browser.find_element(By.ID, "passkey-name").send_keys("laptop")
    browser.find_element(By.ID, "add-passkey").click()
    wait_text(browser, "#passkeys", "laptop")
    listed = server.request("GET", "/api/users/me/2fa/webauthn", None, auth)[1]["webauthn"]
    assert [p["name"] for p in listed] == ["laptop"]
    # Removing it takes the password: a wrong one is said so, the right one removes it.
    browser.find_element(By.CSS_SELECTOR, ".remove-password").send_keys("not the password")
    browser.find_element(By.CSS_SELECTOR, ".remove-passkey").click()
    wait_text(browser, "#security-message", "currentPassword")
    browser.find_element(By.CSS_SELECTOR, ".remove-password").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, ".remove-passkey").click()
    wait_for(browser, "#no-passkeys")
    assert server.request("GET", "/api/users/me/2fa/webauthn", None, auth)[1]["webauthn"] == []


def sign_in_page(server, browser, username: str) -> None:
    """The dashboard's password step, from the sign-in card."""
    from selenium.webdriver.common.by import By

    browser.get(server.origin + "/#/sign-in")
    wait_for(browser, "#login")
    for field, value in (("login", username), ("password", PASSWORD)):
        browser.find_element(By.ID, field).clear()
        browser.find_element(By.ID, field).send_keys(value)
    browser.find_element(By.CSS_SELECTOR, "#sign-in button").click()


def password_step(server, username: str) -> str:
    """POST /auth/sign-in with the password: the challenge a second factor finishes."""
    status, body = server.request(
        "POST", "/auth/sign-in", {"username": username, "password": PASSWORD}
    )
    assert status == 200 and body["twoFactorRequired"] is True, body
    assert "webauthn" in body["methods"] and "token" not in body
    return body["challenge"]


def sign_in_options(server, challenge: str) -> dict:
    status, options = server.request("POST", "/auth/sign-in/webauthn", {"challenge": challenge})
    assert status == 200, options
    return options


def finish(server, challenge: str, credential: dict) -> tuple[int, dict]:
    return server.request(
        "POST", "/auth/sign-in/webauthn/finish", {"challenge": challenge, "credential": credential}
    )


def test_sign_in_with_password_then_passkey_on_the_page(server, browser):
    from selenium.webdriver.common.by import By

    name, auth = account(server)
    register(server, browser, auth, "laptop")
    status, state = server.request("GET", "/api/users/me/2fa", None, auth)
    assert [p["name"] for p in state["webauthn"]] == ["laptop"], state
    sign_in_page(server, browser, name)
    wait_for(browser, "#use-passkey")
    assert browser.find_elements(By.ID, "code") == []  # no TOTP, no recovery codes
    browser.find_element(By.ID, "use-passkey").click()
    wait_for(browser, "#events")
    wait_text(browser, "#who", name)
    me = browser.execute_script(
        "return fetch('/api/users/me').then(r => r.json()).then(b => b.user.username)"
    )
    assert me == name
    listed = server.request("GET", "/api/users/me/2fa/webauthn", None, auth)[1]["webauthn"]
    assert listed[0]["lastUsedAt"] is not None
    refused = [e for e in browser.get_log("browser") if "Content Security Policy" in e["message"]]
    assert refused == []


def test_sign_in_refuses_other_accounts_passkeys_other_sign_ins_and_replays(server, browser):
    alice, alice_auth = account(server)
    bob, bob_auth = account(server)
    register(server, browser, alice_auth)
    register(server, browser, bob_auth)
    mine, theirs = password_step(server, alice), password_step(server, bob)
    # A challenge the password step never gave.
    for path, body in (
        ("/auth/sign-in/webauthn", {"challenge": "made-up"}),
        ("/auth/sign-in/webauthn", {}),
    ):
        status, answer = server.request("POST", path, body)
        assert status in (400, 401), answer
    # Bob's passkey answering Alice's options: not one of her account's.
    options = sign_in_options(server, mine)
    bobs = sign_in_options(server, theirs)["allowCredentials"]
    forged = ceremony(browser, dict(options, allowCredentials=bobs), "get")
    status, answer = finish(server, mine, forged)
    assert status == 401 and "not one of this account" in answer["error"], answer
    # Her own passkey's answer, finished with Bob's sign-in challenge: refused, and
    # still good for her own sign-in, once.
    credential = ceremony(browser, sign_in_options(server, mine), "get")
    status, answer = finish(server, theirs, credential)
    assert status == 401 and "not for this sign-in" in answer["error"], answer
    status, answer = finish(server, "made-up", credential)
    assert status == 401 and "sign in again" in answer["error"], answer
    status, answer = finish(server, mine, credential)
    assert status == 200 and answer["user"]["username"] == alice, answer
    token = {"Authorization": f"Bearer {answer['token']}"}
    assert server.request("GET", "/api/users/me", None, token)[1]["user"]["username"] == alice
    # The sign-in is over: the same answer again, or new options for it, are refused.
    status, answer = finish(server, mine, credential)
    assert status == 401, answer
    status, answer = server.request("POST", "/auth/sign-in/webauthn", {"challenge": mine})
    assert status == 401, answer
    # Bob's sign-in was never touched by all this: it finishes with his own passkey.
    status, answer = finish(
        server, theirs, ceremony(browser, sign_in_options(server, theirs), "get")
    )
    assert status == 200 and answer["user"]["username"] == bob, answer


def test_a_cloned_authenticator_is_refused_by_its_counter(server, browser):
    from selenium.webdriver.common.virtual_authenticator import (
        Credential,
        Protocol,
        Transport,
        VirtualAuthenticatorOptions,
    )

    name, auth = account(server)
    register(server, browser, auth)
    [original] = browser.get_credentials()  # the key, as a thief would copy it
    challenge = password_step(server, name)
    status, answer = finish(
        server, challenge, ceremony(browser, sign_in_options(server, challenge), "get")
    )
    assert status == 200, answer
    # The same private key in another authenticator, as a cloned key would be.
    browser.remove_virtual_authenticator()
    browser.add_virtual_authenticator(
        VirtualAuthenticatorOptions(
            protocol=Protocol.CTAP2,
            transport=Transport.INTERNAL,
            has_resident_key=True,
            has_user_verification=True,
            is_user_verified=True,
        )
    )
    # A copy taken before that sign-in: its counter is behind the one the server stored
    # then (were it not stored, the copy's next count would pass the registration's).
    browser.add_credential(Credential.from_dict(original.to_dict()))
    challenge = password_step(server, name)
    status, answer = finish(
        server, challenge, ceremony(browser, sign_in_options(server, challenge), "get")
    )
    assert status == 401 and "refused" in answer["error"], answer


def test_a_ceremony_begun_on_one_process_finishes_on_another(tmp_path, browser, redis_url):
    """The challenges live in the database: two processes over one data folder."""
    redis = {"url": redis_url[0], "prefix": redis_url[1]}
    first = ServerProcess(tmp_path / "data", {"redis": redis})
    origin = f"http://localhost:{first.port}"
    first.settings["server"] = {"base_url": origin}
    second = ServerProcess(tmp_path / "data", {"redis": redis, "server": {"base_url": origin}})
    with first, second:
        browser.get(origin + "/")
        name, auth = account(first)
        status, options = first.request("POST", "/api/users/me/2fa/webauthn/register", None, auth)
        credential = ceremony(browser, options, "create")
        status, body = second.request(
            "POST", "/api/users/me/2fa/webauthn/register/finish", {"credential": credential}, auth
        )
        assert status == 201, body
        challenge = password_step(second, name)
        credential = ceremony(browser, sign_in_options(first, challenge), "get")
        status, body = finish(second, challenge, credential)
        assert status == 200 and body["user"]["username"] == name, body
        assert finish(first, challenge, credential)[0] == 401


def test_a_passkey_alone_is_a_second_factor_for_git_and_organizations(server, browser, tmp_path):
    import os
    import subprocess

    from .gitcli import ENV

    owner, owner_auth = account(server)
    member, member_auth = account(server)
    org = "o" + secrets.token_hex(4)
    assert server.request("POST", "/api/orgs", {"name": org}, owner_auth)[0] == 201
    assert server.request("PUT", f"/api/orgs/{org}/members/{member}", {}, owner_auth)[0] == 201
    body = {"name": "app", "owner": org, "visibility": "private", "autoInit": True}
    assert server.request("POST", "/api/repositories", body, owner_auth)[0] == 201
    rule = {"requireTwoFactor": True}
    assert server.request("PATCH", f"/api/orgs/{org}", rule, owner_auth)[0] == 409
    register(server, browser, owner_auth)
    status, answer = server.request("PATCH", f"/api/orgs/{org}", rule, owner_auth)
    assert status == 200, answer
    app = f"/api/repositories/{org}/app"
    assert server.request("GET", app, None, member_auth)[0] == 403
    passkey = register(server, browser, member_auth)
    assert server.request("GET", app, None, member_auth)[0] == 200
    # Git's password is no longer enough for the member with a passkey.
    url = server.url.replace("http://", f"http://{member}:{PASSWORD.replace(' ', '%20')}@")
    clone = subprocess.run(
        ["git", "clone", "-q", f"{url}/{org}/app.git", str(tmp_path / "clone")],
        env={**os.environ, **ENV},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert clone.returncode != 0 and "two-factor authentication is on" in clone.stderr
    # The last factor cannot go while the organization requires one.
    remove = f"/api/users/me/2fa/webauthn/{passkey['id']}"
    status, answer = server.request("DELETE", remove, {"currentPassword": PASSWORD}, member_auth)
    assert status == 409 and org in answer["error"], answer
    assert len(server.request("GET", "/api/users/me/2fa", None, member_auth)[1]["webauthn"]) == 1


def test_the_page_asks_for_a_code_where_totp_is_on(server, browser):

    import pyotp
    from selenium.webdriver.common.by import By

    name, auth = account(server)
    status, body = server.request("POST", "/api/users/me/2fa/totp", None, auth)
    totp = pyotp.TOTP(body["secret"])
    previous = {"code": code_of(body["secret"], -1, margin=10)}  # the sign-in's own code stays new
    assert server.request("POST", "/api/users/me/2fa/totp/confirm", previous, auth)[0] == 200
    sign_in_page(server, browser, name)
    wait_for(browser, "#code")
    assert browser.find_elements(By.ID, "use-passkey") == []  # no passkey of theirs
    browser.find_element(By.ID, "code").send_keys("000000" if totp.now() != "000000" else "111111")
    browser.find_element(By.CSS_SELECTOR, "#second-factor button[type=submit]").click()
    wait_text(browser, "#second-factor-error", "not accepted")
    browser.find_element(By.ID, "code").clear()
    browser.find_element(By.ID, "code").send_keys(totp.now())
    browser.find_element(By.CSS_SELECTOR, "#second-factor button[type=submit]").click()
    wait_for(browser, "#events")
    wait_text(browser, "#who", name)
