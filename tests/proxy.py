"""One address in front of several servers: a TCP proxy handing each connection to the next.

Round robin per connection, as nginx's upstream does with keep-alive off: consecutive
requests of a test (each a new connection with urllib) land on different processes, and
a WebSocket stays on the process it was handed to. A refused connection is tried on the
next backend, as nginx's default `proxy_next_upstream error` does; a connection the
backend accepted and then closed with a request unanswered is counted (`unanswered`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from dataclasses import dataclass

from .server import free_port


@dataclass
class _Link:
    """One client connection and its backend's, as the two pipes see them."""

    port: int
    pending: bool = False  # client bytes passed on since the backend last sent any
    upgraded: bool = False  # a WebSocket: its closing handshake crosses, not counted
    client_gone: bool = False
    asked: bytes = b""  # the start of what the client sent last
    answers: int = 0  # chunks the backend sent


class RoundRobinProxy:
    """Listens on 127.0.0.1:<port>; each accepted connection goes to the next backend."""

    def __init__(self, backends: list[int], rate: int = 0) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.backends = backends
        self._next = itertools.cycle(backends)
        self.rate = rate  # bytes a second from clients to backends; 0: as fast as they come
        self.handed: list[int] = []  # the backend port of each connection, in order
        self.refused = 0  # connections a backend refused, handed to the next one
        self.exhausted = 0  # connections every backend refused
        # "port: request line (answers before)" of each request a backend closed unanswered
        self.unanswered: list[str] = []
        self.sent_up = 0  # bytes passed from clients to backends
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link, up: bool
    ) -> None:
        step = max(1, self.rate // 20) if up and self.rate else 65536
        try:
            while data := await reader.read(step):
                if up:
                    if not link.pending:
                        link.asked = data[:80]
                    link.pending = True
                else:
                    link.answers += 1
                    link.upgraded = link.upgraded or data.startswith(b"HTTP/1.1 101")
                    link.pending = False
                writer.write(data)
                await writer.drain()
                if up:
                    self.sent_up += len(data)
                    if self.rate:
                        await asyncio.sleep(len(data) / self.rate)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if up:
                link.client_gone = True
            elif link.pending and not link.upgraded and not link.client_gone:
                self.unanswered.append(
                    f"{link.port}: {link.asked!r} ({link.answers} chunks before)"
                )
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Cancelled by stop(): ended quietly (asyncio logs a cancelled handler as an error).
        with contextlib.suppress(asyncio.CancelledError):
            await self._forward(reader, writer)

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = self.backends.index(next(self._next))
        # The next backend, then the others in turn (not whatever the shared cycle says
        # by then: other connections move it meanwhile).
        for port in self.backends[first:] + self.backends[:first]:
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                self.refused += 1
                continue
            self.handed.append(port)
            link = _Link(port)
            await asyncio.gather(
                self._pipe(reader, up_writer, link, True),
                self._pipe(up_reader, writer, link, False),
            )
            return
        self.exhausted += 1  # every backend refused: the client's connection is closed
        writer.close()

    def start(self) -> RoundRobinProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", self.port), self._loop
        ).result(10)
        return self

    def stop(self) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()  # else its self-pipe sockets warn in whichever test runs next

    def __enter__(self) -> RoundRobinProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
