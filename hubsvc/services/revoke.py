"""Ending credentials at once: the token cache forgets them and their sockets close."""

from __future__ import annotations

from aiohttp import web

from ..keys import CLUSTER
from ..notify.hub import HUB
from ..web.auth import TOKEN_CACHE


def credentials_ended(
    app: web.Application,
    user_id: int,
    digests: set[bytes] | None = None,
    keep: bytes | None = None,
    tell: bool = True,
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
    cluster = app.get(CLUSTER)
    if cluster is not None and tell:  # every other process does the same
        cluster.tell(
            "credentials",
            user=user_id,
            digests=None if digests is None else [d.hex() for d in digests],
            keep=None if keep is None else keep.hex(),
        )


def user_changed(app: web.Application, user_id: int, tell: bool = True) -> None:
    """An account changed (its flags, its settings): cached copies of it go, everywhere."""
    # Cached tokens carry a copy of the user; drop them so the change shows at once.
    app[TOKEN_CACHE].forget_user(user_id)
    cluster = app.get(CLUSTER)
    if cluster is not None and tell:
        cluster.tell("user", user=user_id)
