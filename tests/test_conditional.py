"""ETag and If-None-Match on the repository and its issue and pull request lists (issue 34)."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from .server import start_several, stop_all
from .test_cluster import PASSWORD
from .test_repos import create


async def _get(client, path, headers=None, tag=None):
    sent = dict(headers or {})
    if tag is not None:
        sent["If-None-Match"] = tag
    resp = await client.get(path, headers=sent)
    return resp.status, resp.headers.get("ETag"), await resp.read()


async def test_each_read_answers_304_to_its_own_etag(client, alice):
    await create(client, alice, "tool")
    base = "/api/repositories/alice/tool"
    for path in (base, f"{base}/issues", f"{base}/pulls", f"{base}/issues?state=all&sort=updated"):
        status, tag, body = await _get(client, path, alice.headers)
        assert status == 200 and tag and tag.startswith('"') and body, path
        # As GitHub's clients send it: the tag, weak or strong, alone or in a list.
        for sent in (tag, f"W/{tag}", f'"other", {tag}'):
            again = await client.get(path, headers={**alice.headers, "If-None-Match": sent})
            assert again.status == 304, (path, sent)
            assert await again.read() == b"" and again.headers["ETag"] == tag
        status, same, body = await _get(client, path, alice.headers, '"other"')
        assert status == 200 and same == tag and body


async def test_the_etag_changes_with_anything_on_the_page(client, alice, bob):
    await create(client, alice, "tool")
    base = "/api/repositories/alice/tool"
    _, repo_tag, _ = await _get(client, base, alice.headers)
    _, bob_tag, _ = await _get(client, base, bob.headers)
    assert bob_tag != repo_tag  # the answer says isOwner, starred and permission per viewer
    resp = await client.patch(base, json={"description": "new"}, headers=alice.headers)
    assert resp.status == 200
    status, tag, body = await _get(client, base, alice.headers, repo_tag)
    assert status == 200 and tag != repo_tag and b'"new"' in body

    issues = f"{base}/issues"
    _, empty, _ = await _get(client, issues, alice.headers)
    resp = await client.post(issues, json={"title": "one"}, headers=alice.headers)
    assert resp.status == 201
    status, opened, body = await _get(client, issues, alice.headers, empty)
    assert status == 200 and opened != empty and b'"one"' in body
    # A label, an assignee, a comment (the count): each shows in the page, so in its tag.
    changes = [
        ("PATCH", f"{issues}/1", {"labels": ["bug"]}),
        ("PATCH", f"{issues}/1", {"assignees": ["alice"]}),
        ("POST", f"{issues}/1/comments", {"body": "hi"}),
    ]
    before = opened
    for method, path, body in changes:
        resp = await client.request(method, path, json=body, headers=alice.headers)
        assert resp.status in (200, 201), await resp.text()
        status, after, _ = await _get(client, issues, alice.headers, before)
        assert status == 200 and after != before, (method, path, body)
        before = after


async def test_a_private_repository_stays_404_whatever_if_none_match_says(client, alice, bob):
    await create(client, alice, "vault", visibility="private")
    base = "/api/repositories/alice/vault"
    for path in (base, f"{base}/issues", f"{base}/pulls"):
        status, tag, _ = await _get(client, path, alice.headers)
        assert status == 200 and tag
        for headers in (bob.headers, {}):
            for sent in (tag, "*"):
                status, leaked, body = await _get(client, path, headers, sent)
                assert status == 404 and leaked is None, (path, headers, sent)
                assert b"not found" in body


@pytest.fixture
async def two(tmp_path, redis_url, postgres_url):
    """Two servers on PostgreSQL and Redis."""
    servers = await asyncio.to_thread(
        start_several, tmp_path / "data", 2, redis_url, {"database": {"url": postgres_url}}
    )
    async with aiohttp.ClientSession() as session:
        yield servers, session
    await asyncio.to_thread(stop_all, servers)


async def test_a_change_on_another_process_changes_the_etag(two):
    (a, b), session = two
    resp = await session.post(
        a.url + "/auth/sign-up",
        json={"email": "o@example.com", "username": "owner", "password": PASSWORD, "name": "o"},
    )
    assert resp.status == 201
    auth = {"Authorization": f"Bearer {(await resp.json())['token']}"}
    resp = await session.post(a.url + "/api/repositories", json={"name": "tool"}, headers=auth)
    assert resp.status == 201
    base = "/api/repositories/owner/tool"

    async def read(server, path, tag=None):
        headers = dict(auth, **({"If-None-Match": tag} if tag else {}))
        async with session.get(server.url + path, headers=headers) as got:
            return got.status, got.headers.get("ETag"), await got.read()

    for path, change in (
        (f"{base}/issues", ("POST", f"{base}/issues", {"title": "from a"})),
        (base, ("PATCH", base, {"description": "from a"})),
    ):
        status, tag, _ = await read(b, path)
        assert status == 200 and (await read(b, path, tag))[0] == 304  # B holds it in memory
        async with session.request(
            change[0], a.url + change[1], json=change[2], headers=auth
        ) as resp:
            assert resp.status in (200, 201)
        # B hears of the write through Redis; until then it may still say 304.
        for _ in range(300):
            status, fresh, body = await read(b, path, tag)
            if status == 200:
                break
            await asyncio.sleep(0.01)
        assert status == 200 and fresh != tag and b"from a" in body, path
        assert (await read(b, path, fresh))[0] == 304
