"""Fan-out encoded once: real clients get the same correctly framed bytes; slow ones are cut."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
from types import SimpleNamespace

import pytest
from aiohttp import WSMsgType, web

from hubsvc.keys import STORE
from hubsvc.notify.fanout import Plan, WriteOut
from hubsvc.notify.hub import HUB
from hubsvc.notify.sockets import QUEUE_SIZE, Client, text_frame, write_each

from .conftest import make_config, sign_up
from .test_repos import create
from .test_ws import connect, next_of, nothing_for

SUBSCRIBE = {"type": "subscribe", "repository": {"owner": "alice", "name": "proj"}}


@pytest.fixture
def config(tmp_path, database_url):
    """Room for many sockets from the test's one address."""
    return make_config(tmp_path, database__url=database_url, websocket__max_per_ip=200)


async def raw_socket(port: int, token: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A WebSocket opened by hand: the frames as bytes, with no client library between."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        f"GET /ws?token={token} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
        "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n".encode()
    )
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101"), head
    assert b"permessage-deflate" not in head.lower()  # the server declines compression
    return reader, writer


async def read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes, bytes]:
    """(first byte, the whole frame as read, payload) of one unmasked server frame."""
    head = await asyncio.wait_for(reader.readexactly(2), 5)
    assert head[1] & 0x80 == 0, "server frames are never masked"
    size, extra = head[1] & 0x7F, b""
    if size == 126:
        extra = await reader.readexactly(2)
        size = int.from_bytes(extra, "big")
    elif size == 127:
        extra = await reader.readexactly(8)
        size = int.from_bytes(extra, "big")
    payload = await reader.readexactly(size)
    return head[0], head + extra + payload, payload


def masked(text: str) -> bytes:
    """A client's text frame (clients must mask), for the hand-made socket."""
    data, mask = text.encode(), os.urandom(4)
    assert len(data) < 126
    return (
        bytes((0x81, 0x80 | len(data))) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data))
    )


async def test_one_notification_is_the_same_frame_for_every_socket(client, alice, bob):
    await create(client, alice, "proj")
    sockets = [await connect(client, bob) for _ in range(60)]
    for ws in sockets:
        await ws.send_json(SUBSCRIBE)
        await next_of(ws, "subscribed")
    reader, writer = await raw_socket(client.server.port, bob.token)
    first, _, payload = await read_frame(reader)
    assert first == 0x81 and json.loads(payload)["type"] == "connected"
    writer.write(masked(json.dumps(SUBSCRIBE)))
    first, _, payload = await read_frame(reader)
    assert json.loads(payload)["type"] == "subscribed"

    await client.post(
        "/api/repositories/alice/proj/issues", json={"title": "to all"}, headers=alice.headers
    )
    texts = set()
    for ws in sockets:
        message = await ws.receive(timeout=5)
        assert message.type == WSMsgType.TEXT
        texts.add(message.data)
    assert len(texts) == 1  # byte for byte the same text on all 60 sockets
    (text,) = texts
    assert json.loads(text)["notification"]["data"]["issue"]["title"] == "to all"
    first, frame, payload = await read_frame(reader)
    assert first == 0x81  # FIN, text, no RSV bits: not compressed
    assert payload.decode() == text and frame == text_frame(text)
    writer.close()
    for ws in sockets:
        await ws.close()


async def test_a_client_offering_compression_reads_every_message(client, alice, bob):
    await create(client, alice, "proj")
    ws = await connect(client, bob, compress=15)
    assert ws.compress == 0  # declined: one encoding serves every socket
    await ws.send_json(SUBSCRIBE)
    await next_of(ws, "subscribed")
    await client.post(
        "/api/repositories/alice/proj/issues", json={"title": "deflated?"}, headers=alice.headers
    )
    note = (await next_of(ws, "notification"))["notification"]
    assert note["data"]["issue"]["title"] == "deflated?"
    await ws.close()


async def test_a_socket_that_negotiated_deflate_gets_its_own_compressed_frames(aiohttp_client):
    # Should a socket ever negotiate permessage-deflate, the shared frame is not for it:
    # its messages go through its own compressor, and a real client reads them.
    texts = [json.dumps({"type": "notification", "n": i, "pad": "x" * (i * 40)}) for i in range(50)]

    async def handler(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(compress=True)
        await ws.prepare(request)
        peer = Client(ws, {"id": 1, "username": "z"}, "127.0.0.1", request.transport)
        assert peer.compress
        for text in texts:
            assert peer.put(text_frame(text), text)
        await peer.drained()
        await ws.close()
        return ws

    app = web.Application()
    app.router.add_get("/ws", handler)
    test_client = await aiohttp_client(app)
    ws = await test_client.ws_connect("/ws", compress=15)
    assert ws.compress == 15
    got = []
    async for message in ws:
        got.append(message.data)
    assert got == texts


async def test_a_reader_that_stops_reading_is_cut_off_and_others_still_get_events(
    client, alice, bob
):
    await create(client, alice, "proj")
    carol = await sign_up(client, "carol")
    hub = client.app[HUB]
    fast = await connect(client, bob)
    await fast.send_json(SUBSCRIBE)
    await next_of(fast, "subscribed")
    # A real client that stops reading: aiohttp stops taking bytes off its socket once
    # 64 KiB wait unread, then the kernel's buffers fill, then the server's.
    slow = await connect(client, carol)
    stuck = next(c for c in hub.clients if c.username == "carol")
    big = {"type": "error", "error": "x" * 60_000}
    sent = 0
    while stuck in hub.clients and sent < 5_000:
        hub.send(stuck, big)
        sent += 1
        await asyncio.sleep(0)
    assert stuck not in hub.clients
    assert sent > QUEUE_SIZE  # it was given its whole queue first
    await client.post("/api/repositories/alice/proj/star", headers=alice.headers)
    assert (await next_of(fast, "notification"))["notification"]["type"] == "star"
    message = await slow.receive(timeout=10)
    while message.type == WSMsgType.TEXT:
        message = await slow.receive(timeout=10)
    assert message.type in (WSMsgType.CLOSE, WSMsgType.CLOSED)
    await fast.close()


async def test_a_reader_that_lags_gets_every_message_in_order(client, alice, bob):
    await create(client, alice, "proj")
    hub = client.app[HUB]
    ws = await connect(client, bob)
    peer = next(c for c in hub.clients if c.username == "bob")
    # Past the transport's high-water mark messages wait and go out in batches; fewer
    # than QUEUE_SIZE waiting, nothing is lost and the order holds.
    for i in range(QUEUE_SIZE - 1):
        hub.send(peer, {"type": "error", "error": f"{i} " + "y" * 40_000})
    assert peer.backlog is not None  # the batching path, not the direct write
    for i in range(QUEUE_SIZE - 1):
        assert (await next_of(ws, "error"))["error"].startswith(f"{i} ")
    await client.post("/api/repositories/alice/proj/star", headers=bob.headers)
    assert (await next_of(ws, "notification"))["notification"]["type"] == "star"
    assert peer in hub.clients
    await ws.close()


async def test_a_private_event_reaches_readers_only_among_many_sockets(client, alice, bob):
    await create(client, alice, "secret", visibility="private")
    carol = await sign_up(client, "carol")
    await client.put(
        "/api/repositories/alice/secret/collaborators/bob",
        json={"permission": "read"},
        headers=alice.headers,
    )
    readers = [await connect(client, u) for u in (alice, bob, bob)]
    strangers = [await connect(client, carol) for _ in range(5)]
    await client.post(
        "/api/repositories/alice/secret/issues", json={"title": "hush"}, headers=alice.headers
    )
    for ws in readers:
        note = (await next_of(ws, "notification"))["notification"]
        assert note["data"]["issue"]["title"] == "hush"
    for ws in strangers:
        await nothing_for(ws)
    for ws in readers + strangers:
        await ws.close()


def test_text_frames_carry_their_length_in_the_right_form():
    for size, head in ((0, b"\x81\x00"), (125, b"\x81\x7d"), (126, b"\x81\x7e\x00\x7e")):
        assert text_frame("a" * size)[: len(head)] == head
    frame = text_frame("é" * 40_000)  # 80,000 bytes of UTF-8: the 8-byte length
    assert frame[:2] == b"\x81\x7f" and int.from_bytes(frame[2:10], "big") == 80_000
    assert frame[10:].decode() == "é" * 40_000


async def test_a_replay_held_up_by_a_slow_reader_asks_who_may_read_after_the_wait(
    client, alice, bob
):
    await create(client, alice, "secret", visibility="private")
    repo = "/api/repositories/alice/secret"
    await client.put(
        repo + "/collaborators/bob", json={"permission": "read"}, headers=alice.headers
    )
    feed = await (await client.get("/api/events", headers=bob.headers)).json()
    before = feed["lastEventId"]
    for n in range(3):  # made while bob may read them
        await client.post(repo + "/issues", json={"title": f"private {n}"}, headers=alice.headers)
    hub = client.app[HUB]
    reader, writer = await raw_socket(client.server.port, bob.token)
    peer = next(c for c in hub.clients if c.username == "bob")
    # bob stops reading: past the kernel's buffers and the transport's, messages wait in
    # its backlog; more than half a queue of them and a replay waits for room.
    while peer.backlog is None or len(peer.backlog) <= QUEUE_SIZE // 2 + 8:
        hub.send(peer, {"type": "error", "error": "z" * 60_000})
        await asyncio.sleep(0)
    writer.write(masked(json.dumps({"type": "resume", "after": before})))
    await asyncio.sleep(0.3)  # the replay has begun, and waits
    resp = await client.delete(repo + "/collaborators/bob", headers=alice.headers)
    assert resp.status == 204, await resp.text()
    seen = []
    while True:  # bob reads again: the waiting messages, then the rest of the replay
        _, _, payload = await read_frame(reader)
        message = json.loads(payload)
        seen.append(message)
        if message["type"] == "resumed":
            break
    leaked = [m for m in seen if m["type"] == "notification"]
    assert leaked == []  # bob could no longer read them when they were sent
    writer.close()


async def test_a_cut_off_reader_that_never_reads_again_loses_its_connection(
    client, alice, bob, monkeypatch
):
    from hubsvc.notify import hub as hub_module

    monkeypatch.setattr(hub_module, "CLOSE_SECONDS", 0.5, raising=False)
    hub = client.app[HUB]
    reader, writer = await raw_socket(client.server.port, bob.token)
    peer = next(c for c in hub.clients if c.username == "bob")
    while peer in hub.clients:  # it never reads: past its queue, it is cut off
        hub.send(peer, {"type": "error", "error": "z" * 60_000})
        await asyncio.sleep(0)
    assert hub.per_ip.get("127.0.0.1", 0) == 0  # its slot is free at once
    # aiohttp's close waits for the socket to drain, which it never does: the hub
    # gives up on the polite close and cuts the connection.
    for _ in range(100):
        if not hub._closers:
            break
        await asyncio.sleep(0.05)
    assert not hub._closers

    async def until_cut() -> None:  # what was sent, then the end of the connection
        try:
            while await reader.read(1 << 20):
                pass
        except ConnectionResetError:
            pass

    await asyncio.wait_for(until_cut(), 10)
    writer.close()


class CountedWrites:
    """A socket's real transport, counting the writes made to it."""

    def __init__(self, transport):
        self.transport, self.writes = transport, 0

    def write(self, data):
        self.writes += 1
        self.transport.write(data)

    def writelines(self, items):
        self.writes += 1
        self.transport.writelines(items)

    def __getattr__(self, name):
        return getattr(self.transport, name)


async def test_messages_staged_in_one_loop_turn_reach_a_socket_in_one_write(
    client, alice, bob, monkeypatch
):
    await create(client, alice, "proj")
    hub = client.app[HUB]
    ws = await connect(client, bob)
    other = await connect(client, alice)
    peer = next(c for c in hub.clients if c.username == "bob")
    counted = peer.transport = CountedWrites(peer.transport)
    peer.settle()  # the fan-out writes to `direct`: the counted transport from here
    assert peer.fd >= 0
    real_write = os.write

    def write(fd: int, data: bytes) -> int:  # the fan-out's straight writes to its socket
        if fd == peer.fd:
            counted.writes += 1
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    texts = [json.dumps({"type": "notification", "n": n}) for n in range(3)]
    everyone = [c for c in hub.clients if c.username in ("alice", "bob")]
    hub.out.stage(text_frame(texts[0]), texts[0], everyone)
    hub.out.stage(text_frame(texts[1]), texts[1], [peer])
    hub.out.stage(text_frame(texts[2]), texts[2], everyone)
    await hub.out.idle()
    assert counted.writes == 1
    hub.out.stage(text_frame(texts[0]), texts[0], everyone)  # one message: straight to it
    await hub.out.idle()
    assert counted.writes == 2
    for n in (0, 1, 2, 0):
        assert (await next_of(ws, "notification"))["n"] == n
    assert [(await next_of(other, "notification"))["n"] for _ in range(3)] == [0, 2, 0]
    # A message to the one socket, sent before the staged ones were written, comes after them.
    hub.out.stage(text_frame(texts[0]), texts[0], [peer])
    hub.send(peer, {"type": "error", "error": "after"})
    assert (await next_of(ws, "notification"))["n"] == 0
    assert (await next_of(ws, "error"))["error"] == "after"
    await ws.close()
    await other.close()


async def test_a_socket_is_written_directly_only_while_live_and_open(client, alice, bob):
    hub = client.app[HUB]
    ws = await connect(client, bob)
    peer = next(c for c in hub.clients if c.username == "bob")
    assert peer.direct is peer.transport
    text = json.dumps({"type": "notification", "n": 1})
    peer.set_live(False)  # as while a resume replays the log
    assert peer.direct is None
    hub.out.stage(text_frame(text), text, [peer])
    await hub.out.idle()
    await nothing_for(ws)  # a resuming socket gets live events from its replay, not here
    peer.set_live(True)
    assert peer.direct is peer.transport
    # The server's close begins (aiohttp's close, as for a peer's close or a protocol
    # error): no frame is written after its close frame, directly or not.
    closing = asyncio.create_task(peer.ws.close(code=1000, message=b"bye"))
    await asyncio.sleep(0)
    assert peer.direct is None
    hub.out.stage(text_frame(text), text, [peer])
    await hub.out.idle()
    message = await ws.receive(timeout=5)
    assert message.type == WSMsgType.CLOSE and message.data == 1000
    await ws.close()
    await closing


def test_write_each_reports_the_sockets_that_did_not_take_the_whole_frame():
    # A failed socket (its peer gone) in the middle does not stop the others' writes.
    pairs = [socket.socketpair() for _ in range(3)]
    for a, _ in pairs:
        a.setblocking(False)
    pairs[1][1].close()
    short = write_each([a.fileno() for a, _ in pairs], b"frame")
    assert short == [(1, 0)]
    assert pairs[0][1].recv(10) == b"frame" and pairs[2][1].recv(10) == b"frame"
    # A full socket buffer takes part of a frame, then nothing: both reported.
    a, b = pairs[0]
    big = b"x" * (1 << 22)
    short = write_each([a.fileno(), a.fileno()], big)
    assert [i for i, _ in short] == [0, 1] and 0 < short[0][1] < len(big) and short[1][1] == 0
    for x, y in pairs:
        x.close()
        if y is not pairs[1][1]:
            y.close()


def test_a_short_write_is_finished_on_the_socket_it_began_on():
    # A closed client not yet removed can still hold a descriptor number that a new
    # connection reuses: the rest of the new socket's frame must go to its own transport.
    class Transport:
        def __init__(self) -> None:
            self.got: list[bytes] = []

        def write(self, data: bytes) -> None:
            self.got.append(data)

    dead, new, other = (SimpleNamespace(fd=7, transport=Transport()) for _ in range(3))
    other.fd = 8
    WriteOut._rest([other.transport, new.transport], [(1, 2), (0, 0)], b"frame")
    assert new.transport.got == [b"ame"] and other.transport.got == [b"frame"]
    assert dead.transport.got == []


async def test_a_public_event_goes_to_the_kept_targets_until_a_client_changes(
    client, alice, bob, monkeypatch
):
    await create(client, alice, "proj")
    hub = client.app[HUB]
    sockets = [await connect(client, bob) for _ in range(3)]
    for ws in sockets:
        await ws.send_json(SUBSCRIBE)
        await next_of(ws, "subscribed")
    finds, checked = [], []
    find, one = hub._find, WriteOut._one
    monkeypatch.setattr(hub, "_find", lambda *a: finds.append(1) or find(*a))
    monkeypatch.setattr(WriteOut, "_one", lambda *a: checked.append(1) or one(*a))

    async def post(title: str) -> None:
        await client.post(
            "/api/repositories/alice/proj/issues", json={"title": title}, headers=alice.headers
        )

    store = client.app[STORE]
    repo_id = (await store.repos.by_name("alice", "proj"))["id"]
    # Client.epoch is one per process: in a test process another app's sockets closing
    # late move it too, so the claim is made of an event before which nothing moved.
    for title in ("zero", "one", "two", "two again", "two once more"):
        asked, epoch, audience = len(finds), Client.epoch, await store.repos.audience(repo_id)
        await post(title)
        for ws in sockets:
            got = await next_of(ws, "notification")
            assert got["notification"]["data"]["issue"]["title"] == title
        now = await store.repos.audience(repo_id)
        if title.startswith("two") and Client.epoch == epoch and now is audience:
            break
    # The last event's clients were kept (the audience read before and kept by the store,
    # no client changed), and all were written from the plan: no socket checked one by one.
    assert len(finds) == asked and checked == []
    await sockets[0].send_json({**SUBSCRIBE, "type": "unsubscribe"})
    await next_of(sockets[0], "unsubscribed")
    await post("three")
    for ws in sockets[1:]:
        assert (await next_of(ws, "notification"))["notification"]["data"]["issue"]["title"] == (
            "three"
        )
    await nothing_for(sockets[0])
    assert len(finds) == asked + 1  # a client changed: asked again
    bob_id = next(c.user_id for c in hub.clients if c.username == "bob")
    hub.set_web(bob_id, False)
    await post("four")
    for ws in sockets:
        await nothing_for(ws)
    assert len(finds) == asked + 2
    for ws in sockets:
        await ws.close()


async def test_a_planned_round_checks_each_socket_once_a_client_changed(client, alice, bob):
    hub = client.app[HUB]
    sockets = [await connect(client, bob) for _ in range(3)]
    peers = [c for c in hub.clients if c.username == "bob"]
    plan = Plan.of(peers)
    assert plan is not None
    text = json.dumps({"type": "notification", "n": 1})
    peers[0].set_live(False)  # after the plan was taken, before the round is written
    hub.out.stage(text_frame(text), text, peers, plan)
    await hub.out.idle()
    got = []
    for ws in sockets:
        try:
            got.append((await ws.receive_json(timeout=0.3))["n"])
        except TimeoutError:
            got.append(None)
    assert sorted(got, key=str) == [1, 1, None]  # the resuming one got nothing
    for ws in sockets:
        await ws.close()


async def test_a_planned_batch_with_bytes_unsent_goes_through_the_transports(client, alice, bob):
    hub = client.app[HUB]
    sockets = [await connect(client, bob) for _ in range(2)]
    peers = [c for c in hub.clients if c.username == "bob"]

    class Unsent(CountedWrites):
        def get_write_buffer_size(self) -> int:
            return 1  # as if part of an earlier frame were still waiting in it

    for peer in peers:
        peer.transport = Unsent(peer.transport)
        peer.settle()
    plan = Plan.of(peers)
    assert plan is not None
    text = json.dumps({"type": "notification", "n": 2})
    hub.out.stage(text_frame(text), text, peers, plan)
    await hub.out.idle()
    # Not straight to the descriptors, which would overtake what the transport holds.
    assert [p.transport.writes for p in peers] == [1, 1]
    for ws in sockets:
        assert (await ws.receive_json(timeout=5))["n"] == 2
        await ws.close()


async def test_kept_targets_are_bounded(client, alice, bob):
    from hubsvc.notify import hub as hub_module
    from hubsvc.store.access import Audience

    hub = client.app[HUB]
    ws = await connect(client, bob)
    # Many public repositories' events while no client changes: each would keep a list.
    for number in range(hub_module.KEPT_MOST + 50):
        event = SimpleNamespace(repo_number=number, repo_id=number, public=True, type="push")
        hub._targets(event, Audience(None, set(), {}))
    assert len(hub._kept) == hub_module.KEPT_MOST
    await ws.close()
