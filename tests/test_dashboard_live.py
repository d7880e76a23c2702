"""The dashboard's live feed in Chromium: every readable repository, one page at a time,
and its requests refused from another origin as the API's are."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from .dashboard import (  # noqa: F401 (server and browser are fixtures)
    browser,
    create,
    lines,
    server,
    shoot,
    sign_in,
    sign_up,
    wait_for,
    wait_text,
)
from .server import ServerProcess

FOREIGN_PAGE = b"<!doctype html><title>elsewhere</title><p>another site</p>"


def test_a_repository_made_after_the_page_loaded_is_live(server, browser):
    sign_up(server, "watcher")
    maker = sign_up(server, "maker")
    sign_in(browser, server, "watcher")
    # Neither repository existed when the page connected; watcher owns, stars or names neither.
    create(server, maker, "/api/repositories", {"name": "fresh"})
    create(server, maker, "/api/repositories", {"name": "vault", "visibility": "private"})
    create(server, maker, "/api/repositories/maker/vault/issues", {"title": "classified"})
    create(server, maker, "/api/repositories/maker/fresh/issues", {"title": "brand new"})
    # The issue's own bound: on the open page within 1 s of the API's answer.
    wait_text(browser, "#events li:first-child", "brand new", timeout=1)
    assert "maker opened issue #1 brand new in maker/fresh" in lines(browser)[0]
    create(server, maker, "/api/repositories/maker/vault/issues", {"title": "classified 2"})
    create(server, maker, "/api/repositories/maker/fresh/star", {})
    wait_text(browser, "#events li:first-child", "starred", timeout=1)
    text = browser.find_element("css selector", "#events").text
    assert "vault" not in text and "classified" not in text


def test_first_load_reads_the_newest_page_and_older_ones_on_demand(server, browser):
    auth = sign_up(server, "pager")
    create(server, auth, "/api/repositories", {"name": "busy"})
    for n in range(45):
        create(server, auth, "/api/repositories/pager/busy/issues", {"title": f"issue {n}"})
    sign_in(browser, server, "pager")
    wait_text(browser, "#events li:last-child", "issue 15")
    got = lines(browser)
    assert len(got) == 30 and "#45 issue 44" in got[0], got
    feeds = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
        ".filter(n => n.includes('/api/events'))"
    )
    assert len(feeds) == 1 and "before=" in feeds[0], feeds  # one page, not the whole log
    older = wait_for(browser, "#older")
    assert older.is_displayed()
    shoot(browser, "activity-older", bottom="#older")
    older.click()
    # The page before holds the other 15 and, the server being shared, other tests' events.
    wait_text(browser, "#events", "#1 issue 0 ")
    got = [line for line in lines(browser) if "in pager/busy" in line]
    assert len(got) == 45 and len(set(got)) == 45
    assert not browser.find_element("css selector", "#older").is_displayed()
    create(server, auth, "/api/repositories/pager/busy/issues", {"title": "on top"})
    wait_text(browser, "#events li:first-child", "on top")


@pytest.fixture
def foreign() -> Iterator[int]:
    """A page of another origin (another port): what a hostile site would serve."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(FOREIGN_PAGE)

        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


# From the foreign page, with the victim's cookie wherever the browser sends it: a
# credentialed read, bodiless writes (no JSON Content-Type check can stop those), the socket.
ATTACK = """
const [api, done] = [arguments[0], arguments[arguments.length - 1]];
const out = {};
const attempt = async (name, path, init) => {
  try {
    const r = await fetch(api + path, {credentials: 'include', ...init});
    out[name] = r.type === 'opaque' ? 'opaque' : 'read ' + r.status + ' ' + await r.text();
  } catch (e) { out[name] = 'blocked'; }
};
await attempt('me', '/api/users/me', {});
await attempt('star', '/api/repositories/victim/board/star', {method: 'POST', mode: 'no-cors'});
await attempt('signOut', '/auth/sign-out', {method: 'POST', mode: 'no-cors'});
await attempt('json', '/api/repositories', {method: 'POST',
  headers: {'Content-Type': 'application/json'}, body: JSON.stringify({name: 'forged'})});
out.socket = await new Promise((resolve) => {
  const ws = new WebSocket(api.replace('http', 'ws') + '/ws');
  const got = [];
  ws.onmessage = (m) => got.push(JSON.parse(m.data).type);
  ws.onclose = () => resolve(got.join(',') || 'refused');
  setTimeout(() => resolve('timeout ' + got.join(',')), 5000);
});
done(out);
"""


def stars(server: ServerProcess, auth: dict) -> int:
    status, body = server.request("GET", "/api/repositories/victim/board", None, auth)
    assert status == 200, body
    return body["repo"]["starCount"]


def test_the_pages_requests_are_refused_cross_site(server, browser, foreign):
    auth = sign_up(server, "victim")
    create(server, auth, "/api/repositories", {"name": "board"})
    sign_in(browser, server, "victim")
    # Same site, other origin (the cookie goes along: only the Origin check stops it), and
    # another site (SameSite=Lax keeps the cookie home too).
    for host in ("127.0.0.1", "localhost"):
        browser.get(f"http://{host}:{foreign}/")
        wait_text(browser, "p", "another site")
        browser.set_script_timeout(20)
        out = browser.execute_async_script(ATTACK, server.url)
        assert out == {
            "me": "blocked",
            "star": "opaque",
            "signOut": "opaque",
            "json": "blocked",
            "socket": "refused",
        }, (host, out)
        assert stars(server, auth) == 0
        assert server.request("GET", "/api/repositories/victim/forged", None, auth)[0] == 404
    # A plain HTML form posted from the foreign page: a top-level navigation.
    browser.get(f"http://127.0.0.1:{foreign}/")
    wait_text(browser, "p", "another site")
    browser.execute_script(
        "const f = document.createElement('form'); f.method = 'POST';"
        "f.action = arguments[0] + '/api/repositories/victim/board/star';"
        "document.body.append(f); f.submit();",
        server.url,
    )
    wait_text(browser, "body", "cross-origin request refused")
    assert stars(server, auth) == 0
    # The dashboard's own requests, from its origin with the same cookie, go through.
    browser.get(server.url + "/#/")
    wait_text(browser, "#status", "live")  # the socket: the session survived all of the above
    status = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "import('/ui/api.js').then((m) => m.post('/api/repositories/victim/board/star'))"
        ".then(() => done('ok'), (e) => done(String(e.status)))"
    )
    assert status == "ok" and stars(server, auth) == 1
    browser.find_element("id", "sign-out").click()
    wait_for(browser, "#login")
    assert (
        browser.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "fetch('/api/users/me').then((r) => done(r.status))"
        )
        == 401
    )
