"""Names people type in paths: `me` for the caller."""

from __future__ import annotations

from aiohttp import web

from .auth import require_user


def path_username(request: web.Request, value: str | None = None) -> str:
    """The username a path names; `me` is the caller (401 when anonymous).

    `me` is a reserved username, so it never shadows an account.
    """
    name = request.match_info["username"] if value is None else value
    return require_user(request)["username"] if name.lower() == "me" else name
