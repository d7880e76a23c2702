"""Deadlines on slow clients: a request body that stalls is ended with 408."""

from __future__ import annotations

import asyncio
import time

from aiohttp import StreamReader, web
from aiohttp.typedefs import Handler

from ..errors import BodyTimeout
from ..keys import CONFIG


class BodyWatch:
    """Fails a body stream whose client has sent nothing for `timeout` seconds."""

    def __init__(self, content: StreamReader, timeout: float) -> None:
        self.content = content
        self.timeout = timeout
        self.step = max(timeout / 4, 0.05)
        self._seen = content.total_bytes
        self._since = time.monotonic()
        self._handle = asyncio.get_running_loop().call_later(self.step, self._check)

    def _check(self) -> None:
        content = self.content
        if content.is_eof() or content.exception() is not None:
            return
        now = time.monotonic()
        # Unread bytes in the buffer mean the server is the slow reader, not the client.
        if content.total_bytes != self._seen or getattr(content, "_size", 0) > 0:
            self._seen, self._since = content.total_bytes, now
        elif now - self._since >= self.timeout:
            # Whoever reads the body (a handler, or the git feeder) gets the exception,
            # now if it is waiting, else on its next read.
            content.set_exception(BodyTimeout(f"no body bytes for {self.timeout:g} s"))
            return
        self._handle = asyncio.get_running_loop().call_later(self.step, self._check)

    def cancel(self) -> None:
        """Stop watching (the request is answered)."""
        self._handle.cancel()


@web.middleware
async def body_deadline(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Watch the body of every request that has one for idle gaps (server.body_timeout_seconds)."""
    if not request.body_exists or request.content.is_eof():
        return await handler(request)
    watch = BodyWatch(request.content, request.app[CONFIG]["server"]["body_timeout_seconds"])
    try:
        return await handler(request)
    finally:
        watch.cancel()


def body_timeout(app: web.Application) -> float:
    """The idle limit between body chunks, for code that reads a body its own way."""
    return app[CONFIG]["server"]["body_timeout_seconds"]
