"""One connected WebSocket client, and how a message's bytes reach its socket."""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import Iterable
from itertools import repeat
from typing import Any, ClassVar

from aiohttp import WSMsgType, web
from aiohttp._websocket.reader import WebSocketDataQueue, WebSocketReader

from ..metrics import WS_MESSAGES
from ..policy import Caps

# Messages a client may have waiting before it counts as fallen behind and is dropped.
QUEUE_SIZE = 256
# Bytes the transport may hold unsent before messages wait here instead: the transport
# pauses writing above it (set on connect), and the queue above is what bounds a client.
HIGH_WATER = 64 * 1024

_LEN2 = struct.Struct("!BBH")
_LEN8 = struct.Struct("!BBQ")


def text_frame(text: str) -> bytes:
    """The whole WebSocket frame of a text message as a server sends it (RFC 6455 5.2).

    FIN, opcode 1, no mask (servers never mask) and no permessage-deflate: the same
    bytes for every socket that did not negotiate compression, so a message is
    encoded once, however many sockets it goes to.
    """
    payload = text.encode()
    size = len(payload)
    if size < 126:
        return bytes((0x81, size)) + payload
    if size < 65536:
        return _LEN2.pack(0x81, 126, size) + payload
    return _LEN8.pack(0x81, 127, size) + payload


PING_TEXT = '{"type": "ping"}'
PING_FRAME = text_frame(PING_TEXT)
PING_CONTROL = b"\x89\x00"  # a control ping with no payload: what ws.ping() sends
# A heartbeat's two frames in one write (one send system call a socket, not two).
PING_BOTH = PING_FRAME + PING_CONTROL


_SHARED_LOCK: asyncio.Lock | None = None
_PONG = WSMsgType.PONG
# Transports whose socket is a plain TCP socket, written by themselves with send/write
# once their buffer is empty (uvloop's, asyncio's): not TLS, whose socket carries records.
_PLAIN = {("uvloop.loop", "TCPTransport"), ("asyncio.selector_events", "_SelectorSocketTransport")}


def plain_fd(transport: Any) -> int:
    """The descriptor of a transport's plain TCP socket, or -1 (TLS, a test's stand-in)."""
    kind = type(transport)
    if (kind.__module__, kind.__name__) not in _PLAIN:
        return -1
    if transport.get_extra_info("sslcontext") is not None:
        return -1
    sock = transport.get_extra_info("socket")
    return -1 if sock is None else int(sock.fileno())


def write_each(fds: Iterable[int], data: bytes) -> list[tuple[int, int]]:
    """os.write(fd, data) to each descriptor, the loop in C: (index, bytes written) of the short.

    Only for sockets whose transport holds nothing unsent and is not closing, checked in
    the same synchronous pass (so no byte overtakes the transport's, and the descriptor
    is still the transport's own: it is closed only after is_closing() turns true). It
    costs 0.3 µs of user time a socket against 1.0 for transport.write (uvloop's buffer
    and queue bookkeeping around the same send). A socket whose buffer is full (0 bytes,
    BlockingIOError), that took part of it, or that failed (reset, broken pipe) is
    returned: its caller gives the rest to the transport, which waits or fails as always.
    """
    size = len(data)
    done: list[int] = []
    calls = map(os.write, fds, repeat(data))
    while True:
        try:
            done.extend(calls)  # what was written before an error stays in `done`
            break
        except OSError:
            done.append(0)  # that socket's call raised: it wrote nothing
    if done.count(size) == len(done):
        return []
    return [(i, n) for i, n in enumerate(done) if n != size]


class _Queue(WebSocketDataQueue):
    """aiohttp's message queue of a socket, with pongs taken aside as they are parsed.

    A pong only says the peer is alive: noted on its Client here, it never wakes the
    socket's handler (a task step, aiohttp's receive and the handler's loop: most of a
    heartbeat's cost in user time, every socket every heartbeat_seconds).
    """

    __slots__ = ("client",)
    client: Client | None

    def feed_data(self, data: Any, size: int) -> None:
        if data[0] is _PONG:
            client = self.client
            if client is not None:
                client.last_seen = asyncio.get_running_loop().time()
            return
        WebSocketDataQueue.feed_data(self, data, size)

    def closed(self) -> None:
        """The socket began to close: its client writes nothing more directly."""
        client = self.client
        if client is not None:
            client.direct = None
            Client.epoch += 1


class Socket(web.WebSocketResponse):
    """aiohttp's WebSocket response: pongs taken aside, a close told to its Client."""

    def _post_start(self, request: Any, protocol: Any, writer: Any) -> None:
        handler = request.protocol
        tail = getattr(handler, "_message_tail", b"")
        super()._post_start(request, protocol, writer)
        # Frames that came with the upgrade went into aiohttp's own queue: that socket
        # keeps it (its handler notes pongs too). So does one with aiohttp's heartbeat.
        if tail or self._heartbeat is not None or handler._payload_parser is not self._parser:
            return
        assert self._reader is not None and self._loop is not None  # set by super()
        queue = _Queue(request._protocol, self._reader._limit, loop=self._loop)
        queue.client = None
        parser = WebSocketReader(
            queue, self._max_msg_size, compress=bool(self._compress), decode_text=self._decode_text
        )
        self._reader, self._parser = queue, parser
        handler._payload_parser = None
        handler.set_parser(parser)

    def _set_closed(self) -> None:
        # Every close of aiohttp's (ours, the peer's, an error's) begins here: from now
        # on no frame may follow its close frame.
        super()._set_closed()
        if isinstance(self._reader, _Queue):
            self._reader.closed()

    def watch(self, client: Client) -> None:
        """Note this client's pongs from now on."""
        if isinstance(self._reader, _Queue):
            self._reader.client = client
        client.settle()


def slim(ws: web.WebSocketResponse, protocol: Any) -> None:
    """Let go of what an upgraded socket holds that hubsvc's frames never use (~1.6 KiB).

    aiohttp keeps them for the connection's life: the HTTP request parser and the
    request queue of its connection (unused once upgraded: aiohttp itself reads past
    a missing parser, and a queue of () cannot take a message by mistake: it would
    raise), and the writer's lock and task set for compressed frames (on a socket
    without permessage-deflate, never used).
    """
    global _SHARED_LOCK
    if getattr(protocol, "_upgraded", False) and getattr(protocol, "_payload_parser", None):
        if not getattr(protocol, "_messages", True):
            protocol._messages = ()
        protocol._parser = None
    writer = getattr(ws, "_writer", None)
    if writer is not None and not ws.compress and hasattr(writer, "_send_lock"):
        if _SHARED_LOCK is None:
            _SHARED_LOCK = asyncio.Lock()
        writer._send_lock = _SHARED_LOCK
        writer._background_tasks = _NO_TASKS


_NO_TASKS: set[asyncio.Task] = set()


class Client:
    """One connected socket: its user, subscriptions, and frames waiting to be written.

    No task and no queue per client while its socket keeps up: a message is written to
    the transport at once. Only when the transport holds HIGH_WATER bytes unsent do
    messages wait in `backlog`, written in one batch by a short-lived task as soon as
    the socket drains; QUEUE_SIZE of them waiting and the client has fallen behind.
    """

    __slots__ = (
        "backlog",
        "beat",
        "caps",
        "compress",
        "direct",
        "everything",
        "fd",
        "flusher",
        "ip",
        "last_seen",
        "live",
        "resumer",
        "subscriptions",
        "ticket",
        "token_digest",
        "transport",
        "user_id",
        "username",
        "web",
        "ws",
    )

    # Bumped whenever a client's `direct`, or what decides which clients an event goes
    # to (membership, subscriptions, live, web), changes: a fan-out plan taken at one
    # epoch (fanout.Plan, the hub's kept targets) holds only while it is unchanged.
    epoch: ClassVar[int] = 0

    def __init__(
        self,
        ws: web.WebSocketResponse,
        user: dict[str, Any],
        ip: str,
        transport: Any = None,
        token_digest: bytes | None = None,
        caps: Caps | None = None,
    ) -> None:
        self.ws = ws
        self.token_digest = token_digest
        # What the credential allows (policy.Caps; None: all its user may read): live
        # fan-out and replay ask it per event, as the feed does.
        self.caps = caps
        self.transport = transport
        # Its socket's descriptor (a plain TCP transport), or -1: the fan-out writes a
        # frame straight to it while the transport holds nothing unsent (write_each).
        self.fd = -1
        if transport is not None:
            transport.set_write_buffer_limits(HIGH_WATER)
            self.fd = plain_fd(transport)
        # A socket that negotiated permessage-deflate has zlib streams of its own: its
        # messages go through aiohttp's send_str, one compression each.
        self.compress = bool(ws.compress)
        self.user_id: int = user["id"]
        self.username: str = user["username"]
        self.ip = ip
        self.subscriptions: tuple[int, ...] = ()  # a tuple: a set costs 216 bytes
        # Subscribed to every repository the user may read (subscribe {all: true}).
        self.everything = False
        self.backlog: list[bytes | str] | None = None
        self.flusher: asyncio.Task | None = None
        # False while a resume replays the log: live events wait for the replay to end.
        self.live = True
        # The transport while a message may be written to it at once (live, no backlog,
        # no deflate, not closing), else None: the fan-out's one check a socket.
        self.direct: Any = None
        # The user's notifications.web preference: off, the socket gets no notification.
        self.web = bool(
            ((user.get("preferences") or {}).get("notifications") or {}).get("web", True)
        )
        self.resumer: asyncio.Task | None = None
        # Its entry in the count of sockets per address shared by every process, if any.
        self.ticket: str | None = None
        self.last_seen = asyncio.get_running_loop().time()
        self.beat = 0  # the hub's tick of its next heartbeat
        self.settle()

    def put(self, frame: bytes, text: str | None, messages: int | None = None) -> bool:
        """Write a message now, or queue it behind others; False when the client is behind.

        `frame` is the message's whole frame, `text` its text (None for a control frame,
        or for several messages' frames joined, written as is even on a compressed
        socket); `messages`: how many messages the frame bytes hold, when not one.
        """
        WS_MESSAGES.n += (text is not None) if messages is None else messages
        backlog = self.backlog
        item: bytes | str = text if self.compress and text is not None else frame
        if backlog is not None:
            if len(backlog) >= QUEUE_SIZE:
                return False
            backlog.append(item)
            return True
        transport = self.transport
        if transport is None or transport.is_closing() or self.ws.closed:
            return True  # closing: its handler removes it
        if self.compress or transport.get_write_buffer_size() > HIGH_WATER:
            self.backlog = [item]
            self.direct = None
            Client.epoch += 1
            self.flusher = asyncio.get_running_loop().create_task(self._flush())
        else:
            transport.write(frame)
        return True

    def set_live(self, on: bool) -> None:
        """Live (events written as they come) or not (a resume replays the log)."""
        self.live = on
        self.settle()

    def settle(self) -> None:
        """Set `direct` from the state it sums up (after any part of it changed)."""
        transport = self.transport
        reader = getattr(self.ws, "_reader", None)
        self.direct = (
            transport
            if transport is not None
            # Only a socket whose queue tells it of a close (Socket.watch) is written
            # without asking aiohttp whether it is closing.
            and isinstance(reader, _Queue)
            and reader.client is self
            and self.live
            and self.backlog is None
            and not self.compress
            and not self.ws.closed
            else None
        )
        Client.epoch += 1

    async def drained(self) -> None:
        """Wait until nothing is waiting to be written."""
        while self.flusher is not None and not self.flusher.done():
            await asyncio.wait((self.flusher,))

    def drop(self) -> None:
        """Forget what is waiting and write nothing more (the client was removed)."""
        self.backlog = None
        self.transport = self.direct = (
            None  # put() after this (a replay's next message) writes nothing
        )
        self.fd = -1
        Client.epoch += 1
        if self.flusher is not None:
            self.flusher.cancel()
            self.flusher = None

    async def _flush(self) -> None:
        try:
            while self.backlog:
                await self._room()
                batch, self.backlog = self.backlog, []
                transport = self.transport
                if transport is None or transport.is_closing() or self.ws.closed:
                    break
                if not self.compress:
                    transport.writelines(batch)
                    continue
                for item in batch:
                    if isinstance(item, str):
                        await self.ws.send_str(item)
                    else:
                        transport.write(item)
        except (ConnectionError, RuntimeError):
            pass  # the socket went away: its handler removes the client
        finally:
            if self.flusher is asyncio.current_task():
                self.backlog, self.flusher = None, None
                self.settle()

    async def _room(self) -> None:
        """Wait until the transport holds at most HIGH_WATER bytes unsent."""
        transport = self.transport
        if transport is None:
            return
        protocol = transport.get_protocol()
        while transport.get_write_buffer_size() > HIGH_WATER and not transport.is_closing():
            if protocol._paused:
                # Paused above HIGH_WATER (set_write_buffer_limits), resumed once
                # drained: aiohttp's own writers wait on the same helper.
                await protocol._drain_helper()
            else:
                await asyncio.sleep(0.01)  # limits set by someone else: look again soon
