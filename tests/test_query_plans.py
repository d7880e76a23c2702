"""The hot queries use their indexes: no full scan of a table that grows with use.

Every statement the store runs while the test drives the real app (and a few store
calls with no route: a push's pull lookup, the audience, upkeep, a user's deletion) is
captured with its bound values and explained; a plan line `SCAN <table>` without an
index, for a table that grows, fails the test. Each foreign key must have an index led
by its column, or deleting a parent walks the whole child table.
"""

from __future__ import annotations

import re
import sqlite3
import time

import pytest

from hubsvc.keys import STORE
from hubsvc.store.engines.sqlite import apply_migrations
from hubsvc.timeutil import iso
from hubsvc.web.auth import token_digest

from .conftest import sign_up
from .test_repos import create

# Tables that grow with a team's use; a small table (settings, cursors) may be scanned.
BIG = {
    "users",
    "repositories",
    "issues",
    "pulls",
    "comments",
    "issue_assignees",
    "events",
    "stars",
    "collaborators",
    "tokens",
    "personal_tokens",
    "webhook_deliveries",
    "webhook_attempts",
    "chat_links",
    "chat_link_tokens",
    "labels",
    "milestones",
    "reactions",
    "releases",
    "release_assets",
}
# Statements that read a whole table by their nature (an administrator's user list and
# count, the outbox status counts), or that run only on a rare administrative change
# and stop early (the ghost comes first in id order; the last-administrator check).
WHOLE_TABLE = (
    re.compile(r"FROM users WHERE is_ghost = 0"),
    re.compile(r"SELECT id FROM users WHERE is_ghost = 1 ORDER BY id LIMIT 1"),
    re.compile(r"SELECT COUNT\(\*\) FROM users WHERE is_admin = 1"),
    re.compile(r"SELECT status, COUNT\(\*\) FROM webhook_deliveries GROUP BY status"),
)
# `SCAN t` walks all of t, through an index (`SCAN t USING COVERING INDEX i`: the search
# that took a minute) or not; `SEARCH t USING ...` looks rows up. Aliases are resolved.
_SCAN = re.compile(r"\bSCAN (\w+)")
_ALIAS = re.compile(
    r"\b(?:FROM|JOIN)\s+(\w+)(?:\s+(?:AS\s+)?(?!ON\b|WHERE\b|JOIN\b|LEFT\b|"
    r"INDEXED\b|ORDER\b|GROUP\b|LIMIT\b)(\w+))?",
    re.I,
)


def full_scans(conn: sqlite3.Connection, sql: str) -> list[str]:
    """The plan lines of sql that walk a whole big table."""
    aliases = {}
    for table, alias in _ALIAS.findall(sql):
        aliases[alias or table] = table
        aliases[table] = table
    found = []
    for row in conn.execute("EXPLAIN QUERY PLAN " + sql):
        match = _SCAN.search(row[3])
        # A VIRTUAL TABLE line is an FTS5 index lookup, not a walk of the table.
        if (
            match
            and "VIRTUAL TABLE" not in row[3]
            and aliases.get(match.group(1), match.group(1)) in BIG
        ):
            found.append(row[3])
    return found


async def _capture(store) -> list[str]:
    statements: list[str] = []

    def trace(sql: str) -> None:
        if sql.lstrip().split(None, 1)[0].upper() in (
            "SELECT",
            "WITH",
            "UPDATE",
            "DELETE",
            "INSERT",
        ):
            statements.append(sql)

    for conn in [store.db._writer, *store.db._readers]:
        await store.db._call(conn, lambda c: c.set_trace_callback(trace))
    return statements


# SQLite's own index and plans: PostgreSQL has its own schema file and planner.
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_hot_queries_use_indexes(client, app, tmp_path):
    store = app[STORE]
    statements = await _capture(store)
    alice, bob = await sign_up(client, "alice"), await sign_up(client, "bob")
    repo = await create(client, alice, "tool", description="a fine tool")
    await create(client, alice, "secret", visibility="private")
    base = "/api/repositories/alice/tool"
    await client.put(
        f"{base}/collaborators/bob", json={"permission": "write"}, headers=alice.headers
    )
    await client.post(f"{base}/star", headers=bob.headers)
    await client.post(f"{base}/milestones", json={"title": "v1"}, headers=alice.headers)
    for n in range(3):
        resp = await client.post(
            f"{base}/issues",
            json={
                "title": f"crash number {n}",
                "body": "it crashes",
                "assignees": ["bob"],
                "labels": ["bug"],
                "milestone": 1,
            },
            headers=alice.headers,
        )
        assert resp.status == 201, await resp.text()
    await client.post(f"{base}/issues/1/comments", json={"body": "seen"}, headers=bob.headers)
    await client.post(f"{base}/issues/1/reactions", json={"content": "+1"}, headers=bob.headers)
    await client.post(
        f"{base}/releases", json={"tagName": "v1", "draft": True}, headers=alice.headers
    )
    pull = await store.issues.create(
        repo_id=repo["id"],
        author_id=int(alice.id),
        title="a pull",
        body="",
        labels=[],
        assignee_ids=[],
        pull={"head_repo_id": repo["id"], "head": "topic", "base": "main"},
    )
    resp = await client.get("/api/users/me", headers=bob.headers)
    assert resp.status == 200, await resp.text()
    resp = await client.post("/api/users/me/tokens", json={"name": "ci"}, headers=bob.headers)
    assert resp.status == 201, await resp.text()
    pat = {"Authorization": f"Bearer {(await resp.json())['secret']}"}
    gets = [
        ("/api/users/me", bob.headers),
        ("/api/users/me", pat),
        (base, bob.headers),
        (base, {}),
        ("/api/users/alice/repositories", bob.headers),
        (f"{base}/collaborators", bob.headers),
        (f"{base}/stars", {}),
        (f"{base}/forks", {}),
        (f"{base}/issues", {}),
        (f"{base}/issues?state=closed", {}),
        (f"{base}/issues/1", {}),
        (f"{base}/issues/1/comments", {}),
        (f"{base}/issues?milestone=1&labels=bug", {}),
        (f"{base}/issues/1/reactions", {}),
        (f"{base}/milestones?state=all", {}),
        (f"{base}/labels", {}),
        (f"{base}/releases", alice.headers),
        (f"{base}/pulls", {}),
        (f"{base}/pulls?state=merged", {}),
        (f"{base}/pulls/{pull['number']}", {}),
        (f"{base}/events", {}),
        ("/api/events", bob.headers),
        ("/api/users/alice/profile", {}),
        ("/api/search?q=crash&type=issues", bob.headers),
        ("/api/search?q=pull&type=pulls", {}),
        ("/api/search?q=tool&type=repositories", bob.headers),
        ("/api/search?q=alice/tool&type=repositories", {}),
        ("/api/search?q=bob&type=users", {}),
    ]
    for path, headers in gets:
        resp = await client.get(path, headers=headers)
        assert resp.status == 200, (path, await resp.text())
    # Store calls with no route of their own.
    assert [p["number"] for p in await store.issues.open_pulls_touching(repo["id"], "main")] == [
        pull["number"]
    ]
    assert [p["number"] for p in await store.issues.open_pulls_touching(repo["id"], "topic")] == [
        pull["number"]
    ]
    assert (await store.repos.audience(repo["id"]))[:2] == (None, {int(alice.id), int(bob.id)})
    assert await store.users.token_owner(token_digest("no such token")) is None
    notice = {
        "user_id": int(bob.id),
        "repo_id": repo["id"],
        "type": "issue",
        "number": 1,
        "title": "crash",
        "reason": "you were assigned issue #1",
        "actor": "alice",
        "created_at": iso(time.time()),
    }
    await store.chat_notices.queue(1, [notice], "chat-notify")
    await store.chat_notices.pending(0, 50)
    await store.upkeep.prune_deliveries(iso(time.time()))
    await store.upkeep.prune_chat_notices(iso(time.time()))
    await store.upkeep.prune_sessions(int(time.time()))
    await store.events.prune(iso(time.time() - 86400))
    await store.users.delete(int(bob.id))

    assert len(statements) > 60
    conn = sqlite3.connect(tmp_path / "data" / "hubsvc.db")
    try:
        scans = {}
        for sql in dict.fromkeys(statements):
            if any(p.search(sql) for p in WHOLE_TABLE):
                continue
            found = full_scans(conn, sql)
            if found:
                scans[sql] = found
    finally:
        conn.close()
    assert not scans, "\n\n".join(f"{sql}\n  -> {lines}" for sql, lines in scans.items())


def test_every_foreign_key_has_an_index(tmp_path):
    conn = sqlite3.connect(tmp_path / "fk.db")
    apply_migrations(conn)
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'"
        )
    ]
    missing = []
    for table in tables:
        leading = set()
        for index in conn.execute(f"PRAGMA index_list('{table}')"):
            columns = [c[2] for c in conn.execute(f"PRAGMA index_info('{index[1]}')")]
            if columns:
                leading.add(columns[0])
        # A rowid primary key is an index of its own.
        leading.update(
            c[1]
            for c in conn.execute(f"PRAGMA table_info('{table}')")
            if c[5] == 1 and c[2].upper() == "INTEGER"
        )
        for fk in conn.execute(f"PRAGMA foreign_key_list('{table}')"):
            if fk[3] not in leading:
                missing.append(f"{table}.{fk[3]} -> {fk[2]}")
    conn.close()
    assert missing == []
