"""PostgreSQL and Redis for the tests that need them: a fresh database or key prefix each.

Unset HUBSVC_TEST_POSTGRES_URL / HUBSVC_TEST_REDIS_URL: those tests skip with one line.
Set: the server must answer, or the test fails (CI sets both).
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator
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


def _migrated_template(server: str) -> str:
    """A database with every migration applied, made once per schema, copied per test.

    Copying it is a third of the cost of migrating an empty database each time.
    """
    import psycopg

    from hubsvc.store.engines.postgres import SQL_DIR, apply_migrations, connect

    digest = hashlib.sha256()
    for path in sorted(SQL_DIR.rglob("*.sql")):
        digest.update(path.name.encode() + path.read_bytes())
    name = "hubsvc_template_" + digest.hexdigest()[:16]
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(7243)")  # one worker makes it, others wait
        try:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                return name
            building = name + "_building"
            conn.execute(f'DROP DATABASE IF EXISTS "{building}"')
            conn.execute(f'CREATE DATABASE "{building}"')
            with connect(_with_database(server, building)) as raw:
                apply_migrations(raw)
            conn.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
            return name
        finally:
            conn.execute("SELECT pg_advisory_unlock(7243)")


def fresh_postgres_database(server: str, migrated: bool = True) -> Iterator[str]:
    """Create a database on server (migrated, or empty), yield its URL, drop it afterwards."""
    import psycopg

    name = "hubsvc_test_" + uuid.uuid4().hex[:16]
    template = f' TEMPLATE "{_migrated_template(server)}"' if migrated else ""
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{template}')
    try:
        yield _with_database(server, name)
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


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
