"""A token's repository list is kept by repository id: renames and reused names change nothing."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from hubsvc.store import Store
from hubsvc.store.engines.sqlite import SQL_DIR

from .gitcli import git, remote
from .servers import fresh_postgres_database, postgres_server
from .test_accounts import TOKENS, bearer, new_pat
from .test_repos import create

X = "/api/repositories/alice/x"


async def listed(client, user, token_name: str) -> list[str] | None:
    resp = await client.get(TOKENS, headers=user.headers)
    assert resp.status == 200
    (token,) = [t for t in (await resp.json())["tokens"] if t["name"] == token_name]
    return token["repositories"]


async def owned(client, token: dict[str, str]) -> list[str]:
    """The names of alice's repositories a token's list holds."""
    resp = await client.get("/api/users/alice/repositories", headers=token)
    assert resp.status == 200, await resp.text()
    return sorted(r["name"] for r in (await resp.json())["repositories"])


async def test_a_renamed_repository_stays_on_its_token(client, alice, tmp_path):
    await create(client, alice, "x", visibility="private", autoInit=True)
    await create(client, alice, "other", visibility="private", autoInit=True)
    created = await new_pat(
        client, alice, "one", scopes=["repo:read", "user:read"], repositories=["alice/x"]
    )
    secret = created["secret"]
    token = bearer(secret)
    assert (await client.get(X + "/tree", headers=token)).status == 200
    resp = await client.patch(X, json={"name": "y"}, headers=alice.headers)
    assert resp.status == 200, await resp.text()
    # The token follows its repository under the new name, in the API and in git.
    resp = await client.get("/api/repositories/alice/y/tree", headers=token)
    assert resp.status == 200, await resp.text()
    work = tmp_path / "work"
    await git("clone", "-q", remote(client, alice, "alice", "y", secret), str(work))
    assert (work / "README.md").exists()
    assert await listed(client, alice, "one") == ["alice/y"]
    # The old name still reaches it (git follows renames silently), and nothing else.
    resp = await client.get("/alice/x.git/info/refs?service=git-upload-pack", headers=token)
    assert resp.status == 200, await resp.text()
    resp = await client.get("/api/repositories/alice/other/tree", headers=token)
    assert resp.status == 403 and "alice/other" in (await resp.json())["error"]
    assert await owned(client, token) == ["y"]


async def test_a_new_repository_under_a_deleted_name_is_not_on_the_token(client, alice):
    await create(client, alice, "other", visibility="private", autoInit=True)
    await create(client, alice, "x", visibility="private", autoInit=True)
    created = await new_pat(
        client, alice, "one", scopes=["repo:read", "user:read"], repositories=["alice/x"]
    )
    token = bearer(created["secret"])
    assert (await client.get(X + "/tree", headers=token)).status == 200
    assert (await client.delete(X, headers=alice.headers)).status == 204
    await create(client, alice, "x", visibility="private", autoInit=True)
    resp = await client.get(X + "/tree", headers=token)
    assert resp.status == 403, await resp.text()
    assert "alice/x" in (await resp.json())["error"]
    # Limited to none now, not widened to every repository.
    assert await listed(client, alice, "one") == []
    resp = await client.get("/api/repositories/alice/other/tree", headers=token)
    assert resp.status == 403, await resp.text()
    assert await owned(client, token) == []


async def test_a_limit_to_a_missing_or_unreadable_repository_is_422(client, alice, bob):
    await create(client, bob, "secret", visibility="private")
    await create(client, bob, "open")
    answers = {}
    for name in ("bob/secret", "bob/nothing", "nobody/x"):
        body = {"name": name, "scopes": ["repo:read"], "repositories": ["bob/open", name]}
        resp = await client.post(TOKENS, json=body, headers=alice.headers)
        assert resp.status == 422, (name, await resp.text())
        answers[name] = (await resp.json())["error"]
    # The same answer for missing and for unreadable: existence does not leak.
    assert len({error.replace(name, "NAME") for name, error in answers.items()}) == 1
    assert all(name in error for name, error in answers.items())
    assert (await (await client.get(TOKENS, headers=alice.headers)).json())["tokens"] == []
    # A public one of someone else's may be named, under any case.
    created = await new_pat(client, alice, "ok", repositories=["BOB/Open", "bob/open"])
    assert created["token"]["repositories"] == ["bob/open"]


async def test_the_list_hides_a_repository_its_owner_can_no_longer_read(client, alice, bob):
    await create(client, alice, "secret", visibility="private", autoInit=True)
    collaborator = "/api/repositories/alice/secret/collaborators/bob"
    resp = await client.put(collaborator, json={"permission": "read"}, headers=alice.headers)
    assert resp.status in (200, 201, 204), await resp.text()
    await new_pat(client, bob, "one", repositories=["alice/secret"])
    assert await listed(client, bob, "one") == ["alice/secret"]
    assert (await client.delete(collaborator, headers=alice.headers)).status == 204
    resp = await client.patch(
        "/api/repositories/alice/secret", json={"name": "plans"}, headers=alice.headers
    )
    assert resp.status == 200, await resp.text()
    # Its new name is not Bob's to learn; given access again, the token reaches it again.
    assert await listed(client, bob, "one") == []
    resp = await client.put(
        "/api/repositories/alice/plans/collaborators/bob",
        json={"permission": "read"},
        headers=alice.headers,
    )
    assert await listed(client, bob, "one") == ["alice/plans"]


async def test_a_token_limited_to_repositories_alone_keeps_to_them(client, alice):
    await create(client, alice, "x", visibility="private", autoInit=True)
    await create(client, alice, "other", visibility="private", autoInit=True)
    created = await new_pat(client, alice, "one", repositories=["alice/x"])
    assert created["token"]["scopes"] is None
    token = bearer(created["secret"])
    assert (await client.get(X + "/tree", headers=token)).status == 200
    resp = await client.get("/api/repositories/alice/other/tree", headers=token)
    assert resp.status == 403, await resp.text()


def _old_sql(tmp_path):
    """The migrations before repository ids, for both engines."""
    old = tmp_path / "sql"
    (old / "postgres").mkdir(parents=True)
    for path in [*SQL_DIR.glob("*.sql"), *(SQL_DIR / "postgres").glob("*.sql")]:
        if int(path.name[:4]) < 33:
            shutil.copy(path, old / path.relative_to(SQL_DIR))
    return old


_OLD_ROWS = [
    "INSERT INTO users (id, username, username_key, email, email_key, password_hash,"
    " created_at, updated_at) VALUES (2, 'Alice', 'alice', 'a@x.org', 'a@x.org', 'h', 't', 't')",
    "INSERT INTO repositories (id, owner_id, name, name_key, visibility, created_at,"
    " updated_at) VALUES (7, 2, 'Proj', 'proj', 'private', 't', 't')",
    "INSERT INTO repositories (id, owner_id, name, name_key, visibility, created_at,"
    " updated_at) VALUES (8, 2, 'other', 'other', 'private', 't', 't')",
    # Limited to a repository and a name matching none; limited to names matching none;
    # unlimited.
    "INSERT INTO personal_tokens (id, user_id, name, hash, created_at, scopes, repositories)"
    """ VALUES (1, 2, 'one', 'h1', 't', '["repo:read"]', '["alice/proj", "alice/gone"]')""",
    "INSERT INTO personal_tokens (id, user_id, name, hash, created_at, scopes, repositories)"
    """ VALUES (2, 2, 'none', 'h2', 't', '["repo:read"]', '["alice/gone"]')""",
    "INSERT INTO personal_tokens (id, user_id, name, hash, created_at, scopes, repositories)"
    """ VALUES (3, 2, 'all', 'h3', 't', NULL, NULL)""",
]


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
async def test_stored_names_become_ids_and_never_widen(tmp_path, engine):
    old = _old_sql(tmp_path)
    url = ""
    if engine == "sqlite":
        from hubsvc.store.engines.sqlite import apply_migrations

        conn = sqlite3.connect(tmp_path / "hubsvc.db", isolation_level=None)
        apply_migrations(conn, old)
        for statement in _OLD_ROWS:
            conn.execute(statement.replace("'h1'", "X'01'").replace("'h2'", "X'02'"))
        conn.close()
    else:
        from hubsvc.store.engines.postgres import apply_migrations, connect

        databases = fresh_postgres_database(postgres_server(), migrated=False)
        url = next(databases)
        with connect(url) as raw:
            apply_migrations(raw, old)
            for statement in _OLD_ROWS:
                raw.execute(statement.replace("'h1'", "'\\x01'").replace("'h2'", "'\\x02'"))
    store = Store(tmp_path / "hubsvc.db", url=url)  # opening applies the rest
    await store.open()
    try:
        tokens = {t["name"]: t["repositories"] for t in await store.users.personal_tokens(2)}
        assert tokens == {"one": ["Alice/Proj"], "none": [], "all": None}
        one = await store.users.personal_token_owner(b"\x01")
        none = await store.users.personal_token_owner(b"\x02")
        assert one is not None and one[2] is not None and one[2].repositories == {7}
        assert none is not None and none[2] is not None and none[2].repositories == frozenset()
    finally:
        await store.close()
        if url:
            next(databases, None)
