"""Ending credentials at once: the token cache forgets them and their sockets close."""

from __future__ import annotations

from aiohttp import web

from ..notify.hub import HUB
from ..web.auth import TOKEN_CACHE


def credentials_ended(
    app: web.Application, user_id: int, digests: set[bytes] | None = None, keep: bytes | None = None
) -> None:
    """After the store revoked tokens (digests; every one but keep when None): act on it now."""
    # The cache would honour a revoked token for up to its life, and an open WebSocket
    # never asks again: both are told here rather than left to expire.
    cache = app[TOKEN_CACHE]
    if digests is None:
        cache.forget_user(user_id)
    else:
        for digest in digests:
            cache.forget(digest)
    app[HUB].revoke(user_id, digests, keep)
