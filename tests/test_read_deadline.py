"""A read past database.read_timeout_ms is stopped: 503 with Retry-After, the reader free again."""

from __future__ import annotations

import pytest
from aiohttp import web

from hubsvc.app import create_app
from hubsvc.keys import STORE
from hubsvc.policy import requires
from hubsvc.store.engines.sqlite import ReadTimeout

from .conftest import make_config, sign_up

# Counts without end: only the deadline stops it.
ENDLESS = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT COUNT(*) FROM n"


def _endless(conn):
    return conn.execute(ENDLESS).fetchone()


async def test_slow_read_answers_503_and_frees_the_reader(aiohttp_client, tmp_path):
    app = create_app(make_config(tmp_path, database__read_timeout_ms=100))

    @requires("public")  # every route declares its action
    async def slow(request: web.Request) -> web.Response:
        await request.app[STORE].db.read(_endless)
        return web.json_response({})

    # A route of the test's own that runs a runaway query through the store's reader,
    # behind the app's real middlewares.
    app.router.add_get("/slow", slow)
    client = await aiohttp_client(app)
    for _ in range(3):  # more than there are readers: each one was freed
        resp = await client.get("/slow")
        assert resp.status == 503
        assert resp.headers["Retry-After"] == "1"
        body = await resp.json()
        assert "100 ms" in body["error"] and "read_timeout_ms" in body["error"]
    # Every reader answers again, and ordinary requests are unaffected.
    store = app[STORE]
    for _ in range(4):
        assert await store.db.read(lambda c: c.execute("SELECT 1").fetchone()[0]) == 1
    ada = await sign_up(client, "ada")
    resp = await client.get("/api/users/me", headers=ada.headers)
    assert resp.status == 200


async def test_store_read_raises_read_timeout(app, client):
    store = app[STORE]
    store.db.read_timeout_ms = 50
    with pytest.raises(ReadTimeout) as caught:
        await store.db.read(_endless)
    assert caught.value.status == 503
    # An ordinary SQL error is not mistaken for a timeout.
    with pytest.raises(Exception) as other:
        await store.db.read(lambda c: c.execute("SELECT * FROM no_such_table").fetchall())
    assert not isinstance(other.value, ReadTimeout) and "no_such_table" in str(other.value)
    assert await store.db.read(lambda c: c.execute("SELECT 2").fetchone()[0]) == 2
