"""The fan-out's write-out: what a loop turn staged, written in the next, one write a socket."""

from __future__ import annotations

import asyncio
from array import array
from collections.abc import Callable, Container
from operator import methodcaller
from typing import Any

from ..metrics import WS_MESSAGES
from .sockets import HIGH_WATER, Client, write_each

# Sockets written before the write-out lets other tasks run: 10,000 writes hold the loop
# for ~80 ms, mostly in the kernel (bench_ws: receipts came sooner with this, too).
FANOUT_BATCH = 200

Offer = Callable[[Client, bytes, "str | None", int], None]

_CLOSING = methodcaller("is_closing")
_UNSENT = methodcaller("get_write_buffer_size")


class Plan:
    """The transports and descriptors of a list of clients, all written directly, at one epoch.

    Kept with an audience's targets (Hub._targets) while Client.epoch is unchanged (no
    client's `direct`, membership, subscriptions, live or web changed), so a batch is
    checked and written without touching its Client objects: two passes in C over the
    batch's transports (none closing, none with bytes unsent: the same checks as
    WriteOut._one's, in the same synchronous pass as the writes), then write_each.
    """

    __slots__ = ("closing", "epoch", "fds", "transports", "unsent")

    def __init__(self, transports: list[Any], fds: array[int]) -> None:
        self.epoch = Client.epoch
        self.transports = transports
        self.fds = fds
        # One transport class (uvloop's, in production): its methods called unbound, so
        # no bound method is made a socket; else methodcaller.
        kinds = {type(t) for t in transports}
        kind = kinds.pop() if len(kinds) == 1 else None
        self.closing: Callable[[Any], Any] = getattr(kind, "is_closing", _CLOSING)
        self.unsent: Callable[[Any], Any] = getattr(kind, "get_write_buffer_size", _UNSENT)

    @classmethod
    def of(cls, clients: list[Client]) -> Plan | None:
        """A plan for these clients, or None when one is not written directly now."""
        transports = [c.direct for c in clients]
        fds = array("i", [c.fd for c in clients])
        if any(t is None for t in transports) or (fds and min(fds) < 0):
            return None
        return cls(transports, fds)


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
        self._staged: list[tuple[bytes, str, list[Client], Plan | None]] = []
        self._handle: asyncio.Handle | None = None
        self._idle: asyncio.Future[None] | None = None
        # The round being written: its sockets, and either the one message all get
        # (_frame, _text) or each socket's messages (_merged), from _pos on.
        self._clients: list[Client] = []
        self._frame: bytes | None = None
        self._text = ""
        self._plan: Plan | None = None
        self._merged: dict[Client, list[tuple[bytes, str]]] | None = None
        self._pos = 0

    @property
    def writing(self) -> bool:
        """A round has begun: what is staged now waits for it to end."""
        return self._pos < len(self._clients)

    def stage(
        self, frame: bytes, text: str, clients: list[Client], plan: Plan | None = None
    ) -> None:
        """Write a message to these clients from the next loop turn on (plan: theirs)."""
        self._staged.append((frame, text, clients, plan))
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
            self._frame, self._text, self._clients, self._plan = staged[0]
            self._merged = None
            return True
        merged: dict[Client, list[tuple[bytes, str]]] = {}
        self._plan = None
        for frame, text, clients, _ in staged:
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
            if self._frame is not None and self._planned(start, end, self._frame):
                pass
            elif self._frame is not None:
                # A slice, not islice: islice walks from the list's start to `start`
                # each batch (a quarter of a million steps an event at 10,000 sockets).
                self._one(self._clients[start:end], self._frame, self._text)
            else:
                self._many(self._clients[start:end])
            if not self.writing:
                self._clients, self._merged, self._frame, self._plan = [], None, None, None

    def _planned(self, start: int, end: int, frame: bytes) -> bool:
        """Write the round's clients start:end from its plan: False if it no longer holds.

        It holds while no client's state changed since it was taken (the epoch) and every
        transport of the batch is open with nothing unsent; else _one checks each client.
        """
        plan = self._plan
        if plan is None or plan.epoch != Client.epoch:
            return False
        transports = plan.transports[start:end]
        if any(map(plan.closing, transports)) or any(map(plan.unsent, transports)):
            return False
        short = write_each(plan.fds[start:end], frame)
        if short:
            self._rest(transports, short, frame)
        WS_MESSAGES.n += end - start
        return True

    def _one(self, clients: list[Client], frame: bytes, text: str) -> None:
        """The same frame to each client: straight to its socket while it keeps up."""
        offer, fds, sent = self._offer, [], 0
        direct: list[Any] = []  # transports beside fds: a short write ends on its own socket
        for client in clients:
            transport = client.direct  # live, no backlog, no deflate, not closing
            if transport is not None and not transport.is_closing():
                size = transport.get_write_buffer_size()
                if not size and client.fd >= 0:
                    fds.append(client.fd)  # nothing unsent: to the socket (write_each)
                    direct.append(transport)
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
    def _rest(transports: list[Any], short: list[tuple[int, int]], frame: bytes) -> None:
        """What a socket did not take at once goes to its transport, which waits for room.

        By position, not by descriptor: a closed client not yet removed may still hold a
        number a new connection has reused. The transports were checked open in the
        same synchronous pass as the writes.
        """
        for index, written in short:
            transports[index].write(frame[written:] if written else frame)

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
