"""A rolling restart under load drops nothing: three processes on PostgreSQL and Redis
behind the test proxy, each stopped with SIGTERM and started again in turn, while API
reads and writes, stock git pushes and clones and 200 WebSockets go on.

Every request is answered (the proxy may try the next process after a refused
connection, as nginx does; an accepted connection closed unanswered is a failure), every
event reaches every socket once and in order (a socket closed with 1001 resumes with
?after=), every webhook arrives once. The figures are printed (pytest -s shows them).
"""

from __future__ import annotations

import asyncio
import itertools
import re
import shutil
import signal
import time
from pathlib import Path

import aiohttp
import psycopg
from aiohttp import WSMsgType, web

from .gitcli import git
from .proxy import RoundRobinProxy
from .receiver import Receiver
from .server import free_port, start_several, stop_all
from .test_cluster import PASSWORD, call, sign_up

SOCKETS = 200
WRITERS, READERS = 2, 2
ISSUES = "/api/repositories/owner/proj/issues"


class Load:
    """The clients' tallies: what was asked, what failed, the longest waits."""

    def __init__(self) -> None:
        self.requests = 0
        self.git = 0
        self.pushes = 0  # git pushes that succeeded: one push event each
        self.failures: list[str] = []
        self.slowest = 0.0  # seconds, one request or git command
        self.socket_gap = 0.0  # seconds from a 1001 to the socket's next `connected`
        self.resumes = 0
        self.refusals = 0  # upgrades answered 503 by a process draining: tried again
        self.stop = asyncio.Event()

    def took(self, started: float) -> None:
        self.slowest = max(self.slowest, time.monotonic() - started)


async def _api(load: Load, session, proxy, token: str, write: bool, n: int) -> None:
    k = 0
    while not load.stop.is_set():
        started = time.monotonic()
        try:
            if write:
                status, _ = await call(session, proxy, "POST", ISSUES, {"title": f"{n}-{k}"}, token)
                ok = status == 201
            else:
                status, _ = await call(session, proxy, "GET", ISSUES + "?limit=5", None, token)
                ok = status == 200
        except (TimeoutError, aiohttp.ClientError) as exc:
            status, ok = repr(exc), False
        load.requests += 1
        load.took(started)
        if not ok:
            load.failures.append(f"{'POST' if write else 'GET'} {ISSUES}: {status}")
        k += 1
        await asyncio.sleep(0.1 if write else 0.05)


async def _pushes(load: Load, work: Path, remote: str) -> None:
    k = 0
    while not load.stop.is_set():
        (work / "counter.txt").write_text(f"{k}\n")
        await git("commit", "-qam", f"push {k}", cwd=work)
        started = time.monotonic()
        code, _, err = await git("push", "-q", remote, "main", cwd=work, check=False)
        load.git += 1
        load.took(started)
        if code:
            load.failures.append(f"git push: {err.strip()}")
        else:
            load.pushes += 1
        k += 1


async def _clones(load: Load, where: Path, remote: str) -> None:
    k = 0
    while not load.stop.is_set():
        target = where / f"clone-{k}"
        started = time.monotonic()
        code, _, err = await git("clone", "-q", remote, str(target), check=False)
        load.git += 1
        load.took(started)
        if code:
            load.failures.append(f"git clone: {err.strip()}")
        await asyncio.to_thread(shutil.rmtree, target, True)
        k += 1


async def _socket(load: Load, session, proxy, token: str, after: int, got: list[int]) -> None:
    """A client that follows the repository's events, resuming after a close."""
    url = proxy.url.replace("http", "ws") + f"/ws?token={token}"
    closed_at = None
    while True:
        try:
            ws = await session.ws_connect(url + f"&after={got[-1] if got else after}")
        except aiohttp.WSServerHandshakeError as exc:
            if exc.status != 503:
                load.failures.append(f"WebSocket upgrade: {exc.status}")
            load.refusals += 1
            await asyncio.sleep(0.1)
            continue
        except (TimeoutError, aiohttp.ClientError) as exc:
            load.failures.append(f"WebSocket upgrade: {exc!r}")
            await asyncio.sleep(0.1)
            continue
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            message = msg.json()
            if message["type"] == "connected" and closed_at is not None:
                load.socket_gap = max(load.socket_gap, time.monotonic() - closed_at)
                load.resumes += 1
            elif message["type"] == "notification":
                got.append(int(message["notification"]["id"]))
        if ws.close_code != 1001:
            if ws.close_code is not None and ws.close_code != 1000:
                load.failures.append(f"WebSocket closed with {ws.close_code}: {ws.exception()!r}")
            return
        closed_at = time.monotonic()


def _difference(expected: list[int], got: list[int]) -> str:
    seen = set(got)
    missing = [e for e in expected if e not in seen]
    repeated = sorted({e for e in got if got.count(e) > 1})
    disorder = [(a, b) for a, b in zip(got, got[1:], strict=False) if b <= a][:5]
    return f"missing {missing[:20]}, repeated {repeated[:20]}, out of order {disorder}"


def _query(url: str, sql: str, *args) -> list[tuple]:
    with psycopg.connect(url) as pg:
        return pg.execute(sql, args).fetchall()


async def test_rolling_restart_under_load_drops_nothing(tmp_path, postgres_url, redis_url):
    settings = {
        "database": {"url": postgres_url},
        "websocket": {"max_per_ip": 1000},
        "webhooks": {"allowed_hosts": ["127.0.0.1"], "retry_seconds": 0.2},
        "server": {"drain_seconds": 30},
    }
    servers = await asyncio.to_thread(start_several, tmp_path / "data", 3, redis_url, settings)
    proxy = RoundRobinProxy([s.port for s in servers]).start()
    receiver = Receiver()
    runner = web.AppRunner(receiver.app)
    await runner.setup()
    hook_port = free_port()
    await web.TCPSite(runner, "127.0.0.1", hook_port).start()
    # A new connection per request, as nginx's upstream without keep-alive.
    connector = aiohttp.TCPConnector(force_close=True, limit=0)
    timeout = aiohttp.ClientTimeout(total=60)
    sockets: list[asyncio.Task] = []
    workers: list[asyncio.Task] = []
    try:
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            token = await sign_up(session, proxy, "owner")
            repos = "/api/repositories"
            assert (await call(session, proxy, "POST", repos, {"name": "proj"}, token))[0] == 201
            hook = {"url": f"http://127.0.0.1:{hook_port}/hook", "events": ["issue", "push"]}
            assert (await call(session, proxy, "POST", repos + "/owner/proj/hooks", hook, token))[
                0
            ] == 201
            remote = proxy.url.replace("http://", f"http://owner:{PASSWORD}@") + "/owner/proj.git"
            work = tmp_path / "work"
            await git("init", "-q", "-b", "main", str(work))
            (work / "counter.txt").write_text("start\n")
            await git("add", ".", cwd=work)
            await git("commit", "-qm", "start", cwd=work)
            await git("push", "-q", remote, "main", cwd=work)
            await receiver.wait_for(1, timeout=30)  # the hook's consumer is running
            (start,) = (
                await asyncio.to_thread(_query, postgres_url, "SELECT max(id) FROM events")
            )[0]
            before = len(receiver.requests)

            load = Load()
            streams: list[list[int]] = [[] for _ in range(SOCKETS)]
            sockets[:] = [
                asyncio.create_task(_socket(load, session, proxy, token, start, got))
                for got in streams
            ]
            workers[:] = [
                *(
                    asyncio.create_task(_api(load, session, proxy, token, True, n))
                    for n in range(WRITERS)
                ),
                *(
                    asyncio.create_task(_api(load, session, proxy, token, False, n))
                    for n in range(READERS)
                ),
                asyncio.create_task(_pushes(load, work, remote)),
                asyncio.create_task(_clones(load, tmp_path, remote)),
            ]
            began = time.monotonic()
            await asyncio.sleep(1)
            phases = []
            for server in servers:
                at = time.monotonic()
                assert await asyncio.to_thread(server.stop, signal.SIGTERM, 60) == 0
                stopped = time.monotonic()
                drained = (re.findall(r"drained in [0-9.]+ s", server.logs()) or ["no drain"])[-1]
                await asyncio.to_thread(server.start, 90)  # a loaded machine starts slowly
                phases.append(
                    f"{stopped - at:.1f} s to stop ({drained}), "
                    f"{time.monotonic() - stopped:.1f} s to start"
                )
                await asyncio.sleep(0.5)
            load.stop.set()
            await asyncio.gather(*workers)
            elapsed = time.monotonic() - began

            pushed = "SELECT count(*) FROM events WHERE id > %s AND type = 'push'"
            deadline = time.monotonic() + 20
            while (await asyncio.to_thread(_query, postgres_url, pushed, start))[0][
                0
            ] < load.pushes:
                if time.monotonic() > deadline:
                    break  # told below
                await asyncio.sleep(0.1)
            (push_events,) = (await asyncio.to_thread(_query, postgres_url, pushed, start))[0]
            expected = [
                row[0]
                for row in await asyncio.to_thread(
                    _query,
                    postgres_url,
                    "SELECT id FROM events WHERE id > %s ORDER BY id",
                    start,
                )
            ]
            deadline = time.monotonic() + 30
            while any(got[-1:] != expected[-1:] for got in streams):
                if time.monotonic() > deadline:
                    break  # what is missing is shown below
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)  # a repeat after the last event would show now
            for task in sockets:
                task.cancel()
            await asyncio.gather(*sockets, return_exceptions=True)

            wanted = {
                row[0]
                for row in await asyncio.to_thread(
                    _query,
                    postgres_url,
                    "SELECT id FROM events WHERE id > %s AND type IN ('issue', 'push')",
                    start,
                )
            }
            deadline = time.monotonic() + 30
            while len(receiver.requests) - before < len(wanted):
                assert time.monotonic() < deadline, "webhooks did not all arrive"
                await asyncio.sleep(0.1)
            await asyncio.sleep(1)  # a repeat would arrive now
            sent = dict(
                await asyncio.to_thread(
                    _query, postgres_url, "SELECT guid, event_id FROM hook_deliveries"
                )
            )
            delivered = [
                sent[r["headers"]["X-Hubsvc-Delivery"]] for r in receiver.requests[before:]
            ]

        exact = sum(got == expected for got in streams)
        print(
            f"\nrolling restart of 3 processes in {elapsed:.1f} s under load:"
            f"\n  restarts: {'; '.join(phases)}"
            f"\n  API requests {load.requests}, git pushes and clones {load.git},"
            f" proxy connections {len(proxy.handed)} (refused and retried: {proxy.refused},"
            f" refused by all: {proxy.exhausted})"
            f"\n  failures {len(load.failures)} {sorted(set(load.failures))[:5]},"
            f" closed unanswered {len(proxy.unanswered)} {proxy.unanswered[:3]}"
            f"\n  longest request or git command {load.slowest:.2f} s,"
            f" longest socket pause (1001 to connected) {load.socket_gap:.2f} s"
            f"\n  events {len(expected)}; sockets with every event once and in order"
            f" {exact}/{SOCKETS}; resumes {load.resumes}, upgrades refused 503 {load.refusals}"
            f"\n  pushes {load.pushes}, push events {push_events};"
            f" webhooks {len(delivered)} for {len(wanted)} events"
            f" ({len(delivered) - len(set(delivered))} repeats)"
        )
        noted = []
        for server in servers:
            lines = server.logs().splitlines()
            for n, line in enumerate(lines):
                if " ERROR " in line:  # with its traceback
                    more = itertools.takewhile(lambda x: not x[:4].isdigit(), lines[n + 1 :])
                    noted += [line, *more]
                elif " WARNING " in line and "Too many connections" not in line:
                    noted.append(line)
        print("  the servers' errors and warnings:", *noted[:60], sep="\n    ")
        assert load.failures == []
        assert proxy.unanswered == [] and proxy.exhausted == 0
        assert exact == SOCKETS, _difference(
            expected, next(got for got in streams if got != expected)
        )
        assert load.resumes >= SOCKETS  # every socket was moved at least once
        assert sorted(delivered) == sorted(wanted)
        assert push_events == load.pushes
    finally:
        for task in sockets + workers:  # a failure midway leaves them running
            task.cancel()
        await asyncio.gather(*sockets, *workers, return_exceptions=True)
        proxy.stop()
        await runner.cleanup()
        await asyncio.to_thread(stop_all, servers)
