"""Repository ids are never handed out twice: folders and open-repository caches go by id."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3

import pytest

from hubsvc.store.engines.sqlite import SQL_DIR, apply_migrations

from .gitcli import git
from .server import ServerProcess, start_several, stop_all

PASSWORD = "12345678"


def _create(server: ServerProcess, headers: dict, name: str) -> int:
    status, body = server.request("POST", "/api/repositories", {"name": name}, headers)
    assert status == 201, body
    return int(body["repo"]["id"])


def _url(server: ServerProcess, name: str) -> str:
    return server.url.replace("http://", f"http://owner:{PASSWORD}@") + f"/owner/{name}.git"


async def _push_secret(tmp_path, server: ServerProcess, name: str) -> None:
    work = tmp_path / f"work-{name}"
    await git("init", "-q", "-b", "main", str(work))
    (work / "secret.txt").write_text("what the deleted repository held\n")
    await git("add", "secret.txt", cwd=work)
    await git("commit", "-q", "-m", "secret", cwd=work)
    await git("push", "-q", _url(server, name), "main", "main:refs/heads/hidden", cwd=work)


async def _refs(server: ServerProcess, name: str) -> str:
    return (await git("ls-remote", _url(server, name)))[1]


@pytest.fixture(params=["sqlite", "postgres"])
def database(request) -> dict:
    """Server settings for one SQLite file in the data folder, or one PostgreSQL database."""
    if request.param == "postgres":
        return {"database": {"url": request.getfixturevalue("postgres_url")}}
    return {}


async def test_a_new_repository_never_takes_a_deleted_ones_id_or_contents(
    tmp_path, redis_url, database
):
    a, b = await asyncio.to_thread(start_several, tmp_path / "data", 2, redis_url, database)
    try:
        status, body = await asyncio.to_thread(
            a.request,
            "POST",
            "/auth/sign-up",
            {"email": "o@example.com", "username": "owner", "password": PASSWORD, "name": "O"},
        )
        assert status == 201, body
        headers = {"Authorization": f"Bearer {body['token']}"}
        first = await asyncio.to_thread(_create, a, headers, "first")
        old = await asyncio.to_thread(_create, a, headers, "old")
        assert old > first
        await _push_secret(tmp_path, a, "old")
        # The other process opens the repository and keeps its handle in its cache.
        assert "refs/heads/hidden" in await _refs(b, "old")
        status, _ = await asyncio.to_thread(
            b.request, "GET", "/api/repositories/owner/old/branches", None, headers
        )
        assert status == 200
        # The newest repository goes; the next one must not get its id.
        status, _ = await asyncio.to_thread(
            a.request, "DELETE", "/api/repositories/owner/old", None, headers
        )
        assert status == 204
        new = await asyncio.to_thread(_create, a, headers, "new")
        assert new > old
        # Served by the process that held the deleted one open: empty, nothing of the old.
        assert await _refs(b, "new") == ""
        status, branches = await asyncio.to_thread(
            b.request, "GET", "/api/repositories/owner/new/branches", None, headers
        )
        assert status == 200 and not branches.get("branches"), branches
    finally:
        await asyncio.to_thread(stop_all, [a, b])
    # Across a restart too: the newest deleted, then the next one made after the start.
    server = ServerProcess(tmp_path / "data", a.settings)
    await asyncio.to_thread(server.start)
    try:
        status, _ = await asyncio.to_thread(
            server.request, "DELETE", "/api/repositories/owner/new", None, headers
        )
        assert status == 204
        await asyncio.to_thread(server.stop)
        server = ServerProcess(tmp_path / "data", a.settings)
        await asyncio.to_thread(server.start)
        later = await asyncio.to_thread(_create, server, headers, "later")
        assert later > new
        assert await _refs(server, "later") == ""
    finally:
        await asyncio.to_thread(stop_all, [server])


def test_the_rebuild_keeps_every_row_key_and_search_entry_of_an_existing_database(tmp_path):
    """0035 on a database made before it: rows, foreign keys and search carry over."""
    sql = tmp_path / "sql"
    sql.mkdir()
    for path in SQL_DIR.glob("*.sql"):
        if int(path.name[:4]) < 35:
            shutil.copy(path, sql)
    conn = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    apply_migrations(conn, sql)
    conn.execute(
        "INSERT INTO users (id, username, username_key, email, email_key, name, password_hash,"
        " is_admin, created_at, updated_at) VALUES (100, 'a', 'a', 'a@x', 'a@x', 'a', 'x', 0,"
        " 't', 't')"
    )
    for n, parent in ((1, None), (2, 1), (3, None)):
        conn.execute(
            "INSERT INTO repositories (owner_id, name, name_key, visibility, created_at,"
            " updated_at, parent_id) VALUES (100, ?, ?, 'public', 't', 't', ?)",
            (f"needle{n}", f"needle{n}", parent),
        )
    conn.execute("INSERT INTO stars (repo_id, user_id, created_at) VALUES (2, 100, 't')")
    conn.execute("DELETE FROM repositories WHERE id = 3")

    # 0035 and whatever came after it.
    assert apply_migrations(conn)[0] == 35
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("SELECT COUNT(*) FROM stars").fetchone()[0] == 1
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    new = "INSERT INTO repositories (owner_id, name, name_key, visibility, created_at,"
    new += " updated_at) VALUES (100, ?, ?, 'public', 't', 't') RETURNING id"
    made = conn.execute(new, ("n4", "n4")).fetchone()[0]
    conn.execute("DELETE FROM repositories WHERE id = ?", (made,))
    assert conn.execute(new, ("n5", "n5")).fetchone()[0] == made + 1
    hits = conn.execute(
        "SELECT rowid FROM repositories_fts WHERE repositories_fts MATCH 'needle2'"
    ).fetchall()
    assert hits == [(2,)]
    # The keys still act: a parent's delete empties its fork's parent, an owner's its rows.
    conn.execute("DELETE FROM repositories WHERE id = 1")
    assert conn.execute("SELECT parent_id FROM repositories WHERE id = 2").fetchone() == (None,)
    conn.execute("DELETE FROM users WHERE id = 100")
    assert conn.execute("SELECT COUNT(*) FROM stars").fetchone()[0] == 0
    conn.close()
