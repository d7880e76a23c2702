"""Saved notification preferences act: web notifications off stops them on the socket."""

from __future__ import annotations

from .test_repos import create


async def _next_notification(ws, timeout: float):
    while True:
        message = await ws.receive_json(timeout=timeout)
        if message["type"] == "notification":
            return message["notification"]


async def test_web_notifications_off_and_on(client, alice):
    await create(client, alice, "proj")
    ws = await client.ws_connect(f"/ws?token={alice.token}")
    assert (await ws.receive_json(timeout=5))["type"] == "connected"
    resp = await client.post(
        "/api/users/me/settings/preferences",
        headers=alice.headers,
        json={"notifications": {"web": False}},
    )
    assert resp.status == 200
    await client.post(
        "/api/repositories/alice/proj/issues", headers=alice.headers, json={"title": "quiet"}
    )
    try:
        got = await _next_notification(ws, 0.5)
    except TimeoutError:
        got = None
    assert got is None
    await ws.send_json({"type": "ping"})  # the socket itself still answers
    assert (await ws.receive_json(timeout=5))["type"] == "pong"
    # A new socket while it is off gets connected and nothing more.
    other = await client.ws_connect(f"/ws?token={alice.token}")
    assert (await other.receive_json(timeout=5))["type"] == "connected"
    await client.patch(
        "/api/users/me/settings",
        headers=alice.headers,
        json={"preferences": {"notifications": {"web": True}}},
    )
    await client.post(
        "/api/repositories/alice/proj/issues", headers=alice.headers, json={"title": "loud"}
    )
    for socket in (ws, other):
        assert (await _next_notification(socket, 5))["data"]["issue"]["title"] == "loud"
        await socket.close()
