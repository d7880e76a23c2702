"""The web dashboard in a real headless Chromium against a real server process."""

from __future__ import annotations

from .dashboard import (  # noqa: F401 (server and browser are fixtures)
    PASSWORD,
    SVG,
    XSS,
    browser,
    create,
    lines,
    no_script_ran,
    push,
    server,
    shoot,
    sign_in,
    sign_up,
    wait_for,
    wait_text,
)
from .server import ServerProcess


def test_page_is_served_with_a_strict_csp(server):
    import urllib.request

    with urllib.request.urlopen(server.url + "/") as resp:
        csp = resp.headers["Content-Security-Policy"]
        page = resp.read().decode()
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert "<script>" not in page and "style=" not in page


def test_sign_in_wrong_password_then_right(server, browser):
    from selenium.webdriver.common.by import By

    sign_up(server, "signer")
    browser.get(server.url + "/")
    wait_for(browser, "#login")
    shoot(browser, "sign-in")
    browser.find_element(By.ID, "login").send_keys("signer")
    browser.find_element(By.ID, "password").send_keys("wrong password!")
    browser.find_element(By.CSS_SELECTOR, "#sign-in button").click()
    wait_text(browser, "#sign-in-error", "Wrong username")
    sign_in(browser, server, "signer")
    assert browser.find_element(By.ID, "who").text == "signer"
    browser.find_element(By.ID, "sign-out").click()
    wait_for(browser, "#login")
    browser.get(server.url + "/#/")
    wait_for(browser, "#login")  # the cookie is gone: back to the form


def test_issue_appears_live_within_a_second(server, browser):
    auth = sign_up(server, "livey")
    create(
        server,
        auth,
        "/api/repositories",
        {"name": "board", "description": "a board", "autoInit": True},
    )
    create(server, auth, "/api/repositories/livey/board/issues", {"title": "first"})
    sign_in(browser, server, "livey")
    wait_text(browser, "#events", "first")
    create(server, auth, "/api/repositories/livey/board/issues", {"title": "arrives live"})
    # The issue's own bound: on the open page within 1 s of the API's answer.
    wait_text(browser, "#events li:first-child", "arrives live", timeout=1)
    got = lines(browser)
    assert "livey opened issue #2 arrives live in livey/board" in got[0]
    assert "first" in got[1]
    time_el = browser.find_element("css selector", "#events li:first-child time")
    assert time_el.text == "just now" and time_el.get_attribute("title")
    create(server, auth, "/api/repositories/livey/board/star", {})
    wait_text(browser, "#events li:first-child", "starred")
    shoot(browser, "activity")
    # The user's dark theme, from their preferences.
    create(server, auth, "/api/users/me/settings/preferences", {"theme": "dark"})
    browser.refresh()
    wait_text(browser, "#status", "live")
    assert browser.execute_script("return document.documentElement.dataset.theme") == "dark"
    shoot(browser, "activity-dark")
    browser.get(server.url + "/#/r/livey/board")
    wait_text(browser, "main", "Open issues")
    shoot(browser, "repository")
    browser.get(server.url + "/#/repos")
    wait_text(browser, "#own", "livey/board")
    wait_text(browser, "#starred", "livey/board")
    shoot(browser, "repositories")
    browser.get(server.url + "/#/search/board/repositories")
    wait_text(browser, "#results", "livey/board")
    shoot(browser, "search")
    browser.get(server.url + "/#/search/arrives/issues")
    wait_text(browser, "#results", "#2 arrives live")
    browser.find_element("link text", "#2 arrives live").click()
    wait_text(browser, "main h1", "arrives live #2")
    no_script_ran(browser)


def test_restart_resumes_without_gaps_or_repeats(server, browser):
    auth = sign_up(server, "resumer")
    create(server, auth, "/api/repositories", {"name": "r"})
    create(server, auth, "/api/repositories/resumer/r/issues", {"title": "before"})
    sign_in(browser, server, "resumer")
    wait_text(browser, "#events", "before")
    server.stop()
    wait_text(browser, "#status", "reconnecting…")
    # While the page's server is down, another process over the same data writes 3 issues.
    with ServerProcess(server.data_dir) as other:
        token = other.request(
            "POST", "/auth/sign-in", {"username": "resumer", "password": PASSWORD}
        )[1]["token"]
        for n in range(3):
            create(
                other,
                {"Authorization": f"Bearer {token}"},
                "/api/repositories/resumer/r/issues",
                {"title": f"meanwhile {n}"},
            )
    server.start()
    wait_text(browser, "#status", "live", timeout=30)
    wait_text(browser, "#events", "meanwhile 2")
    create(server, auth, "/api/repositories/resumer/r/issues", {"title": "after"})
    wait_text(browser, "#events li:first-child", "after")
    got = [line for line in lines(browser) if "in resumer/r" in line]
    titles = ["before", "meanwhile 0", "meanwhile 1", "meanwhile 2", "after"]
    for title in titles:
        assert sum(f"#{titles.index(title) + 1} {title} " in line for line in got) == 1, got
    assert len(got) == 5, got
    ids = browser.execute_script(
        "return [...document.querySelectorAll('#events li')].map(li => li.dataset.id)"
    )
    assert ids == sorted(ids, key=int, reverse=True) and len(set(ids)) == len(ids)


def test_payloads_render_inert(server, browser, tmp_path):
    auth = sign_up(server, "mallory")
    create(server, auth, "/api/repositories", {"name": "xss", "description": XSS + SVG})
    readme = f"# Read me\n\n{XSS}\n\n{SVG}\n\n[click](javascript:window.__xss=5)\n"
    bad_name = '<img src=x onerror="window.__xss=6">.md'
    push(server, "mallory", "xss", {"README.md": readme, bad_name: XSS}, tmp_path / "w")
    issue = create(
        server, auth, "/api/repositories/mallory/xss/issues", {"title": XSS, "body": SVG}
    )
    number = issue.get("number") or issue["issue"]["number"]
    create(
        server, auth, f"/api/repositories/mallory/xss/issues/{number}/comments", {"body": SVG + XSS}
    )
    create(server, auth, "/api/repositories/mallory/xss/issues", {"title": SVG})
    sign_in(browser, server, "mallory")
    wait_text(browser, "#events", "window.__xss=3")  # the SVG shows as text
    assert XSS in browser.find_element("css selector", "#events").text
    no_script_ran(browser)
    browser.get(server.url + "/#/r/mallory/xss")
    wait_text(browser, "#readme", "Read me")
    assert browser.find_elements("css selector", "#readme h1")  # the Markdown is rendered
    assert not browser.find_elements(
        "css selector", "#readme script, #readme svg, #readme [onerror]"
    )
    shoot(browser, "repository-readme")
    browser.find_element("link text", bad_name).click()
    wait_text(browser, "#file", "window.__xss=1")
    no_script_ran(browser)
    pages = (
        ("/#/r/mallory/xss", "#readme"),
        ("/#/repos", "#own"),
        (f"/#/r/mallory/xss/issues/{number}", "main h1"),
    )
    for page, css in pages:
        browser.get(server.url + page)
        wait_text(browser, css, "Read me" if css == "#readme" else "window.__xss=")
        no_script_ran(browser)
        hrefs = browser.execute_script(
            "return [...document.querySelectorAll('a')].map(a => a.getAttribute('href'))"
        )
        assert not [h for h in hrefs if h and h.lower().startswith("javascript:")], hrefs
    shoot(browser, "issue")


def test_private_repository_invisible_to_another_user(server, browser):
    owner = sign_up(server, "hider")
    sign_up(server, "peeker")
    create(server, owner, "/api/repositories", {"name": "secret", "visibility": "private"})
    create(server, owner, "/api/repositories/hider/secret/issues", {"title": "classified"})
    create(server, owner, "/api/repositories", {"name": "open"})
    create(server, owner, "/api/repositories/hider/open/issues", {"title": "public news"})
    sign_in(browser, server, "peeker")
    wait_text(browser, "#events", "public news")
    create(server, owner, "/api/repositories/hider/secret/issues", {"title": "classified 2"})
    create(server, owner, "/api/repositories/hider/open/issues", {"title": "public 2"})
    wait_text(browser, "#events", "public 2", timeout=1)
    text = browser.find_element("css selector", "#events").text
    assert "secret" not in text and "classified" not in text
    browser.get(server.url + "/#/r/hider/secret")
    wait_text(browser, "main", "not found")
    browser.get(server.url + "/#/search/classified/issues")
    wait_text(browser, "#results", "Nothing found")


def test_pull_request_page_shows_files_and_diff(server, browser, tmp_path):
    auth = sign_up(server, "puller")
    create(server, auth, "/api/repositories", {"name": "pr"})
    run = push(server, "puller", "pr", {"notes.txt": "one\ntwo\n"}, tmp_path / "w")
    run("checkout", "-qb", "feature")
    (tmp_path / "w" / "notes.txt").write_text("one\nthree\n")
    run("commit", "-qam", "three, not two")
    host = server.url.replace("http://", f"http://puller:{PASSWORD.replace(' ', '%20')}@")
    run("push", "-q", f"{host}/puller/pr.git", "feature")
    pull = create(
        server, auth, "/api/repositories/puller/pr/pulls", {"title": "Say three", "head": "feature"}
    )
    number = pull.get("number") or pull["pullRequest"]["number"]
    sign_in(browser, server, "puller")
    wait_text(browser, "#events li:first-child", "opened pull request")
    browser.get(f"{server.url}/#/r/puller/pr/pulls/{number}")
    wait_text(browser, "main", "Files changed (1)")
    added = browser.find_elements("css selector", ".diff .add .code")
    removed = browser.find_elements("css selector", ".diff .del .code")
    assert [e.text for e in added] == ["+three"] and [e.text for e in removed] == ["-two"]
    shoot(browser, "pull-request")
    browser.get(f"{server.url}/#/r/puller/pr")
    # Only the hash changes: wait for the repository page itself, not the page before it.
    wait_text(browser, "main", "Open pull requests")
    wait_for(browser, "main a[href$='/blob/main/notes.txt']").click()
    wait_text(browser, "#file", "two")
    shoot(browser, "file")


def test_sign_in_refused_for_a_while_says_how_long(browser, tmp_path):
    from selenium.webdriver.common.by import By

    settings = {"rate_limit": {"enabled": True, "sign_in_per_15_minutes": 2}}
    with ServerProcess(tmp_path / "data", settings) as limited:
        sign_up(limited, "hasty")
        browser.get(limited.url + "/#/sign-in")
        wait_for(browser, "#login")
        browser.find_element(By.ID, "login").send_keys("hasty")
        # The submit handler clears the message before it asks, so each wait sees its answer.
        for expected in ("Wrong username", "Wrong username", "Too many attempts: try again in"):
            browser.find_element(By.ID, "password").clear()
            browser.find_element(By.ID, "password").send_keys("not the password")
            browser.find_element(By.CSS_SELECTOR, "#sign-in button").click()
            wait_text(browser, "#sign-in-error", expected)
        assert "seconds" in browser.find_element(By.ID, "sign-in-error").text
