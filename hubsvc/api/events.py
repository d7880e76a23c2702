"""The events feed: what happened in the repositories a caller may read, from a cursor."""

from __future__ import annotations

from aiohttp import web

from schemas.events import EventFeedSchema, FeedQuerySchema

from ..errors import ApiError
from ..keys import STORE
from ..policy import requires
from ..web.auth import current_user
from ..web.openapi import doc
from ..web.permissions import load_repo, readable_by
from ..web.rest import json_response, read_query, shared

routes = web.RouteTableDef()
FEED_DESCRIPTION = (
    "Oldest first after the cursor `after` (an event id; without it, from the oldest event "
    "kept). Each event as the WebSocket sends it, its id the log id. Only events of "
    "repositories the caller may read now. Events are kept for events.retention_days: a "
    "cursor older than that answers 410 (start again without after). Pass lastEventId as "
    "after= to go on. With `before` (an event id), the newest events before it, newest "
    "first: pass the oldest one's id as before= for the page before (hasMore: there are "
    "older ones); lastEventId is then the newest one returned, the cursor to go on from "
    "with after= (or the WebSocket's ?after=)."
)


async def _feed(request: web.Request, repo_id: int | None) -> web.Response:
    query = read_query(request, shared(FeedQuerySchema))
    store = request.app[STORE]
    after = int(query.get("after", 0))
    if "after" in query and after < await store.events.pruned_through():
        raise ApiError(
            "the events after this cursor were pruned (events.retention_days); "
            "start again without after",
            410,
        )
    viewer = user["id"] if (user := current_user(request)) else 0
    if "before" in query:
        before = int(query["before"])
        events, more = await store.events.visible_before(
            viewer, before, after, query["limit"], repo_id, readable_by(request)
        )
        if events:
            last = events[0].id
        else:  # nothing readable before it: go on from there, but never past the log's end
            last = str(max(min(before - 1, await store.events.last_id()), after))
    else:
        events, more = await store.events.visible_after(
            viewer, after, query["limit"], repo_id, readable_by(request)
        )
        last = events[-1].id if events else str(after)
    return json_response(
        {"events": [e.to_dict() for e in events], "hasMore": more, "lastEventId": last}
    )


@routes.get("/api/events")
@doc(
    "Events of every repository the caller may read",
    query=FeedQuerySchema,
    responses={200: EventFeedSchema},
    errors=(410,),
    public=True,
    tag="events",
    description=FEED_DESCRIPTION,
)
@requires("repo.read")
async def feed(request: web.Request) -> web.Response:
    return await _feed(request, None)


@routes.get("/api/repositories/{owner}/{name}/events")
@doc(
    "Events of one repository (readable as the repository is)",
    query=FeedQuerySchema,
    responses={200: EventFeedSchema},
    errors=(404, 410),
    public=True,
    tag="events",
    description=FEED_DESCRIPTION,
)
@requires("repo.read")
async def repo_feed(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    return await _feed(request, repo["id"])
