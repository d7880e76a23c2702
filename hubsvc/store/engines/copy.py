"""Copying a SQLite database into an empty PostgreSQL one, and what PostgreSQL can get wrong."""

from __future__ import annotations

import sqlite3
from typing import Any

from ...errors import Unavailable
from . import postgres

# SQLite's own and the search index's tables: PostgreSQL keeps its search words in
# generated columns, and its migrations table is written by its own migrations.
_SKIP_PREFIXES = ("sqlite_", "repositories_fts", "issues_fts", "users_fts")
_SKIP = {"schema_migrations"}


def _sqlite_tables(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
    ).fetchall()
    return [name for (name,) in rows if name not in _SKIP and not name.startswith(_SKIP_PREFIXES)]


def _insert_order(pg: Any, tables: list[str]) -> list[str]:
    """Tables with every table a foreign key names before the table naming it."""
    parents: dict[str, set[str]] = {table: set() for table in tables}
    for child, parent in pg.execute(
        "SELECT c.conrelid::regclass::text, c.confrelid::regclass::text FROM pg_constraint c"
        " WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace"
    ):
        if child in parents and parent != child:
            parents[child].add(parent)
    ordered: list[str] = []
    while parents:
        ready = sorted(t for t, ps in parents.items() if not ps - set(ordered) - {t})
        if not ready:
            raise Unavailable(f"foreign keys form a cycle among {sorted(parents)}")
        for table in ready:
            ordered.append(table)
            del parents[table]
    return ordered


def _pg_columns(pg: Any, table: str) -> set[str]:
    """Columns a copy may write: not the generated ones (search words, star order)."""
    return {
        name
        for (name,) in pg.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public'"
            " AND table_name = %s AND is_generated = 'NEVER'"
            " AND (COALESCE(identity_generation, '') <> 'ALWAYS' OR column_name = 'id')",
            (table,),
        )
    }


def is_empty(pg: Any) -> bool:
    found = pg.execute(
        "SELECT 1 FROM information_schema.tables WHERE table_schema = 'public' LIMIT 1"
    ).fetchone()
    return found is None


def copy_rows(lite: sqlite3.Connection, pg: Any) -> dict[str, int]:
    """Every row, in one PostgreSQL transaction; then identities set past the copied ids."""
    counts: dict[str, int] = {}
    lite.execute("BEGIN")  # one snapshot of the source for the whole copy
    with pg.transaction():
        tables = _insert_order(pg, _sqlite_tables(lite))
        # What the migrations put in (the ghost, the log's state) is replaced by the source's.
        for table in reversed(tables):
            pg.execute(f'DELETE FROM "{table}"')
        for table in tables:
            wanted = _pg_columns(pg, table)
            columns = [
                row[1] for row in lite.execute(f'PRAGMA table_info("{table}")') if row[1] in wanted
            ]
            if not columns:
                raise Unavailable(f"table {table} is not in the PostgreSQL schema")
            names = ", ".join(f'"{c}"' for c in columns)
            count = 0
            # rowid order: a fork after its parent, a redelivery after its original, and
            # stars in the order they were given (PostgreSQL numbers them as they come).
            rows = lite.execute(f'SELECT {names} FROM "{table}"{_in_rowid_order(lite, table)}')
            with pg.cursor().copy(f'COPY "{table}" ({names}) FROM STDIN') as copy:
                for row in rows:
                    copy.write_row(row)
                    count += 1
            counts[table] = count
        _set_identities(lite, pg, tables)
    lite.execute("ROLLBACK")
    return counts


def _in_rowid_order(lite: sqlite3.Connection, table: str) -> str:
    """ORDER BY rowid, for the tables that have one (not the WITHOUT ROWID ones)."""
    try:
        lite.execute(f'SELECT rowid FROM "{table}" LIMIT 0')
    except sqlite3.OperationalError:
        return ""
    return " ORDER BY rowid"


def _set_identities(lite: sqlite3.Connection, pg: Any, tables: list[str]) -> None:
    """Each identity past the highest id the source ever gave (AUTOINCREMENT's too)."""
    handed = dict(lite.execute("SELECT name, seq FROM sqlite_sequence").fetchall())
    for table, sequence in _identities(pg):
        if table not in tables:
            continue
        highest = pg.execute(f'SELECT COALESCE(MAX(id), 0) FROM "{table}"').fetchone()[0]
        highest = max(highest, handed.get(table, 0))
        if highest:
            pg.execute("SELECT setval(%s, %s)", (sequence, highest))
    # Event ids: past every id the source's counter gave (pruned events' included).
    counter = lite.execute(
        "SELECT value FROM event_log_state WHERE name = 'last_event_id'"
    ).fetchone()
    newest = pg.execute("SELECT COALESCE(MAX(id), 0) FROM events").fetchone()[0]
    given = max(newest, counter[0] if counter else 0)
    if given:
        pg.execute("SELECT setval('events_id_seq', %s)", (given,))


def _identities(pg: Any) -> list[tuple[str, str]]:
    """(table, its id sequence) for every table whose id is an identity column."""
    return pg.execute(
        "SELECT table_name, pg_get_serial_sequence(quote_ident(table_name), 'id')"
        " FROM information_schema.columns WHERE table_schema = 'public'"
        " AND column_name = 'id' AND is_identity = 'YES' ORDER BY table_name"
    ).fetchall()


def check_postgres(url: str) -> tuple[list[str], int, list[tuple[int, str]]]:
    """Problems in a PostgreSQL database, its schema version and its repository rows."""
    problems: list[str] = []
    with postgres.connect(url) as pg:
        schema = pg.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0]
        # PostgreSQL keeps its constraints itself; what it cannot know is that a copy
        # left an id sequence behind the ids it holds (the next insert would collide, or
        # an event id be handed out twice).
        for table, sequence in [*_identities(pg), ("events", "events_id_seq")]:
            highest = pg.execute(f'SELECT COALESCE(MAX(id), 0) FROM "{table}"').fetchone()[0]
            last = pg.execute(f"SELECT last_value, is_called FROM {sequence}").fetchone()
            given = last[0] if last[1] else last[0] - 1
            if given < highest:
                problems.append(
                    f"{table}: its id sequence is at {given}, behind the highest id {highest}"
                )
        rows = pg.execute(
            "SELECT r.id, COALESCE(u.username, '?') || '/' || r.name FROM repositories r"
            " LEFT JOIN users u ON u.id = r.owner_id ORDER BY r.id"
        ).fetchall()
    return problems, schema, [(row[0], row[1]) for row in rows]
