"""Real faults: a full disk, a held database lock, clients that hang up or stall, git caps."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import sqlite3
from pathlib import Path

from hubsvc.app import create_app
from hubsvc.keys import STORE

from .conftest import make_config, sign_up
from .server import ServerProcess
from .test_git_http import PNG
from .test_repos import create

BUSY = {"error": "the database is busy, try again"}
FULL = {"error": "the server's disk is full"}


def _children_running(word: str, parent: int | None = None) -> list[int]:
    """Pids of the children of parent (this process) whose command line holds word."""
    found = []
    me = str(parent or os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError):
            continue
        if ppid == me and word in cmdline:
            found.append(int(entry.name))
    return found


async def _until(predicate, what: str, tries: int = 400) -> None:
    for _ in range(tries):
        if predicate():
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"never happened: {what}")


# --- a database held by another connection -------------------------------------------


async def test_a_held_lock_answers_503_busy_once_then_health_recovers(
    aiohttp_client, tmp_path, caplog
):
    app = create_app(make_config(tmp_path, database__write_timeout_ms=300))
    client = await aiohttp_client(app)
    alice = await sign_up(client, "alice")
    holder = sqlite3.connect(tmp_path / "data" / "hubsvc.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        caplog.set_level(logging.INFO)
        # Three writes queued at once all give up at the one deadline with the same
        # answer (before: 500, after 5 s, then 10, then 14.5).
        answers = await asyncio.gather(
            *[
                client.post("/api/repositories", json={"name": f"p{n}"}, headers=alice.headers)
                for n in range(3)
            ]
        )
        for resp in answers:
            assert resp.status == 503
            assert resp.headers["Retry-After"] == "1"
            assert await resp.json() == BUSY
        # A read still works under the lock (WAL).
        assert (await client.get("/api/users/me", headers=alice.headers)).status == 200
        resp = await client.get("/health")
        body = await resp.json()
        assert resp.status == 503 and body["status"] == "degraded" and body["database"] == "busy"
        assert body["faults"]["databaseBusy"] == 3
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    busy = [r for r in caplog.records if "database busy" in r.getMessage()]
    assert len(busy) == 3 and all(r.exc_info is None for r in busy)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    await create(client, alice, "after")
    resp = await client.get("/health")
    assert resp.status == 200 and (await resp.json())["database"] == "ok"


# --- a full disk -----------------------------------------------------------------------


def _fill(folder: Path) -> Path:
    """Write a file until the filesystem has no room left; returns it."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(os.urandom(1 << 16))
        except OSError:
            pass
    # The last partial block may not have fit; small writes take what is left.
    with open(folder / "crumbs", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"x" * 512)
        except OSError:
            pass
    return filler


async def test_a_full_disk_answers_507_and_health_says_so(aiohttp_client, small_disk, caplog):
    config = make_config(small_disk, server__min_free_mb=1)
    config["storage"]["data_dir"] = str(small_disk / "data")
    client = await aiohttp_client(create_app(config))
    alice = await sign_up(client, "alice")
    await create(client, alice, "proj")
    issue = await client.post(
        "/api/repositories/alice/proj/issues", json={"title": "t"}, headers=alice.headers
    )
    assert issue.status == 201
    caplog.set_level(logging.INFO)
    filler = _fill(small_disk)
    # Comments, avatar uploads and sign-ins, as the issue lists them (before: 500).
    big = "w" * 60000
    for _ in range(3):  # enough writes to need new pages whatever space the WAL had
        resp = await client.post(
            "/api/repositories/alice/proj/issues/1/comments",
            json={"body": big},
            headers=alice.headers,
        )
        if resp.status != 201:
            break
    assert resp.status == 507 and await resp.json() == FULL
    resp = await client.patch(
        "/api/users/me/avatar",
        data=PNG + b"\0" * 200000,
        headers={**alice.headers, "Content-Type": "image/png"},
    )
    assert resp.status == 507 and await resp.json() == FULL
    resp = await client.post("/api/repositories", json={"name": "more"}, headers=alice.headers)
    assert resp.status == 507 and await resp.json() == FULL
    resp = await client.post(
        "/auth/sign-in", json={"username": "alice", "password": alice.password}
    )
    assert resp.status == 507 and await resp.json() == FULL
    resp = await client.get("/health")
    body = await resp.json()
    assert resp.status == 503 and body["status"] == "degraded" and body["database"] == "full"
    assert body["disk"]["low"] is True and body["disk"]["freeBytes"] < 1 << 20
    assert body["faults"]["diskFull"] >= 3 and body["warnings"]
    full = [r for r in caplog.records if r.getMessage().startswith("disk full")]
    assert full and all(r.exc_info is None for r in full)
    assert not [r for r in caplog.records if "unexpected error" in r.getMessage()]
    # Space comes back: so do writes.
    filler.unlink()
    (small_disk / "crumbs").unlink()
    resp = await client.post(
        "/auth/sign-in", json={"username": "alice", "password": alice.password}
    )
    assert resp.status == 200
    resp = await client.get("/health")
    assert resp.status == 200 and (await resp.json())["database"] == "ok"


# --- clients that hang up or stall -----------------------------------------------------


def _basic(user) -> str:
    return base64.b64encode(f"{user.username}:{user.password}".encode()).decode()


class _Account:
    def __init__(self, username: str, password: str) -> None:
        self.username, self.password = username, password


def _pkt(text: str) -> bytes:
    return f"{len(text) + 4:04x}".encode() + text.encode()


# The start of a push: one ref to create, then a pack that announces an object and
# stops, so git waits for the rest of the body.
PUSH_START = (
    _pkt("0" * 40 + " " + "1" * 40 + " refs/heads/new\0report-status\n")
    + b"0000"
    + b"PACK\x00\x00\x00\x02\x00\x00\x00\x01"
)


async def _start_push(client, user, length: int = 100000, parent: int | None = None):
    """A raw connection that has sent the head and the start of a push body."""
    reader, writer = await _open(client)
    writer.write(
        (
            f"POST /{user.username}/proj.git/git-receive-pack HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Basic {_basic(user)}\r\n"
            "Content-Type: application/x-git-receive-pack-request\r\n"
            f"Content-Length: {length}\r\n\r\n"
        ).encode()
        + PUSH_START
    )
    await writer.drain()
    await _until(lambda: _children_running("receive-pack", parent), "git receive-pack started")
    return reader, writer


async def _open(client):
    if isinstance(client, ServerProcess):
        return await asyncio.open_connection("127.0.0.1", client.port)
    return await asyncio.open_connection(client.server.host, client.server.port)


async def test_a_client_hanging_up_mid_body_is_499_not_an_error(tmp_path):
    # A real server process: aiohttp's test server cancels handlers on a disconnect,
    # run_app (what runs in production) does not, and that is the case that logged 500s.
    server = ServerProcess(tmp_path / "data").start()
    try:
        status, body = server.request(
            "POST",
            "/auth/sign-up",
            {"email": "a@example.com", "username": "alice", "password": "12345678", "name": "A"},
        )
        headers = {"Authorization": f"Bearer {body['token']}"}
        assert (
            server.request(
                "POST", "/api/repositories", {"name": "proj", "autoInit": True}, headers
            )[0]
            == 201
        )
        pid = server.proc.pid
        # A push that sends part of its pack, then goes.
        reader, writer = await _start_push(server, _Account("alice", "12345678"), parent=pid)
        writer.close()
        await writer.wait_closed()
        # The git process it started is killed, not left to wait for the rest.
        await _until(lambda: not _children_running("receive-pack", pid), "git receive-pack killed")
        # A JSON body cut short.
        reader, writer = await _open(server)
        writer.write(
            (
                f"POST /api/repositories HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: {headers['Authorization']}\r\n"
                "Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
                '{"name": "half'
            ).encode()
        )
        await writer.drain()
        await asyncio.sleep(0.1)
        writer.close()
        await writer.wait_closed()
        await _until(
            lambda: server.logs().count("client closed the connection") == 2,
            "two 'client closed' lines",
        )
        await _until(lambda: server.logs().count('" 499 ') == 2, "two 499 access lines")
        assert server.request("GET", "/api/repositories/alice/half", headers=headers)[0] == 404
        assert server.request("GET", "/health")[1]["faults"]["clientClosed"] == 2
    finally:
        server.stop()
    logs = server.logs()
    assert " INFO hubsvc.errors " in logs and "client closed the connection" in logs
    assert "Traceback" not in logs and " ERROR " not in logs, logs


async def test_a_stalled_body_is_ended_with_408_and_its_git_killed(aiohttp_client, tmp_path):
    client = await aiohttp_client(create_app(make_config(tmp_path, server__body_timeout_seconds=1)))
    alice = await sign_up(client, "alice")
    await create(client, alice, "proj", autoInit=True)
    reader, writer = await _start_push(client, alice)
    # Then nothing more: the server answers and closes (before: it waited forever).
    answer = await asyncio.wait_for(reader.read(), 60)
    writer.close()
    await writer.wait_closed()
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert b"the request body arrived too slowly" in answer
    assert not _children_running("receive-pack")


async def test_a_request_head_that_never_ends_is_closed(aiohttp_client, tmp_path):
    client = await aiohttp_client(
        create_app(make_config(tmp_path, server__header_timeout_seconds=1))
    )
    reader, writer = await _open(client)
    writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    await writer.drain()
    # Before: aiohttp's keep-alive default held it for an hour (75 s under run_app).
    assert await asyncio.wait_for(reader.read(), 60) == b""
    writer.close()
    await writer.wait_closed()


# --- a cap on git processes --------------------------------------------------------------


async def test_git_processes_past_the_per_client_cap_get_503(aiohttp_client, tmp_path):
    client = await aiohttp_client(
        create_app(make_config(tmp_path, server__git_processes_per_client=1))
    )
    alice = await sign_up(client, "alice")
    await create(client, alice, "proj", autoInit=True)
    reader, writer = await _start_push(client, alice)
    headers = {"Authorization": f"Basic {_basic(alice)}"}
    resp = await client.get("/alice/proj.git/info/refs?service=git-upload-pack", headers=headers)
    assert resp.status == 503 and resp.headers["Retry-After"] == "2"
    assert resp.content_type == "text/plain" and "too many git operations" in await resp.text()
    assert len(_children_running("upload-pack")) == 0
    # A push's POST is answered inside git's protocol, which git prints as "remote: …".
    # (A lone flush-pkt is git's probe, answered with no git and so no slot.)
    command = _pkt(f"{'0' * 40} {'1' * 40} refs/heads/x\0report-status\n") + b"0000"
    resp = await client.post(
        "/alice/proj.git/git-receive-pack",
        data=command,
        headers={
            **headers,
            "User-Agent": "git/2.43.0",
            "Content-Type": "application/x-git-receive-pack-request",
        },
    )
    assert resp.status == 200
    assert (
        await resp.read()
        == _pkt("\x03too many git operations at once, try again shortly\n") + b"0000"
    )
    writer.close()
    await writer.wait_closed()
    await _until(lambda: not _children_running("receive-pack"), "the held push ended")
    for _ in range(200):  # the slot is free once the handler has finished
        resp = await client.get(
            "/alice/proj.git/info/refs?service=git-upload-pack", headers=headers
        )
        if resp.status == 200:
            break
        await asyncio.sleep(0.025)
    assert resp.status == 200


# --- tokens ------------------------------------------------------------------------------


async def test_expired_sign_in_tokens_are_pruned_at_start(aiohttp_client, tmp_path):
    config = make_config(tmp_path)
    client = await aiohttp_client(create_app(config))
    alice = await sign_up(client, "alice")
    for _ in range(3):
        resp = await client.post(
            "/auth/sign-in", json={"username": "alice", "password": alice.password}
        )
        assert resp.status == 200
    await client.close()
    path = tmp_path / "data" / "hubsvc.db"
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM tokens").fetchone()[0] == 4
        conn.execute(
            "UPDATE tokens SET expires_at = 1 WHERE hash IN "
            "(SELECT hash FROM tokens ORDER BY created_at LIMIT 3)"
        )
    again = await aiohttp_client(create_app(config))

    def count() -> int:
        with sqlite3.connect(path) as conn:
            return conn.execute("SELECT count(*) FROM tokens").fetchone()[0]

    await _until(lambda: count() == 1, "expired tokens pruned")
    assert await again.app[STORE].users.prune_tokens() == 0
