"""A session ended on one process is refused, and its socket closed, on another (issue 32)."""

from __future__ import annotations

import asyncio
import time

import aiohttp

from .test_cluster import PASSWORD, call, sign_up, socket, three  # noqa: F401 - the fixture


async def test_a_session_ended_on_one_process_is_refused_and_closed_on_another(three):
    (a, b, _), session = three
    await sign_up(session, a, "owner")
    status, body = await call(
        session, a, "POST", "/auth/sign-in", {"username": "owner", "password": PASSWORD}
    )
    assert status == 200
    phone = body["token"]
    status, body = await call(
        session, a, "POST", "/auth/sign-in", {"username": "owner", "password": PASSWORD}
    )
    laptop = body["token"]
    assert (await call(session, b, "GET", "/api/users/me", token=phone))[0] == 200  # cached on B
    ws = await socket(session, b, phone)
    status, body = await call(session, a, "GET", "/api/users/me/sessions", token=laptop)
    laptop_row, target, _ = body["sessions"]  # newest first: the laptop, the phone, sign-up's
    assert laptop_row["current"] and not target["current"]
    path = f"/api/users/me/sessions/{target['id']}"
    status, _ = await call(session, a, "DELETE", path, token=laptop)
    assert status == 204
    start = time.perf_counter()
    while (await call(session, b, "GET", "/api/users/me", token=phone))[0] != 401:
        assert time.perf_counter() - start < 1.0, "B still honours the ended session after 1 s"
        await asyncio.sleep(0.01)
    closed = await ws.receive(timeout=1)
    assert closed.type == aiohttp.WSMsgType.CLOSE and closed.data == 4001
    assert (await call(session, b, "GET", "/api/users/me", token=laptop))[0] == 200


async def test_ending_all_other_sessions_reaches_every_process(three):
    (a, b, c), session = three
    keep = await sign_up(session, a, "owner")
    others = []
    for _ in range(2):
        status, body = await call(
            session, a, "POST", "/auth/sign-in", {"username": "owner", "password": PASSWORD}
        )
        others.append(body["token"])
    sockets = [await socket(session, server, token) for server, token in zip((b, c), others)]
    for server, token in zip((b, c), others):
        assert (await call(session, server, "GET", "/api/users/me", token=token))[0] == 200
    assert (await call(session, a, "DELETE", "/api/users/me/sessions", token=keep))[0] == 204
    for ws in sockets:
        closed = await ws.receive(timeout=1)
        assert closed.type == aiohttp.WSMsgType.CLOSE and closed.data == 4001
    for server, token in zip((b, c), others):
        assert (await call(session, server, "GET", "/api/users/me", token=token))[0] == 401
    assert (await call(session, c, "GET", "/api/users/me", token=keep))[0] == 200
