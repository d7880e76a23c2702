"""The fan-out's write-out: what a loop turn staged, written in the next, one write a socket."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Container

from ..metrics import WS_MESSAGES
from .sockets import HIGH_WATER, Client, write_each

# Sockets written before the write-out lets other tasks run: 10,000 writes hold the loop
# for ~80 ms, mostly in the kernel (bench_ws: receipts came sooner with this, too).
FANOUT_BATCH = 200

Offer = Callable[[Client, bytes, "str | None", int], None]


class WriteOut:
    """Messages staged for many sockets, written FANOUT_BATCH sockets per loop turn.

    A notification is staged with its sockets and its frame, built once. Everything
    staged in one loop turn is written as one round in the next ones: a socket that gets
    several of its messages gets them in one write. A message written to one socket
    outside the fan-out (an answer, a ping) calls flush() first, so nothing overtakes
    what was staged before it.
    """

    def __init__(self, offer: Offer, live: Container[Client]) -> None:
        # offer(client, frame, text, messages): the slow path (a backlog, a compressed
        # socket, one about to be dropped); live: the clients still connected.
        self._offer = offer
        self._live = live
        self._staged: list[tuple[bytes, str, list[Client]]] = []
        self._handle: asyncio.Handle | None = None
        self._idle: asyncio.Future[None] | None = None
        # The round being written: its sockets, and either the one message all get
        # (_frame, _text) or each socket's messages (_merged), from _pos on.
        self._clients: list[Client] = []
        self._frame: bytes | None = None
        self._text = ""
        self._merged: dict[Client, list[tuple[bytes, str]]] | None = None
        self._pos = 0

    @property
    def writing(self) -> bool:
        """A round has begun: what is staged now waits for it to end."""
        return self._pos < len(self._clients)

    def stage(self, frame: bytes, text: str, clients: list[Client]) -> None:
        """Write a message to these clients from the next loop turn on."""
        self._staged.append((frame, text, clients))
        if self._handle is None:
            self._handle = asyncio.get_running_loop().call_soon(self._step)

    async def idle(self) -> None:
        """Return once everything staged has been written."""
        while self._staged or self.writing:
            if self._idle is None:
                self._idle = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._idle)

    def flush(self) -> None:
        """Write everything staged now (before a message to one socket, keeping order)."""
        if self._handle is None:
            return
        self._handle.cancel()
        self._handle = None
        self._write(None)
        self._settled()

    def _step(self) -> None:
        self._handle = None
        self._write(FANOUT_BATCH)
        if self._staged or self.writing:
            self._handle = asyncio.get_running_loop().call_soon(self._step)
        else:
            self._settled()

    def _settled(self) -> None:
        if self._idle is not None:
            if not self._idle.done():
                self._idle.set_result(None)
            self._idle = None

    def _begin(self) -> bool:
        """Make the staged messages the round to write: False when nothing is staged."""
        staged, self._staged = self._staged, []
        self._pos = 0
        if not staged:
            self._clients, self._merged = [], None
            return False
        if len(staged) == 1:
            self._frame, self._text, self._clients = staged[0]
            self._merged = None
            return True
        merged: dict[Client, list[tuple[bytes, str]]] = {}
        for frame, text, clients in staged:
            message = (frame, text)
            for client in clients:
                got = merged.get(client)
                if got is None:
                    merged[client] = [message]
                else:
                    got.append(message)
        self._frame, self._merged, self._clients = None, merged, list(merged)
        return True

    def _write(self, budget: int | None) -> None:
        """Write up to budget sockets (None: all), beginning rounds as they end."""
        while budget is None or budget > 0:
            if not self.writing and not self._begin():
                return
            start = self._pos
            end = len(self._clients) if budget is None else min(len(self._clients), start + budget)
            self._pos = end
            if budget is not None:
                budget -= end - start
            # A slice, not islice: islice walks from the list's start to `start` each
            # batch (a quarter of a million steps an event at 10,000 sockets).
            batch = self._clients[start:end]
            if self._frame is not None:
                self._one(batch, self._frame, self._text)
            else:
                self._many(batch)
            if not self.writing:
                self._clients, self._merged, self._frame = [], None, None

    def _one(self, clients: list[Client], frame: bytes, text: str) -> None:
        """The same frame to each client: straight to its socket while it keeps up."""
        offer, fds, sent = self._offer, [], 0
        direct: list[Client] = []  # beside fds, so a short write is finished on its own socket
        for client in clients:
            transport = client.direct  # live, no backlog, no deflate, not closing
            if transport is not None and not transport.is_closing():
                size = transport.get_write_buffer_size()
                if not size and client.fd >= 0:
                    fds.append(client.fd)  # nothing unsent: to the socket (write_each)
                    direct.append(client)
                    continue
                if size <= HIGH_WATER:
                    transport.write(frame)
                    sent += 1
                    continue
            if client.transport is not None and client.live:
                # Not removed since staged (Client.drop), and not resuming (its replay
                # sends it): the slow path, which queues or compresses.
                offer(client, frame, text, 1)
        if fds:
            short = write_each(fds, frame)
            if short:
                self._rest(direct, short, frame)
        WS_MESSAGES.n += sent + len(fds)

    @staticmethod
    def _rest(direct: list[Client], short: list[tuple[int, int]], frame: bytes) -> None:
        """What a socket did not take at once goes to its transport, which waits for room.

        By position, not by descriptor: a closed client not yet removed may still hold a
        number a new connection has reused.
        """
        for index, written in short:
            transport = direct[index].transport
            if transport is not None:
                transport.write(frame[written:] if written else frame)

    def _many(self, clients: list[Client]) -> None:
        """Each client's messages of the round, joined into one write."""
        merged, live, offer = self._merged or {}, self._live, self._offer
        for client in clients:
            if not client.live or client not in live:
                continue
            messages = merged[client]
            if len(messages) == 1 or client.compress:
                for frame, text in messages:  # a compressed socket compresses each one
                    offer(client, frame, text, 1)
            else:
                offer(client, b"".join(frame for frame, _ in messages), None, len(messages))
