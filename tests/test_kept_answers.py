"""What a hot read keeps between requests (issue 34, round 4), and that a write drops it.

A token's Identity and the actions already allowed to it ride its token cache entry; the
repository's ETag is kept by path, viewer and credential until the next write; the
signed-in user's body by the user object it was made of.
"""

from __future__ import annotations

from hubsvc.api import repos as repos_api
from hubsvc.api import users as users_api
from hubsvc.web import auth
from hubsvc.web.auth import TOKEN_CACHE, token_digest

from .conftest import sign_up
from .test_repos import create


def _count(monkeypatch, module, name):
    """Count the calls of module.name (still calling it)."""
    calls = []
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


async def test_a_kept_repository_answer_skips_the_reads(client, alice, monkeypatch):
    await create(client, alice, "tool")
    base = "/api/repositories/alice/tool"
    loads = _count(monkeypatch, repos_api, "load_repo")
    first = await client.get(base, headers=alice.headers)
    answers = [first] + [await client.get(base, headers=alice.headers) for _ in range(3)]
    bodies = {await resp.read() for resp in answers}
    assert [resp.status for resp in answers] == [200] * 4 and len(bodies) == 1
    assert {resp.headers["ETag"] for resp in answers} == {first.headers["ETag"]}
    assert len(loads) == 1  # the other three were the kept tag and body
    again = await client.get(
        base, headers={**alice.headers, "If-None-Match": first.headers["ETag"]}
    )
    assert again.status == 304 and len(loads) == 1
    # A write drops it: the next answer is read and made again, and says the change.
    resp = await client.patch(base, json={"description": "new"}, headers=alice.headers)
    assert resp.status == 200
    body = await (await client.get(base, headers=alice.headers)).json()
    gets = [args for args in loads if args[0].method == "GET"]
    assert body["repo"]["description"] == "new" and len(gets) == 2


async def test_kept_repository_answers_go_with_membership_visibility_and_tokens(client, alice, bob):
    carol = await sign_up(client, "carol")
    await create(client, alice, "vault", visibility="private")
    base = "/api/repositories/alice/vault"
    await client.put(
        f"{base}/collaborators/bob", json={"permission": "read"}, headers=alice.headers
    )
    for _ in range(3):  # the second and third from what was kept
        assert (await client.get(base, headers=bob.headers)).status == 200
    await client.delete(f"{base}/collaborators/bob", headers=alice.headers)
    assert (await client.get(base, headers=bob.headers)).status == 404

    resp = await client.patch(base, json={"visibility": "public"}, headers=alice.headers)
    assert resp.status == 200
    for _ in range(3):
        assert (await client.get(base)).status == 200
        assert (await client.get(base, headers=carol.headers)).status == 200
    resp = await client.patch(base, json={"visibility": "private"}, headers=alice.headers)
    assert resp.status == 200
    assert (await client.get(base)).status == 404
    assert (await client.get(base, headers=carol.headers)).status == 404

    for _ in range(3):
        assert (await client.get(base, headers=alice.headers)).status == 200
    assert (await client.post("/auth/sign-out", headers=alice.headers)).status == 204
    assert (await client.get(base, headers=alice.headers)).status == 401


async def test_a_token_s_identity_is_built_once_and_dropped_with_it(client, alice, monkeypatch):
    made = []
    real = auth.Identity

    def counted(*args, **kwargs):
        made.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(auth, "Identity", counted)
    for _ in range(4):
        assert (await client.get("/api/users/me", headers=alice.headers)).status == 200
    assert len(made) == 1
    kept = client.app[TOKEN_CACHE].kept(token_digest(alice.token))
    assert kept is not None and kept.identities["bearer"].user["username"] == "alice"
    assert "user.read" in kept.allowed["bearer"]
    assert (await client.post("/auth/sign-out", headers=alice.headers)).status == 204
    assert client.app[TOKEN_CACHE].kept(token_digest(alice.token)) is None
    assert (await client.get("/api/users/me", headers=alice.headers)).status == 401


async def test_a_scope_a_token_lacks_is_refused_every_time(client, alice):
    resp = await client.post(
        "/api/users/me/tokens",
        json={"name": "narrow", "scopes": ["repo:read"]},
        headers=alice.headers,
    )
    assert resp.status == 201, await resp.text()
    narrow = {"Authorization": f"Bearer {(await resp.json())['secret']}"}
    await create(client, alice, "tool")
    for _ in range(3):
        assert (await client.get("/api/repositories/alice/tool", headers=narrow)).status == 200
        resp = await client.patch(
            "/api/repositories/alice/tool", json={"description": "x"}, headers=narrow
        )
        assert resp.status == 403


async def test_me_is_made_once_and_follows_account_changes(client, alice, monkeypatch):
    made = _count(monkeypatch, users_api, "_user_json")
    bodies = [await (await client.get("/api/users/me", headers=alice.headers)).read()]
    bodies += [await (await client.get("/api/users/me", headers=alice.headers)).read()]
    assert bodies[0] == bodies[1] and len(made) == 1
    resp = await client.patch(
        "/api/users/me/settings", json={"name": "Alice Renamed"}, headers=alice.headers
    )
    assert resp.status == 200, await resp.text()
    body = await (await client.get("/api/users/me", headers=alice.headers)).json()
    assert body["user"]["name"] == "Alice Renamed" and len(made) == 2
    # Another user's answer is their own, whatever was kept.
    bob = await sign_up(client, "bob")
    body = await (await client.get("/api/users/me", headers=bob.headers)).json()
    assert body["user"]["username"] == "bob"
