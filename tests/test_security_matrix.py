"""Every repository route, enumerated from the router: a private repository is invisible
to anonymous callers and strangers, visible to readers, writable only by writers."""

from __future__ import annotations

import io
import logging
import re

import pytest

from .conftest import sign_up
from .gitcli import git, remote
from .test_repos import create

PREFIX = "/api/repositories/{owner}/{name}"
# Routes a reader may not use (more than read access needed): asserted, not assumed.
NEEDS_MORE_THAN_READ = {
    ("PATCH", PREFIX),
    ("DELETE", PREFIX),
    ("PUT", PREFIX + "/collaborators/{username}"),
    ("DELETE", PREFIX + "/collaborators/{username}"),
    # Who holds which permission is for writers, as on GitHub.
    ("GET", PREFIX + "/collaborators"),
    ("DELETE", PREFIX + "/issues/{number}"),
    ("POST", PREFIX + "/pulls/{number}/merge"),
    # Editing someone else's issue or pull request (the reader is not their author).
    ("PATCH", PREFIX + "/issues/{number}"),
    ("PATCH", PREFIX + "/pulls/{number}"),
    # Changing someone else's comment (only its author and admins may).
    ("PATCH", PREFIX + "/issues/{number}/comments/{id}"),
    ("DELETE", PREFIX + "/issues/{number}/comments/{id}"),
    ("PATCH", PREFIX + "/pulls/{number}/comments/{id}"),
    ("DELETE", PREFIX + "/pulls/{number}/comments/{id}"),
    # CI statuses are posted by writers.
    ("POST", PREFIX + "/statuses/{sha}"),
    # Branch protection is set by the repository's admins (readers may read it).
    ("PUT", PREFIX + "/branches/{branch}/protection"),
    ("DELETE", PREFIX + "/branches/{branch}/protection"),
    # Deploy keys belong to the repository's admins, reading them included.
    ("GET", PREFIX + "/keys"),
    ("POST", PREFIX + "/keys"),
    ("DELETE", PREFIX + "/keys/{id}"),
    # Milestones and labels are managed by triagers; releases and their assets by writers.
    *(
        (method, PREFIX + path)
        for path in ("/milestones", "/labels", "/releases")
        for method in ("POST",)
    ),
    ("PATCH", PREFIX + "/milestones/{number}"),
    ("DELETE", PREFIX + "/milestones/{number}"),
    ("PATCH", PREFIX + "/labels/{label}"),
    ("DELETE", PREFIX + "/labels/{label}"),
    ("PATCH", PREFIX + "/releases/{id}"),
    ("DELETE", PREFIX + "/releases/{id}"),
    ("POST", PREFIX + "/releases/{id}/assets"),
    ("DELETE", PREFIX + "/releases/assets/{assetId}"),
    # A reaction is taken back by the person who reacted only.
    ("DELETE", PREFIX + "/issues/{number}/reactions/{reactionId}"),
    ("DELETE", PREFIX + "/issues/{number}/comments/{id}/reactions/{reactionId}"),
    # Reviews are asked for by the author or triagers.
    ("POST", PREFIX + "/pulls/{number}/requested_reviewers"),
    ("DELETE", PREFIX + "/pulls/{number}/requested_reviewers"),
    # Webhooks belong to the repository's admins, reading them included.
    *(
        (method, PREFIX + "/hooks" + tail)
        for method, tail in (
            ("GET", ""),
            ("POST", ""),
            ("GET", "/{id}"),
            ("PATCH", "/{id}"),
            ("DELETE", "/{id}"),
            ("POST", "/{id}/test"),
            ("GET", "/{id}/deliveries"),
            ("POST", "/{id}/deliveries/{deliveryId}/redeliver"),
        )
    ),
}


def repo_routes(app) -> list[tuple[str, str]]:
    found = []
    for route in app.router.routes():
        info = route.resource.get_info()
        path = info.get("formatter") or info.get("path") or ""
        if path.startswith(PREFIX) and route.method not in ("HEAD", "OPTIONS"):
            found.append((route.method, path))
    return sorted(set(found))


def concrete(path: str, values: dict[str, str]) -> str:
    if "/comments/" in path:  # a comment's reaction, not the issue's
        values = {**values, "reactionId": values["commentReactionId"]}
    return re.sub(r"{(\w+)}", lambda m: values[m.group(1)], path)


@pytest.fixture(params=["user", "org"])
async def world(request, client, alice, bob, tmp_path):
    """<owner>/secret (private) with a commit, a branch, issue #1 and pull request #2.

    The owner is alice, or her organization acme (with a team "readers" that reads it):
    an organization's private repository is as closed to outsiders in every route.
    """
    reader = await sign_up(client, "reader")
    acme = await setup_org(client, alice)
    owner = "alice" if request.param == "user" else "acme"
    await create(client, alice, "secret", visibility="private", autoInit=True, owner=owner)
    base = f"/api/repositories/{owner}/secret"
    if owner == "alice":
        resp = await client.put(
            base + "/collaborators/reader", json={"permission": "read"}, headers=alice.headers
        )
    else:
        resp = await client.put(acme + "/members/reader", json={}, headers=alice.headers)
        assert resp.status == 201
        resp = await client.put(acme + "/teams/readers/members/reader", headers=alice.headers)
        assert resp.status == 201
        resp = await client.put(
            acme + "/teams/readers/repositories/secret", json={}, headers=alice.headers
        )
    assert resp.status == 201, await resp.text()
    work = tmp_path / "w"
    await git("clone", "-q", remote(client, alice, owner, "secret"), str(work))
    await git("checkout", "-qb", "feature", cwd=work)
    (work / "f.txt").write_text("f\n")
    await git("add", "f.txt", cwd=work)
    await git("commit", "-qm", "feature", cwd=work)
    await git("push", "-q", "origin", "feature", cwd=work)
    oid = (await git("rev-parse", "HEAD", cwd=work))[1].strip()
    await client.post(
        base + "/issues",
        json={"title": "private bug", "labels": ["bug"]},
        headers=alice.headers,
    )
    resp = await client.post(
        base + "/pulls",
        json={"title": "private pr", "head": "feature"},
        headers=alice.headers,
    )
    assert resp.status == 201
    for path in ("issues/1", "pulls/2"):  # comments 1 and 2, by the owner
        resp = await client.post(
            f"{base}/{path}/comments",
            json={"body": "c"},
            headers=alice.headers,
        )
        assert resp.status == 201
    resp = await client.put(base + "/branches/main/protection", json={}, headers=alice.headers)
    assert resp.status == 200
    # Milestone 1, the owner's reactions (1 on issue 1, 2 on comment 1), release 1 (tag
    # v1) with asset 1: every route of theirs has something to reach.
    resp = await client.post(base + "/milestones", json={"title": "m"}, headers=alice.headers)
    assert resp.status == 201, await resp.text()
    for path in ("issues/1", "issues/1/comments/1"):
        resp = await client.post(
            f"{base}/{path}/reactions", json={"content": "+1"}, headers=alice.headers
        )
        assert resp.status == 201, await resp.text()
    resp = await client.post(
        base + "/releases", json={"tagName": "v1", "name": "one"}, headers=alice.headers
    )
    assert resp.status == 201, await resp.text()
    resp = await client.post(
        base + "/releases/1/assets?name=a.txt", data=b"asset", headers=alice.headers
    )
    assert resp.status == 201, await resp.text()
    return {
        "reader": reader,
        "stranger": bob,
        "owner": alice,
        "oid": oid,
        "repo_owner": owner,
        "base": base,
    }


async def setup_org(client, owner) -> str:
    """The organization acme, owned by owner, with the team readers (read); its API path."""
    resp = await client.post("/api/orgs", json={"name": "acme"}, headers=owner.headers)
    assert resp.status == 201, await resp.text()
    resp = await client.post(
        "/api/orgs/acme/teams", json={"name": "readers"}, headers=owner.headers
    )
    assert resp.status == 201, await resp.text()
    return "/api/orgs/acme"


def _values(world, name: str, number: str) -> dict[str, str]:
    return {
        "owner": world["repo_owner"],
        "org": "acme",
        "team": "readers",
        "name": name,
        "number": number,
        "oid": world["oid"],
        "username": "bob",
        "id": "2" if number == "2" else "1",
        "kind": "diff",
        "spec": "main...feature",
        "deliveryId": "1",
        "label": "bug",
        "reactionId": "1",
        "commentReactionId": "2",
        "tag": "v1",
        "assetId": "1",
        "branch": "main",
        "ref": "main",
        "sha": world["oid"],
    }


async def _call(client, method, url, user):
    headers = user.headers if user else {}
    resp = await client.request(
        method, url + ("?path=README.md" if url.endswith("/file") else ""), json={}, headers=headers
    )
    return resp.status, await resp.text()


async def test_every_route_is_invisible_to_outsiders(client, world):
    routes = repo_routes(client.app)
    assert len(routes) >= 25  # the matrix covers the routes that exist, whatever they are
    for method, path in routes:
        number = "2" if "/pulls/" in path else "1"
        real = concrete(path, _values(world, "secret", number))
        missing = concrete(path, _values(world, "no-such-repo", number))
        for who in (None, world["stranger"]):
            got = await _call(client, method, real, who)
            baseline = await _call(client, method, missing, who)
            # Exactly what a repository that does not exist answers: nothing leaks.
            assert got == baseline, (method, path, who and who.username, got, baseline)
            assert got[0] in (401, 404), (method, path, got)
            if who is not None:
                assert got[0] == 404, (method, path, got)


async def test_readers_see_everything_and_write_only_where_allowed(client, world):
    reader = world["reader"]
    refused = set()
    for method, path in repo_routes(client.app):
        if (method, path) in {("DELETE", PREFIX + "/star")}:
            continue  # unstarring what one never starred is allowed; nothing to learn
        number = "2" if "/pulls/" in path else "1"
        status, body = await _call(
            client, method, concrete(path, _values(world, "secret", number)), reader
        )
        assert status != 404 or path.endswith("/collaborators/{username}"), (method, path, body)
        if status == 403:
            refused.add((method, path))
        if method == "GET" and (method, path) not in NEEDS_MORE_THAN_READ:
            assert status == 200, (method, path, body)
    assert refused == NEEDS_MORE_THAN_READ


async def test_writers_pass_where_readers_are_refused(client, world):
    owner = world["owner"]
    base = world["base"]
    if world["repo_owner"] == "alice":
        resp = await client.put(
            base + "/collaborators/reader", json={"permission": "write"}, headers=owner.headers
        )
    else:  # the team's grant raised from read to write holds at once
        resp = await client.patch(
            "/api/orgs/acme/teams/readers", json={"permission": "write"}, headers=owner.headers
        )
    assert resp.status == 200, await resp.text()
    reader = world["reader"]
    merge = await client.post(base + "/pulls/2/merge", json={}, headers=reader.headers)
    assert merge.status == 200
    labels = await client.patch(base + "/issues/1", json={"labels": ["x"]}, headers=reader.headers)
    assert labels.status == 200
    # Owner-only stays owner-only for writers.
    for method, path in (
        ("PATCH", ""),
        ("DELETE", ""),
        ("DELETE", "/issues/1"),
        ("PUT", "/collaborators/bob"),
    ):
        resp = await client.request(method, f"{base}{path}", json={}, headers=reader.headers)
        assert resp.status == 403, (method, path)


TRAVERSALS = [
    "../../../etc/passwd",
    "..",
    "a/../../b",
    "/etc/passwd",
    "%2e%2e/%2e%2e/etc/passwd",
    "..%2f..%2fconfig",
    "README.md%00.txt",
    "README.md\x00",
    "..\\..\\config",
    "\\etc\\passwd",
    "./README.md",
    "C:\\Windows",
    "%252e%252e/config",
    "//etc/passwd",
    "config",
    "objects",
    "HEAD",
    "refs/heads/main",
]


async def test_traversal_corpus_never_escapes(client, world):
    owner = world["owner"]
    for bad in TRAVERSALS:
        for endpoint in ("tree", "file"):
            resp = await client.get(
                f"{world['base']}/{endpoint}",
                params={"path": bad},
                headers=owner.headers,
            )
            text = await resp.text()
            assert resp.status in (400, 404), (endpoint, bad, resp.status)
            assert "root:" not in text and "[core]" not in text and "ref: refs" not in text
        resp = await client.get(
            f"{world['base']}/file",
            params={"path": bad, "return": "1"},
            headers=owner.headers,
        )
        assert resp.status in (400, 404)


async def test_malformed_and_oversized_bodies_are_4xx(client, world):
    owner = world["owner"]
    spec = await (await client.get("/api/openapi.json")).json()
    # Every operation documented as taking a JSON body; routes without one ignore bodies.
    writes = [
        (method.upper(), path)
        for path, ops in spec["paths"].items()
        for method, op in ops.items()
        if "application/json" in op.get("requestBody", {}).get("content", {})
        and not path.startswith("/auth/sign-out")
    ]
    assert len(writes) >= 15
    for method, path in writes:
        url = concrete(path, _values(world, "secret", "2" if "/pulls/" in path else "1"))
        statuses = set()
        for body in (b"{", b"[]", b'"x"', b"\xff\xfe", b"null", b"{}}"):
            resp = await client.request(
                method,
                url,
                data=body,
                headers={**owner.headers, "Content-Type": "application/json"},
            )
            assert 400 <= resp.status < 500, (method, path, body, resp.status)
            assert "error" in await resp.json()
            statuses.add(resp.status)
        resp = await client.request(
            method,
            url,
            data=io.BytesIO(b"{" + b" " * (2 << 20) + b"}"),
            headers={**owner.headers, "Content-Type": "application/json"},
        )
        # Where the body is read at all (malformed ones were 400), an oversized one is 413;
        # routes that refuse the caller first (401/403) never read it.
        assert resp.status == (413 if statuses == {400} else min(statuses)), (method, path)


async def test_private_repository_absent_from_search_for_outsiders(client, world):
    for who in (None, world["stranger"]):
        headers = who.headers if who else {}
        for kind, q in (("repositories", "secret"), ("issues", "private"), ("pulls", "private")):
            resp = await client.get("/api/search", params={"q": q, "type": kind}, headers=headers)
            assert (await resp.json())["results"] == [], (kind, who)
    resp = await client.get(
        "/api/search", params={"q": "private", "type": "pulls"}, headers=world["reader"].headers
    )
    assert len((await resp.json())["results"]) == 1


async def test_no_secret_reaches_the_logs(client, world, caplog):
    owner = world["owner"]
    caplog.set_level(logging.DEBUG)
    secrets = [owner.token, owner.password, world["reader"].token]
    await client.get(f"/ws?token={owner.token}")
    await client.get("/api/users/me", headers=owner.headers)
    await client.post("/auth/sign-in", json={"username": "alice", "password": owner.password})
    await client.post(
        "/auth/sign-in", json={"username": "alice", "password": "wrong-" + owner.password}
    )
    await client.get("/api/users/me", headers={"Authorization": "Bearer " + owner.token + "x"})
    where = world["repo_owner"]
    await git("ls-remote", remote(client, owner, where, "secret"), check=False)
    await git("ls-remote", remote(client, owner, where, "secret", owner.token), check=False)
    text = "\n".join(record.getMessage() for record in caplog.records)
    assert text  # something was logged (the access log at least)
    for secret in secrets:
        assert secret not in text
