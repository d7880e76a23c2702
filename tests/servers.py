"""PostgreSQL and Redis for the tests that need them: a fresh database or key prefix each.

Unset HUBSVC_TEST_POSTGRES_URL / HUBSVC_TEST_REDIS_URL: those tests skip with one line.
Set: the server must answer, or the test fails (CI sets both).
"""

from __future__ import annotations

import hashlib
import os
import threading
import uuid
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from urllib.parse import urlsplit, urlunsplit

import pytest

POSTGRES_ENV = "HUBSVC_TEST_POSTGRES_URL"
REDIS_ENV = "HUBSVC_TEST_REDIS_URL"


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def postgres_server() -> str:
    """The server URL from the environment, or a skip saying how to run the test."""
    url = os.environ.get(POSTGRES_ENV, "")
    if not url:
        pytest.skip(
            f"PostgreSQL tests need {POSTGRES_ENV} (e.g. postgresql://postgres@127.0.0.1/postgres)"
        )
    return url


def redis_server() -> str:
    """The Redis URL from the environment, or a skip saying how to run the test."""
    url = os.environ.get(REDIS_ENV, "")
    if not url:
        pytest.skip(f"Redis tests need {REDIS_ENV} (e.g. redis://127.0.0.1:6379/0)")
    return url


_templates: dict[str, str] = {}


def _migrated_template(server: str) -> str:
    """A database with every migration applied, made once per schema, copied per test.

    Copying it is a third of the cost of migrating an empty database each time.
    """
    if server in _templates:
        return _templates[server]
    import psycopg

    from hubsvc.store.engines.postgres import SQL_DIR, apply_migrations, connect

    digest = hashlib.sha256()
    for path in sorted(SQL_DIR.rglob("*.sql")):
        digest.update(path.name.encode() + path.read_bytes())
    name = "hubsvc_template_" + digest.hexdigest()[:16]
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(7243)")  # one worker makes it, others wait
        try:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                building = name + "_building"
                conn.execute(f'DROP DATABASE IF EXISTS "{building}"')
                conn.execute(f'CREATE DATABASE "{building}"')
                with connect(_with_database(server, building)) as raw:
                    apply_migrations(raw)
                conn.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
        finally:
            conn.execute("SELECT pg_advisory_unlock(7243)")
    _templates[server] = name
    return name


def _create(server: str, migrated: bool) -> str:
    """A new database on server (a copy of the migrated template, or empty): its name."""
    import psycopg

    name = "hubsvc_test_" + uuid.uuid4().hex[:16]
    template = f' TEMPLATE "{_migrated_template(server)}"' if migrated else ""
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{template}')
    return name


def _drop(server: str, name: str) -> None:
    import psycopg

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class _Databases:
    """Each test still gets a database no test used, but not on its own clock.

    CREATE DATABASE copies the template through the WAL and DROP DATABASE waits for a
    checkpoint: together seconds on a busy machine, once per PostgreSQL test. Here the
    next copies are made while a test runs, and the used ones dropped behind it (several
    drops at once share one checkpoint); the last drops are waited for at the session's end.
    """

    AHEAD = 2

    def __init__(self) -> None:
        self.makers = ThreadPoolExecutor(self.AHEAD, thread_name_prefix="pg-create")
        self.droppers = ThreadPoolExecutor(4, thread_name_prefix="pg-drop")
        self.ready: dict[tuple[str, bool], deque[Future[str]]] = {}
        self.dropping: list[Future[None]] = []
        self.lock = threading.Lock()

    def take(self, server: str, migrated: bool) -> str:
        with self.lock:
            queue = self.ready.setdefault((server, migrated), deque())
            # Empty databases are few (the migration and copy tests): made when asked.
            while len(queue) < (self.AHEAD + 1 if migrated else 1):
                queue.append(self.makers.submit(_create, server, migrated))
            made = queue.popleft()
        return made.result()

    def give_back(self, server: str, name: str) -> None:
        with self.lock:
            self.dropping = [f for f in self.dropping if not f.done()]
            self.dropping.append(self.droppers.submit(_drop, server, name))

    def close(self) -> None:
        """Drop what was made ahead and never used, then wait for every drop."""
        with self.lock:
            for (server, _), queue in self.ready.items():
                for made in queue:
                    try:
                        name = made.result()
                    except Exception:  # its making failed, and that test said so: nothing to drop
                        continue
                    self.dropping.append(self.droppers.submit(_drop, server, name))
            self.ready.clear()
            dropping, self.dropping = self.dropping, []
        for dropped in dropping:
            dropped.result()
        self.makers.shutdown()
        self.droppers.shutdown()


_databases: _Databases | None = None


def close_databases() -> None:
    """At the session's end: no database of this process's tests is left on the server."""
    global _databases
    if _databases is not None:
        _databases.close()
        _databases = None


def fresh_postgres_database(server: str, migrated: bool = True) -> Iterator[str]:
    """A database on server (migrated, or empty) no other test used: yield its URL, drop it."""
    global _databases
    if _databases is None:
        _databases = _Databases()
    name = _databases.take(server, migrated)
    try:
        yield _with_database(server, name)
    finally:
        _databases.give_back(server, name)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database of its own, dropped after the test."""
    yield from fresh_postgres_database(postgres_server(), migrated=False)


def _redis_prefix(url: str) -> Iterator[tuple[str, str]]:
    prefix = "hubsvc-test-" + uuid.uuid4().hex[:12]
    yield url, prefix
    import redis

    client = redis.Redis.from_url(url)
    try:
        for key in client.scan_iter(match=prefix + "*", count=1000):
            client.delete(key)
    finally:
        client.close()


@pytest.fixture
def redis_url() -> Iterator[tuple[str, str]]:
    """(url, prefix): the Redis server and a key prefix no other test uses; its keys deleted after."""
    yield from _redis_prefix(redis_server())
