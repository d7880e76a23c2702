"""Work that must run once runs on one process: the jobs lease, its takeover, the fences.

The store tests drive the leases table directly; the rest run three real server processes
over one data folder (one SQLite file) with real receivers, a real SMTP server and git.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import time

import pytest
from aiohttp import web

from hubsvc.store import Store
from hubsvc.store.leases import LeaseLost, fence
from hubsvc.timeutil import now_iso

from .gitcli import git
from .server import ServerProcess, lease_holder, seed_owner, several
from .test_chat_link import Inbox, smtp  # noqa: F401 - the aiosmtpd fixture

TAKEOVER_SECONDS = 10  # the issue's bound for another process to take the work over


async def test_a_lease_is_held_renewed_and_taken_over_only_once_expired(tmp_path, database_url):
    store = Store(tmp_path / "hubsvc.db", url=database_url)
    await store.open()
    try:
        leases, now = store.leases, time.time()
        assert await leases.beat("a", "jobs", now, 6) is True
        assert await leases.beat("b", "jobs", now + 1, 6) is False  # a holds it
        assert await leases.beat("a", "jobs", now + 4, 6) is True  # renewed to now + 10
        assert await leases.beat("b", "jobs", now + 9, 6) is False
        assert await leases.processes(now + 9) == ["a", "b"]
        # a stops renewing: once its lease has run out, b takes it, and a's claims fail.
        assert await leases.beat("b", "jobs", now + 10.5, 6) is True
        assert (await leases.get("jobs"))["holder"] == "b"
        with pytest.raises(LeaseLost):
            await store.db.write(lambda conn: fence(conn, "jobs", "a", now + 10.5))
        await store.db.write(lambda conn: fence(conn, "jobs", "b", now + 10.5))
        assert await leases.processes(now + 10.5) == ["b"]  # a's heartbeat ran out too
        await leases.release("b")
        assert await leases.get("jobs") is None
        assert await leases.beat("a", "jobs", now + 11, 6) is True  # free at once
    finally:
        await store.close()


class GatedReceiver:
    """Answers 200 to each POST; the gate_at-th one waits until the gate opens, so the
    sending process can be killed while that request is in flight."""

    def __init__(self, gate_at: int) -> None:
        self.requests: list[dict] = []
        self.gate_at = gate_at
        self.gate = asyncio.Event()
        self.reached = asyncio.Event()
        self.app = web.Application()
        self.app.router.add_post("/hook", self.handle)
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.requests.append({"headers": dict(request.headers), "json": json.loads(body)})
        if len(self.requests) == self.gate_at:
            self.reached.set()
            await self.gate.wait()
        return web.Response(status=200)

    def of_type(self, event_type: str) -> list[dict]:
        return [r for r in self.requests if r["headers"].get("X-Hubsvc-Event") == event_type]


async def _gated(aiohttp_server, gate_at: int) -> GatedReceiver:
    receiver = GatedReceiver(gate_at)
    server = await aiohttp_server(receiver.app)
    receiver.url = str(server.make_url("/hook"))
    return receiver


async def _start(*servers: ServerProcess) -> None:
    await asyncio.gather(*(asyncio.to_thread(s.start) for s in servers))


async def _stop(*servers: ServerProcess) -> None:
    for server in servers:
        if server.proc is not None and server.proc.poll() is None:
            await asyncio.to_thread(server.stop)


async def _call(server: ServerProcess, method: str, path: str, body=None, headers=None):
    return await asyncio.to_thread(server.request, method, path, body, headers)


async def _open_issues(servers, headers, titles) -> None:
    """Open one issue per title, round robin over servers, several at a time."""
    answers = await asyncio.gather(
        *(
            _call(
                servers[n % len(servers)],
                "POST",
                "/api/repositories/owner/proj/issues",
                {"title": title},
                headers,
            )
            for n, title in enumerate(titles)
        )
    )
    assert [status for status, _ in answers] == [201] * len(titles), answers


@pytest.fixture(params=["sqlite", "postgres"])
def cluster_database(request) -> str:
    """The processes' [database] url: the shared SQLite file, or a fresh PostgreSQL one."""
    return "" if request.param == "sqlite" else request.getfixturevalue("postgres_url")


def _holder_of(data, servers, url: str = "") -> ServerProcess | None:
    found = lease_holder(data, url=url)
    return next((s for s in servers if found and s.proc.pid == found[1]), None)


async def _wait(predicate, timeout: float, what: str) -> float:
    """Seconds until predicate() holds; fails after timeout."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"{what}: not within {timeout} s")
        await asyncio.sleep(0.05)
    return time.monotonic() - start


async def test_three_processes_send_each_delivery_once_in_order_across_a_kill(
    tmp_path, aiohttp_server, redis_url, cluster_database
):
    # Each receiver holds its 10th request open; the lease holder is SIGKILLed while it
    # waits for those answers, and events keep coming through the other two processes.
    hook_rx = [await _gated(aiohttp_server, 10) for _ in range(2)]
    chat_rx = await _gated(aiohttp_server, 10)
    data = tmp_path / "data"
    servers = several(
        data,
        3,
        {
            "webhooks": {
                "allowed_hosts": ["127.0.0.1"],
                "retry_seconds": 0.05,
                "max_retry_seconds": 0.2,
                "timeout_seconds": 60,  # the held requests stay in flight until the kill
            },
            "chat": {"webhook_url": chat_rx.url, "retry_seconds": 0.05},
            "database": {"url": cluster_database},
        },
        redis_url,
    )
    try:
        await _start(servers[0])
        headers, _ = await asyncio.to_thread(seed_owner, servers[0])
        for receiver in hook_rx:
            status, body = await _call(
                servers[0],
                "POST",
                "/api/repositories/owner/proj/hooks",
                {"url": receiver.url, "format": "json", "events": ["issue"]},
                headers,
            )
            assert status == 201, body
        await _start(*servers[1:])
        await _open_issues(servers, headers, [f"first {n}" for n in range(30)])
        for receiver in [*hook_rx, chat_rx]:
            await asyncio.wait_for(receiver.reached.wait(), 30)
        holder = _holder_of(data, servers, cluster_database)
        assert holder is not None
        survivors = [s for s in servers if s is not holder]
        await asyncio.to_thread(holder.stop, signal.SIGKILL)
        for receiver in [*hook_rx, chat_rx]:
            receiver.gate.set()
        await _open_issues(survivors, headers, [f"then {n}" for n in range(30)])
        took = await _wait(
            lambda: _holder_of(data, survivors, cluster_database) is not None,
            TAKEOVER_SECONDS,
            "another process takes the lease over",
        )
        for receiver in hook_rx:
            await _wait(
                lambda r=receiver: (
                    len({q["headers"]["X-Hubsvc-Delivery"] for q in r.requests}) >= 60
                ),
                30,
                "every hook delivery",
            )
        await _wait(
            lambda: (
                len({r["headers"]["X-Hubsvc-Delivery"] for r in chat_rx.of_type("issue")}) >= 60
            ),
            30,
            "every chat message",
        )
        await asyncio.sleep(1.5)  # time for any second copy to arrive
        for receiver in [*hook_rx, chat_rx]:
            # Each delivery once, in log order; the only repeat is the one in flight when
            # its sender was killed, sent again once under the same delivery id (the
            # README's at-least-once across a crash): never by two live processes.
            held = receiver.requests[9]["headers"]["X-Hubsvc-Delivery"]
            guids = [r["headers"]["X-Hubsvc-Delivery"] for r in receiver.requests]
            assert all(guids.count(g) == 1 for g in guids if g != held)
            assert guids.count(held) <= 2
            firsts = [r for n, r in enumerate(receiver.requests) if guids.index(guids[n]) == n]
            ids = [int(r["json"]["id"]) for r in firsts if "id" in r["json"]]
            assert ids == sorted(set(ids))
        for receiver in hook_rx:
            titles = [r["json"]["data"]["issue"]["title"] for r in receiver.requests]
            assert len(set(titles)) == 60
            assert len({r["headers"]["X-Hubsvc-Delivery"] for r in receiver.requests}) == 60
        issues = chat_rx.of_type("issue")
        assert len({r["headers"]["X-Hubsvc-Delivery"] for r in issues}) == 60
        assert took < TAKEOVER_SECONDS
    finally:
        for receiver in [*hook_rx, chat_rx]:
            receiver.gate.set()
        await _stop(*servers)


async def test_three_processes_mail_each_notification_once(
    tmp_path, smtp, redis_url, cluster_database
):
    data = tmp_path / "data"
    servers = several(
        data,
        3,
        {
            "mail": {"smtp_host": "127.0.0.1", "smtp_port": smtp.port, "starttls": False},
            "database": {"url": cluster_database},
        },
        redis_url,
    )
    try:
        await _start(servers[0])  # the first start makes the database (one at a time)
        await _start(*servers[1:])
        headers, _ = await asyncio.to_thread(seed_owner, servers[0])
        status, _ = await _call(
            servers[1],
            "POST",
            "/auth/sign-up",
            {"email": "bob@example.com", "username": "bob", "password": "12345678", "name": "B"},
        )
        assert status == 201
        status, _ = await _call(
            servers[2],
            "PUT",
            "/api/repositories/owner/proj/collaborators/bob",
            {"permission": "write"},
            headers,
        )
        assert status in (200, 201, 204)
        answers = await asyncio.gather(
            *(
                _call(
                    servers[n % 3],
                    "POST",
                    "/api/repositories/owner/proj/issues",
                    {"title": f"task {n}", "assignees": ["bob"]},
                    headers,
                )
                for n in range(9)
            )
        )
        assert [status for status, _ in answers] == [201] * 9
        await _wait(lambda: len(smtp.messages) >= 9, 20, "nine e-mails")
        await asyncio.sleep(2)  # a copy from another process would arrive by now
        subjects = sorted(smtp.parsed(i)["Subject"] for i in range(len(smtp.messages)))
        assert len(subjects) == 9 and len(set(subjects)) == 9
        assert all(m.rcpt_tos == ["bob@example.com"] for m in smtp.messages)
    finally:
        await _stop(*servers)


def _db(data) -> sqlite3.Connection:
    return sqlite3.connect(data / "hubsvc.db", timeout=10)


async def test_a_push_in_flight_on_a_live_process_is_left_to_it(tmp_path, redis_url):
    data = tmp_path / "data"
    first, second, third = several(data, 3, None, redis_url)
    try:
        await _start(first)
        headers, url = await asyncio.to_thread(seed_owner, first)
        await _start(second)
        work = tmp_path / "w"
        await git("init", "-q", "-b", "main", str(work))
        await git("commit", "-q", "--allow-empty", "-m", "one", cwd=work)
        await git("push", "-q", url, "main", cwd=work)
        # What the second process's journal holds while its receive-pack runs: the push
        # journalled under its name, and the refs already moved on disk.
        conn = _db(data)
        with conn:
            live = conn.execute(
                "SELECT holder FROM leases WHERE name LIKE 'process:%' AND holder LIKE ?",
                (f"%:{second.proc.pid}:%",),
            ).fetchone()[0]
            repo_id = conn.execute("SELECT id FROM repositories").fetchone()[0]
            conn.execute(
                "INSERT INTO pushes_in_flight (repo_id, actor_id, started_at, holder)"
                " VALUES (?, NULL, ?, ?)",
                (repo_id, now_iso(), live),
            )
        conn.close()
        bare = next((data / "repositories").glob("*/*.git"))
        for n in range(2):
            await git("commit", "-q", "--allow-empty", "-m", f"late {n}", cwd=work)
        await git("push", "-q", str(bare), "main", cwd=work)

        async def pushes() -> list[dict]:
            status, feed = await _call(third, "GET", "/api/repositories/owner/proj/events")
            assert status == 200, feed
            return [e for e in feed["events"] if e["type"] == "push"]

        def flights() -> int:
            conn = _db(data)
            try:
                return conn.execute("SELECT COUNT(*) FROM pushes_in_flight").fetchone()[0]
            finally:
                conn.close()

        # Another process starts, and the lease holder reconciles (every 5 s): the push
        # is left to the live process that runs it.
        await _start(third)
        await asyncio.sleep(6)
        assert len(await pushes()) == 1
        assert flights() == 1
        # Its process dies: the push is recorded, once.
        await asyncio.to_thread(second.stop, signal.SIGKILL)
        await _wait(lambda: flights() == 0, 20, "the dead process's push reconciled")
        recorded = await pushes()
        assert [p["data"]["totalCommits"] for p in recorded] == [1, 2]
    finally:
        await _stop(first, second, third)
