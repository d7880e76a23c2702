"""The PostgreSQL database: a pool of psycopg connections, one thread hop per transaction.

psycopg 3's synchronous connections keep the store's shape (a transaction is one plain
function of a connection, run on a worker thread), so one set of store queries serves
SQLite and PostgreSQL; the differences live here: placeholders, rows, isolation,
faults, migrations and search.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import re
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from ...errors import DatabaseBusy, DatabaseUnreachable, DiskFull
from ...metrics import DB_READ, DB_WRITE
from .common import DatabaseBase
from .sqlite import READ_TIMEOUT_MS, SQL_DIR, ReadTimeout

log = logging.getLogger("hubsvc.store")
T = TypeVar("T")

# Migrations before this number are folded into sql/postgres/<BASELINE>_schema.sql: the
# SQLite files rebuild tables in ways PostgreSQL does not need.
BASELINE = 29
# Held while migrating, so processes starting together apply each migration once.
_MIGRATION_LOCK = 0x6875627376630001
# A statement is prepared on a connection once used this often there; at most this many
# stay prepared per connection (psycopg deallocates the least recently used).
PREPARE_THRESHOLD = 1
PREPARED_MAX = 256
# Held for a server's life (startup.claim_database): shared by servers that share state
# through Redis, exclusive by one without it (a second process would run with split state).
SERVER_LOCK = 0x6875627376630002


def _driver() -> Any:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - the message is the point
        raise RuntimeError(
            "[database] url names PostgreSQL, but psycopg is not installed:"
            " pip install 'hubsvc[postgres]'"
        ) from None
    return psycopg


# --- SQL text: the store writes SQLite's placeholders; PostgreSQL's are translated --------

_TOKENS = re.compile(
    r"""('(?:[^']|'')*')"""  # a string literal, kept as it is
    r"""|("(?:[^"]|"")*")"""  # a quoted identifier
    r"|(::)"  # a cast, not a named parameter
    r"|(\?)"  # a positional parameter
    r"|:([A-Za-z_][A-Za-z0-9_]*)"  # a named parameter
    r"|(%)"  # a literal percent sign
)


def _token(match: re.Match[str]) -> str:
    literal, ident, cast, positional, named, percent = match.groups()
    if positional:
        return "%s"
    if named:
        return f"%({named})s"
    if percent:
        return "%%"
    return literal or ident or cast


@functools.lru_cache(maxsize=4096)
def translate(sql: str) -> str:
    """SQLite's `?` and `:name` placeholders as psycopg's `%s` and `%(name)s`."""
    return _TOKENS.sub(_token, sql)


def _param(value: Any) -> Any:
    # Booleans are INTEGER 0/1 columns on both databases, as SQLite stores them.
    return int(value) if isinstance(value, bool) else value


def _params(params: Any) -> Any:
    if params is None:
        return None
    if isinstance(params, dict):
        return {key: _param(value) for key, value in params.items()}
    return [_param(value) for value in params]


class Row:
    """A result row read by position or by column name, like sqlite3.Row."""

    __slots__ = ("_index", "_values")

    def __init__(self, values: Sequence[Any], index: dict[str, int]) -> None:
        self._values = values
        self._index = index

    def __getitem__(self, key: int | str | slice) -> Any:
        if isinstance(key, str):
            return self._values[self._index[key]]
        return self._values[key]

    def keys(self) -> list[str]:
        return list(self._index)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        return tuple(self._values) == (tuple(other) if isinstance(other, Row | tuple) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Row({dict(zip(self._index, self._values, strict=True))!r})"


# Column name -> position, per result shape (its raw field names): psycopg's
# `description` builds a Column object per column on each access (a page of issues
# has 86 columns: ~0.1 ms a call), so it is read once per shape. The store has a few
# hundred statements; the cap only guards against a caller making shapes endlessly.
_INDEXES: dict[tuple[bytes | None, ...], dict[str, int]] = {}


def row_factory(cursor: Any) -> Callable[[Sequence[Any]], Row]:
    res = cursor.pgresult
    shape = tuple(res.fname(i) for i in range(res.nfields)) if res is not None else ()
    index = _INDEXES.get(shape)
    if index is None:
        index = {column.name: i for i, column in enumerate(cursor.description or ())}
        if len(_INDEXES) >= 4096:
            _INDEXES.clear()
        _INDEXES[shape] = index
    return lambda values: Row(values, index)


# libpq's ExecStatus of a result with rows: TUPLES_OK, SINGLE_TUPLE, TUPLES_CHUNK (the
# numbers, so psycopg, an optional dependency, is not imported at load).
_ROWS_STATUS = frozenset({2, 9, 12})


def _has_rows(cursor: Any) -> bool:
    """Whether the result holds rows: `cursor.description is not None`, without its Columns."""
    res = cursor.pgresult
    return res is not None and bool(res.nfields or res.status in _ROWS_STATUS)


class Cursor:
    """The part of sqlite3.Cursor the store uses, over a psycopg cursor."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return int(self._cursor.rowcount)

    @property
    def lastrowid(self) -> int:
        raise AttributeError("PostgreSQL has no lastrowid: use INSERT … RETURNING id")

    def fetchone(self) -> Row | None:
        return self._cursor.fetchone() if _has_rows(self._cursor) else None

    def fetchall(self) -> list[Row]:
        return self._cursor.fetchall() if _has_rows(self._cursor) else []

    def __iter__(self) -> Iterator[Row]:
        return iter(self.fetchall())


class Connection:
    """The part of sqlite3.Connection the store uses, over a psycopg connection.

    server_bound (reads): statements go with their parameters bound on the server, so
    psycopg prepares each one on its second use on a pooled connection and the server
    parses and plans it once per connection, not on every call (_server_form). Writes
    stay bound on the client: their SERIALIZABLE retries roll back, and a ROLLBACK
    empties psycopg's prepared cache, so preparing them would buy nothing.
    """

    dialect = "postgresql"

    def __init__(self, conn: Any, server_bound: bool = False) -> None:
        self.raw = conn
        self.server_bound = server_bound

    def execute(self, sql: str, params: Any = None) -> Cursor:
        if self.server_bound and sql not in _CLIENT_BOUND:
            form = _server_form(sql, params)
            if form is not None:
                text, values, prepare = form
                # psycopg.Cursor, not the connection's factory (ClientCursor, for writes)
                cursor = _driver().Cursor(self.raw)
                try:
                    cursor.execute(text, values, prepare=prepare)
                    return Cursor(cursor)
                except Exception as exc:
                    if not _needs_client_binding(exc):
                        raise
                    # A parameter whose type only the literal told (autocommit: nothing
                    # else was undone); this statement is bound on the client from now on.
                    _CLIENT_BOUND.add(sql)
                    log.info("statement bound on the client from now on: %s (%s)", sql, exc)
        cursor = self.raw.cursor()
        cursor.execute(translate(sql), _params(params))
        return Cursor(cursor)

    def executemany(self, sql: str, seq: Any) -> Cursor:
        cursor = self.raw.cursor()
        cursor.executemany(translate(sql), [_params(p) for p in seq])
        return Cursor(cursor)


# --- server-side binding for reads ------------------------------------------------------

# Statements that failed bound on the server (a parameter PostgreSQL could not type).
_CLIENT_BOUND: set[str] = set()

# `IN (?, ?, …)` (or NOT IN) with only positional marks: its length changes with the call.
_IN_LIST = re.compile(r"(?i)\b(NOT\s+)?IN\s*\(\s*\?(?:\s*,\s*\?)*\s*\)")
_POSITIONAL = re.compile(r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|(\?)""")


def _needs_client_binding(exc: BaseException) -> bool:
    # Class 42 (an operator or function for an untyped or wrongly typed parameter, an
    # undeterminable type), 22P02/22003 (text or a small int where the literal coerced)
    # and 0A000 (a cached plan's result type changed).
    sqlstate = getattr(exc, "sqlstate", None) or ""
    return sqlstate.startswith("42") or sqlstate in ("22P02", "22003", "0A000")


@functools.lru_cache(maxsize=4096)
def _in_lists(sql: str) -> tuple[tuple[int, int, int, int, bool], ...]:
    """Each IN list of marks in sql: (start, end, first mark's index, marks, negated)."""
    found = []
    for match in _IN_LIST.finditer(sql):
        before = sum(1 for m in _POSITIONAL.finditer(sql, 0, match.start()) if m.group(1))
        marks = match.group(0).count("?")
        found.append((match.start(), match.end(), before, marks, bool(match.group(1))))
    return tuple(found)


@functools.lru_cache(maxsize=4096)
def _with_arrays(sql: str, kinds: tuple[str, ...]) -> str:
    """sql with its IN lists as `= ANY(?::kind[])` (`<> ALL` when negated), translated."""
    parts, at = [], 0
    for (start, end, _, _, negated), kind in zip(_in_lists(sql), kinds, strict=True):
        test = "<> ALL" if negated else "= ANY"
        parts += [sql[at:start], f"{test}(?::{kind}[])"]
        at = end
    return translate("".join(parts) + sql[at:])


def _kind(values: Sequence[Any]) -> str | None:
    if all(type(v) is int for v in values):
        return "bigint"
    if all(type(v) is str for v in values):
        return "text"
    return None


def _server_form(sql: str, params: Any) -> tuple[str, Any, bool | None] | None:
    """(text, parameters, prepare) to send sql bound on the server; None: bind on the client.

    An IN list of marks becomes one array parameter, so a page of 30 ids and a page of 29
    are one prepared statement, not one each crowding the others out of psycopg's cache
    (prepared_max per connection).
    """
    lists = _in_lists(sql)
    if not lists:
        return translate(sql), _params(params), None
    if not isinstance(params, list | tuple):
        return None  # named parameters with IN lists of marks: not written in the store
    values = _params(params)
    out: list[Any] = []
    kinds = []
    at = 0
    for _, _, first, marks, _ in lists:
        group = values[first : first + marks]
        kind = _kind(group)
        if kind is None:
            return None
        kinds.append(kind)
        out += [*values[at:first], group]
        at = first + marks
    out += values[at:]
    return _with_arrays(sql, tuple(kinds)), out, None


# Held from taking event ids until commit: event writers commit in id order.
EVENT_LOCK = 0x6875627376630003


def reserve_event_ids(conn: Connection, count: int) -> int:
    """The first of count consecutive event ids, taken last in the transaction.

    The advisory lock waits for every other event writer's commit, so ids are commit
    order; only its holder calls the sequence, so the count ids are consecutive. A
    transaction that rolls back after taking ids leaves a gap, which readers skip over
    (a cursor means "every event up to here", not "this many"). A counter row gave the
    same order, but under SERIALIZABLE every writer waiting on it failed and reran its
    whole change (benchmarks/bench_event_log.py: 0.11x a plain sequence at 16 writers).
    """
    conn.execute("SELECT pg_advisory_xact_lock(?)", (EVENT_LOCK,))
    rows = conn.execute(
        "SELECT nextval('events_id_seq') FROM generate_series(1, ?)", (count,)
    ).fetchall()
    return int(rows[0][0])


# --- the dialect the store's queries take pieces from --------------------------------


# A subquery, so a prepared statement's generic plan parses the query once (an InitPlan),
# not once per matching row for the index recheck and again for ts_rank: the parameter
# keeps it from being folded into a constant as a literal is (10,000 issues, `error`
# matching 2,374: the ranked page 4.8 -> 3.2 ms of server CPU; benchmarks/README.md).
_TSQUERY = "(SELECT to_tsquery('simple', :{}))"


class PostgresSql:
    """What the store's queries take from PostgreSQL's dialect: tsvector search and quirks."""

    star_order = "s.seq"  # stars in the order they were given
    lateral_joins = True  # LATERAL (a join the planner may memoize per key)
    optimize: str | None = None  # autovacuum keeps the planner's statistics

    @staticmethod
    def json_array_has_lower(column: str) -> str:
        """A condition: the JSON array of strings in column holds `?` (lower-cased)."""
        return (
            f"EXISTS (SELECT 1 FROM json_array_elements_text({column}::json) l(v)"
            " WHERE lower(l.v) = ?)"
        )

    @staticmethod
    def json_items(column: str) -> str:
        """A FROM item: the elements of the JSON array (text) in column as e(key, value),
        key their place in it."""
        return f"json_array_elements_text({column}::json) WITH ORDINALITY e(value, key)"

    @staticmethod
    def json_list(kind: str, values: list[str]) -> str:
        """A JSON array (text): the string kind, then values (SQL expressions)."""
        return f"json_build_array('{kind}', {', '.join(values)})::text"

    @staticmethod
    def text_agg(expr: str, sep: str) -> str:
        """An aggregate: the group's texts joined by sep, in no set order."""
        return f"string_agg({expr}, '{sep}')"

    @staticmethod
    def highest_id(conn: Connection, table: str) -> int:
        """The highest id an identity column ever handed out (0: none)."""
        row = conn.execute(
            "SELECT pg_sequence_last_value(pg_get_serial_sequence(?, 'id'))", (table,)
        ).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    @staticmethod
    def fts_query(groups: list[tuple[list[str], bool]], names_only: bool = False) -> str:
        """Word groups as a tsquery: each a required phrase (<->), a prefix (:*) unless quoted."""
        # The words are letters and digits only, so no tsquery syntax reaches the server.
        weight = "A" if names_only else ""
        phrases = []
        for words, prefix in groups:
            last = len(words) - 1
            terms = [
                w.lower() + ":" + ("*" if prefix and i == last else "") + weight
                if (prefix and i == last) or weight
                else w.lower()
                for i, w in enumerate(words)
            ]
            phrases.append("(" + " <-> ".join(terms) + ")")
        return " & ".join(phrases)

    @staticmethod
    def fts_either(first: str, second: str) -> str:
        return f"({first}) | ({second})"

    @staticmethod
    def repository_matches(param: str) -> str:
        return "r.search_words @@ " + _TSQUERY.format(param)

    @staticmethod
    def repository_hits(where: str) -> str:
        """A page of matching repositories: hit (the id) and score (lower is better)."""
        q = _TSQUERY.format("q")
        return (
            f"SELECT r.id AS hit, -ts_rank(r.search_words, {q}) AS score FROM repositories r"
            f" WHERE r.search_words @@ {q} AND {where}"
            " ORDER BY score, r.id DESC LIMIT :limit OFFSET :offset"
        )

    @staticmethod
    def issue_hits(visible: str, pull: bool) -> str:
        """WITH … page: a page of matching issues (pull requests when pull), hit and score."""
        q = _TSQUERY.format("q")
        return (
            "WITH page AS MATERIALIZED ("
            f" SELECT k.id AS hit, -ts_rank(k.search_words, {q}) AS score"
            "   FROM issues k JOIN repositories r ON r.id = k.repo_id"
            f"  WHERE k.search_words @@ {q} AND k.is_pull = {int(pull)} AND {visible}"
            "  ORDER BY score, k.id DESC LIMIT :limit OFFSET :offset)"
        )

    @staticmethod
    def user_hits() -> str:
        q = _TSQUERY.format("q")
        return (
            "SELECT u.id, u.username, u.name, u.avatar_hash, u.created_at FROM users u"
            f" WHERE u.search_words @@ {q}"
            f" ORDER BY -ts_rank(u.search_words, {q}), u.id LIMIT :limit OFFSET :offset"
        )


# --- faults -----------------------------------------------------------------------------


def fault_of(exc: BaseException) -> str | None:
    """ "full" for a full disk, "busy" for a lock wait or lost server, else None."""
    try:
        import psycopg
        from psycopg import errors
    except ImportError:
        return None
    if isinstance(exc, errors.DiskFull | errors.OutOfMemory):
        return "full"
    if isinstance(exc, errors.LockNotAvailable | errors.QueryCanceled | errors.AdminShutdown):
        return "busy"
    if isinstance(exc, psycopg.OperationalError):
        return "busy"  # the server went away or refused the connection: try again shortly
    try:
        from psycopg_pool import PoolTimeout
    except ImportError:
        return None
    return "busy" if isinstance(exc, PoolTimeout) else None


def unreachable(exc: BaseException) -> bool:
    """Whether exc says the server is gone (restarting, down, the connection cut)."""
    import psycopg
    from psycopg import errors

    gone = errors.AdminShutdown | errors.CrashShutdown | errors.CannotConnectNow
    if isinstance(exc, gone | errors.ConnectionException):
        return True
    # The client's own error for a connection lost or refused carries no SQLSTATE; the
    # server's (a full disk, a serialization failure: OperationalError too) always one.
    return isinstance(exc, psycopg.OperationalError) and exc.sqlstate is None


def _retryable(exc: BaseException) -> bool:
    from psycopg import errors

    return isinstance(exc, errors.SerializationFailure | errors.DeadlockDetected)


# --- migrations -------------------------------------------------------------------------


def migration_plan(sql_dir: Path = SQL_DIR) -> list[tuple[int, str, Path]]:
    """PostgreSQL's migrations in order: the baseline, then each later one's own file.

    `sql/postgres/NNNN_name.sql` replaces `sql/NNNN_name.sql` where the SQLite text
    cannot serve (AUTOINCREMENT, WITHOUT ROWID, FTS5, table rebuilds).
    """
    own = {
        int(p.name[:4]): p
        for p in (sql_dir / "postgres").glob("*.sql")
        if re.match(r"^\d{4}_[a-z0-9_]+\.sql$", p.name)
    }
    common = {
        int(p.name[:4]): p
        for p in sql_dir.glob("*.sql")
        if re.match(r"^\d{4}_[a-z0-9_]+\.sql$", p.name)
    }
    plan = []
    for version in sorted(set(own) | set(common)):
        if version < BASELINE:
            continue
        path = own.get(version) or common[version]
        plan.append((version, path.stem[5:], path))
    return plan


def apply_migrations(raw: Any, sql_dir: Path = SQL_DIR) -> list[int]:
    """Apply every migration not yet recorded, each in its own transaction, under a lock."""
    raw.autocommit = True
    raw.execute("SELECT pg_advisory_lock(%s)", (_MIGRATION_LOCK,))
    applied = []
    try:
        raw.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        done = {row[0] for row in raw.execute("SELECT version FROM schema_migrations")}
        for version, name, path in migration_plan(sql_dir):
            if version in done:
                continue
            with raw.transaction():
                raw.execute(path.read_text())
                folded = range(1, version) if version == BASELINE else ()
                for number in [*folded, version]:
                    raw.execute(
                        "INSERT INTO schema_migrations VALUES (%s, %s,"
                        " to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'))"
                        " ON CONFLICT DO NOTHING",
                        (number, name if number == version else "baseline"),
                    )
            log.info("applied migration %04d_%s", version, name)
            applied.append(version)
    finally:
        raw.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))
    return applied


def connect(url: str, autocommit: bool = True) -> Any:
    """A plain connection, for the command line's one-off work."""
    psycopg = _driver()
    return psycopg.connect(url, autocommit=autocommit, cursor_factory=psycopg.ClientCursor)


# --- the database -----------------------------------------------------------------------


class PostgresDatabase(DatabaseBase):
    """A pool of connections; every write is a SERIALIZABLE transaction, retried on conflict.

    SERIALIZABLE keeps what SQLite's single writer gave every check-then-act step
    (first account, last admin, counts, single-use tokens): a conflicting pair of
    writes becomes one commit and one retry, never two commits that each saw the other
    missing.
    """

    dialect = "postgresql"
    sql = PostgresSql()

    def __init__(
        self,
        url: str,
        pool_size: int = 10,
        read_timeout_ms: int = READ_TIMEOUT_MS,
        write_timeout_ms: int = 5000,
    ) -> None:
        super().__init__()
        self.url = url
        self.path = url  # what messages name the database by
        self.pool_size = pool_size
        self.read_timeout_ms = read_timeout_ms
        self.write_timeout = write_timeout_ms / 1000
        self._pool: Any = None
        self._threads: ThreadPoolExecutor | None = None
        self._checking = False

    def _configure(self, conn: Any) -> None:
        psycopg = _driver()
        conn.cursor_factory = psycopg.ClientCursor
        conn.row_factory = row_factory
        # Reads run outside a transaction, under the session's statement_timeout; writes
        # lift it for their transaction (_transaction). A prepared statement's plan is
        # made once and kept: by default (plan_cache_mode auto) PostgreSQL plans it again
        # with its values for its first five executions on each connection, and the issue
        # statements' correlated access checks take 10-20 ms to plan, against under 6 ms
        # to run (benchmarks/README.md, item 3). Writes are bound on the client: unaffected.
        # No JIT: a generic plan guesses a LIMIT parameter keeps 10% of the rows, so at
        # 100,000 issues a page's estimate passed jit_above_cost and every execution
        # compiled 500 functions first (0.5 s, for a statement that runs in 6 ms).
        # An index probe costs about a sequential page read: the store's tables are read
        # from shared buffers and the page cache, not from spinning disks (random_page_cost
        # 4 made a page's generic plan hash every assignee of the database for 31 ids:
        # 10,000 issues, a page's server CPU 1.6 -> 1.15 ms; benchmarks/README.md, round 4).
        conn.autocommit = True
        conn.execute(
            f"SET statement_timeout = {int(self.read_timeout_ms)};"
            " SET plan_cache_mode = force_generic_plan; SET jit = off;"
            " SET random_page_cost = 1.1"
        )
        # A read statement is prepared on its second use on this connection (Connection:
        # server_bound); the store has a few hundred distinct ones, IN lists folded.
        conn.prepare_threshold = PREPARE_THRESHOLD
        conn.prepared_max = PREPARED_MAX

    async def open(self) -> None:
        """Open the pool and apply the migrations."""
        _driver()
        from psycopg_pool import ConnectionPool

        self._threads = ThreadPoolExecutor(self.pool_size, thread_name_prefix="hubsvc-pg")
        loop = asyncio.get_running_loop()

        def start() -> Any:
            with connect(self.url) as raw:
                apply_migrations(raw)
            pool = ConnectionPool(
                self.url,
                min_size=1,
                max_size=self.pool_size,
                configure=self._configure,
                timeout=max(self.write_timeout, self.read_timeout_ms / 1000),
                open=False,
            )
            pool.open(wait=True, timeout=30)
            return pool

        self._pool = await loop.run_in_executor(self._threads, start)

    async def close(self) -> None:
        """Close the pool and its threads."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await asyncio.get_running_loop().run_in_executor(self._threads, pool.close)
        if self._threads is not None:
            self._threads.shutdown(wait=False)
            self._threads = None
        self._ping_ok_at = float("-inf")

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        assert self._pool is not None and self._threads is not None, "database is not open"
        return await asyncio.get_running_loop().run_in_executor(
            self._threads, functools.partial(fn, *args)
        )

    def _transaction(self, fn: Callable[..., T], args: Any, kwargs: Any, deadline: float) -> T:
        attempt = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DatabaseBusy(waited=self.write_timeout)
            try:
                started = 0.0
                try:
                    with self._pool.connection(timeout=left) as raw:
                        started = time.perf_counter()  # from the connection's lending on
                        raw.autocommit = False  # a read left it on
                        ms = max(1, int((deadline - time.monotonic()) * 1000))
                        # One round trip for the three settings (the client cursor sends
                        # them as one simple query).
                        raw.execute(
                            "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE;"
                            f" SET LOCAL lock_timeout = {ms}; SET LOCAL statement_timeout = 0"
                        )
                        result = fn(Connection(raw), *args, **kwargs)
                        # the pool's context commits on a clean exit, rolls back otherwise
                finally:
                    if started:
                        DB_WRITE.observe(time.perf_counter() - started)
                return result
            except Exception as exc:
                if _retryable(exc) and time.monotonic() < deadline:
                    # Another transaction won the race: run again on fresh data, after a
                    # random pause that grows, so writers of one row stop colliding in step.
                    attempt += 1
                    time.sleep(random.uniform(0, min(0.05, 0.001 * 2**attempt)))
                    continue
                raise

    def _lost(self, exc: BaseException) -> DatabaseUnreachable:
        """The server went away: the error to raise; the pool's dead connections go now."""
        # Else each idle connection the restart killed would fail one more request.
        if not self._checking and self._pool is not None and self._threads is not None:
            self._checking = True
            pool = self._pool

            def check() -> None:
                try:
                    pool.check()
                except Exception as err:  # the server is still down: the next failure retries
                    log.warning("checking the database pool's connections failed: %s", err)
                finally:
                    self._checking = False

            self._threads.submit(check)
        return DatabaseUnreachable(str(exc).strip() or type(exc).__name__)

    async def write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run fn(conn, ...) in one transaction, retried whole on a serialization failure."""
        return await self._write(fn, args, kwargs, time.monotonic() + self.write_timeout)

    async def _write(
        self, fn: Callable[..., T], args: Any, kwargs: Any, deadline: float, quiet: bool = False
    ) -> T:
        try:
            result = await self._run(self._transaction, fn, args, kwargs, deadline)
        except Exception as exc:
            fault = fault_of(exc)
            gone = unreachable(exc)
            if fault is not None or isinstance(exc, DatabaseBusy | DiskFull):
                self.last_write = ("unavailable" if gone else fault or "busy", time.monotonic())
            if isinstance(exc, DatabaseBusy | DiskFull):
                raise
            if gone:
                raise self._lost(exc) from exc
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

    def _read(self, fn: Callable[..., Any], args: Any) -> Any:
        from psycopg import errors

        with self._pool.connection() as raw:
            started = time.perf_counter()
            # Autocommit: a read was BEGIN, SET LOCAL statement_timeout, the query and
            # COMMIT, four round trips for one statement; now each statement is one, and
            # the timeout is the session's (_configure). Each statement of a read saw its
            # own snapshot under READ COMMITTED before too.
            raw.autocommit = True
            try:
                return fn(Connection(raw, server_bound=True), *args)
            except errors.QueryCanceled:
                raise ReadTimeout(self.read_timeout_ms) from None
            finally:
                DB_READ.observe(time.perf_counter() - started)

    def pool_use(self) -> tuple[int, int, int]:
        """(connections lent out, pool_size, transactions waiting for a connection)."""
        if self._pool is None:
            return 0, self.pool_size, 0
        stats = self._pool.get_stats()
        size = stats.get("pool_size", 0)
        return (
            size - stats.get("pool_available", 0),
            self.pool_size,
            stats.get("requests_waiting", 0),
        )

    async def read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run fn(conn, ...) in a read transaction, stopped past read_timeout_ms."""
        try:
            result: T = await self._run(self._read, functools.partial(fn, **kwargs), args)
        except Exception as exc:
            if unreachable(exc):
                raise self._lost(exc) from exc
            raise
        return result
