"""Chat notices for the bot to send as direct messages: read them (a long poll), acknowledge."""

from __future__ import annotations

from aiohttp import web

from schemas.chat import AckResultSchema, AckSchema, NoticeListSchema, NoticeQuerySchema

from ..keys import STORE
from ..notify.chat_dm import poll
from ..policy import requires
from ..web.auth import require_bot
from ..web.openapi import doc
from ..web.rest import json_response, read_json, read_query, shared
from .chat import BOT_ONLY

routes = web.RouteTableDef()


@routes.get("/api/chat/notifications")
@doc(
    "Direct messages to send to linked chat users (chat bot only)",
    query=NoticeQuerySchema,
    responses={200: NoticeListSchema},
    tag="chat",
    description=BOT_ONLY + " Oldest first, the notices not yet acknowledged: an issue or pull "
    "request assigned to the user, or an @mention of them, for users whose "
    "notifications.chat preference is on. Each is checked again as it is read: a user who "
    "has since unlinked, switched notifications.chat off, been disabled or lost read "
    "access to the repository gets nothing, and that notice is gone for good. With wait, "
    "an empty queue holds the answer until a notice arrives or wait seconds pass.",
)
@requires("bot.key")
async def notifications(request: web.Request) -> web.Response:
    require_bot(request)
    query = read_query(request, shared(NoticeQuerySchema))
    notices, more = await poll(request.app, query["limit"], query["wait"])
    return json_response({"notifications": notices, "hasMore": more})


@routes.post("/api/chat/notifications/ack")
@doc(
    "Acknowledge the notices sent, through an id (chat bot only)",
    body=AckSchema,
    responses={200: AckResultSchema},
    tag="chat",
    description=BOT_ONLY + " Deletes the notice `through` and every older one. An id not "
    "handed out yet is 400, so a wrong number cannot drop notices nobody has seen.",
)
@requires("bot.key")
async def acknowledge(request: web.Request) -> web.Response:
    require_bot(request)
    data = await read_json(request, AckSchema())
    gone = await request.app[STORE].chat_notices.acknowledge(data["through"])
    return json_response({"acknowledged": gone})
