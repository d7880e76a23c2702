"""Search: ranked, paged, echoed, kept in step, and private hits only for readers."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from hubsvc.app import create_app
from hubsvc.keys import STORE
from hubsvc.store.engines.sqlite import SQL_DIR, apply_migrations, migration_files

from .conftest import sign_up
from .gitcli import git, remote
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
    await client.patch(
        "/api/repositories/alice/alpha",
        json={"name": "beta", "description": "zeta"},
        headers=alice.headers,
    )
    assert (await search(client, "alpha"))["results"] == []
    assert len((await search(client, "beta"))["results"]) == 1
    assert len((await search(client, "zeta"))["results"]) == 1
    await client.delete("/api/repositories/alice/beta", headers=alice.headers)
    assert (await search(client, "beta"))["results"] == []


async def test_issue_pull_and_user_search(client, alice):
    await create(client, alice, "proj")
    await client.post(
        "/api/repositories/alice/proj/issues",
        json={"title": "Crash on startup", "body": "segfault"},
        headers=alice.headers,
    )
    body = await search(client, "crash", "issues")
    hit = body["results"][0]
    assert hit["type"] == "issue" and hit["title"] == "Crash on startup"
    assert hit["repository"] == {"owner": "alice", "name": "proj"}
    assert hit["description"] == "segfault" and hit["number"] == 1
    assert (await search(client, "segfault", "pulls"))["results"] == []
    await client.patch(
        "/api/repositories/alice/proj/issues/1", json={"title": "Hang"}, headers=alice.headers
    )
    assert (await search(client, "crash", "issues"))["results"] == []
    assert len((await search(client, "hang", "issues"))["results"]) == 1
    users = await search(client, "alice", "users")
    assert users["results"][0]["username"] == "alice" and users["results"][0]["type"] == "user"


async def test_private_hits_only_for_readers(client, alice, bob):
    carol = await sign_up(client, "carol")
    await create(client, alice, "secretive", visibility="private")
    await client.post(
        "/api/repositories/alice/secretive/issues",
        json={"title": "secretive issue"},
        headers=alice.headers,
    )
    await client.put(
        "/api/repositories/alice/secretive/collaborators/carol",
        json={"permission": "read"},
        headers=alice.headers,
    )
    for who in (None, bob):
        headers = who.headers if who else None
        assert (await search(client, "secretive", headers=headers))["results"] == []
        assert (await search(client, "secretive", "issues", headers=headers))["results"] == []
    for who in (alice, carol):
        assert len((await search(client, "secretive", headers=who.headers))["results"]) == 1
        assert (
            len((await search(client, "secretive", "issues", headers=who.headers))["results"]) == 1
        )


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


FTS_SYNTAX = [
    '"',
    '""',
    '"my cool',
    'my" cool"',
    "*",
    "cool*",
    "^cool",
    "name:cool",
    "{name description}: cool",
    "(cool)",
    "(cool OR tool",
    "cool) AND (",
    "NEAR(my tool, 2)",
    "NEAR",
    "AND",
    "OR",
    "NOT cool",
    "cool + tool",
    "-cool",
    "'cool'",
    "\\",
    "%",
    "_",
    "-_.",
    "my_cool.tool",
    "\u00e9\u0301",
    "\U0001f600 cool",
    "\ue000",
    "a" * 256,
    " ".join(["cool"] * 40),
]


async def test_fts_syntax_is_plain_text_for_every_type(client, alice):
    await create(client, alice, "my-cool-tool", description="does (cool) things: NEAR AND OR")
    for kind in ("repositories", "issues", "pulls", "users"):
        for q in FTS_SYNTAX:
            resp = await client.get("/api/search", params={"q": q, "type": kind})
            assert resp.status == 200, (kind, q, await resp.text())
    # The words still count, whatever surrounds them.
    for q in ("(cool)", "^cool", "cool*", "my_cool.tool", "'cool'?", '"cool"'):
        assert [r["name"] for r in (await search(client, q))["results"]] == ["my-cool-tool"], q


async def names(client, q, kind="repositories", field="name"):
    return [r[field] for r in (await search(client, q, kind))["results"]]


async def test_repository_found_by_any_word_of_its_name(client, alice):
    await create(client, alice, "my-cool-tool")
    await create(client, alice, "vault-be71b57345")
    await create(client, alice, "tool-cool-my")
    await create(client, alice, "snake_case.name")
    for q in (
        "cool",
        "coo",
        "my-cool-tool",
        "my cool tool",
        '"my cool tool"',
        "My-Cool-Tool",
        "my-cool-to",
        "cool-tool",
    ):
        assert "my-cool-tool" in await names(client, q), q
    # A name written with its punctuation is those words in that order.
    assert await names(client, "my-cool-tool") == ["my-cool-tool"]
    assert await names(client, '"my cool tool"') == ["my-cool-tool"]
    assert await names(client, '"my cool too"') == []  # quoted: exact words
    for q in ("be71b57345", "be71", "vault-be71b57345", "vault be71b57345"):
        assert await names(client, q) == ["vault-be71b57345"], q
    for q in ("case", "snake", "name", "snake_case.name", "case.name"):
        assert await names(client, q) == ["snake_case.name"], q


async def test_repository_found_by_its_full_name(client, alice, bob):
    await create(client, alice, "vault-be71b57345")
    await create(client, bob, "vault-be71b57345")
    await create(client, alice, "vault-hidden", visibility="private")
    await sign_up(client, "client")
    await create(client, bob, "chat", description="a client/server chat")
    for q in (
        "alice/vault-be71b57345",
        "Alice/Vault-BE71B57345",
        " alice/vault-be71 ",
        "alice/be71b57345",
    ):
        body = await search(client, q)
        assert [r["fullName"] for r in body["results"]] == ["alice/vault-be71b57345"], q
    assert len((await search(client, "vault-be71b57345"))["results"]) == 2
    assert (await search(client, "carol/vault-be71b57345"))["results"] == []
    # Still plain words where they match, even when the part before / is a user.
    assert await names(client, "client/server") == ["chat"]
    # And never a private repository for those who may not read it.
    assert (await search(client, "alice/vault-hidden", headers=bob.headers))["results"] == []
    assert len((await search(client, "alice/vault-hidden", headers=alice.headers))["results"]) == 1


async def test_user_found_by_any_word_of_the_username(client):
    await sign_up(client, "ada-lovelace")
    await sign_up(client, "grace-hopper")
    for q in ("lovelace", "love", "ada", "ada-lovelace", "ada lovelace", "Ada-Lovelace"):
        assert await names(client, q, "users", "username") == ["ada-lovelace"], q
    assert await names(client, "hopper", "users", "username") == ["grace-hopper"]


async def test_issue_titles_with_punctuation(client, alice):
    await create(client, alice, "proj")
    url = "/api/repositories/alice/proj/issues"
    for title in ("my-cool-tool crashes", "Fix parse_args.py on v2.0-rc1", "tool for my cool app"):
        resp = await client.post(url, json={"title": title}, headers=alice.headers)
        assert resp.status == 201
    for q in ("cool", "coo", "my cool tool"):  # each word anywhere
        assert "my-cool-tool crashes" in await names(client, q, "issues", "title"), q
    for q in ("my-cool-tool", "my-cool-to", '"my cool tool"'):  # the words in that order
        assert await names(client, q, "issues", "title") == ["my-cool-tool crashes"], q
    for q in ("parse_args", "args", "parse_args.py", "v2", "rc1", "0-rc1", "v2.0-rc1"):
        assert await names(client, q, "issues", "title") == ["Fix parse_args.py on v2.0-rc1"], q


async def test_pull_request_titles_with_punctuation(client, alice, tmp_path):
    await create(client, alice, "proj")
    work = tmp_path / "work"
    await git("init", "-q", "-b", "main", str(work))
    (work / "a.txt").write_text("a\n")
    await git("add", "-A", cwd=work)
    await git("commit", "-qm", "base", cwd=work)
    for branch in ("one", "two"):
        await git("checkout", "-qb", branch, "main", cwd=work)
        (work / f"{branch}.txt").write_text(branch)
        await git("add", "-A", cwd=work)
        await git("commit", "-qm", branch, cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "proj"), "main", "one", "two", cwd=work)
    for head, title in (("one", "Add my-cool-tool.yml"), ("two", "Tool: my cool yml")):
        resp = await client.post(
            "/api/repositories/alice/proj/pulls",
            headers=alice.headers,
            json={"title": title, "body": "", "head": head},
        )
        assert resp.status == 201, await resp.text()
    for q in ("cool", "coo", "my cool tool", "yml"):
        assert "Add my-cool-tool.yml" in await names(client, q, "pulls", "title"), q
    for q in ("my-cool-tool", '"my cool tool"', "my-cool-tool.yml", "tool.yml"):
        assert await names(client, q, "pulls", "title") == ["Add my-cool-tool.yml"], q
    assert await names(client, "cool", "issues", "title") == []


async def test_name_and_title_matches_rank_above_body_matches(client, alice):
    # Created first, so id order alone would put the body match ahead.
    await create(client, alice, "notes", description="notes for my-cool-tool and its cool parts")
    await create(client, alice, "my-cool-tool", description="a tool")
    for q in ("cool", "my-cool-tool", "my cool tool"):
        assert await names(client, q) == ["my-cool-tool", "notes"], q
    url = "/api/repositories/alice/notes/issues"
    await client.post(
        url, json={"title": "notes", "body": "my-cool-tool crashes, cool"}, headers=alice.headers
    )
    await client.post(url, json={"title": "my-cool-tool crashes"}, headers=alice.headers)
    assert await names(client, "cool", "issues", "title") == ["my-cool-tool crashes", "notes"]
    zed = await sign_up(client, "zed")
    resp = await client.patch(
        "/api/users/me/settings", headers=zed.headers, json={"name": "Ada Lovelace fan"}
    )
    assert resp.status == 200, await resp.text()
    await sign_up(client, "ada-lovelace")
    assert await names(client, "lovelace", "users", "username") == ["ada-lovelace", "zed"]


# SQLite's own index and plans: PostgreSQL has its own schema file and planner.
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_upgrade_rebuilds_the_indexes_of_an_existing_database(
    aiohttp_client, config, tmp_path
):
    # A database made by the migrations before 0010, with rows already in it.
    old_sql = tmp_path / "old_sql"
    old_sql.mkdir()
    for version, _, path in migration_files():
        if version <= 7:
            shutil.copy(path, old_sql)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(config.data_dir / "hubsvc.db", isolation_level=None)
    assert apply_migrations(conn, old_sql) == [1, 2, 3, 4, 5, 6, 7]
    now = "2024-01-01T00:00:00Z"
    conn.execute(
        "INSERT INTO users (id, username, username_key, email, email_key, name,"
        " password_hash, created_at, updated_at) VALUES (1, 'ada-lovelace',"
        " 'ada-lovelace', 'ada@example.com', 'ada@example.com', '', 'x', ?, ?)",
        (now, now),
    )
    conn.execute(
        "INSERT INTO repositories (id, owner_id, name, name_key, visibility,"
        " created_at, updated_at) VALUES (1, 1, 'vault-be71b57345',"
        " 'vault-be71b57345', 'public', ?, ?)",
        (now, now),
    )
    conn.execute(
        "INSERT INTO issues (repo_id, number, title, created_at, updated_at)"
        " VALUES (1, 1, 'my-cool-tool crashes', ?, ?)",
        (now, now),
    )
    # The old tokenizer kept the name whole: the last word alone found nothing.
    assert (
        conn.execute(
            "SELECT rowid FROM repositories_fts WHERE repositories_fts MATCH '\"be71b57345\"*'"
        ).fetchall()
        == []
    )
    conn.close()

    client = await aiohttp_client(create_app(config))
    assert await names(client, "be71b57345") == ["vault-be71b57345"]
    assert await names(client, "vault-be71b57345") == ["vault-be71b57345"]
    assert await names(client, "lovelace", "users", "username") == ["ada-lovelace"]
    assert await names(client, "my-cool-tool", "issues", "title") == ["my-cool-tool crashes"]
    # The triggers of 0004 keep the new indexes in step.
    ada = await sign_up(client, "ada-byron")
    await create(client, ada, "tiny_box.rs")
    assert await names(client, "box") == ["tiny_box.rs"]
    assert await names(client, "byron", "users", "username") == ["ada-byron"]
    await client.delete("/api/repositories/ada-byron/tiny_box.rs", headers=ada.headers)
    assert await names(client, "box") == []
    assert SQL_DIR.joinpath("0010_search_words.sql").exists()


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
    await client.patch(
        "/api/repositories/alice/proj", json={"visibility": "private"}, headers=alice.headers
    )
    assert (await search(client, "cache", "issues"))["results"] == []


async def test_background_writes_keep_the_search_cache(client, alice, monkeypatch):
    """The inbox consumer's, cursors' and leases' writes change no hit: the cache stays."""
    store = client.server.app[STORE]
    await create(client, alice, "proj")
    url = "/api/repositories/alice/proj/issues"
    await client.post(url, json={"title": "cache one"}, headers=alice.headers)
    repo_id = (await store.repos.by_name("alice", "proj"))["id"]
    issue_id = await store.db.read(
        lambda conn: conn.execute(
            "SELECT id FROM issues WHERE repo_id = ? AND number = 1", (repo_id,)
        ).fetchone()[0]
    )
    ranked: list[str] = []
    read = store.db.read

    async def counting(fn, *args, **kwargs):
        if "SearchStore.issues" in repr(fn):
            ranked.append(repr(args))
        return await read(fn, *args, **kwargs)

    monkeypatch.setattr(store.db, "read", counting)
    first = await search(client, "cache", "issues")
    assert len(ranked) == 1 and len(first["results"]) == 1
    await store.events.start_cursor("test-consumer", 0)
    await store.events.set_cursor("test-consumer", 1)
    when = "2026-01-01T00:00:00Z"
    await store.notifications.record(
        "test-inbox", 1, issue_id, repo_id, when, None, {}, {int(alice.id): "mention"}, set(), None
    )
    await store.leases.give_up("test-holder", "test-lease")
    await store.leases.release("test-holder")
    assert await search(client, "cache", "issues") == first
    assert len(ranked) == 1  # answered from the cache
    await client.patch(url + "/1", json={"title": "cache renamed"}, headers=alice.headers)
    renamed = await search(client, "cache", "issues")
    assert len(ranked) == 2 and renamed["results"][0]["title"] == "cache renamed"
