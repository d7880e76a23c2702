"""Credentials a user controls: password change, personal access tokens, and revocation
that reaches open WebSockets; repository access re-checked for open sockets."""

from __future__ import annotations

from aiohttp import WSMsgType

from hubsvc.keys import STORE

from .conftest import sign_up
from .gitcli import git, remote
from .test_repos import create
from .test_ws import connect, next_of, nothing_for

TOKENS = "/api/users/me/tokens"


async def new_pat(client, user, name="ci", **extra) -> dict:
    resp = await client.post(TOKENS, json={"name": name, **extra}, headers=user.headers)
    assert resp.status == 201, await resp.text()
    return await resp.json()


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def closed_with(ws, timeout: float = 5) -> tuple[int, str]:
    """Read until the close frame: no notification may come first; its code and reason."""
    while True:
        message = await ws.receive(timeout=timeout)
        if message.type == WSMsgType.TEXT:
            assert message.json()["type"] != "notification", message.data
            continue
        assert message.type == WSMsgType.CLOSE, message
        return message.data, message.extra


async def still_open(ws) -> None:
    await ws.send_json({"type": "ping"})
    assert (await next_of(ws, "pong"))["type"] == "pong"


async def test_personal_token_lifecycle(client, alice, bob):
    created = await new_pat(client, alice, "deploy", expiresAt="2999-01-01T00:00:00Z")
    secret, token = created["secret"], created["token"]
    assert secret.startswith("hubsvc_pat_") and len(secret) >= 11 + 43
    assert set(token) == {
        "id",
        "name",
        "createdAt",
        "expiresAt",
        "lastUsedAt",
        "scopes",
        "repositories",
    }
    assert token["expiresAt"] == "2999-01-01T00:00:00Z" and token["lastUsedAt"] is None
    assert token["scopes"] is None and token["repositories"] is None  # every scope
    never = (await new_pat(client, alice, "forever"))["token"]
    assert never["expiresAt"] is None
    # A bearer like any other; lastUsedAt is recorded, the secret never shown again.
    me = await client.get("/api/users/me", headers=bearer(secret))
    assert me.status == 200 and (await me.json())["user"]["username"] == "alice"
    listed = await (await client.get(TOKENS, headers=alice.headers)).json()
    assert [t["name"] for t in listed["tokens"]] == ["forever", "deploy"]
    assert listed["tokens"][1]["lastUsedAt"] is not None
    assert secret not in str(listed)
    # Someone else's token id is 404 and stays alive; the list is per user.
    assert (await client.delete(f"{TOKENS}/{token['id']}", headers=bob.headers)).status == 404
    assert (await (await client.get(TOKENS, headers=bob.headers)).json())["tokens"] == []
    assert (await client.get("/api/users/me", headers=bearer(secret))).status == 200
    # Bad input, a name in use, and a token minting tokens.
    for body, status in (
        ({"name": ""}, 400),
        ({"name": "x" * 101}, 400),
        ({"name": "a\nb"}, 400),
        ({"name": "ok", "expiresAt": "soon"}, 400),
        ({"name": "ok", "expiresAt": "2001-01-01T00:00:00Z"}, 400),
        ({"name": "deploy"}, 409),
    ):
        resp = await client.post(TOKENS, json=body, headers=alice.headers)
        assert resp.status == status, (body, await resp.text())
        assert "error" in await resp.json()
    resp = await client.post(TOKENS, json={"name": "child"}, headers=bearer(secret))
    assert resp.status == 403
    assert (await client.delete(f"{TOKENS}/999999", headers=alice.headers)).status == 404
    assert (await client.delete(f"{TOKENS}/nope", headers=alice.headers)).status == 404
    assert (await client.delete(f"{TOKENS}/{token['id']}", headers=alice.headers)).status == 204
    assert (await client.get("/api/users/me", headers=bearer(secret))).status == 401


async def test_at_most_a_hundred_tokens(client, alice):
    for n in range(100):
        await new_pat(client, alice, f"t{n}")
    resp = await client.post(TOKENS, json={"name": "one more"}, headers=alice.headers)
    assert resp.status == 409 and "100" in (await resp.json())["error"]


async def test_personal_token_is_gits_password(client, alice, bob, tmp_path):
    await create(client, alice, "secret", visibility="private", autoInit=True)
    secret = (await new_pat(client, alice, "git"))["secret"]
    clone = tmp_path / "clone"
    await git("clone", "-q", remote(client, alice, "alice", "secret", secret), str(clone))
    assert (clone / "README.md").exists()
    (clone / "more.txt").write_text("pushed with a token\n")
    await git("add", "more.txt", cwd=clone)
    await git("commit", "-qm", "more", cwd=clone)
    await git("push", "-q", "origin", "main", cwd=clone)
    # Only with its own username; and the password keeps working beside it.
    code, _, _ = await git(
        "clone",
        "-q",
        remote(client, bob, "alice", "secret", secret),
        str(tmp_path / "nope"),
        check=False,
    )
    assert code != 0
    await git("fetch", "-q", remote(client, alice, "alice", "secret"), cwd=clone)


async def test_password_change_ends_every_other_credential(client, alice):
    other = await client.post(
        "/auth/sign-in", json={"username": "alice", "password": alice.password}
    )
    other_token = (await other.json())["token"]
    client.session.cookie_jar.clear()
    pat = (await new_pat(client, alice))["secret"]
    url = "/api/users/me/password"
    resp = await client.post(
        url, json={"currentPassword": "wrong one!", "newPassword": "n" * 10}, headers=alice.headers
    )
    assert resp.status == 403 and "currentPassword" in (await resp.json())["error"]
    resp = await client.post(
        url, json={"currentPassword": alice.password, "newPassword": "short"}, headers=alice.headers
    )
    assert resp.status == 400 and "newPassword" in (await resp.json())["error"]
    assert (await client.get("/api/users/me", headers=bearer(other_token))).status == 200
    ws_other = await client.ws_connect(f"/ws?token={other_token}")
    ws_pat = await client.ws_connect(f"/ws?token={pat}")
    ws_self = await connect(client, alice)
    resp = await client.post(
        url,
        json={"currentPassword": alice.password, "newPassword": "a new password"},
        headers=alice.headers,
    )
    assert resp.status == 204
    assert await closed_with(ws_other) == (4001, "token revoked")
    assert await closed_with(ws_pat) == (4001, "token revoked")
    await still_open(ws_self)
    assert (await client.get("/api/users/me", headers=alice.headers)).status == 200
    for token in (other_token, pat):
        assert (await client.get("/api/users/me", headers=bearer(token))).status == 401
    old = await client.post("/auth/sign-in", json={"username": "alice", "password": alice.password})
    new = await client.post(
        "/auth/sign-in", json={"username": "alice", "password": "a new password"}
    )
    assert (old.status, new.status) == (401, 200)
    await ws_self.close()


async def test_revocation_closes_the_sockets_of_that_token_at_once(client, alice, bob):
    await create(client, alice, "hidden", visibility="private")
    await client.put(
        "/api/repositories/alice/hidden/collaborators/bob",
        json={"permission": "read"},
        headers=alice.headers,
    )
    pat = (await new_pat(client, bob, "watch"))["secret"]
    ws_pat = await client.ws_connect(f"/ws?token={pat}")
    ws_session = await connect(client, bob)
    await client.post(
        "/api/repositories/alice/hidden/issues", json={"title": "seen"}, headers=alice.headers
    )
    assert (await next_of(ws_pat, "notification"))["notification"]["type"] == "issue"
    assert (await next_of(ws_session, "notification"))["notification"]["type"] == "issue"
    # Deleting the token closes its socket, and only its socket.
    token_id = (await (await client.get(TOKENS, headers=bob.headers)).json())["tokens"][0]["id"]
    assert (await client.delete(f"{TOKENS}/{token_id}", headers=bob.headers)).status == 204
    assert await closed_with(ws_pat) == (4001, "token revoked")
    await still_open(ws_session)
    # Signing out closes the sockets of the token it revokes, before any later event.
    assert (await client.post("/auth/sign-out", headers=bob.headers)).status == 204
    await client.post(
        "/api/repositories/alice/hidden/issues", json={"title": "private"}, headers=alice.headers
    )
    assert await closed_with(ws_session) == (4001, "token revoked")


async def test_a_revocation_made_elsewhere_reaches_the_socket(client, alice):
    ws = await connect(client, alice)
    # What run.py reset-password does from another process: the database changes and
    # nothing tells this server; its sweep of open sockets finds the token gone.
    await client.app[STORE].users.set_password(int(alice.id), "x")
    code, reason = await closed_with(ws, timeout=15)
    assert (code, reason) == (4001, "token revoked")


async def test_losing_read_access_unsubscribes_at_once(client, alice, bob):
    carol = await sign_up(client, "carol")
    await create(client, alice, "hidden", visibility="private")
    await create(client, alice, "open")
    await client.put(
        "/api/repositories/alice/hidden/collaborators/bob",
        json={"permission": "write"},
        headers=alice.headers,
    )
    ws_bob, ws_carol = await connect(client, bob), await connect(client, carol)
    hidden, public = {"owner": "alice", "name": "hidden"}, {"owner": "alice", "name": "open"}
    await ws_bob.send_json({"type": "subscribe", "repository": hidden})
    await next_of(ws_bob, "subscribed")
    await ws_carol.send_json({"type": "subscribe", "repository": public})
    await next_of(ws_carol, "subscribed")
    resp = await client.delete(
        "/api/repositories/alice/hidden/collaborators/bob", headers=alice.headers
    )
    assert resp.status == 204
    assert await next_of(ws_bob, "unsubscribed") == {
        "type": "unsubscribed",
        "repository": hidden,
        "reason": "access revoked",
    }
    resp = await client.patch(
        "/api/repositories/alice/open", json={"visibility": "private"}, headers=alice.headers
    )
    assert resp.status == 200
    assert await next_of(ws_carol, "unsubscribed") == {
        "type": "unsubscribed",
        "repository": public,
        "reason": "access revoked",
    }
    for name in ("hidden", "open"):
        await client.post(
            f"/api/repositories/alice/{name}/issues", json={"title": "after"}, headers=alice.headers
        )
    await nothing_for(ws_bob)
    await nothing_for(ws_carol)
    await ws_bob.close()
    await ws_carol.close()


async def test_an_expired_personal_token_is_refused(client, alice):
    created = await new_pat(client, alice, "short", expiresAt="2999-01-01T00:00:00Z")
    # Its expiry passes (set in the database: the test cannot wait for a real one).
    await client.app[STORE].db.write(
        lambda c: c.execute(
            "UPDATE personal_tokens SET expires_at = 1 WHERE id = ?", (int(created["token"]["id"]),)
        )
    )
    assert (await client.get("/api/users/me", headers=bearer(created["secret"]))).status == 401
