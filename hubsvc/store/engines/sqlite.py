"""The SQLite database: one write connection, a few read connections, migrations."""

from __future__ import annotations

import errno
import fcntl
import functools
import itertools
import logging
import os
import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from ...datadir import FILE_MODE, private_file
from ...errors import DatabaseBusy, DiskFull, Unavailable
from ...metrics import DB_READ, DB_WRITE
from .common import DatabaseBase

log = logging.getLogger("hubsvc.store")

_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}


def fault_of(exc: BaseException) -> str | None:
    """ "full" for a full disk, "busy" for a locked database, else None."""
    if isinstance(exc, DiskFull):
        return "full"
    if isinstance(exc, DatabaseBusy):
        return "busy"
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        primary = code & 0xFF if isinstance(code, int) else None
        text = str(exc).lower()
        if primary == sqlite3.SQLITE_FULL or "disk is full" in text:
            return "full"
        if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or "database is locked" in text:
            return "busy"
        return None
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return "full"
    return None


SQL_DIR = Path(__file__).resolve().parents[3] / "sql"
T = TypeVar("T")


# Each connection's page cache, in KiB (negative cache_size); SQLite's default is 2 MiB,
# named here so the memory a connection may hold is a stated bound, not a surprise.
CACHE_KIB = 2048


def _configure(conn: sqlite3.Connection, busy_ms: int = 5000) -> None:
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")


def _transaction(
    conn: sqlite3.Connection, fn: Callable[..., T], args, kwargs, deadline: float
) -> T:
    # busy_timeout applies per statement, and only BEGIN IMMEDIATE waits for the lock:
    # it gets what is left of the write's one deadline, counted from when the write was
    # asked for, so writes queued behind a stuck one give up with it instead of each
    # waiting its own 5 s in turn.
    left = deadline - time.monotonic()
    if left <= 0:
        raise sqlite3.OperationalError("database is locked (write deadline passed in the queue)")
    conn.execute(f"PRAGMA busy_timeout = {max(1, int(left * 1000))}")
    started = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    try:
        try:
            result = fn(conn, *args, **kwargs)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    finally:
        DB_WRITE.observe(time.perf_counter() - started)
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
        super().__init__(
            f"the database query took longer than {timeout_ms} ms"
            " (database.read_timeout_ms) and was stopped; try again shortly,"
            " or narrow the request"
        )
        self.headers["Retry-After"] = "1"


def _read_with_deadline(
    conn: sqlite3.Connection, fn: Callable[..., T], timeout_ms: int, *args: Any
) -> T:
    """fn(conn, *args), interrupted with ReadTimeout once it runs past timeout_ms."""
    started = time.monotonic()
    deadline = started + timeout_ms / 1000
    conn.set_progress_handler(lambda: time.monotonic() > deadline, _PROGRESS_STEPS)
    try:
        return fn(conn, *args)
    except sqlite3.OperationalError as exc:
        if "interrupted" in str(exc) and time.monotonic() > deadline:
            raise ReadTimeout(timeout_ms) from None
        raise
    finally:
        conn.set_progress_handler(None, 0)
        DB_READ.observe(time.monotonic() - started)


# The first line of a migration that rebuilds a table others' foreign keys name.
REBUILD_MARK = "-- foreign_keys: off"


def migration_files(sql_dir: Path = SQL_DIR) -> list[tuple[int, str, Path]]:
    """The numbered migrations, in order."""
    found = []
    for path in sorted(sql_dir.glob("*.sql")):
        match = re.match(r"^(\d{4})_([a-z0-9_]+)\.sql$", path.name)
        if match:
            found.append((int(match.group(1)), match.group(2), path))
    return found


def _broken_keys(conn: sqlite3.Connection) -> set[tuple]:
    """Every row whose foreign key names no row: (table, rowid, parent table, key)."""
    return {tuple(row) for row in conn.execute("PRAGMA foreign_key_check")}


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
        # A table rebuild (SQLite's ALTER TABLE procedure) runs with foreign keys off:
        # dropping the old table would otherwise cascade into every table naming it. The
        # pragma only takes effect outside a transaction; the keys are checked before COMMIT.
        rebuild = script.startswith(REBUILD_MARK)
        # Only keys the migration broke count: a database with older dangling rows
        # (foreign keys were not always on) still migrates.
        before = _broken_keys(conn) if rebuild else set()
        # executescript commits first, so BEGIN/COMMIT inside the script make it atomic.
        try:
            if rebuild:
                conn.execute("PRAGMA foreign_keys = OFF")
            conn.executescript(
                "BEGIN IMMEDIATE;\n" + script + "\n;INSERT INTO schema_migrations VALUES "
                f"({version}, '{name}', strftime('%Y-%m-%dT%H:%M:%SZ', 'now'));"
            )
            broken = list(_broken_keys(conn) - before) if rebuild else []
            if broken:
                raise sqlite3.IntegrityError(
                    f"migration {version:04d} leaves {len(broken)} broken foreign keys"
                    f" (first: {tuple(broken[0])})"
                )
            conn.execute("COMMIT")
        except sqlite3.Error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            if rebuild:
                conn.execute("PRAGMA foreign_keys = ON")
        log.info("applied migration %04d_%s", version, name)
        applied.append(version)
    return applied


def reserve_event_ids(conn: sqlite3.Connection, count: int) -> int:
    """The first of count event ids: from a counter row (never reused, as AUTOINCREMENT)."""
    last = conn.execute(
        "UPDATE event_log_state SET value = value + ? WHERE name = 'last_event_id' RETURNING value",
        (count,),
    ).fetchone()[0]
    return int(last) - count + 1


class SqliteSql:
    """What the store's queries take from SQLite's dialect: FTS5 search and a few quirks."""

    star_order = "s.rowid"  # stars in the order they were given
    lateral_joins = False  # no LATERAL
    optimize: str | None = "PRAGMA optimize"  # the planner's statistics, refreshed

    @staticmethod
    def json_array_has_lower(column: str) -> str:
        """A condition: the JSON array of strings in column holds `?` (lower-cased)."""
        return f"EXISTS (SELECT 1 FROM json_each({column}) l WHERE lower(l.value) = ?)"

    @staticmethod
    def json_items(column: str) -> str:
        """A FROM item: the elements of the JSON array (text) in column as e(key, value),
        key their place in it."""
        return f"json_each({column}) e"

    @staticmethod
    def json_list(kind: str, values: list[str]) -> str:
        """A JSON array (text): the string kind, then values (SQL expressions)."""
        return f"json_array('{kind}', {', '.join(values)})"

    @staticmethod
    def text_agg(expr: str, sep: str) -> str:
        """An aggregate: the group's texts joined by sep, in no set order."""
        return f"group_concat({expr}, '{sep}')"

    @staticmethod
    def highest_id(conn: sqlite3.Connection, table: str) -> int:
        """The highest id an AUTOINCREMENT table ever handed out (0: none)."""
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
        return int(row[0]) if row else 0

    @staticmethod
    def fts_query(groups: list[tuple[list[str], bool]], names_only: bool = False) -> str:
        """Word groups as an FTS5 query: each a required phrase, a prefix unless quoted."""
        # Only letters and digits go inside the quotes, so FTS5 syntax in the input
        # (quotes, *, ^, :, parentheses, NEAR, AND, OR) is never anything but text.
        text = " ".join(
            '"' + " ".join(words) + '"' + ("*" if prefix else "") for words, prefix in groups
        )
        return "name : " + text if names_only else text

    @staticmethod
    def fts_either(first: str, second: str) -> str:
        return f"({first}) OR ({second})"

    @staticmethod
    def repository_matches(param: str) -> str:
        return f"r.id IN (SELECT rowid FROM repositories_fts WHERE repositories_fts MATCH :{param})"

    @staticmethod
    def repository_hits(where: str) -> str:
        """A page of matching repositories: hit (the id) and score (lower is better)."""
        return (
            "SELECT r.id AS hit, bm25(repositories_fts, 10.0, 1.0) AS score"
            " FROM repositories_fts f JOIN repositories r ON r.id = f.rowid"
            f" WHERE repositories_fts MATCH :q AND {where}"
            " ORDER BY score, r.id DESC LIMIT :limit OFFSET :offset"
        )

    @staticmethod
    def issue_hits(visible: str, pull: bool) -> str:
        """WITH … page: a page of matching issues (pull requests when pull), hit and score."""
        # The FTS hits come first, as their own materialized step, and each is then
        # checked (kind, readable repository) by primary key: the planner may never walk
        # every issue to find the few that match.
        return (
            "WITH hits AS MATERIALIZED ("
            "  SELECT rowid AS hit, bm25(issues_fts, 5.0, 1.0) AS score FROM issues_fts"
            "   WHERE issues_fts MATCH :q),"
            " page AS MATERIALIZED ("
            "  SELECT h.hit, h.score FROM hits h"
            "    JOIN issues k INDEXED BY issues_kind ON k.id = h.hit"
            "    JOIN repositories r ON r.id = k.repo_id"
            f"  WHERE k.is_pull = {int(pull)} AND {visible}"
            "   ORDER BY h.score, h.hit DESC LIMIT :limit OFFSET :offset)"
        )

    @staticmethod
    def user_hits() -> str:
        return (
            "SELECT u.id, u.username, u.name, u.avatar_hash, u.created_at FROM users_fts f"
            " JOIN users u ON u.id = f.rowid WHERE users_fts MATCH :q"
            " ORDER BY bm25(users_fts, 5.0, 1.0), u.id LIMIT :limit OFFSET :offset"
        )


class Database(DatabaseBase):
    """Writes go through one connection under BEGIN IMMEDIATE; reads use the others."""

    dialect = "sqlite"
    sql = SqliteSql()

    def __init__(
        self,
        path: str | Path,
        readers: int = 2,
        read_timeout_ms: int = READ_TIMEOUT_MS,
        write_timeout_ms: int = 5000,
    ) -> None:
        super().__init__()
        self.path = str(path)
        self.read_timeout_ms = read_timeout_ms
        self.write_timeout = write_timeout_ms / 1000
        self._reader_count = readers
        self._writer: aiosqlite.Connection | None = None
        self._readers: list[aiosqlite.Connection] = []
        self._next_reader = itertools.cycle(range(readers))

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
            await self._call(reader, _configure, int(self.write_timeout * 1000))
            self._readers.append(reader)

    def _setup_writer(self, conn: sqlite3.Connection) -> None:
        _configure(conn, int(self.write_timeout * 1000))
        conn.execute("PRAGMA journal_mode = WAL")
        if self.path == ":memory:":
            apply_migrations(conn)
            return
        # The list of applied migrations is read before each one's transaction: processes
        # starting together on one file take turns, so each migration applies once.
        with open(self.path + ".migrating", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
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
        return await self._write(fn, args, kwargs, time.monotonic() + self.write_timeout)

    async def _write(
        self, fn: Callable[..., T], args: Any, kwargs: Any, deadline: float, quiet: bool = False
    ) -> T:
        assert self._writer is not None, "database is not open"
        self.in_use += 1
        try:
            result = await self._call(self._writer, _transaction, fn, args, kwargs, deadline)
        except sqlite3.Error as exc:
            fault = fault_of(exc) or "error"
            self.last_write = (fault, time.monotonic())
            if fault == "busy":
                raise DatabaseBusy(waited=self.write_timeout) from exc
            if fault == "full":
                raise DiskFull(str(exc)) from exc
            raise
        else:
            self.last_write = ("ok", time.monotonic())
            if not quiet:
                for listener in self.write_listeners:
                    listener()
            return result
        finally:
            if not quiet:
                self.generation += 1
            self.in_use -= 1

    async def read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run fn(conn, ...) on a read connection."""
        assert self._readers, "database is not open"
        conn = self._readers[next(self._next_reader)]
        self.in_use += 1
        try:
            return await self._call(
                conn,
                _read_with_deadline,
                functools.partial(fn, **kwargs),
                self.read_timeout_ms,
                *args,
            )
        finally:
            self.in_use -= 1

    def pool_use(self) -> tuple[int, int, int]:
        """(transactions running or queued, connections, waiting): the writer and readers."""
        return self.in_use, self._reader_count + 1, 0


# -- the database file as a whole: backups, checks, and whether a server has it open --


def open_file(path: Path, read_only: bool = False) -> sqlite3.Connection:
    """A plain connection to a database file, for the command line's one-off work."""
    if read_only:
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    return sqlite3.connect(path, timeout=30, isolation_level=None)


def snapshot(source: Path, dest: Path) -> None:
    """Copy one consistent snapshot of a live database into a new self-contained file.

    The online backup runs in one read transaction; WAL lets the server keep writing.
    """
    live = sqlite3.connect(source, timeout=30)
    try:
        copy = sqlite3.connect(dest, isolation_level=None)
        try:
            live.backup(copy)
            copy.execute("PRAGMA journal_mode = DELETE")  # one file, no -wal beside it
        finally:
            copy.close()
    finally:
        live.close()


def integrity_problems(conn: sqlite3.Connection, foreign_keys: bool = True) -> list[str]:
    """What SQLite's own checks find wrong in a database (nothing: an empty list)."""
    problems = [row[0] for row in conn.execute("PRAGMA integrity_check") if row[0] != "ok"]
    if foreign_keys:
        problems += [
            f"{table} row {rowid} references a missing {parent} row"
            for table, rowid, parent, _ in conn.execute("PRAGMA foreign_key_check")
        ]
    return problems


def in_use(path: Path) -> bool:
    """True when another process has the database open (the server, say)."""
    if not path.exists():
        return False
    conn = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        # In WAL mode every open connection holds a shared lock; an exclusive-mode
        # write lock can only be taken when no other connection exists.
        conn.execute("PRAGMA locking_mode = EXCLUSIVE")
        conn.execute("BEGIN EXCLUSIVE")
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError as exc:
        return "locked" in str(exc) or "busy" in str(exc)
    except sqlite3.DatabaseError:
        return False  # not a database at all, so no server has it open
    finally:
        conn.close()
