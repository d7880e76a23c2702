"""The token cache: live tokens by digest, and what was worked out from each while it lives."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from ..identity import Grant, Identity


class Kept:
    """A live token as the cache keeps it, and what was worked out from it while it lives.

    identities: the Identity of each way it came (bearer, cookie), built once; allowed:
    by the same way, the route actions the policy let it take (policy.decide_action
    reads only the credential and its user, both fixed for the entry's life). Both go
    with the entry: a revocation, an account change or the ttl drops them with it.
    """

    __slots__ = ("allowed", "at", "expires", "grant", "identities", "user")

    def __init__(self, user: dict[str, Any], expires: int, grant: Grant | None, at: float) -> None:
        self.user, self.expires, self.grant, self.at = user, expires, grant, at
        self.identities: dict[str, Identity] = {}
        self.allowed: dict[str, set[str]] = {}


class TokenCache:
    """Recently seen token digests -> (user id, expiry), so most requests skip the database."""

    # A short life: changes made outside this process (the admin CLI) show within seconds.
    def __init__(self, ttl: float = 5.0, size: int = 10000) -> None:
        self.ttl = ttl
        self.size = size
        self._tokens: OrderedDict[bytes, Kept] = OrderedDict()
        # Lookups under way: the requests that find a token expired at once (every ttl,
        # under load all of a client's connections) share one read of the database.
        self._pending: dict[bytes, asyncio.Future[Any]] = {}

    def kept(self, digest: bytes) -> Kept | None:
        """The live entry of a token digest, or None (unknown, expired or past the ttl)."""
        hit = self._tokens.get(digest)
        if hit is None:
            return None
        now = time.time()
        if now - hit.at > self.ttl or hit.expires <= now:
            del self._tokens[digest]
            return None
        return hit

    def get(self, digest: bytes) -> tuple[dict[str, Any], int, Grant | None] | None:
        hit = self.kept(digest)
        return None if hit is None else (hit.user, hit.expires, hit.grant)

    def put(
        self, digest: bytes, user: dict[str, Any], expires: int, grant: Grant | None = None
    ) -> None:
        self._tokens[digest] = Kept(user, expires, grant, time.time())
        self._tokens.move_to_end(digest)
        while len(self._tokens) > self.size:
            self._tokens.popitem(last=False)

    async def load(self, digest: bytes, fetch: Callable[[], Awaitable[Any]]) -> Any:
        """fetch()'s answer (user, expiry, grant) for a token not in the cache, kept in it;
        one fetch for concurrent callers.

        A forget, forget_user or clear drops the lookup under way too, so a caller that
        comes after a revocation never takes an answer read before it, nor is it cached.
        """
        shared = self._pending.get(digest)
        if shared is not None:
            try:
                return await asyncio.shield(shared)
            except asyncio.CancelledError:
                if not shared.cancelled():
                    raise
                return await self.load(digest, fetch)
        future = asyncio.get_running_loop().create_future()
        self._pending[digest] = future
        try:
            found = await fetch()
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(exc)
                future.exception()  # retrieved: nobody may be waiting
            raise
        finally:
            current = self._pending.get(digest) is future
            if current:
                del self._pending[digest]
        if found is not None and current:
            self.put(digest, *found)
        future.set_result(found)
        return found

    def forget(self, digest: bytes) -> None:
        self._tokens.pop(digest, None)
        self._pending.pop(digest, None)

    def clear(self) -> None:
        """Forget every token (after missing what other processes said)."""
        self._tokens.clear()
        self._pending.clear()

    def forget_user(self, user_id: int) -> None:
        """Drop every cached token of a user, after their account changed."""
        for digest in [d for d, kept in self._tokens.items() if kept.user["id"] == user_id]:
            del self._tokens[digest]
        # Lookups under way do not say whose token they are: start them all again.
        self._pending.clear()
