"""The notifications inbox (GitHub's /notifications): threads, read state, subscriptions."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from schemas.notifications import (
    MarkedSchema,
    MarkReadSchema,
    NotificationEnvelopeSchema,
    NotificationListSchema,
    NotificationQuerySchema,
    RepoNotificationQuerySchema,
    SubscriptionEnvelopeSchema,
    SubscriptionUpdateSchema,
)

from ..errors import NotFound
from ..keys import CONFIG, STORE
from ..notify.hub import HUB
from ..policy import requires
from ..timeutil import now_iso
from ..web import present
from ..web.auth import require_user
from ..web.openapi import doc
from ..web.permissions import load_repo, readable_by
from ..web.rest import json_response, read_json, read_query

routes = web.RouteTableDef()
THREADS = "/api/notifications/threads/{id}"
ISSUE_SUBSCRIPTION = "/api/repositories/{owner}/{name}/issues/{number}/subscription"
LIST_DOC = (
    "A thread per issue or pull request the caller follows, most recently updated first: "
    "reason (assign, author, comment, mention, review_requested, state_change, "
    "team_mention, subscribed: watching a repository of their own, or subscribed by hand) "
    "says why its latest event reached them. Unread only unless all=true; participating=true "
    "leaves out `subscribed`; since/before bound updatedAt. A thread shows only while the "
    "caller may read its repository (a lost grant hides it), and a token limited to some "
    "repositories sees theirs only. The WebSocket sends {type: inbox, thread, unreadCount} "
    "to the person's own sockets whenever one of their threads changes."
)


def _thread_id(request: web.Request) -> int:
    raw = request.match_info["id"]
    if not raw.isdigit() or len(raw) > 18:
        raise NotFound("notification thread not found")
    return int(raw)


async def _list(request: web.Request, query: dict[str, Any], repo_id: int | None) -> web.Response:
    user = require_user(request)
    store, within = request.app[STORE], readable_by(request)
    rows, more = await store.notifications.page(
        user["id"], within, query["limit"], query["offset"], {**query, "repo_id": repo_id}
    )
    base = request.app[CONFIG].base_url
    return json_response(
        {
            "notifications": [present.notification(base, r) for r in rows],
            "hasMore": more,
            "unreadCount": await store.notifications.unread_count(user["id"], within),
        }
    )


@routes.get("/api/notifications")
@doc(
    "The caller's notification threads",
    query=NotificationQuerySchema,
    responses={200: NotificationListSchema},
    errors=(400, 404),
    tag="notifications",
    description=LIST_DOC + " repository=owner/name keeps that repository's (404 if unreadable).",
)
@requires("notifications.read")
async def list_notifications(request: web.Request) -> web.Response:
    query = read_query(request, NotificationQuerySchema())
    repo_id = None
    if "repository" in query:
        owner, name = query["repository"].split("/", 1)
        repo_id = (await load_repo(request, owner=owner, name=name))["id"]
    return await _list(request, query, repo_id)


@routes.get("/api/repositories/{owner}/{name}/notifications")
@doc(
    "The caller's notification threads of one repository",
    query=RepoNotificationQuerySchema,
    responses={200: NotificationListSchema},
    errors=(400, 404),
    tag="notifications",
    description=LIST_DOC,
)
@requires("notifications.read")
async def repo_notifications(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    return await _list(request, read_query(request, RepoNotificationQuerySchema()), repo["id"])


@routes.put("/api/notifications")
@doc(
    "Mark every thread updated up to lastReadAt (default: now) read",
    body=MarkReadSchema,
    responses={200: MarkedSchema},
    errors=(400,),
    tag="notifications",
    description="GitHub answers 202 or 205; this API answers 200 with how many were marked "
    "and the unread count left. Threads updated later (a new comment) stay unread.",
)
@requires("notifications.write")
async def mark_all_read(request: web.Request) -> web.Response:
    user = require_user(request)
    data = await read_json(request, MarkReadSchema())
    store, within = request.app[STORE], readable_by(request)
    marked = await store.notifications.mark_all_read(
        user["id"], data.get("lastReadAt") or now_iso(), within
    )
    count = await store.notifications.unread_count(user["id"], within)
    # Every thread of the user's may have changed: the sockets get the count alone.
    request.app[HUB].inbox(
        user["id"], False, {"type": "inbox", "thread": None, "unreadCount": count}
    )
    return json_response({"marked": marked, "unreadCount": count})


async def _thread(request: web.Request) -> tuple[dict, dict[str, Any]]:
    user = require_user(request)
    row = await request.app[STORE].notifications.thread(
        user["id"], _thread_id(request), readable_by(request)
    )
    if row is None:
        raise NotFound("notification thread not found")
    return user, row


@routes.get(THREADS)
@doc(
    "One notification thread",
    responses={200: NotificationEnvelopeSchema},
    errors=(404,),
    tag="notifications",
    description="404 for another person's thread, and for one of a repository the caller "
    "may no longer read.",
)
@requires("notifications.read")
async def get_thread(request: web.Request) -> web.Response:
    _, row = await _thread(request)
    return json_response({"notification": present.notification(request.app[CONFIG].base_url, row)})


@routes.patch(THREADS)
@doc(
    "Mark a thread read",
    responses={200: NotificationEnvelopeSchema},
    errors=(404,),
    tag="notifications",
    description="GitHub answers 205 without a body; this API answers 200 with the thread. "
    "The caller's sockets get {type: inbox, thread, unreadCount}.",
)
@requires("notifications.write")
async def mark_thread_read(request: web.Request) -> web.Response:
    user, row = await _thread(request)
    store = request.app[STORE]
    await store.notifications.mark_read(user["id"], row["id"])
    row = await store.notifications.thread(user["id"], row["id"]) or row
    thread = present.notification(request.app[CONFIG].base_url, row)
    count = await store.notifications.unread_count(user["id"])
    request.app[HUB].inbox(
        user["id"],
        row["visibility"] == "public",
        {"type": "inbox", "thread": thread, "unreadCount": count},
    )
    return json_response({"notification": thread})


def _sub_json(request: web.Request, url: str, thread_id: int | None, row: dict | None) -> dict:
    base = request.app[CONFIG].base_url
    thread_url = f"{base}/api/notifications/threads/{thread_id}" if thread_id else None
    return present.subscription(url, thread_url, row)


def _thread_sub_url(request: web.Request, thread_id: int) -> str:
    return f"{request.app[CONFIG].base_url}/api/notifications/threads/{thread_id}/subscription"


@routes.get(THREADS + "/subscription")
@doc(
    "The caller's subscription to a thread",
    responses={200: SubscriptionEnvelopeSchema},
    errors=(404,),
    tag="notifications",
)
@requires("notifications.read")
async def get_thread_subscription(request: web.Request) -> web.Response:
    user, row = await _thread(request)
    sub = await request.app[STORE].notifications.subscription(row["issue_id"], user["id"])
    url = _thread_sub_url(request, row["id"])
    return json_response({"subscription": _sub_json(request, url, row["id"], sub)})


@routes.put(THREADS + "/subscription")
@doc(
    "Subscribe to a thread, or ignore it ({ignored: true})",
    body=SubscriptionUpdateSchema,
    responses={200: SubscriptionEnvelopeSchema},
    errors=(400, 404),
    tag="notifications",
    description="Ignored: no notification of the thread at all, not even a mention.",
)
@requires("notifications.write")
async def put_thread_subscription(request: web.Request) -> web.Response:
    data = await read_json(request, SubscriptionUpdateSchema())  # 400 before 404, as is cheap
    user, row = await _thread(request)
    sub = await request.app[STORE].notifications.subscribe(
        row["issue_id"], user["id"], not data["ignored"], data["ignored"]
    )
    url = _thread_sub_url(request, row["id"])
    return json_response({"subscription": _sub_json(request, url, row["id"], sub)})


@routes.delete(THREADS + "/subscription")
@doc(
    "Unsubscribe from a thread (mute it until the caller is mentioned or takes part)",
    responses={204: "unsubscribed"},
    errors=(404,),
    tag="notifications",
)
@requires("notifications.write")
async def delete_thread_subscription(request: web.Request) -> web.Response:
    user, row = await _thread(request)
    await request.app[STORE].notifications.subscribe(row["issue_id"], user["id"], False, False)
    return web.Response(status=204)


async def _issue(request: web.Request) -> tuple[dict, dict, dict]:
    """The caller, the repository and its issue or pull request of the path (numbers are shared)."""
    user = require_user(request)
    repo = await load_repo(request)
    raw = request.match_info["number"]
    item = None
    if raw.isdigit() and len(raw) <= 12:
        for is_pull in (False, True):
            item = item or await request.app[STORE].issues.get(repo["id"], int(raw), is_pull)
    if item is None:
        raise NotFound("issue not found")
    return user, repo, item


def _issue_sub_url(request: web.Request, repo: dict, item: dict) -> str:
    return (
        f"{request.app[CONFIG].base_url}/api/repositories/{repo['owner_username']}/"
        f"{repo['name']}/issues/{item['number']}/subscription"
    )


@routes.get(ISSUE_SUBSCRIPTION)
@doc(
    "The caller's subscription to an issue or pull request",
    responses={200: SubscriptionEnvelopeSchema},
    errors=(404,),
    tag="notifications",
)
@requires("notifications.read")
async def get_issue_subscription(request: web.Request) -> web.Response:
    user, repo, item = await _issue(request)
    sub = await request.app[STORE].notifications.subscription(item["id"], user["id"])
    url = _issue_sub_url(request, repo, item)
    return json_response({"subscription": _sub_json(request, url, None, sub)})


@routes.put(ISSUE_SUBSCRIPTION)
@doc(
    "Subscribe to an issue or pull request (any reader), or ignore it ({ignored: true})",
    body=SubscriptionUpdateSchema,
    responses={200: SubscriptionEnvelopeSchema},
    errors=(400, 404),
    tag="notifications",
    description="Subscribed, its events reach the caller's inbox (reason `subscribed`, or "
    "the reason they first joined it for).",
)
@requires("notifications.write")
async def put_issue_subscription(request: web.Request) -> web.Response:
    user, repo, item = await _issue(request)
    data = await read_json(request, SubscriptionUpdateSchema())
    sub = await request.app[STORE].notifications.subscribe(
        item["id"], user["id"], not data["ignored"], data["ignored"]
    )
    url = _issue_sub_url(request, repo, item)
    return json_response({"subscription": _sub_json(request, url, None, sub)})


@routes.delete(ISSUE_SUBSCRIPTION)
@doc(
    "Unsubscribe from an issue or pull request",
    responses={204: "unsubscribed"},
    errors=(404,),
    tag="notifications",
    description="Until the caller is mentioned, assigned or asked to review, or takes part.",
)
@requires("notifications.write")
async def delete_issue_subscription(request: web.Request) -> web.Response:
    user, _, item = await _issue(request)
    await request.app[STORE].notifications.subscribe(item["id"], user["id"], False, False)
    return web.Response(status=204)
