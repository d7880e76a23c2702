"""A real HTTP receiver for webhook tests that answers as told: 2xx, 5xx, 429, or hangs;
or, as Discord does, 400 to a body outside Discord's limits."""

from __future__ import annotations

import asyncio
import json
import time

from aiohttp import web


def _units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2  # the stricter count: UTF-16 code units


def discord_problems(body: dict) -> list[str]:
    """What Discord refuses with 400 in a webhook body (its documented limits)."""
    problems = []
    if _units(body.get("username", "")) > 80:
        problems.append("username longer than 80")
    if _units(body.get("content", "")) > 2000:
        problems.append("content longer than 2000")
    embeds = body.get("embeds", [])
    if len(embeds) > 10:
        problems.append("more than 10 embeds")
    total = 0
    for embed in embeds:
        texts = {
            "title": (embed.get("title", ""), 256),
            "description": (embed.get("description", ""), 4096),
            "footer.text": (embed.get("footer", {}).get("text", ""), 2048),
            "author.name": (embed.get("author", {}).get("name", ""), 256),
        }
        fields = embed.get("fields", [])
        if len(fields) > 25:
            problems.append("more than 25 fields")
        for n, item in enumerate(fields):
            if not item.get("name") or not item.get("value"):
                problems.append(f"fields.{n}: empty name or value")
            texts[f"fields.{n}.name"] = (item.get("name", ""), 256)
            texts[f"fields.{n}.value"] = (item.get("value", ""), 1024)
        for where, (text, limit) in texts.items():
            if not isinstance(text, str):
                problems.append(f"{where}: not a string")
                continue
            if _units(text) > limit:
                problems.append(f"{where}: longer than {limit}")
            total += _units(text)
        for where in ("url", "author.url", "author.icon_url"):
            holder, _, key = where.rpartition(".")
            value = (embed.get(holder, {}) if holder else embed).get(key)
            if value is not None and not str(value).startswith(("http://", "https://")):
                problems.append(f"{where}: not a well formed URL")
    if total > 6000:
        problems.append(f"embeds: {total} characters, more than 6000 in all")
    return problems


class Receiver:
    """Records every request; `plan` holds the answers to give, then 200 forever.

    With discord=True, a body outside Discord's limits gets Discord's answer: 400.
    """

    def __init__(self, discord: bool = False) -> None:
        self.requests: list[dict] = []
        self.plan: list = []
        self.discord = discord
        self.app = web.Application()
        self.app.router.add_post("/hook", self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        record = {
            "headers": dict(request.headers),
            "body": body,
            "json": json.loads(body),
            "at": time.monotonic(),
            "status": 200,
        }
        self.requests.append(record)
        if self.discord and (problems := discord_problems(record["json"])):
            record["status"] = 400
            return web.json_response(
                {"message": "Invalid Form Body", "errors": problems}, status=400
            )
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
