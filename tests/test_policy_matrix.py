"""The policy matrix, walked from the router: every route, each credential kind, public and
private repositories of a user and of an organization.

For each route and principal the answer is what the policy table says: refused by the
credential (403 naming the scope, the bot's scope or the token's repositories), invisible
(404 for a private repository its user may not read), or let through. Every answer's body
is searched for marks of what the principal may not read: a private repository's
description, and an issue's title where the credential may not read issues there.
"""

from __future__ import annotations

import re

import pytest

from hubsvc.policy import SCOPES, action_of, decide_action
from hubsvc.site.pages import PAGE_HANDLERS

from .conftest import make_config, sign_up
from .test_accounts import bearer, new_pat
from .test_chat_link import BOT_KEY, as_chat, link
from .test_repos import create

REPOS = ("alice/pub", "alice/priv", "acme/opub", "acme/opriv")
PRIVATE = ("alice/priv", "acme/opriv")
# Bodies never read back (a write the policy lets through would act on the world).
SAFE = ("GET",)
SKIP = {"/ws", "/{owner}/{name}/info/lfs/{tail}"}


@pytest.fixture
def config(tmp_path, database_url):
    return make_config(tmp_path, chat__bot_key=BOT_KEY, database__url=database_url)


def repo_mark(full: str) -> str:
    return "REPOMARK" + full.replace("/", "x")


def issue_mark(full: str) -> str:
    return "ISSUEMARK" + full.replace("/", "x")


class Principal:
    """A credential of the matrix: its headers, its caps in the policy's words, its user."""

    def __init__(self, label, headers, kind, user, scopes=None, repositories=None):
        self.label, self.headers, self.kind, self.user = label, headers, kind, user
        self.scopes = None if scopes is None else frozenset(scopes)
        self.repositories = repositories  # names; the matrix turns them into ids

    def caps(self, ids: dict[str, int]):
        from hubsvc.policy import Caps

        if self.kind in ("anonymous", "session"):
            return None
        limited = (
            None if self.repositories is None else frozenset(ids[r] for r in self.repositories)
        )
        return Caps(self.kind, self.scopes, limited)

    def may_read_repo(self, full: str) -> bool:
        """Whether this principal's user reads the repository (alice owns all four)."""
        if full not in PRIVATE:
            return True
        return self.user == "alice"

    def covers(self, full: str) -> bool:
        return self.repositories is None or full in self.repositories


@pytest.fixture
async def world(client, alice):
    acme = await client.post("/api/orgs", json={"name": "acme"}, headers=alice.headers)
    assert acme.status == 201, await acme.text()
    ids = {}
    for full in REPOS:
        owner, name = full.split("/")
        private = full in PRIVATE
        repo = await create(
            client,
            alice,
            name,
            owner=owner,
            visibility="private" if private else "public",
            autoInit=True,
            description=repo_mark(full) if private else "open",
        )
        ids[full] = int(repo["id"])
        resp = await client.post(
            f"/api/repositories/{full}/issues",
            json={"title": issue_mark(full), "body": issue_mark(full)},
            headers=alice.headers,
        )
        assert resp.status == 201
    resp = await client.post("/api/orgs/acme/teams", json={"name": "core"}, headers=alice.headers)
    assert resp.status == 201, await resp.text()
    for full in ("alice/pub", "acme/opriv"):  # events that are not issues'
        resp = await client.post(f"/api/repositories/{full}/star", headers=alice.headers)
        assert resp.status in (200, 201, 204), await resp.text()
    carol = await sign_up(client, "carol")
    await link(client, alice, "chat-alice")
    principals = [
        Principal("anonymous", {}, "anonymous", None),
        Principal("alice sign-in token", alice.headers, "session", "alice"),
        Principal("carol (stranger)", carol.headers, "session", "carol"),
        Principal("bot for alice", as_chat("chat-alice"), "bot", "alice"),
    ]
    every = await new_pat(client, alice, "all")
    principals.append(Principal("token, every scope", bearer(every["secret"]), "pat", "alice"))
    for scope in SCOPES:
        made = await new_pat(client, alice, scope, scopes=[scope])
        principals.append(
            Principal(f"token {scope}", bearer(made["secret"]), "pat", "alice", [scope])
        )
    limited = await new_pat(
        client,
        alice,
        "limited",
        scopes=["repo:write", "issues:write", "statuses:write", "user:read", "org:read"],
        repositories=["alice/pub"],
    )
    principals.append(
        Principal(
            "token limited to alice/pub",
            bearer(limited["secret"]),
            "pat",
            "alice",
            ["repo:write", "issues:write", "statuses:write", "user:read", "org:read"],
            ["alice/pub"],
        )
    )
    return ids, principals


VALUES = {
    "number": "1",
    "id": "1",
    "deliveryId": "1",
    "reactionId": "1",
    "assetId": "1",
    "label": "bug",
    "tag": "v1",
    "oid": "HEAD",
    "ref": "main",
    "sha": "0" * 40,
    "spec": "main...main",
    "branch": "main",
    "username": "alice",
    "org": "acme",
    "team": "core",
    "chatId": "chat-alice",
    "file": "app.js",
    "kind": "diff",
    "name": "opriv",  # a team's repository: /api/orgs/{org}/teams/{team}/repositories/{name}
}


def routes_of(app):
    found = set()
    for route in app.router.routes():
        if route.resource is None or route.method in ("HEAD", "OPTIONS", "*"):
            continue
        template = route.resource.canonical
        # The dashboard's page at a forge's paths reads nothing and answers the same HTML
        # for every path and principal, private repositories too (test_page_routes).
        if template in SKIP or route.handler in PAGE_HANDLERS:
            continue
        found.add((route.method, template, action_of(route.handler)))
    return sorted(found)


def queries(template: str, path: str, action: str) -> list[tuple[str, tuple[str, ...]]]:
    """The requests a route is tried with, each with the actions it needs beyond the route's."""
    if template.endswith("/info/refs"):
        return [(path + "?service=git-upload-pack", ())]
    if template == "/api/search":
        # Issue hits need issues.read too: what a repo:read token may not see.
        return [(path + "?q=REPOMARK", ()), (path + "?q=ISSUEMARK&type=issues", ("issues.read",))]
    return [(path, ())]


def concrete(template: str, full: str | None) -> str:
    values = dict(VALUES)
    if full is not None:
        values["owner"], values["name"] = full.split("/")
    path = re.sub(r"{(\w+)}", lambda m: values[m.group(1)], template)
    return path


async def test_every_route_answers_as_the_policy_table_says(app, client, world):
    ids, principals = world
    marks_checked = 0
    for method, template, action in routes_of(app):
        assert action is not None, (method, template)
        repo_route = "{owner}" in template and "{name}" in template
        for full in REPOS if repo_route else (None,):
            for path, needs in queries(template, concrete(template, full), action):
                for who in principals:
                    caps = who.caps(ids)
                    first = decide_action(caps, action, is_admin=who.user == "alice")
                    for more in needs:
                        first = first if not first.ok else decide_action(caps, more)
                    if not first.ok and (who.user is not None or first.status == 404):
                        # 403 naming what is missing; 404 for what no credential opens.
                        expect = (first.status, first.reason)
                    elif repo_route and not who.may_read_repo(full):
                        # Anonymous: 404, or 401 asking who it is (as for a public one).
                        expect = (404, None) if who.user is not None else ((401, 404), None)
                    elif repo_route and who.user is not None and not who.covers(full):
                        expect = (403, f"not for {full}")
                    elif method not in SAFE:
                        continue  # let through: not sent, it would change the world
                    else:
                        expect = None
                    resp = await client.request(
                        method, path, headers=who.headers, json={} if method != "GET" else None
                    )
                    body = (await resp.read()).decode(errors="replace")
                    where = (method, path, who.label, resp.status, body[:200])
                    if expect is not None:
                        status, text = expect
                        assert resp.status in (
                            status if isinstance(status, tuple) else (status,)
                        ), where
                        if text is not None:
                            assert text in body, where
                    elif who.user is not None:
                        # Let through by the policy: never refused for the credential.
                        assert not (resp.status == 403 and "token" in body), where
                        assert not (resp.status == 403 and "chat bot's scope" in body), where
                    assert resp.status < 500 or resp.status == 503, where  # 503: nothing configured
                    for other in REPOS:
                        readable = who.may_read_repo(other) and who.covers(other)
                        if not readable:
                            assert repo_mark(other) not in body, where
                        issues_ok = readable and (
                            caps is None or decide_action(caps, "issues.read").ok
                        )
                        if not issues_ok:
                            assert issue_mark(other) not in body, where
                        marks_checked += 1
    assert marks_checked > 1000


async def test_feed_search_and_lists_are_narrowed_to_the_credential(client, world):
    """Findings 3 and 4: what spans repositories carries only what the credential may read."""
    ids, principals = world
    by = {p.label: p for p in principals}
    repo_only = by["token repo:read"].headers
    feed = await (await client.get("/api/events", headers=repo_only)).json()
    assert {e["type"] for e in feed["events"]} == {"star"}, feed
    repo_feed = await client.get("/api/repositories/alice/pub/events", headers=repo_only)
    assert {e["type"] for e in (await repo_feed.json())["events"]} == {"star"}
    resp = await client.get("/api/search?q=ISSUEMARK&type=issues", headers=repo_only)
    assert resp.status == 403 and "issues:read" in await resp.text()
    user_only = by["token user:read"].headers
    listed = await (await client.get("/api/users/alice/repositories", headers=user_only)).json()
    assert [r["fullName"] for r in listed["repositories"]] == ["alice/pub"]
    limited = by["token limited to alice/pub"].headers
    listed = await (await client.get("/api/users/alice/repositories", headers=limited)).json()
    assert [r["fullName"] for r in listed["repositories"]] == ["alice/pub"]
    feed = await (await client.get("/api/events", headers=limited)).json()
    assert {e["repository"]["name"] for e in feed["events"]} <= {"pub"}
    assert feed["events"], "the limited token's feed holds its own repository's events"
    found = await (await client.get("/api/search?q=ISSUEMARK&type=issues", headers=limited)).json()
    assert [r["title"] for r in found["results"]] == [issue_mark("alice/pub")]
    # It creates nothing outside its list, and posts into no other repository.
    resp = await client.post("/api/repositories", json={"name": "new"}, headers=limited)
    assert resp.status == 403 and "limited" in await resp.text()
    resp = await client.post("/api/repositories/acme/opub/fork", json={}, headers=limited)
    assert resp.status == 403
    resp = await client.post(
        "/api/webhooks/chat",
        json={
            "repository": {"owner": "alice", "name": "priv"},
            "type": "star",
            "data": {"action": "added"},
        },
        headers=limited,
    )
    assert resp.status == 403 and "not for alice/priv" in await resp.text()
    resp = await client.put(
        "/api/orgs/acme/teams/core/repositories/opriv", json={}, headers=limited
    )
    assert resp.status in (403, 404)


async def test_admin_routes_need_the_admin_scope_wherever_they_live(client, world):
    """Finding 6: administrator routes outside /api/admin/ ignored the admin scope."""
    _, principals = world
    by = {p.label: p for p in principals}
    for path in (
        "/api/webhooks/chat/deliveries",
        "/api/chat/link/test",
        "/api/webhooks/chat/test",
        "/api/admin/deliveries",
    ):
        resp = await client.get(path, headers=by["token repo:read"].headers)
        assert resp.status == 403 and "admin" in await resp.text(), path
        resp = await client.get(path, headers=by["token admin"].headers)
        assert resp.status != 403, (path, await resp.text())


async def test_sockets_carry_only_what_their_credential_may_read(client, world, alice):
    """Finding 3 and item 6: a socket carries its credential's caps, live and on replay."""
    _, principals = world
    by = {p.label: p for p in principals}
    repo_only = by["token repo:read"].headers["Authorization"][7:]
    limited = by["token limited to alice/pub"].headers["Authorization"][7:]
    sockets = {}
    for label, token in (("repo", repo_only), ("limited", limited)):
        ws = await client.ws_connect(f"/ws?token={token}&subscribe=all&after=0")
        sockets[label] = ws
    for full in REPOS:
        resp = await client.post(
            f"/api/repositories/{full}/issues",
            json={"title": "live " + full},
            headers=alice.headers,
        )
        assert resp.status == 201
    resp = await client.post("/api/repositories/acme/opub/star", headers=alice.headers)
    assert resp.status in (200, 201, 204)
    resp = await client.post("/api/repositories/alice/pub/star", headers=alice.headers)
    seen: dict[str, list[tuple[str, str]]] = {}
    for label, ws in sockets.items():
        got = []
        while True:
            message = await ws.receive_json(timeout=10)
            if message["type"] != "notification":
                continue
            event = message["notification"]
            got.append(
                (event["type"], f"{event['repository']['owner']}/{event['repository']['name']}")
            )
            if (
                event["type"] == "star"
                and event["repository"]["name"] == "opub"
                and label == "repo"
            ):
                break
            if (
                event["type"] == "star"
                and event["repository"]["name"] == "pub"
                and label == "limited"
                and len(got) > 1
            ):
                break
        seen[label] = got
        await ws.close()
    assert {t for t, _ in seen["repo"]} == {"star"}, seen["repo"]
    assert {r for _, r in seen["limited"]} == {"alice/pub"}, seen["limited"]
    assert ("issue", "alice/pub") in seen["limited"]
