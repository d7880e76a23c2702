"""Search: ranked, paged, echoed, kept in step, and private hits only for readers."""

from __future__ import annotations

from .conftest import sign_up
from .test_repos import create


async def search(client, q, kind="repositories", headers=None, **extra):
    params = {"q": q, "type": kind, **extra}
    resp = await client.get("/api/search", params=params, headers=headers or {})
    assert resp.status == 200, await resp.text()
    return await resp.json()


async def test_repository_search_ranked_paged_and_echoed(client, alice):
    await create(client, alice, "rocket", description="fast engine")
    await create(client, alice, "garden", description="grows a rocket sometimes")
    await create(client, alice, "other", description="nothing")
    body = await search(client, "rocket")
    assert body["query"] == "rocket"
    assert [r["name"] for r in body["results"]] == ["rocket", "garden"]  # name outranks description
    first = body["results"][0]
    for field in ("type", "id", "title", "description", "url", "createdAt"):
        assert field in first
    assert first["type"] == "repository" and first["title"] == "alice/rocket"
    assert first["owner"]["username"] == "alice" and "starCount" in first
    page = await search(client, "rocket", limit=1)
    assert len(page["results"]) == 1 and page["hasMore"] is True
    page = await search(client, "rocket", limit=1, offset=1)
    assert page["results"][0]["name"] == "garden" and page["hasMore"] is False
    assert (await search(client, "roc"))["results"]  # prefix match


async def test_index_follows_create_rename_edit_and_delete(client, alice):
    await create(client, alice, "alpha")
    assert len((await search(client, "alpha"))["results"]) == 1
    await client.patch("/api/repositories/alice/alpha", json={"name": "beta", "description": "zeta"},
                       headers=alice.headers)
    assert (await search(client, "alpha"))["results"] == []
    assert len((await search(client, "beta"))["results"]) == 1
    assert len((await search(client, "zeta"))["results"]) == 1
    await client.delete("/api/repositories/alice/beta", headers=alice.headers)
    assert (await search(client, "beta"))["results"] == []


async def test_issue_pull_and_user_search(client, alice):
    await create(client, alice, "proj")
    await client.post("/api/repositories/alice/proj/issues",
                      json={"title": "Crash on startup", "body": "segfault"}, headers=alice.headers)
    body = await search(client, "crash", "issues")
    hit = body["results"][0]
    assert hit["type"] == "issue" and hit["title"] == "Crash on startup"
    assert hit["repository"] == {"owner": "alice", "name": "proj"}
    assert hit["description"] == "segfault" and hit["number"] == 1
    assert (await search(client, "segfault", "pulls"))["results"] == []
    await client.patch("/api/repositories/alice/proj/issues/1", json={"title": "Hang"},
                       headers=alice.headers)
    assert (await search(client, "crash", "issues"))["results"] == []
    assert len((await search(client, "hang", "issues"))["results"]) == 1
    users = await search(client, "alice", "users")
    assert users["results"][0]["username"] == "alice" and users["results"][0]["type"] == "user"


async def test_private_hits_only_for_readers(client, alice, bob):
    carol = await sign_up(client, "carol")
    await create(client, alice, "secretive", visibility="private")
    await client.post("/api/repositories/alice/secretive/issues",
                      json={"title": "secretive issue"}, headers=alice.headers)
    await client.put("/api/repositories/alice/secretive/collaborators/carol",
                     json={"permission": "read"}, headers=alice.headers)
    for who in (None, bob):
        headers = who.headers if who else None
        assert (await search(client, "secretive", headers=headers))["results"] == []
        assert (await search(client, "secretive", "issues", headers=headers))["results"] == []
    for who in (alice, carol):
        assert len((await search(client, "secretive", headers=who.headers))["results"]) == 1
        assert len((await search(client, "secretive", "issues", headers=who.headers))["results"]) == 1


async def test_bad_queries(client):
    assert (await client.get("/api/search")).status == 400
    assert (await client.get("/api/search?q=")).status == 400
    assert (await client.get("/api/search?q=%20%20")).status == 400
    assert (await client.get("/api/search?q=x&type=code")).status == 400
    assert (await client.get("/api/search?q=x&limit=500")).status == 400
    # FTS syntax in the input is plain text, never an error.
    for q in ('"', "a OR", "NEAR(", "*", "col:x", "-x", "a AND NOT b"):
        resp = await client.get("/api/search", params={"q": q})
        assert resp.status == 200, q


async def test_repeated_searches_see_every_write(client, alice):
    await create(client, alice, "proj")
    url = "/api/repositories/alice/proj/issues"
    await client.post(url, json={"title": "cache one"}, headers=alice.headers)
    first = await search(client, "cache", "issues")
    again = await search(client, "cache", "issues")
    assert first == again and len(first["results"]) == 1
    await client.post(url, json={"title": "cache two"}, headers=alice.headers)
    assert len((await search(client, "cache", "issues"))["results"]) == 2
    await client.patch(url + "/1", json={"title": "renamed"}, headers=alice.headers)
    assert len((await search(client, "cache", "issues"))["results"]) == 1
    # Visibility changes are writes too: a repository turned private drops out at once.
    await client.patch("/api/repositories/alice/proj", json={"visibility": "private"},
                       headers=alice.headers)
    assert (await search(client, "cache", "issues"))["results"] == []
