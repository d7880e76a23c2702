"""The SQLite database: one write connection, a few read connections, migrations."""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import os
import re
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

import aiosqlite

from ..datadir import FILE_MODE, private_file
from ..errors import Unavailable

log = logging.getLogger("hubsvc.store")

SQL_DIR = Path(__file__).resolve().parent.parent.parent / "sql"
T = TypeVar("T")
PING_FRESH_SECONDS = 1.0


def _configure(conn: sqlite3.Connection) -> None:
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute("PRAGMA synchronous = NORMAL")


def _transaction(conn: sqlite3.Connection, fn: Callable[..., T], args, kwargs) -> T:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn, *args, **kwargs)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result


# --- Read deadline ---------------------------------------------------------------------
# No read may hold a reader connection without bound: SQLite calls the progress handler
# every _PROGRESS_STEPS virtual-machine steps, and a true answer interrupts the
# statement (OperationalError "interrupted"), which frees the connection at once.
READ_TIMEOUT_MS = 2000
_PROGRESS_STEPS = 1000


class ReadTimeout(Unavailable):
    """A read ran past database.read_timeout_ms and was stopped."""

    def __init__(self, timeout_ms: int) -> None:
        super().__init__(f"the database query took longer than {timeout_ms} ms"
                         " (database.read_timeout_ms) and was stopped; try again shortly,"
                         " or narrow the request")
        self.headers["Retry-After"] = "1"


def _read_with_deadline(conn: sqlite3.Connection, fn: Callable[..., T], timeout_ms: int,
                        *args: Any) -> T:
    """fn(conn, *args), interrupted with ReadTimeout once it runs past timeout_ms."""
    deadline = time.monotonic() + timeout_ms / 1000
    conn.set_progress_handler(lambda: time.monotonic() > deadline, _PROGRESS_STEPS)
    try:
        return fn(conn, *args)
    except sqlite3.OperationalError as exc:
        if "interrupted" in str(exc) and time.monotonic() > deadline:
            raise ReadTimeout(timeout_ms) from None
        raise
    finally:
        conn.set_progress_handler(None, 0)


def migration_files(sql_dir: Path = SQL_DIR) -> list[tuple[int, str, Path]]:
    """The numbered migrations, in order."""
    found = []
    for path in sorted(sql_dir.glob("*.sql")):
        match = re.match(r"^(\d{4})_([a-z0-9_]+)\.sql$", path.name)
        if match:
            found.append((int(match.group(1)), match.group(2), path))
    return found


def apply_migrations(conn: sqlite3.Connection, sql_dir: Path = SQL_DIR) -> list[int]:
    """Apply every migration not yet recorded, each in its own transaction."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
    applied = []
    for version, name, path in migration_files(sql_dir):
        if version in done:
            continue
        script = path.read_text()
        # executescript commits first, so BEGIN/COMMIT inside the script make it atomic.
        try:
            conn.executescript(
                "BEGIN IMMEDIATE;\n" + script + "\n;INSERT INTO schema_migrations VALUES "
                f"({version}, '{name}', strftime('%Y-%m-%dT%H:%M:%SZ', 'now'));\nCOMMIT;"
            )
        except sqlite3.Error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        log.info("applied migration %04d_%s", version, name)
        applied.append(version)
    return applied


class Database:
    """Writes go through one connection under BEGIN IMMEDIATE; reads use the others."""

    def __init__(self, path: str | Path, readers: int = 2,
                 read_timeout_ms: int = READ_TIMEOUT_MS) -> None:
        self.path = str(path)
        self.read_timeout_ms = read_timeout_ms
        self._reader_count = readers
        self._writer: aiosqlite.Connection | None = None
        self._readers: list[aiosqlite.Connection] = []
        self._next_reader = itertools.cycle(range(readers))
        # Bumped by every write, so read caches can tell their entries are stale.
        self.generation = 0
        # Told of events once the transaction that wrote them has committed.
        self.event_listeners: list[Callable[[list], None]] = []
        self._ping_ok_at = float("-inf")

    async def open(self) -> None:
        """Open the connections, turn on WAL and apply the migrations."""
        # SQLite gives the -wal and -shm files the database file's mode, so a 0600
        # database keeps its journal private too; existing ones are set as well.
        if self.path != ":memory:":
            private_file(Path(self.path))
        self._writer = await aiosqlite.connect(self.path, isolation_level=None)
        await self._call(self._writer, self._setup_writer)
        for suffix in ("-wal", "-shm"):
            if Path(self.path + suffix).is_file():
                os.chmod(self.path + suffix, FILE_MODE)
        for _ in range(self._reader_count):
            reader = await aiosqlite.connect(self.path, isolation_level=None)
            await self._call(reader, _configure)
            self._readers.append(reader)

    def _setup_writer(self, conn: sqlite3.Connection) -> None:
        _configure(conn)
        conn.execute("PRAGMA journal_mode = WAL")
        apply_migrations(conn)

    async def close(self) -> None:
        """Close every connection, after PRAGMA optimize on the writer."""
        if self._writer is not None:
            try:  # statistics for the next start's planner; SQLite's advice at close
                await self._call(self._writer, lambda c: c.execute("PRAGMA optimize"))
            except sqlite3.Error:
                log.exception("PRAGMA optimize at close failed")
        for conn in [*self._readers, self._writer]:
            if conn is not None:
                await conn.close()
        self._readers.clear()
        self._writer = None
        self._ping_ok_at = float("-inf")

    @staticmethod
    async def _call(conn: aiosqlite.Connection, fn: Callable[..., T], *args: Any) -> T:
        # One hop to the connection's thread for the whole function: the thread hop,
        # not SQLite, is what costs, so a transaction is one call, not one per statement.
        return await conn._execute(fn, conn._conn, *args)

    async def write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run fn(conn, ...) in one BEGIN IMMEDIATE transaction on the write connection."""
        assert self._writer is not None, "database is not open"
        try:
            return await self._call(self._writer, _transaction, fn, args, kwargs)
        finally:
            self.generation += 1

    def committed(self, events: list) -> None:
        """Tell the listeners (the bus) of events that just committed."""
        if events:
            for listener in self.event_listeners:
                listener(events)

    async def read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run fn(conn, ...) on a read connection."""
        assert self._readers, "database is not open"
        conn = self._readers[next(self._next_reader)]
        return await self._call(conn, _read_with_deadline, functools.partial(fn, **kwargs),
                                self.read_timeout_ms, *args)

    async def ping(self) -> bool:
        """True when the database answers a trivial query (a success is trusted for 1 s)."""
        # A health check polled thousands of times a second would spend most of its time
        # hopping to a reader thread; one answer a second says as much about liveness.
        if time.monotonic() - self._ping_ok_at < PING_FRESH_SECONDS:
            return True
        try:
            await asyncio.wait_for(self.read(lambda c: c.execute("SELECT 1").fetchone()), 2)
        except Exception:
            self._ping_ok_at = float("-inf")
            return False
        self._ping_ok_at = time.monotonic()
        return True
