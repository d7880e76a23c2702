"""Caches on hot paths hold only what is still true: audiences, repositories, identicons."""

from __future__ import annotations

import threading

from hubsvc.git import files as repofiles
from hubsvc.git.files import REPO_FILES
from hubsvc.keys import STORE

from .conftest import sign_up
from .test_repos import create


async def test_audience_follows_collaborators_stars_and_visibility(client, app):
    store = app[STORE]
    alice, bob = await sign_up(client, "alice"), await sign_up(client, "bob")
    carol = await sign_up(client, "carol")
    a, b, c = int(alice.id), int(bob.id), int(carol.id)
    repo = await create(client, alice, "vault", visibility="private")
    rid, base = int(repo["id"]), "/api/repositories/alice/vault"
    assert (await store.repos.audience(rid))[:2] == ({a}, {a})
    assert (await store.repos.audience(rid))[:2] == ({a}, {a})  # served from memory now
    resp = await client.put(
        f"{base}/collaborators/bob", json={"permission": "read"}, headers=alice.headers
    )
    assert resp.status in (200, 201, 204), await resp.text()
    assert (await store.repos.audience(rid))[:2] == ({a, b}, {a, b})
    resp = await client.post(f"{base}/star", headers=bob.headers)
    assert resp.status == 200, await resp.text()
    resp = await client.delete(f"{base}/collaborators/bob", headers=alice.headers)
    assert resp.status == 204
    # bob still stars it, but may no longer read it.
    assert (await store.repos.audience(rid))[:2] == ({a}, {a, b})
    resp = await client.patch(base, json={"visibility": "public"}, headers=alice.headers)
    assert resp.status == 200
    assert (await store.repos.audience(rid))[:2] == (None, {a, b})
    await client.post(f"{base}/star", headers=carol.headers)
    assert (await store.repos.audience(rid))[:2] == (None, {a, b, c})
    resp = await client.delete(base, headers=alice.headers)
    assert resp.status == 204
    assert await store.repos.audience(rid) is None


async def test_repository_answers_follow_changes_at_once(client, alice, bob):
    await create(client, alice, "tool", visibility="private")
    base = "/api/repositories/alice/tool"
    assert (await client.get(base, headers=bob.headers)).status == 404
    await client.put(
        f"{base}/collaborators/bob", json={"permission": "read"}, headers=alice.headers
    )
    assert (await client.get(base, headers=bob.headers)).status == 200
    await client.delete(f"{base}/collaborators/bob", headers=alice.headers)
    assert (await client.get(base, headers=bob.headers)).status == 404
    await client.patch(base, json={"description": "new"}, headers=alice.headers)
    body = await (await client.get(base, headers=alice.headers)).json()
    assert body["repo"]["description"] == "new"


async def test_repositories_open_and_close_off_the_event_loop(client, app, alice, monkeypatch):
    threads: list[str] = []

    class Spy(repofiles.GitRepo):
        # Records the thread each open and close happens on, then does the real thing.
        def __init__(self, *args, **kwargs):
            threads.append(threading.current_thread().name)
            super().__init__(*args, **kwargs)

        def close(self):
            threads.append(threading.current_thread().name)
            super().close()

    monkeypatch.setattr(repofiles, "GitRepo", Spy)
    files = app[REPO_FILES]
    files.cache_size = 1
    for name in ("one", "two", "three"):
        await create(client, alice, name, autoInit=True)
        resp = await client.get(f"/api/repositories/alice/{name}/branches")
        assert resp.status == 200, await resp.text()
    await client.delete("/api/repositories/alice/three", headers=alice.headers)
    assert len(threads) >= 5  # three opens, evictions and the delete's close
    assert threading.main_thread().name not in threads, threads


async def test_generated_avatar_is_drawn_once(client, alice):
    first = await client.get("/api/users/alice/avatar")
    assert first.status == 200 and first.content_type == "image/png"
    again = await client.get("/api/users/alice/avatar")
    assert await again.read() == await first.read()
