"""A real HTTP receiver for webhook tests that answers as told: 2xx, 5xx, 429, or hangs."""

from __future__ import annotations

import asyncio
import json
import time

from aiohttp import web


class Receiver:
    """Records every request; `plan` holds the answers to give, then 200 forever."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.plan: list = []
        self.app = web.Application()
        self.app.router.add_post("/hook", self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.requests.append({"headers": dict(request.headers), "body": body,
                              "json": json.loads(body), "at": time.monotonic()})
        step = self.plan.pop(0) if self.plan else 200
        if step == "hang":
            await asyncio.sleep(30)
            return web.Response(status=200)
        if isinstance(step, tuple):  # (status, headers)
            return web.Response(status=step[0], headers=step[1])
        return web.Response(status=step)

    async def wait_for(self, count: int, timeout: float = 10.0) -> list[dict]:
        """Wait until count requests arrived."""
        deadline = time.monotonic() + timeout
        while len(self.requests) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"got {len(self.requests)} webhook requests, wanted {count}")
            await asyncio.sleep(0.02)
        return self.requests
