"""The WebSocket hub with a real client: auth, messages, who gets what, limits, shutdown."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from aiohttp import WSMsgType

from hubsvc.app import create_app
from hubsvc.notify import sockets
from hubsvc.notify.hub import HUB

from .conftest import make_config, sign_up
from .test_repos import create


async def connect(client, user, **kwargs):
    ws = await client.ws_connect(f"/ws?token={user.token}", **kwargs)
    hello = await ws.receive_json(timeout=5)
    assert hello == {
        "type": "connected",
        "userId": user.id,
        "username": user.username,
        "lastEventId": hello["lastEventId"],
    }
    assert hello["lastEventId"].isdigit()
    return ws


async def next_of(ws, kind: str, timeout: float = 5.0) -> dict:
    """The next message of a type, skipping heartbeats."""
    while True:
        message = await ws.receive_json(timeout=timeout)
        if message["type"] == kind:
            return message


async def nothing_for(ws, seconds: float = 0.3) -> None:
    """Assert no notification arrives within seconds."""
    try:
        while True:
            message = await ws.receive_json(timeout=seconds)
            assert message["type"] != "notification", message
    except TimeoutError:
        pass


async def test_needs_a_token_before_the_upgrade(client, alice):
    for url in ("/ws", "/ws?token=bogus"):
        with pytest.raises(aiohttp.WSServerHandshakeError) as info:
            await client.ws_connect(url)
        assert info.value.status == 401


async def test_ping_pong_and_malformed_messages(client, alice):
    ws = await connect(client, alice)
    await ws.send_json({"type": "ping"})
    assert await next_of(ws, "pong") == {"type": "pong"}
    for bad in ("not json", "[1]", '{"no": "type"}', '{"type": "dance"}'):
        await ws.send_str(bad)
        assert "error" in await next_of(ws, "error")
    await ws.send_json({"type": "subscribe"})
    assert "repository" in (await next_of(ws, "error"))["error"]
    await ws.send_json({"type": "ping"})
    assert (await next_of(ws, "pong"))["type"] == "pong"  # still open
    await ws.close()


async def test_owner_and_stargazer_get_events_strangers_do_not(client, alice, bob):
    carol = await sign_up(client, "carol")
    await create(client, alice, "proj")
    ws_alice, ws_bob, ws_carol = [await connect(client, u) for u in (alice, bob, carol)]
    await client.post("/api/repositories/alice/proj/star", headers=bob.headers)
    note = (await next_of(ws_alice, "notification"))["notification"]
    assert note["type"] == "star" and note["data"]["action"] == "added"
    assert note["repository"] == {"owner": "alice", "name": "proj"}
    assert set(note) == {
        "id",
        "type",
        "repository",
        "actor",
        "data",
        "createdAt",
        "public",
        "inbound",
    }
    assert (await next_of(ws_bob, "notification"))["notification"]["id"] == note["id"]
    await nothing_for(ws_carol)
    # Carol may subscribe to a public repository she does not watch.
    await ws_carol.send_json(
        {"type": "subscribe", "repository": {"owner": "alice", "name": "proj"}}
    )
    assert (await next_of(ws_carol, "subscribed"))["repository"] == {
        "owner": "alice",
        "name": "proj",
    }
    await client.post(
        "/api/repositories/alice/proj/issues", json={"title": "x"}, headers=alice.headers
    )
    assert (await next_of(ws_carol, "notification"))["notification"]["type"] == "issue"
    await ws_carol.send_json(
        {"type": "unsubscribe", "repository": {"owner": "alice", "name": "proj"}}
    )
    await next_of(ws_carol, "unsubscribed")
    await client.post(
        "/api/repositories/alice/proj/issues", json={"title": "y"}, headers=alice.headers
    )
    await nothing_for(ws_carol)
    for ws in (ws_alice, ws_bob, ws_carol):
        await ws.close()


async def test_private_events_follow_access_as_it_changes(client, alice, bob):
    await create(client, alice, "hidden", visibility="private")
    ws_bob = await connect(client, bob)
    await ws_bob.send_json(
        {"type": "subscribe", "repository": {"owner": "alice", "name": "hidden"}}
    )
    assert (await next_of(ws_bob, "error"))["error"] == "repository not found"
    await client.post(
        "/api/repositories/alice/hidden/issues", json={"title": "a"}, headers=alice.headers
    )
    await nothing_for(ws_bob)
    await client.put(
        "/api/repositories/alice/hidden/collaborators/bob",
        json={"permission": "read"},
        headers=alice.headers,
    )
    await client.post(
        "/api/repositories/alice/hidden/issues", json={"title": "b"}, headers=alice.headers
    )
    assert (await next_of(ws_bob, "notification"))["notification"]["data"]["issue"]["title"] == "b"
    await ws_bob.send_json(
        {"type": "subscribe", "repository": {"owner": "alice", "name": "hidden"}}
    )
    await next_of(ws_bob, "subscribed")
    await client.delete("/api/repositories/alice/hidden/collaborators/bob", headers=alice.headers)
    await client.post(
        "/api/repositories/alice/hidden/issues", json={"title": "c"}, headers=alice.headers
    )
    await nothing_for(ws_bob)  # even though still subscribed: access is checked per event
    await ws_bob.close()


async def test_per_ip_limit(aiohttp_client, tmp_path):
    client = await aiohttp_client(create_app(make_config(tmp_path, websocket__max_per_ip=2)))
    user = await sign_up(client, "many")
    sockets = [await connect(client, user) for _ in range(2)]
    with pytest.raises(aiohttp.WSServerHandshakeError) as info:
        await client.ws_connect(f"/ws?token={user.token}")
    assert info.value.status == 429
    await sockets[0].close()
    await asyncio.sleep(0.05)
    sockets.append(await connect(client, user))
    for ws in sockets:
        await ws.close()


async def test_cookie_upgrade_checks_the_origin(client, alice):
    await client.post("/auth/sign-in", json={"username": "alice", "password": alice.password})
    with pytest.raises(aiohttp.WSServerHandshakeError) as info:
        await client.ws_connect("/ws", headers={"Origin": "https://evil.example"})
    assert info.value.status == 403
    ws = await client.ws_connect("/ws")
    assert (await ws.receive_json(timeout=5))["type"] == "connected"
    await ws.close()


async def test_silent_clients_are_dropped(aiohttp_client, tmp_path):
    client = await aiohttp_client(create_app(make_config(tmp_path, websocket__heartbeat_seconds=1)))
    user = await sign_up(client, "quiet")
    ws = await client.ws_connect(f"/ws?token={user.token}", autoping=False)
    # Never answer the server's pings and never send anything.
    await asyncio.sleep(3.3)
    assert not client.app[HUB].clients
    message = await ws.receive(timeout=2)
    while message.type not in (WSMsgType.CLOSE, WSMsgType.CLOSED):
        message = await ws.receive(timeout=2)


async def test_clients_that_answer_control_pings_stay(aiohttp_client, tmp_path):
    client = await aiohttp_client(create_app(make_config(tmp_path, websocket__heartbeat_seconds=1)))
    user = await sign_up(client, "awake")
    # aiohttp's client answers each control ping with a pong and nothing else: the hub
    # notes the pong as it is parsed (no handler wake-up) and keeps the socket.
    ws = await client.ws_connect(f"/ws?token={user.token}", autoping=True)
    assert (await ws.receive_json(timeout=5))["type"] == "connected"
    (peer,) = client.app[HUB].clients
    assert isinstance(peer.ws._reader, sockets._Queue)
    connected_at = peer.last_seen
    seen: list[str] = []

    async def read() -> None:  # aiohttp's client answers pings while it reads
        async for message in ws:
            seen.append(json.loads(message.data)["type"])

    reader = asyncio.create_task(read())
    await asyncio.sleep(3.3)
    assert client.app[HUB].clients == {peer}
    assert peer.last_seen > connected_at
    assert "ping" in seen
    reader.cancel()
    await asyncio.gather(reader, return_exceptions=True)
    await ws.send_json({"type": "ping"})  # other messages still reach the handler
    assert (await next_of(ws, "pong"))["type"] == "pong"
    await ws.close()


async def test_shutdown_closes_sockets_going_away(client, alice):
    ws = await connect(client, alice)
    await client.app.shutdown()
    message = await ws.receive(timeout=5)
    while message.type == WSMsgType.TEXT:
        message = await ws.receive(timeout=5)
    assert message.type == WSMsgType.CLOSE and message.data == 1001


async def test_deeply_nested_messages_get_an_error_and_the_socket_stays_open(client, alice):
    ws = await connect(client, alice)
    for deep in ("[" * 60_000, '{"type": "ping", "x": ' + "[" * 65 + "]" * 65 + "}"):
        await ws.send_str(deep)
        assert (await next_of(ws, "error"))["error"] == "JSON nested deeper than 64 levels"
    await ws.send_json({"type": "ping"})
    assert (await next_of(ws, "pong"))["type"] == "pong"
    # Past the 64 KiB message limit the socket closes with a clean 1009, no trace.
    await ws.send_str("[" * 100_000)
    msg = await ws.receive(timeout=5)
    while msg.type == WSMsgType.TEXT:
        msg = await ws.receive(timeout=5)
    assert msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSED, WSMsgType.CLOSING)
    assert ws.close_code == 1009


async def test_subscribe_all_follows_every_readable_repository_even_new_ones(client, alice, bob):
    ws = await connect(client, bob)
    await ws.send_json({"type": "subscribe", "all": True})
    assert await next_of(ws, "subscribed") == {"type": "subscribed", "all": True}
    # Repositories made after the subscription, which bob neither owns, stars nor names.
    await create(client, alice, "later")
    await create(client, alice, "hidden", visibility="private")
    for repo in ("hidden", "later"):
        await client.post(
            f"/api/repositories/alice/{repo}/issues", json={"title": repo}, headers=alice.headers
        )
    note = (await next_of(ws, "notification"))["notification"]
    assert note["repository"] == {"owner": "alice", "name": "later"}
    await nothing_for(ws)  # nothing of the private one
    await client.put(
        "/api/repositories/alice/hidden/collaborators/bob",
        json={"permission": "read"},
        headers=alice.headers,
    )
    await client.post(
        "/api/repositories/alice/hidden/issues", json={"title": "now"}, headers=alice.headers
    )
    note = (await next_of(ws, "notification"))["notification"]
    assert note["data"]["issue"]["title"] == "now"
    await ws.send_json({"type": "unsubscribe", "all": True})
    assert await next_of(ws, "unsubscribed") == {"type": "unsubscribed", "all": True}
    await client.post(
        "/api/repositories/alice/later/issues", json={"title": "unheard"}, headers=alice.headers
    )
    await nothing_for(ws)
    await ws.close()
    with pytest.raises(aiohttp.WSServerHandshakeError) as info:
        await client.ws_connect(f"/ws?token={bob.token}&subscribe=some")
    assert info.value.status == 400
