"""The WebSocket endpoint: real-time notifications for the repositories a user may read."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import WSCloseCode, WSMsgType, web

from schemas.events import WsQuerySchema

from ..clients import client_ip
from ..errors import ApiError, BadRequest, Forbidden
from ..keys import CONFIG, STORE
from ..notify.hub import HUB, Hub
from ..notify.sockets import Client, Socket, slim
from ..policy import Caps, decide, requires
from ..web.auth import allowed_origin, caps_of, require_identity
from ..web.openapi import doc
from ..web.permissions import role_of, two_factor_rule
from ..web.rest import json_depth, parse_json

routes = web.RouteTableDef()
MAX_MESSAGE = 64 * 1024


def _ws_user(request: web.Request) -> tuple[dict[str, Any], bytes | None, Caps | None]:
    """The credential the middleware resolved (?token=, the cookie or a bearer); else 401."""
    identity = require_identity(request)
    if identity.via == "cookie" and not allowed_origin(request):
        raise Forbidden("cross-origin WebSocket refused")
    return identity.user, identity.token_digest, caps_of(identity)


@routes.get("/ws")
@doc(
    "WebSocket upgrade for notifications (token in ?token= or the session cookie)",
    responses={101: "switching protocols"},
    errors=(400, 403, 503),
    tag="websocket",
    query=WsQuerySchema,
    description="Server messages: connected {userId, username, lastEventId}, ping, pong, "
    "notification {notification: event} (event as in GET /api/events, its id the "
    "log id), subscribed {repository} or {all: true}, unsubscribed {repository, "
    "reason?} or {all: true}, inbox {thread, unreadCount} (one of the user's own "
    "notification threads changed, as GET /api/notifications/threads/:id shows it, or null "
    "after mark-all; only to the user's own sockets), "
    "resumed {lastEventId} (a replay ended; live events follow), resync "
    "{lastEventId, reason} (the cursor is older than events.retention_days: read "
    "the state again, then go on from lastEventId), error {error}. Client "
    "messages: ping, pong, subscribe {repository: {owner, name}}, unsubscribe "
    "{repository}, subscribe {all: true} and unsubscribe {all: true}, resume {after: "
    '"<event id>"}. subscribe {all: true} (or ?subscribe=all on the upgrade, which '
    "also widens its ?after= replay) follows every repository the user may read, "
    "including ones created later: the events GET /api/events shows, live. "
    "Resume (or ?after=<id> on the upgrade) first sends, in order, the "
    "notifications the socket would have got since that id (events of "
    "repositories the user owns, collaborates on, starred or subscribed to, or "
    "every one with subscribe all, and may read now), then live ones, with no gap "
    "and no repeat at the seam. A resume message replays from its id even what the "
    "socket got live since it connected; ?after= on the upgrade has no such window. "
    "A malformed message, or one nested deeper than limits.json_depth, gets "
    "error {error} and the socket stays open; over 64 KiB closes it (1009). "
    "Over websocket.max_per_ip open sockets from one address → 429. When the "
    "token the socket was opened with stops working (sign-out, token deletion, "
    "password change, account disabled or deleted) the socket closes with code "
    '4001, reason "token revoked"; a subscriber who loses read access gets '
    'unsubscribed {repository, reason: "access revoked"}.',
)
@requires("events.stream")
async def websocket(request: web.Request) -> web.StreamResponse:
    user, digest, caps = _ws_user(request)
    after = _cursor(request.query.get("after"))
    everything = request.query.get("subscribe")
    if everything not in (None, "all"):
        raise BadRequest("subscribe: must be all")
    hub = request.app[HUB]
    config = request.app[CONFIG]["websocket"]
    ip = client_ip(request)
    if hub.closing:
        raise ApiError("shutting down", 503)
    ticket = await hub.admit(ip, config["max_per_ip"])
    if ticket is False:
        raise ApiError("too many WebSocket connections from this address", 429)
    # No permessage-deflate: its per-socket zlib state costs about 100 KiB a client, and
    # notifications of under a kilobyte gain little from it.
    ws = Socket(autoping=False, max_msg_size=MAX_MESSAGE, compress=False)
    try:
        await ws.prepare(request)
    except BaseException:
        hub.release(ip, ticket)
        raise
    if hub.closing:
        # The server began to stop while this socket was admitted (past the check above):
        # it goes the way the others went, so its client resumes on another process.
        hub.release(ip, ticket)
        await ws.close(code=WSCloseCode.GOING_AWAY, message=b"server shutdown")
        return ws
    slim(ws, request.protocol)
    client = Client(ws, user, ip, request.transport, digest, caps)
    client.ticket = ticket
    ws.watch(client)
    hub.add(client)
    hub.send(
        client,
        {
            "type": "connected",
            "userId": str(user["id"]),
            "username": user["username"],
            "lastEventId": str(hub.cursor),
        },
    )
    if everything:
        # Before the replay starts, so the replay holds every readable repository's events.
        hub.subscribe_all(client)
        hub.send(client, {"type": "subscribed", "all": True})
    if after is not None:
        hub.resume(client, after)
    try:
        async for msg in ws:
            client.last_seen = asyncio.get_running_loop().time()
            if msg.type == WSMsgType.TEXT:
                await _handle(request, hub, client, msg.data)
            elif msg.type == WSMsgType.PING:
                await ws.pong(msg.data)
            elif msg.type == WSMsgType.BINARY:
                hub.send(client, {"type": "error", "error": "messages must be JSON text"})
    finally:
        hub.remove(client)
    return ws


def _cursor(value: object) -> int | None:
    """An event id given as a resume cursor (a string of digits, or an integer)."""
    if value is None:
        return None
    text = str(value)
    if not text.isdigit() or len(text) > 18:
        raise BadRequest("after: must be an event id")
    return int(text)


async def _handle(request: web.Request, hub: Hub, client: Client, text: str) -> None:
    try:
        # Depth-limited like request bodies: a deeply nested message gets an error
        # message and the socket stays open, as for any malformed one.
        message = parse_json(text, json_depth(request))
    except ApiError as exc:
        hub.send(client, {"type": "error", "error": exc.message})
        return
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        hub.send(client, {"type": "error", "error": "messages are JSON objects with a type"})
        return
    kind = message["type"]
    if kind == "ping":
        hub.send(client, {"type": "pong"})
    elif kind == "pong":
        pass
    elif kind == "resume":
        error: str | None
        try:
            after = _cursor(message.get("after"))
        except ApiError as exc:
            after, error = None, exc.message
        else:
            error = "after: must be an event id" if after is None else None
        if error or after is None:
            hub.send(client, {"type": "error", "error": error})
            return
        hub.resume(client, after)
    elif kind in ("subscribe", "unsubscribe") and message.get("all") is True:
        hub.subscribe_all(client, kind == "subscribe")
        hub.send(client, {"type": f"{kind}d", "all": True})
    elif kind in ("subscribe", "unsubscribe"):
        ref = message.get("repository")
        if not (
            isinstance(ref, dict)
            and isinstance(ref.get("owner"), str)
            and isinstance(ref.get("name"), str)
            and len(ref["owner"]) <= 100
            and len(ref["name"]) <= 100
        ):
            hub.send(client, {"type": "error", "error": "repository: {owner, name} is required"})
            return
        user = await request.app[STORE].users.by_id(client.user_id)
        repo = await request.app[STORE].repos.by_name(ref["owner"], ref["name"], client.user_id)
        if repo is not None and repo["two_factor_held"] and role_of(repo, user) is None:
            hub.send(client, {"type": "error", "error": two_factor_rule(repo["owner_username"])})
            return
        if (
            repo is None
            or user is None
            or role_of(repo, user) is None
            or not decide(client.caps, "repo.read", repo["id"], "").ok
        ):
            hub.send(client, {"type": "error", "error": "repository not found"})
            return
        named = {"owner": repo["owner_username"], "name": repo["name"]}
        if kind == "subscribe":
            hub.subscribe(client, repo["id"])
            hub.send(client, {"type": "subscribed", "repository": named})
        else:
            hub.unsubscribe(client, repo["id"])
            hub.send(client, {"type": "unsubscribed", "repository": named})
    else:
        hub.send(client, {"type": "error", "error": f"unknown message type: {kind[:50]}"})
