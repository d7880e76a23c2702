"""The signed-in user's sessions: where they are signed in, and ending them."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from schemas.audit import SessionListSchema

from ..errors import NotFound
from ..keys import STORE
from ..policy import requires
from ..services import audit
from ..services.revoke import credentials_ended
from ..web.auth import require_identity, require_user
from ..web.openapi import doc
from ..web.rest import json_response

routes = web.RouteTableDef()


def _session_json(row: dict[str, Any], current: bytes | None) -> dict[str, Any]:
    return {
        "id": str(row["id"]),
        "createdAt": row["created_at"],
        "lastSeenAt": row["last_seen_at"],
        "ip": row["ip"],
        "userAgent": row["user_agent"],
        "current": current is not None and row["hash"] == current,
    }


def _current(request: web.Request) -> bytes | None:
    """The sign-in token of this request (never a personal access token's digest)."""
    identity = require_identity(request)
    return None if identity.personal else identity.token_digest


@routes.get("/api/users/me/sessions")
@doc(
    "Where the signed-in user is signed in: each session (sign-in token), newest first",
    responses={200: SessionListSchema},
    tag="users",
    description="A session is what a sign-in (or sign-up) gives: the cookie and the token in "
    "its answer are the same session. `ip` and `userAgent` are the sign-in's; `lastSeenAt` "
    "is written at most once a minute. `current` marks the session of this request. "
    "Personal access tokens are listed at /api/users/me/tokens.",
)
@requires("user.settings")
async def list_sessions(request: web.Request) -> web.Response:
    user = require_user(request)
    rows = await request.app[STORE].users.sessions(user["id"])
    current = _current(request)
    return json_response({"sessions": [_session_json(row, current) for row in rows]})


@routes.delete("/api/users/me/sessions/{id}")
@doc(
    "End one of the signed-in user's sessions at once",
    responses={204: "ended"},
    errors=(404,),
    tag="users",
    description="Its next request answers 401 on every process, and its WebSockets close "
    "with 4001. Another user's session id, or one already ended, answers 404. Ending the "
    "current session signs this client out.",
)
@requires("user.sessions")
async def end_session(request: web.Request) -> web.Response:
    user = require_user(request)
    raw = request.match_info["id"]
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise NotFound("session not found")
    entry = audit.entry(request, "session.ended", user=user, data={"session": str(int(raw))})
    digest = await request.app[STORE].users.end_session(
        user["id"], int(raw), audit=lambda ended: entry if ended is not None else None
    )
    if digest is None:
        raise NotFound("session not found")
    credentials_ended(request.app, user["id"], {digest})
    return web.Response(status=204)


@routes.delete("/api/users/me/sessions")
@doc(
    "End every session of the signed-in user but this request's",
    responses={204: "ended"},
    tag="users",
    description="As ending each one: their requests answer 401 and their sockets close, on "
    "every process. Personal access tokens stay (delete them at /api/users/me/tokens).",
)
@requires("user.sessions")
async def end_other_sessions(request: web.Request) -> web.Response:
    user = require_user(request)
    current = _current(request)

    def ended(digests: set[bytes]) -> Any:
        data = {"sessions": len(digests), "allButCurrent": True}
        return audit.entry(request, "session.ended", user=user, data=data) if digests else None

    digests = await request.app[STORE].users.end_other_sessions(user["id"], current, audit=ended)
    if digests:
        credentials_ended(request.app, user["id"], digests)
    return web.Response(status=204)
