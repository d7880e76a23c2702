"""Several server processes on one data folder and one Redis: what crosses between them.

Three real processes (run.py) over one SQLite file, sharing [redis] url and prefix.
They skip unless HUBSVC_TEST_REDIS_URL is set (CI sets it), except the guard's test.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time

import aiohttp
import pytest

from .server import ROOT, ServerProcess, start_several, stop_all

PASSWORD = "12345678"


@pytest.fixture(params=["sqlite", "postgres"])
async def three(request, tmp_path, redis_url):
    """Three servers on one data folder and Redis: on one SQLite file, or on PostgreSQL."""
    settings = {}
    if request.param == "postgres":
        settings["database"] = {"url": request.getfixturevalue("postgres_url")}
    servers = await asyncio.to_thread(start_several, tmp_path / "data", 3, redis_url, settings)
    async with aiohttp.ClientSession() as session:
        yield servers, session
    await asyncio.to_thread(stop_all, servers)


async def call(session, server, method, path, body=None, token=None, headers=None):
    """(status, JSON body) of one request to one server."""
    sent = dict(headers or {})
    if token:
        sent["Authorization"] = f"Bearer {token}"
    async with session.request(method, server.url + path, json=body, headers=sent) as resp:
        text = await resp.text()
        return resp.status, (await resp.json() if text else {})


async def sign_up(session, server, name):
    status, body = await call(
        session,
        server,
        "POST",
        "/auth/sign-up",
        {"email": f"{name}@example.com", "username": name, "password": PASSWORD, "name": name},
    )
    assert status == 201, body
    return body["token"]


async def socket(session, server, token, after=None):
    query = f"?token={token}" + (f"&after={after}" if after is not None else "")
    ws = await session.ws_connect(server.url.replace("http", "ws") + "/ws" + query)
    assert (await ws.receive_json(timeout=5))["type"] == "connected"
    return ws


async def next_of(ws, kind, timeout=5.0):
    while True:
        message = await ws.receive_json(timeout=timeout)
        if message["type"] == kind:
            return message


async def subscribe(ws, owner, name):
    await ws.send_json({"type": "subscribe", "repository": {"owner": owner, "name": name}})
    assert (await next_of(ws, "subscribed"))["repository"] == {"owner": owner, "name": name}


async def open_issue(session, server, token, title, repo="owner/proj"):
    status, body = await call(
        session, server, "POST", f"/api/repositories/{repo}/issues", {"title": title}, token
    )
    assert status == 201, body


async def test_an_event_made_on_one_process_reaches_a_socket_on_another(three):
    (a, b, _), session = three
    token = await sign_up(session, a, "owner")
    assert (await call(session, a, "POST", "/api/repositories", {"name": "proj"}, token))[0] == 201
    ws = await socket(session, b, token)
    await subscribe(ws, "owner", "proj")
    latencies = []
    for n in range(20):
        start = time.perf_counter()
        made = asyncio.create_task(open_issue(session, a, token, f"issue {n}"))
        message = await next_of(ws, "notification")
        latencies.append(time.perf_counter() - start)
        await made
        assert message["notification"]["data"]["issue"]["title"] == f"issue {n}"
    # From sending the request to process A to the notification on process B's socket.
    print(
        f"\nA→B notification: median {statistics.median(latencies) * 1000:.1f} ms, "
        f"max {max(latencies) * 1000:.1f} ms"
    )
    assert max(latencies) < 1.0  # the issue asks for 100 ms; the bound here is generous
    await ws.close()


async def test_a_socket_resuming_on_a_third_process_gets_every_event_once_in_order(three):
    (a, b, c), session = three
    token = await sign_up(session, a, "owner")
    assert (await call(session, a, "POST", "/api/repositories", {"name": "proj"}, token))[0] == 201
    ws = await socket(session, b, token)
    await subscribe(ws, "owner", "proj")
    await open_issue(session, a, token, "seen on B")
    last = (await next_of(ws, "notification"))["notification"]["id"]
    await ws.close()
    for n in range(5):  # made on A and C while the client is away
        await open_issue(session, (a, c)[n % 2], token, f"missed {n}")
    # The cursor on the upgrade: replayed before anything live. (A resume message sent
    # after `connected` replays from its id what may already have come live meanwhile.)
    ws = await socket(session, c, token, after=last)
    got = []
    while True:
        message = await ws.receive_json(timeout=5)
        if message["type"] == "resumed":
            break
        if message["type"] == "notification":
            got.append(message["notification"])
    await open_issue(session, b, token, "live after the resume")
    got.append((await next_of(ws, "notification"))["notification"])
    titles = [e["data"]["issue"]["title"] for e in got]
    assert titles == [*(f"missed {n}" for n in range(5)), "live after the resume"]
    ids = [int(e["id"]) for e in got]
    assert ids == sorted(set(ids)) and ids[0] > int(last)
    await ws.close()


async def test_a_sign_out_on_one_process_is_refused_on_another_within_a_second(three):
    (a, b, _), session = three
    await sign_up(session, a, "owner")
    status, body = await call(
        session, a, "POST", "/auth/sign-in", {"username": "owner", "password": PASSWORD}
    )
    assert status == 200
    token = body["token"]
    assert (await call(session, b, "GET", "/api/users/me", token=token))[0] == 200  # now cached
    ws = await socket(session, b, token)
    assert (await call(session, a, "POST", "/auth/sign-out", token=token))[0] == 204
    start = time.perf_counter()
    while (await call(session, b, "GET", "/api/users/me", token=token))[0] != 401:
        assert time.perf_counter() - start < 1.0, "B still honours the token after 1 s"
        await asyncio.sleep(0.01)
    print(f"\nsign-out on A refused on B after {(time.perf_counter() - start) * 1000:.1f} ms")
    closed = await ws.receive(timeout=1)
    assert closed.type == aiohttp.WSMsgType.CLOSE and closed.data == 4001


async def test_a_removed_collaborator_loses_the_repository_on_every_process_at_once(three):
    (a, b, _), session = three
    owner = await sign_up(session, a, "owner")
    bob = await sign_up(session, a, "bob")
    status, _ = await call(
        session, a, "POST", "/api/repositories", {"name": "proj", "visibility": "private"}, owner
    )
    assert status == 201
    status, _ = await call(
        session,
        a,
        "PUT",
        "/api/repositories/owner/proj/collaborators/bob",
        {"permission": "read"},
        owner,
    )
    assert status == 201
    assert (await call(session, b, "GET", "/api/repositories/owner/proj", token=bob))[0] == 200
    bob_ws = await socket(session, b, bob)
    owner_ws = await socket(session, b, owner)
    await subscribe(bob_ws, "owner", "proj")
    await subscribe(owner_ws, "owner", "proj")
    await open_issue(session, a, owner, "both see this")
    for ws in (bob_ws, owner_ws):
        assert (await next_of(ws, "notification"))["notification"]["data"]["issue"]["title"] == (
            "both see this"
        )
    path = "/api/repositories/owner/proj/collaborators/bob"
    assert (await call(session, a, "DELETE", path, token=owner))[0] == 204
    # At once: no retry, no wait for a cache to expire.
    assert (await call(session, b, "GET", "/api/repositories/owner/proj", token=bob))[0] == 404
    gone = await next_of(bob_ws, "unsubscribed", timeout=1)
    assert gone["reason"] == "access revoked"
    await open_issue(session, a, owner, "only the owner sees this")
    assert (await next_of(owner_ws, "notification"))["notification"]["data"]["issue"][
        "title"
    ] == "only the owner sees this"
    with pytest.raises(TimeoutError):
        await next_of(bob_ws, "notification", timeout=0.5)


async def test_rate_limits_are_one_budget_across_processes(tmp_path, redis_url):
    settings = {
        "server": {"trusted_proxies": ["127.0.0.1"]},
        "rate_limit": {
            "enabled": True,
            "burst": 12,
            "per_minute": 1,
            "sign_in_per_15_minutes": 3,
        },
        "websocket": {"max_per_ip": 2},
    }
    servers = await asyncio.to_thread(start_several, tmp_path / "data", 3, redis_url, settings)
    try:
        async with aiohttp.ClientSession() as session:

            def client(addr):
                return {"X-Forwarded-For": addr}

            # The API budget: 12 in all, whichever process answers.
            statuses = [
                (
                    await call(
                        session,
                        servers[n % 3],
                        "GET",
                        "/api/users/nobody",
                        headers=client("10.0.0.1"),
                    )
                )[0]
                for n in range(30)
            ]
            assert sum(s != 429 for s in statuses) == 12, statuses
            assert statuses[12:] == [429] * 18
            # Sign-in guesses: 3 per 15 minutes per client and account, across processes.
            token = await sign_up(session, servers[0], "owner")
            guesses = [
                (
                    await call(
                        session,
                        servers[n % 3],
                        "POST",
                        "/auth/sign-in",
                        {"username": "owner", "password": "wrong-password"},
                        headers=client("10.0.0.2"),
                    )
                )[0]
                for n in range(5)
            ]
            assert guesses == [401, 401, 401, 429, 429]
            # Sockets per address: 2 in all.
            held = []
            for server in servers[:2]:
                ws = await session.ws_connect(
                    server.url.replace("http", "ws") + f"/ws?token={token}",
                    headers=client("10.0.0.3"),
                )
                held.append(ws)
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await session.ws_connect(
                    servers[2].url.replace("http", "ws") + f"/ws?token={token}",
                    headers=client("10.0.0.3"),
                )
            assert refused.value.status == 429
            await held[0].close()
            await asyncio.sleep(0.2)  # the release reaches Redis
            ws = await session.ws_connect(
                servers[2].url.replace("http", "ws") + f"/ws?token={token}",
                headers=client("10.0.0.3"),
            )
            await ws.close()
            await held[1].close()
    finally:
        await asyncio.to_thread(stop_all, servers)


def test_a_second_process_without_redis_is_refused_at_start(tmp_path):
    first = ServerProcess(tmp_path / "data").start()
    try:
        second = ServerProcess(tmp_path / "data", first.settings)
        with pytest.raises(RuntimeError) as refused:
            second.start()
        assert "another hubsvc server is running on data folder" in str(refused.value)
        assert "[redis] url" in str(refused.value)
        assert second.proc is not None and second.proc.returncode == 2
    finally:
        first.stop()
    # Once the first is gone the folder is free again.
    again = ServerProcess(tmp_path / "data", first.settings).start()
    again.stop()


def test_a_second_process_on_the_same_postgresql_is_refused_even_on_another_folder(
    tmp_path, postgres_url, redis_url
):
    # Processes on other machines share the database, not a lockable folder: the rule
    # holds in PostgreSQL too (an advisory lock for the life of the process).
    settings = {"database": {"url": postgres_url}}
    first = ServerProcess(tmp_path / "one", settings).start()
    try:
        second = ServerProcess(tmp_path / "two", settings)
        with pytest.raises(RuntimeError) as refused:
            second.start()
        assert "another hubsvc server is running on this database" in str(refused.value)
        joining = ServerProcess(
            tmp_path / "three",
            {**settings, "redis": {"url": redis_url[0], "prefix": redis_url[1]}},
        )
        with pytest.raises(RuntimeError) as refused:
            joining.start()
        assert "without [redis] url is running on this database" in str(refused.value)
    finally:
        first.stop()
    # Once it is gone, the database is free again.
    ServerProcess(tmp_path / "two", settings).start().stop()


def test_a_process_with_redis_is_refused_beside_one_without(tmp_path):
    # Shared (Redis) and exclusive (alone) locks conflict: neither joins the other.
    first = ServerProcess(tmp_path / "data").start()
    try:
        second = ServerProcess(
            tmp_path / "data", {"redis": {"url": "redis://127.0.0.1:1/0", "prefix": "x"}}
        )
        with pytest.raises(RuntimeError) as refused:
            second.start()
        assert "a hubsvc server without [redis] url is running" in str(refused.value)
    finally:
        first.stop()


async def test_a_password_reset_from_the_command_line_is_refused_on_every_process_at_once(
    three, redis_url
):
    (a, b, c), session = three
    token = await sign_up(session, a, "owner")
    for server in (b, c):  # cached there
        assert (await call(session, server, "GET", "/api/users/me", token=token))[0] == 200
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUBSVC_")}
    env.update(
        HUBSVC_SECURITY_BCRYPT_ROUNDS="4",
        HUBSVC_PASSWORD="a new password",
        HUBSVC_REDIS_URL=redis_url[0],
        HUBSVC_REDIS_PREFIX=redis_url[1],
        HUBSVC_DATABASE_URL=a.settings.get("database", {}).get("url", ""),
        PYTHONPATH=str(ROOT),
    )
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(ROOT / "run.py"), "--data-dir", str(a.data_dir)]
        + ["reset-password", "owner"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    start = time.perf_counter()
    for server in (b, c):
        while (await call(session, server, "GET", "/api/users/me", token=token))[0] != 401:
            assert time.perf_counter() - start < 1.0, "a process still honours the token"
            await asyncio.sleep(0.01)


async def test_a_member_added_on_one_process_hears_the_org_repository_on_another(three):
    (a, b, c), session = three
    owner = await sign_up(session, a, "owner")
    member = await sign_up(session, a, "member")
    assert (await call(session, a, "POST", "/api/orgs", {"name": "acme"}, owner))[0] == 201
    body = {"name": "secret", "owner": "acme", "visibility": "private"}
    assert (await call(session, a, "POST", "/api/repositories", body, owner))[0] == 201
    # B fans an event of the repository out to the owner: its audience is cached there.
    watching = await socket(session, b, owner)
    await subscribe(watching, "acme", "secret")
    await open_issue(session, c, owner, "before", repo="acme/secret")
    await next_of(watching, "notification")
    assert (await call(session, b, "GET", "/api/repositories/acme/secret", token=member))[0] == 404

    status, _ = await call(
        session, a, "PUT", "/api/orgs/acme/members/member", {"role": "member"}, owner
    )
    assert status in (200, 201, 204)
    # Within a second on B (a grant added is told, not waited for; a removal is waited
    # for before its answer): the member reads the repository, subscribes, and hears.
    start = time.perf_counter()
    while (await call(session, b, "GET", "/api/repositories/acme/secret", token=member))[0] != 200:
        assert time.perf_counter() - start < 1.0, "B does not know of the new member"
        await asyncio.sleep(0.01)
    ws = await socket(session, b, member)
    await subscribe(ws, "acme", "secret")
    await open_issue(session, c, owner, "after", repo="acme/secret")
    message = await next_of(ws, "notification", timeout=2.0)
    assert message["notification"]["data"]["issue"]["title"] == "after"
    await ws.close()
    await watching.close()
