"""Token-bucket rate limits per client, and the client address behind trusted proxies."""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

from aiohttp import web
from aiohttp.typedefs import Handler

from ..clients import client_group
from .auth import BASIC_CACHE, CHAT_LINK_PATHS, bot_key_ok, user_for_token
from .errors import error_answer

RATE_HEADERS = web.RequestKey("rate_headers", dict)


class TokenBucket:
    """Buckets of `capacity` tokens refilled at `rate` per second, one per key."""

    def __init__(
        self,
        capacity: float,
        rate: float,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 100_000,
    ) -> None:
        self.capacity = capacity
        self.rate = rate
        self.clock = clock
        self.max_keys = max_keys
        # Least recently used first, so pruning drops the buckets idle the longest.
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def _level(self, key: str, now: float) -> float:
        tokens, stamp = self._buckets.get(key, (self.capacity, now))
        return min(self.capacity, tokens + (now - stamp) * self.rate)

    def take(self, key: str) -> tuple[bool, float, float]:
        """Spend a token: (allowed, tokens left, seconds until one is available)."""
        now = self.clock()
        tokens = self._level(key, now)
        allowed = tokens >= 1
        if allowed:
            tokens -= 1
        self._buckets[key] = (tokens, now)
        self._buckets.move_to_end(key)
        while len(self._buckets) > self.max_keys:
            # Dropping only the idlest keeps every active attacker's spent budget;
            # clearing them all (as before) handed everyone a full one again.
            self._buckets.popitem(last=False)
        wait = 0.0 if tokens >= 1 else (1 - tokens) / self.rate
        return allowed, tokens, wait

    async def spend(self, key: str) -> tuple[bool, float, float]:
        """take(), as the limiters shared between processes answer (cluster.buckets)."""
        return self.take(key)

    def full_in(self, tokens: float) -> float:
        """Seconds until a bucket holding `tokens` is full again."""
        return (self.capacity - tokens) / self.rate

    def __len__(self) -> int:
        return len(self._buckets)

    def __contains__(self, key: str) -> bool:
        return key in self._buckets


class Limiter(Protocol):
    """A TokenBucket here, or one whose buckets every process shares (cluster.buckets)."""

    capacity: float

    async def spend(self, key: str) -> tuple[bool, float, float]: ...

    def full_in(self, tokens: float) -> float: ...


LIMITER: web.AppKey[Limiter] = web.AppKey("rate_limiter")
SIGN_IN_LIMITER: web.AppKey[Limiter] = web.AppKey("sign_in_limiter")
GIT_LIMITER: web.AppKey[Limiter] = web.AppKey("git_limiter")
# Smart-HTTP routes (hubsvc/api/smart_http.py), by the pattern they were registered with.
GIT_ROUTES = frozenset(
    f"/{{owner}}/{{name}}/{tail}" for tail in ("info/refs", "git-upload-pack", "git-receive-pack")
)


def sign_in_key(request: web.Request, login: str, user: dict[str, Any] | None) -> str:
    """One sign-in budget per client and account, whether named by username or e-mail."""
    who = f"user:{user['id']}" if user is not None else "login:" + login.casefold()[:300]
    return f"{client_group(request)}|{who}"


def limit_key(request: web.Request) -> str:
    """Bot-key requests count per chat user (link endpoints per bot key); others per address."""
    chat_user = request.headers.get("X-Chat-User-Id")
    # Only a valid bot key earns a per-chat-user bucket; otherwise rotating the header
    # would dodge the per-address limit.
    if bot_key_ok(request):
        # The link endpoints need no linked chat id, so a made-up one per request would
        # be a fresh bucket each time: they share the bot key's one budget.
        if request.path.startswith(CHAT_LINK_PATHS) or not chat_user:
            return "bot"
        return "chat:" + chat_user[:200]
    return "ip:" + client_group(request)


async def git_user_id(request: web.Request) -> int | None:
    """The account of a git request whose credentials are already known good, else None."""
    # A token (as Bearer, or as the Basic password) is looked up as the auth middleware
    # would; a Basic password counts only once bcrypt has accepted it (smart_http's cache),
    # so made-up usernames never earn a bucket of their own.
    header = request.headers.get("Authorization", "")
    scheme = header[:7].lower()
    if scheme == "bearer ":
        found = await user_for_token(request.app, header[7:].strip())
        return found[0]["id"] if found else None
    if scheme[:6] != "basic ":
        return None
    try:
        username, _, secret = base64.b64decode(header[6:].strip()).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    if not username or not secret:
        return None
    found = await user_for_token(request.app, secret)
    if found is not None:
        return found[0]["id"] if found[0]["username"].lower() == username.lower() else None
    hit = request.app[BASIC_CACHE].get(
        hashlib.sha256(f"{username.lower()}\0{secret}".encode()).digest()
    )
    return hit[0]["id"] if hit else None


async def _bucket(request: web.Request, limiter: Limiter) -> tuple[Limiter, str]:
    """Git traffic of a signed-in user spends that user's git budget; the rest limit_key's."""
    git = request.app.get(GIT_LIMITER)
    if (
        git is not None
        and request.match_info.route.resource is not None
        and request.match_info.route.resource.canonical in GIT_ROUTES
    ):
        user_id = await git_user_id(request)
        if user_id is not None:
            return git, f"user:{user_id}"
    return limiter, limit_key(request)


def _headers(limiter: Limiter, tokens: float) -> dict[str, str]:
    return {
        "RateLimit-Limit": str(int(limiter.capacity)),
        "RateLimit-Remaining": str(max(0, math.floor(tokens))),
        "RateLimit-Reset": str(math.ceil(limiter.full_in(tokens))),
    }


def too_many(
    request: web.Request, retry_after: float, headers: dict[str, str] | None = None
) -> web.Response:
    """The 429 answer with Retry-After and retryAfter."""
    wait = max(1, math.ceil(retry_after))
    return error_answer(
        request,
        429,
        "too many requests",
        {**(headers or {}), "Retry-After": str(wait)},
        retryAfter=wait,
    )


@web.middleware
async def rate_limit_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Spend a token per request; the headers go on every answer, streamed ones included."""
    limiter = request.app.get(LIMITER)
    if (
        limiter is None
        or request.method == "OPTIONS"
        or (request.path == "/health" and request.method in ("GET", "HEAD"))
    ):
        # /health is for load balancers and monitors, which poll it from one address.
        return await handler(request)
    limiter, key = await _bucket(request, limiter)
    allowed, tokens, wait = await limiter.spend(key)
    headers = _headers(limiter, tokens)
    if not allowed:
        return too_many(request, wait, headers)
    request[RATE_HEADERS] = headers
    if not key.startswith("chat:"):
        return await handler(request)
    response = await handler(request)
    if response.status == 401:
        # A chat id that turned out not to be linked got a bucket of its own above; made-
        # up ids would each get a fresh one, so they also spend the bot key's shared one.
        allowed, tokens, wait = await limiter.spend("bot")
        if not allowed:
            return too_many(request, wait, _headers(limiter, tokens))
    return response


def add_rate_headers(request: web.Request, response: web.StreamResponse) -> None:
    """Copy the rate-limit headers onto the answer (front.answer_headers calls it)."""
    headers = request.get(RATE_HEADERS)
    if headers:
        response.headers.update(headers)
