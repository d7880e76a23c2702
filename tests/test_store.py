"""The store: migrations recorded and applied once, WAL, one writer with rollback."""

from __future__ import annotations

import sqlite3

import pytest

from hubsvc.store.engines.sqlite import Database, apply_migrations, migration_files


async def test_migrations_applied_once_and_recorded(tmp_path):
    path = tmp_path / "x.db"
    db = Database(path)
    await db.open()
    versions = await db.read(
        lambda c: [
            r[0] for r in c.execute("SELECT version FROM schema_migrations ORDER BY version")
        ]
    )
    assert versions == [v for v, _, _ in migration_files()]
    mode = await db.read(lambda c: c.execute("PRAGMA journal_mode").fetchone()[0])
    assert mode == "wal"
    assert await db.read(lambda c: c.execute("PRAGMA foreign_keys").fetchone()[0]) == 1
    await db.close()
    again = Database(path)
    await again.open()  # a second start applies nothing and fails on nothing
    count = await again.read(
        lambda c: c.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()[0]
    )
    assert count == len(versions)
    await again.close()


def test_existing_database_upgrades_in_place(tmp_path):
    sql = tmp_path / "sql"
    sql.mkdir()
    (sql / "0001_first.sql").write_text("CREATE TABLE a (x INTEGER);")
    conn = sqlite3.connect(tmp_path / "u.db", isolation_level=None)
    assert apply_migrations(conn, sql) == [1]
    conn.execute("INSERT INTO a VALUES (7)")
    (sql / "0002_second.sql").write_text("ALTER TABLE a ADD COLUMN y TEXT DEFAULT 'z';")
    assert apply_migrations(conn, sql) == [2]
    assert apply_migrations(conn, sql) == []
    assert conn.execute("SELECT x, y FROM a").fetchall() == [(7, "z")]


def test_failed_migration_leaves_nothing_behind(tmp_path):
    sql = tmp_path / "sql"
    sql.mkdir()
    (sql / "0001_bad.sql").write_text("CREATE TABLE b (x INTEGER); INSERT INTO nope VALUES (1);")
    conn = sqlite3.connect(tmp_path / "f.db", isolation_level=None)
    with pytest.raises(sqlite3.OperationalError):
        apply_migrations(conn, sql)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "b" not in tables
    assert conn.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()[0] == 0


async def test_write_rolls_back_on_error(tmp_path):
    db = Database(tmp_path / "w.db")
    await db.open()

    def half_done(conn):
        conn.execute(
            "INSERT INTO users (username, username_key, email, email_key, password_hash,"
            " created_at, updated_at) VALUES ('a','a','a@x','a@x','h','t','t')"
        )
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        await db.write(half_done)
    # The ghost row of migration 0011 is there; the half-written user is not.
    assert (
        await db.read(
            lambda c: c.execute("SELECT COUNT(*) FROM users WHERE username_key = 'a'").fetchone()[0]
        )
        == 0
    )
    await db.close()
