"""Administration over the API: open_signup, creating, disabling and deleting accounts,
the last administrator, security.admins, and the ghost that keeps a deleted user's work."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3

from hubsvc.app import create_app
from hubsvc.git.files import REPO_FILES
from hubsvc.keys import STORE
from hubsvc.store import Store
from hubsvc.store.engines.sqlite import SQL_DIR, apply_migrations
from hubsvc.web.auth import hash_password

from .conftest import make_config, sign_up
from .gitcli import git, remote
from .test_accounts import closed_with, new_pat
from .test_repos import create
from .test_ws import connect

USERS = "/api/admin/users"
PASSWORD = "correct horse"


async def whoami(client, headers) -> tuple[int, dict]:
    resp = await client.get("/api/users/me", headers=headers)
    return resp.status, await resp.json()


async def sign_in(client, username: str, password: str = PASSWORD):
    resp = await client.post("/auth/sign-in", json={"username": username, "password": password})
    client.session.cookie_jar.clear()
    return resp


async def test_closed_sign_up_leaves_account_creation_to_administrators(aiohttp_client, tmp_path):
    client = await aiohttp_client(create_app(make_config(tmp_path, auth__open_signup=False)))
    body = {"email": "eve@example.com", "username": "eve", "password": PASSWORD, "name": "Eve"}
    resp = await client.post("/auth/sign-up", json=body)
    assert resp.status == 403 and "administrator" in (await resp.json())["error"]
    # The first account comes from run.py create-user, which calls this same store code.
    await client.app[STORE].users.create(
        username="root",
        email="root@example.com",
        name="Root",
        password_hash=await hash_password(PASSWORD, 4),
    )
    root_token = (await (await sign_in(client, "root")).json())["token"]
    root = {"Authorization": f"Bearer {root_token}"}
    resp = await client.post(USERS, json=body, headers=root)
    assert resp.status == 201, await resp.text()
    eve = (await resp.json())["user"]
    assert eve["username"] == "eve" and eve["isAdmin"] is False and eve["disabled"] is False
    assert (await client.post(USERS, json=body, headers=root)).status == 409
    resp = await client.post(USERS, json={**body, "username": "bad-"}, headers=root)
    assert resp.status == 400
    # Eve signs in with the password the administrator set, and is no administrator.
    resp = await sign_in(client, "eve")
    assert resp.status == 200
    eve_headers = {"Authorization": f"Bearer {(await resp.json())['token']}"}
    for method, path in (
        ("GET", USERS),
        ("POST", USERS),
        ("PATCH", f"{USERS}/root"),
        ("DELETE", f"{USERS}/root"),
    ):
        resp = await client.request(method, path, json=body, headers=eve_headers)
        assert resp.status == 403, (method, path)
    assert (await client.get(USERS)).status == 401
    listed = await (await client.get(USERS, headers=root)).json()
    assert [u["username"] for u in listed["users"]] == ["root", "eve"]  # never the ghost
    assert listed["hasMore"] is False


async def test_disabling_stops_every_credential_at_once(client, alice, bob, tmp_path):
    await create(client, bob, "code", autoInit=True, visibility="private")
    pat = (await new_pat(client, bob))["secret"]
    ws = await connect(client, bob)
    resp = await client.patch(f"{USERS}/bob", json={"disabled": True}, headers=alice.headers)
    assert resp.status == 200 and (await resp.json())["user"]["disabled"] is True
    assert await closed_with(ws) == (4001, "token revoked")
    for secret in (bob.token, pat):
        assert (await whoami(client, {"Authorization": f"Bearer {secret}"}))[0] == 401
    resp = await sign_in(client, "bob")
    assert resp.status == 403 and "disabled" in (await resp.json())["error"]
    for secret in (bob.password, pat):
        code, _, err = await git(
            "ls-remote", remote(client, bob, "bob", "code", secret), check=False
        )
        assert code != 0, err
    # Enabled again: the unexpired tokens work again.
    resp = await client.patch(f"{USERS}/bob", json={"disabled": False}, headers=alice.headers)
    assert resp.status == 200
    assert (await whoami(client, bob.headers))[0] == 200
    await git("ls-remote", remote(client, bob, "bob", "code", pat))


async def test_the_last_administrator_stays(client, alice, bob):
    for body in ({"isAdmin": False}, {"disabled": True}):
        resp = await client.patch(f"{USERS}/alice", json=body, headers=alice.headers)
        assert resp.status == 409, body
    assert (await client.delete(f"{USERS}/alice", headers=alice.headers)).status == 409
    resp = await client.patch(f"{USERS}/bob", json={"isAdmin": True}, headers=alice.headers)
    assert (await resp.json())["user"]["isAdmin"] is True
    assert (await whoami(client, bob.headers))[1]["user"]["isAdmin"] is True
    # Two administrators: one may step down; then the other is the last again.
    resp = await client.patch(f"{USERS}/alice", json={"isAdmin": False}, headers=alice.headers)
    assert resp.status == 200 and (await resp.json())["user"]["isAdmin"] is False
    assert (await whoami(client, alice.headers))[1]["user"]["isAdmin"] is False
    assert (await client.delete(f"{USERS}/bob", headers=bob.headers)).status == 409
    assert (await client.patch(f"{USERS}/nobody", json={}, headers=bob.headers)).status == 404
    assert (await client.delete(f"{USERS}/ghost", headers=bob.headers)).status == 409


async def test_deleting_a_user_keeps_their_issues_under_the_ghost(client, alice, bob, tmp_path):
    await create(client, alice, "proj")
    theirs = await create(client, bob, "theirs", autoInit=True)
    await client.post(
        "/api/repositories/bob/theirs/fork", json={"name": "mine"}, headers=alice.headers
    )
    resp = await client.post(
        "/api/repositories/alice/proj/issues", json={"title": "by bob"}, headers=bob.headers
    )
    number = (await resp.json())["issue"]["number"]
    await client.post(
        f"/api/repositories/alice/proj/issues/{number}/comments",
        json={"body": "bob says"},
        headers=bob.headers,
    )
    await client.post("/api/repositories/alice/proj/star", headers=bob.headers)
    await client.put(
        "/api/repositories/alice/proj/collaborators/bob",
        json={"permission": "write"},
        headers=alice.headers,
    )
    folder = client.app[REPO_FILES].path(int(theirs["id"]))
    assert folder.exists()
    ws = await connect(client, bob)
    assert (await client.delete(f"{USERS}/bob", headers=alice.headers)).status == 204
    assert await closed_with(ws) == (4001, "token revoked")
    assert (await whoami(client, bob.headers))[0] == 401
    issue = await (await client.get(f"/api/repositories/alice/proj/issues/{number}")).json()
    assert issue["issue"]["author"]["username"] == "ghost"
    assert [c["author"]["username"] for c in issue["comments"]] == ["ghost"]
    ghost = await client.get("/api/users/ghost")
    assert ghost.status == 200 and (await ghost.json())["user"]["name"] == "Deleted user"
    assert (await client.get("/api/repositories/bob/theirs")).status == 404
    assert not folder.exists()
    fork = (await (await client.get("/api/repositories/alice/mine")).json())["repo"]
    assert fork["parent"] is None
    proj = (await (await client.get("/api/repositories/alice/proj")).json())["repo"]
    assert proj["starCount"] == 0
    collaborators = await (
        await client.get("/api/repositories/alice/proj/collaborators", headers=alice.headers)
    ).json()
    assert collaborators["users"] == []
    # The ghost cannot sign in, be assigned, or collaborate; the name bob is free again.
    assert (await sign_in(client, "ghost", "not-a-password")).status == 401
    resp = await client.put(
        "/api/repositories/alice/proj/collaborators/ghost",
        json={"permission": "read"},
        headers=alice.headers,
    )
    assert resp.status == 404
    new_bob = await sign_up(client, "bob")
    assert new_bob.id != bob.id
    assert (await whoami(client, new_bob.headers))[1]["user"]["isAdmin"] is False


async def test_security_admins_names_only_accounts_existing_at_start(aiohttp_client, tmp_path):
    first = await aiohttp_client(create_app(make_config(tmp_path)))
    await sign_up(first, "root")
    await sign_up(first, "carol")
    await first.close()
    client = await aiohttp_client(
        create_app(make_config(tmp_path, security__admins=["carol", "dave"]))
    )
    carol = await sign_in(client, "carol")
    carol_headers = {"Authorization": f"Bearer {(await carol.json())['token']}"}
    assert (await whoami(client, carol_headers))[1]["user"]["isAdmin"] is True
    # dave did not exist when the server started: signing up with the name grants nothing.
    dave = await sign_up(client, "dave")
    assert (await whoami(client, dave.headers))[1]["user"]["isAdmin"] is False
    assert (await client.get(USERS, headers=dave.headers)).status == 403


async def test_only_the_very_first_account_is_an_administrator(client):
    # Side by side on an empty server: one write transaction decides, so exactly one wins.
    users = await asyncio.gather(*(sign_up(client, f"user{n}") for n in range(6)))
    flags = [(await whoami(client, u.headers))[1]["user"]["isAdmin"] for u in users]
    assert flags.count(True) == 1
    # A database whose accounts have no administrator (one from an older version) can be
    # emptied; the next sign-up is a stranger on a server that had users, not the first.
    store = client.app[STORE]
    await store.db.write(lambda conn: conn.execute("UPDATE users SET is_admin = 0"))
    for user in users:
        await store.users.delete(user.id)
    assert await store.users.count() == 0
    late = await sign_up(client, "late")
    assert (await whoami(client, late.headers))[1]["user"]["isAdmin"] is False


async def test_migration_upgrades_a_database_whose_user_is_named_ghost(tmp_path):
    old_sql = tmp_path / "sql"
    old_sql.mkdir()
    for path in sorted(SQL_DIR.glob("*.sql")):
        if int(path.name[:4]) < 11:
            shutil.copy(path, old_sql / path.name)
    db = tmp_path / "hubsvc.db"
    conn = sqlite3.connect(db, isolation_level=None)
    apply_migrations(conn, old_sql)
    conn.execute(
        "INSERT INTO users (username, username_key, email, email_key, password_hash,"
        " created_at, updated_at) VALUES ('Ghost', 'ghost', 'g@x.org', 'g@x.org', 'h',"
        " 't', 't')"
    )
    conn.close()
    store = Store(db)  # opening applies 0011 to the existing database
    await store.open()
    try:
        kept = await store.users.by_username("ghost")
        assert kept["email"] == "g@x.org" and not kept["is_ghost"] and not kept["disabled"]
        assert await store.users.count() == 1
        rows = await store.db.read(
            lambda c: c.execute("SELECT username FROM users WHERE is_ghost = 1").fetchall()
        )
        assert len(rows) == 1 and rows[0][0].startswith("ghost-")
    finally:
        await store.close()


async def test_an_organization_is_no_account_the_admin_user_routes_act_on(client):
    # Found by the fuzz run: an organization took a deleted user's name, and PATCH
    # /api/admin/users/<it> answered its row (e-mail "") as an account.
    admin = await sign_up(client, "boss")
    made = await client.post("/api/orgs", json={"name": "acme"}, headers=admin.headers)
    assert made.status == 201, await made.text()
    for method, body in (("PATCH", {"disabled": True}), ("PATCH", {}), ("DELETE", None)):
        resp = await client.request(
            method, "/api/admin/users/acme", json=body, headers=admin.headers
        )
        assert resp.status == 404, (method, await resp.text())
        assert (await resp.json())["error"] == "user not found"
    assert (await client.get("/api/orgs/acme", headers=admin.headers)).status == 200
