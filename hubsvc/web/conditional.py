"""Conditional reads: an ETag on an answer, and 304 to an If-None-Match that names it.

The tag is a digest of everything the answer is made of (the rows as read, the viewer,
the base URL), so it changes whenever any of it does, in whichever process the change
was made, and the same content gives the same tag in every process. The caller decides
who may read before asking: a 404 stays a 404 whatever If-None-Match says.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

# What the OpenAPI document says of a conditional read.
NOT_MODIFIED = "not modified: the If-None-Match sent names the current ETag (no body)"
CONDITIONAL = (
    "The answer carries an ETag; a request whose If-None-Match names it is answered 304 "
    "without a body, as GitHub's conditional requests. Who may read is decided first: "
    "an unreadable repository is 404 whatever If-None-Match says."
)
# Answers by tag: a tag names one body, so a hit is the body the builder would make.
_BODY_BYTES = 16 * 1024 * 1024
_BODY_MAX = 256 * 1024


class _Bodies:
    """The most recent answers by tag, up to a total size."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.bodies: OrderedDict[str, bytes] = OrderedDict()

    def get(self, tag: str) -> bytes | None:
        body = self.bodies.get(tag)
        if body is not None:
            self.bodies.move_to_end(tag)
        return body

    def put(self, tag: str, body: bytes) -> None:
        if len(body) > _BODY_MAX or tag in self.bodies:
            return
        self.bodies[tag] = body
        self.size += len(body)
        while self.size > self.limit:
            _, dropped = self.bodies.popitem(last=False)
            self.size -= len(dropped)


BODIES = _Bodies(_BODY_BYTES)


def entity_tag(*parts: Any) -> str:
    """A strong ETag of the parts an answer is made of (their repr: plain data only)."""
    return '"' + hashlib.blake2b(repr(parts).encode(), digest_size=16).hexdigest() + '"'


def digest(data: Any) -> str:
    """A digest of plain data (rows as read), to stand for it in an entity_tag."""
    return hashlib.blake2b(repr(data).encode(), digest_size=16).hexdigest()


def fresh(request: web.Request, tag: str) -> bool:
    """Whether If-None-Match names tag (weak comparison, as RFC 9110 has it for GET)."""
    header = request.headers.get("If-None-Match")
    if not header:
        return False
    for candidate in header.split(","):
        candidate = candidate.strip()
        if candidate == "*" or candidate.removeprefix("W/") == tag:
            return True
    return False


def conditional_json(request: web.Request, tag: str, build: Callable[[], Any]) -> web.Response:
    """304 when the client holds tag, else the JSON build() makes (kept by tag); both carry it."""
    headers = {
        "ETag": tag,
        # Each viewer's answer differs: kept by the client only, and asked for again.
        "Cache-Control": "private, no-cache",
        "Vary": "Authorization, Cookie",
    }
    if fresh(request, tag):
        return web.Response(status=304, headers=headers)
    body = BODIES.get(tag)
    if body is None:
        body = orjson.dumps(build())
        BODIES.put(tag, body)
    return web.Response(body=body, content_type="application/json", headers=headers)
