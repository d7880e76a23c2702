"""Reactions on issues, pull requests (by their number) and their comments."""

from __future__ import annotations

from aiohttp import web

from schemas.planning import (
    ReactionCreateSchema,
    ReactionEnvelopeSchema,
    ReactionListQuerySchema,
    ReactionListSchema,
)

from ..errors import Forbidden, NotFound
from ..events.shape import Event
from ..keys import CONFIG, STORE
from ..policy import requires
from ..services.publish import event
from ..store.reactions import ON_ITEM
from ..web.auth import require_user
from ..web.openapi import doc
from ..web.permissions import load_repo
from ..web.present_planning import reaction as reaction_json
from ..web.rest import json_response, read_json, read_query
from .issues import ISSUES, number_of

routes = web.RouteTableDef()
ON_ISSUE = ISSUES + "/{number}/reactions"
ON_COMMENT = ISSUES + "/{number}/comments/{id}/reactions"
KINDS_DOC = (
    "GitHub's eight: +1, -1, laugh, confused, heart, hooray, rocket, eyes. The number may "
    "be a pull request's, as on GitHub."
)


def _id(raw: str) -> int:
    if not raw.isdigit() or len(raw) > 18:
        raise NotFound("not found")
    return int(raw)


async def _subject(request: web.Request, on_comment: bool) -> tuple[dict, dict, int]:
    """The repository, the issue or pull request of the number, and the comment id (or 0)."""
    repo = await load_repo(request)
    store = request.app[STORE]
    number = number_of(request)
    item = await store.issues.get(repo["id"], number, False) or await store.issues.get(
        repo["id"], number, True
    )
    if item is None:
        raise NotFound("issue not found")
    if not on_comment:
        return repo, item, ON_ITEM
    comment = await store.issues.comment(item["id"], _id(request.match_info["id"]))
    if comment is None:
        raise NotFound("comment not found")
    return repo, item, comment["id"]


def _event(
    request: web.Request, repo: dict, item: dict, comment_id: int, action: str, row: dict
) -> Event:
    subject = {
        "number": item["number"],
        "title": item["title"],
        "kind": "pull_request" if item["is_pull"] else "issue",
    }
    if comment_id != ON_ITEM:
        subject["commentId"] = str(comment_id)
    return event(
        request,
        repo,
        "reaction",
        {
            "action": action,
            "reaction": reaction_json(request.app[CONFIG].base_url, row),
            "subject": subject,
        },
    )


async def _list(request: web.Request, on_comment: bool) -> web.Response:
    repo, item, comment_id = await _subject(request, on_comment)
    q = read_query(request, ReactionListQuerySchema())
    rows, more = await request.app[STORE].reactions.page(
        item["id"], comment_id, q.get("content"), q["limit"], q["offset"]
    )
    base = request.app[CONFIG].base_url
    return json_response({"reactions": [reaction_json(base, r) for r in rows], "hasMore": more})


async def _add(request: web.Request, on_comment: bool) -> web.Response:
    user = require_user(request)
    repo, item, comment_id = await _subject(request, on_comment)
    data = await read_json(request, ReactionCreateSchema())
    row, made = await request.app[STORE].reactions.add(
        item["id"],
        comment_id,
        user["id"],
        data["content"],
        emit=lambda result: (
            [_event(request, repo, item, comment_id, "created", result[0])] if result[1] else []
        ),
    )
    body = {"reaction": reaction_json(request.app[CONFIG].base_url, row)}
    return json_response(body, status=201 if made else 200)


async def _delete(request: web.Request, on_comment: bool, key: str) -> web.Response:
    user = require_user(request)
    repo, item, comment_id = await _subject(request, on_comment)
    found = await request.app[STORE].reactions.get(
        item["id"], comment_id, _id(request.match_info[key])
    )
    if found is None:
        raise NotFound("reaction not found")
    if found["user_id"] != user["id"]:
        raise Forbidden("only the person who reacted may take the reaction back")
    gone = await request.app[STORE].reactions.delete(
        found["id"],
        emit=lambda gone: (
            [_event(request, repo, item, comment_id, "deleted", found)] if gone else []
        ),
    )
    if not gone:
        raise NotFound("reaction not found")
    return web.Response(status=204)


@routes.get(ON_ISSUE)
@doc(
    "Reactions to an issue or pull request, oldest first",
    query=ReactionListQuerySchema,
    responses={200: ReactionListSchema},
    errors=(400, 404),
    public=True,
    tag="reactions",
    description=KINDS_DOC + " content= keeps one kind.",
)
@requires("issues.read")
async def list_issue_reactions(request: web.Request) -> web.Response:
    return await _list(request, False)


@routes.post(ON_ISSUE)
@doc(
    "React to an issue or pull request (any signed-in reader)",
    body=ReactionCreateSchema,
    responses={200: ReactionEnvelopeSchema, 201: ReactionEnvelopeSchema},
    errors=(404,),
    tag="reactions",
    description=KINDS_DOC + " Once per person and kind: a repeat answers 200 with the "
    "reaction there is (GitHub's way), a new one 201.",
)
@requires("issues.comment")
async def react_issue(request: web.Request) -> web.Response:
    return await _add(request, False)


@routes.delete(ON_ISSUE + "/{reactionId}")
@doc(
    "Take back one's reaction to an issue or pull request",
    responses={204: "deleted"},
    errors=(403, 404),
    tag="reactions",
    description="Only the person who reacted (403 for others).",
)
@requires("issues.comment")
async def unreact_issue(request: web.Request) -> web.Response:
    return await _delete(request, False, "reactionId")


@routes.get(ON_COMMENT)
@doc(
    "Reactions to a comment on an issue or pull request, oldest first",
    query=ReactionListQuerySchema,
    responses={200: ReactionListSchema},
    errors=(400, 404),
    public=True,
    tag="reactions",
    description=KINDS_DOC + " content= keeps one kind.",
)
@requires("issues.read")
async def list_comment_reactions(request: web.Request) -> web.Response:
    return await _list(request, True)


@routes.post(ON_COMMENT)
@doc(
    "React to a comment (any signed-in reader)",
    body=ReactionCreateSchema,
    responses={200: ReactionEnvelopeSchema, 201: ReactionEnvelopeSchema},
    errors=(404,),
    tag="reactions",
    description=KINDS_DOC + " Once per person and kind: a repeat answers 200 with the "
    "reaction there is, a new one 201.",
)
@requires("issues.comment")
async def react_comment(request: web.Request) -> web.Response:
    return await _add(request, True)


@routes.delete(ON_COMMENT + "/{reactionId}")
@doc(
    "Take back one's reaction to a comment",
    responses={204: "deleted"},
    errors=(403, 404),
    tag="reactions",
    description="Only the person who reacted (403 for others).",
)
@requires("issues.comment")
async def unreact_comment(request: web.Request) -> web.Response:
    return await _delete(request, True, "reactionId")
