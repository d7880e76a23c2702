"""Serving until SIGTERM, then draining: what was accepted is answered, then the process ends.

aiohttp's own shutdown (web.run_app) closes every connection at once and waits a fixed
time for the handlers: a request body still arriving is dropped (`data_received` ignores
a closing connection, so a push in flight fails with curl's "RPC failed"), connections
the kernel completed but nobody accepted yet are reset when the listener closes, and a
request on a kept-alive connection is lost. Here, as nginx's and Go's graceful stops do:

1. the listener stops, after the kernel's accept queue is emptied (those connections
   were promised an answer: they get one, not a reset; later ones are refused, which a
   proxy retries on another process);
2. on_shutdown runs (WebSockets close with 1001, the jobs lease is handed off);
3. every request in flight runs to its end, answered with `Connection: close` (by
   front's answer hook); a request arriving on a kept-alive connection is answered too;
   a connection closes only between requests, once idle for IDLE_GRACE and with nothing
   unread in its socket; other work in flight (git over SSH) ends on its own, through
   DRAINERS;
4. all of it within [server] drain_seconds; then what is left is cut off.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from collections.abc import Callable, Coroutine
from time import monotonic
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_server import Server

from ..keys import STATE

log = logging.getLogger("hubsvc")

# A connection idle this long (since its last byte or answer, or since the drain began,
# whichever is later) is closed: time for a client that holds it to send its next request.
IDLE_GRACE = 2.0
TICK = 0.05
# Work in flight other than HTTP connections: each is called with the loop time of the
# deadline and returns once its work has ended (or the deadline passed).
Drainer = Callable[[float], Coroutine[Any, Any, None]]
DRAINERS = web.AppKey("drainers", list[Drainer])


class _Handler(RequestHandler):
    """aiohttp's connection handler, telling whether it is between requests."""

    # aiohttp's handler has slots: without these each connection had a __dict__ as well.
    __slots__ = ("partial", "quiet_since")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.quiet_since = self._loop.time()
        self.partial = False  # bytes that made no whole request head yet, or a body

    # Both methods run for every request, so they note as little as they can: RequestHandler's
    # methods are called by name, not through super() (a super object per call); a byte
    # that arrives is not timed, since it either completes a request (whose answer is
    # timed, later) or leaves the connection partial (not idle, whatever the time).
    def data_received(self, data: bytes) -> None:
        before = self._request_count
        RequestHandler.data_received(self, data)
        if self._request_count == before:
            self.partial = True

    def log_access(self, request: Any, response: Any, time: float | None) -> None:
        # aiohttp calls this once each answer is written, on every path that keeps the
        # connection open (an extra coroutine around each request did this before).
        self.partial = False
        self.quiet_since = self._loop.time()
        # RequestHandler.log_access's body: one call less for every request. The start is
        # the loop's clock; uvloop's ticks in whole ms at each loop turn, so a request
        # answered within one turn (a kept answer) read 0 ms on it. The end is read on the
        # same monotonic clock at full precision.
        if self._logging_enabled and self.access_logger is not None and time is not None:
            self.access_logger.log(request, response, monotonic() - time)

    def idle(self) -> bool:
        """Parked waiting for a request, nothing of one received: safe to close."""
        waiter = self._waiter
        return (
            self.transport is not None
            and waiter is not None
            and not waiter.done()
            and not self._messages
            and not self._request_in_progress
            and not self.partial
            and not _unread(self.transport)
        )


def _unread(transport: asyncio.BaseTransport) -> bool:
    """Whether the kernel holds bytes of the connection not read yet (a request on its way)."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return False
    try:
        with socket.socket(fileno=os.dup(sock.fileno())) as peek:
            return bool(peek.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return False


class _Server(Server):
    def __call__(self) -> RequestHandler:
        return _Handler(self, loop=self._loop, **self._kwargs)


class DrainingRunner(web.AppRunner):
    """An AppRunner over listening sockets of its own, which it drains before cleanup."""

    def __init__(self, app: web.Application, **kwargs: Any) -> None:
        super().__init__(app, handle_signals=False, **kwargs)
        self.listeners: list[socket.socket] = []
        self._shut = False

    async def _make_server(self) -> Server:
        server = await super()._make_server()
        return _Server(
            server.request_handler,
            request_factory=server.request_factory,
            loop=asyncio.get_running_loop(),
            **server._kwargs,
        )

    async def listen(self, host: str, port: int) -> None:
        """Listen on host:port as asyncio's create_server would (every address the name
        has), with sockets kept here so their queues can be emptied at the end."""
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            self.listeners.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(128)
            sock.setblocking(False)
            await web.SockSite(self, sock).start()

    async def shutdown(self) -> None:
        """on_shutdown, once (drain runs it first; cleanup would again)."""
        if not self._shut:
            self._shut = True
            await super().shutdown()

    async def drain(self, seconds: float, hurry: asyncio.Event) -> None:
        """Stop listening, answer what was accepted, let work in flight end (see the module)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + seconds
        self.app[STATE]["draining"] = True
        await self._stop_listening()
        log.info("draining: stopped listening; finishing what is in flight (%s s at most)", seconds)
        await self.shutdown()
        drainers = [loop.create_task(drain(deadline)) for drain in self.app.get(DRAINERS, [])]
        server = self.server
        while loop.time() < deadline and not hurry.is_set():
            now = loop.time()
            live = server.connections if server is not None else []
            for conn in live:
                if (
                    isinstance(conn, _Handler)
                    and now - max(conn.quiet_since, started) >= IDLE_GRACE
                    and conn.idle()
                ):
                    conn.force_close()
            if not live and all(task.done() for task in drainers):
                break
            await asyncio.sleep(TICK)
        left = len(server.connections) if server is not None else 0
        for task in drainers:
            task.cancel()
        await asyncio.gather(*drainers, return_exceptions=True)
        if left:
            log.warning("drain ended with %d connections still open: they are closed", left)
        log.info("drained in %.1f s", loop.time() - started)

    async def _stop_listening(self) -> None:
        """Close the listeners, first accepting what the kernel queued (else it resets them)."""
        loop = asyncio.get_running_loop()
        held = [sock.dup() for sock in self.listeners]
        for site in list(self.sites):
            await site.stop()
        opening = []
        factory = self.server
        for sock in held:
            # The loop no longer accepts; this copy keeps the socket listening until its
            # queue is empty, then closes it in the same step (nothing in between).
            sock.setblocking(False)
            while True:
                try:
                    conn, _ = sock.accept()
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    break
                conn.setblocking(False)
                if factory is not None:
                    opening.append(loop.connect_accepted_socket(factory, conn))
                else:
                    conn.close()
            sock.close()
        for sock in self.listeners:
            sock.close()
        self.listeners.clear()
        await asyncio.gather(*opening, return_exceptions=True)


async def serve(
    app: web.Application,
    host: str,
    port: int,
    drain_seconds: float,
    listening: Callable[[], None] | None = None,
    **runner_args: Any,
) -> None:
    """Serve app on host:port until SIGTERM or SIGINT, then drain and clean up.

    A second signal cuts the drain short.
    """
    loop = asyncio.get_running_loop()
    stop, hurry = asyncio.Event(), asyncio.Event()

    def signalled() -> None:
        (hurry if stop.is_set() else stop).set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, signalled)
    # What is left after the drain is cut off within a second.
    runner = DrainingRunner(app, shutdown_timeout=1.0, **runner_args)
    try:
        await runner.setup()
        await runner.listen(host, port)
        if listening is not None:
            listening()
        await stop.wait()
        await runner.drain(drain_seconds, hurry)
    finally:
        await runner.cleanup()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
