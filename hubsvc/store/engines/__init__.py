"""Database engines: everything one database needs (connections, its SQL dialect, faults).

SQLite (the default, the file in the data folder) and PostgreSQL ([database] url); code
above the store asks these names, never an engine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import postgres, sqlite
from .postgres import PostgresDatabase
from .sqlite import Database

# A result row, read by position or by column name (sqlite3.Row or postgres.Row).
Row = Any
# A connection inside a transaction (sqlite3.Connection or postgres.Connection).
Conn = Any
AnyDatabase = Database | PostgresDatabase


def fault_of(exc: BaseException) -> str | None:
    """ "full" for a full disk, "busy" for a locked or unreachable database, else None."""
    return sqlite.fault_of(exc) or postgres.fault_of(exc)


def reserve_event_ids(conn: Conn, count: int) -> int:
    """The first of count consecutive event ids, in commit order (see store/log.py)."""
    if getattr(conn, "dialect", "sqlite") == "postgresql":
        return postgres.reserve_event_ids(conn, count)
    return sqlite.reserve_event_ids(conn, count)


def open_database(
    url: str, path: Path, read_timeout_ms: int, write_timeout_ms: int, pool_size: int = 10
) -> AnyDatabase:
    """The database [database] url names: PostgreSQL, or (empty) the SQLite file at path."""
    if url:
        return PostgresDatabase(
            url,
            pool_size=pool_size,
            read_timeout_ms=read_timeout_ms,
            write_timeout_ms=write_timeout_ms,
        )
    return Database(path, read_timeout_ms=read_timeout_ms, write_timeout_ms=write_timeout_ms)


__all__ = [
    "AnyDatabase",
    "Conn",
    "Database",
    "PostgresDatabase",
    "Row",
    "fault_of",
    "open_database",
]
