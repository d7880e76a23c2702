"""Conditional reads: an ETag on an answer, and 304 to an If-None-Match that names it.

The tag is a digest of everything the answer is made of (the rows as read, the viewer,
the base URL), so it changes whenever any of it does, in whichever process the change
was made, and the same content gives the same tag in every process. The caller decides
who may read before asking: a 404 stays a 404 whatever If-None-Match says.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
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


def _headers(tag: str) -> dict[str, str]:
    return {
        "ETag": tag,
        # Each viewer's answer differs: kept by the client only, and asked for again.
        "Cache-Control": "private, no-cache",
        "Vary": "Authorization, Cookie",
    }


def kept_answer(request: web.Request, tag: str) -> web.Response | None:
    """304 when the client holds tag, else the body kept for tag; None when none is kept."""
    if fresh(request, tag):
        return web.Response(status=304, headers=_headers(tag))
    body = BODIES.get(tag)
    if body is None:
        return None
    return web.Response(body=body, content_type="application/json", headers=_headers(tag))


def conditional_json(request: web.Request, tag: str, build: Callable[[], Any]) -> web.Response:
    """304 when the client holds tag, else the JSON build() makes (kept by tag); both carry it."""
    answer = kept_answer(request, tag)
    if answer is not None:
        return answer
    body = orjson.dumps(build())
    BODIES.put(tag, body)
    return web.Response(body=body, content_type="application/json", headers=_headers(tag))


class KeptTags:
    """A read route's ETag by what its answer is made of (path, viewer, credential), until
    the next write and at most until the instant given with it.

    The tag names the body (BODIES), so a request that finds its tag skips the reads,
    checks and digest that made it. Only answers that were given are kept: a 404, 403 or
    redirect is worked out again each time. Any write in this process, or told by
    another (the Redis pulse), bumps the database generation, which empties this; what
    changes outside any process (the admin commands) shows by the instant given, the
    life of the cached row the answer was made of.
    """

    def __init__(self, most: int = 4096) -> None:
        self.most = most
        # Whose: a process serves one application, but tests make many, each with a
        # database of its own whose generations count alike.
        self.db: Any = None
        self.generation = -1
        self.tags: dict[Hashable, tuple[str, float]] = {}

    def get(self, db: Any, generation: int, key: Hashable) -> str | None:
        """The tag kept for key while db is at generation, or None."""
        if generation != self.generation or db is not self.db:
            return None
        hit = self.tags.get(key)
        if hit is None or time.monotonic() >= hit[1]:
            return None
        return hit[0]

    def put(self, db: Any, generation: int, key: Hashable, tag: str, until: float) -> None:
        """Keep tag for key, made from what was read at generation (unless db wrote since)."""
        if db.generation != generation:
            return  # written meanwhile: what was read may be gone already
        if generation != self.generation or db is not self.db:
            self.tags.clear()
            self.db, self.generation = db, generation
        elif len(self.tags) >= self.most:
            del self.tags[next(iter(self.tags))]  # the oldest: insertion order
        self.tags[key] = (tag, until)
