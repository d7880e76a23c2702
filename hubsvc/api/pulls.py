"""Pull requests: create, list, read, edit, merge, comments."""

from __future__ import annotations

import asyncio

from aiohttp import web

from schemas.common import PageQuerySchema
from schemas.issues import (CommentCreateSchema, CommentEnvelopeSchema, CommentListSchema,
                            MergeSchema, PullCreateSchema, PullEnvelopeSchema, PullListQuerySchema,
                            PullListSchema, PullUpdateSchema, PullWithCommentsSchema)

from .. import present, pulls
from ..auth import require_user
from ..errors import BadRequest, Conflict
from ..keys import CONFIG, STORE
from ..openapi import doc
from ..permissions import load_repo
from ..publish import event
from ..pushes import push_data
from ..repofiles import REPO_FILES
from ..rest import json_response, load, read_json
from .issues import (add_comment, check_edit, list_comments, load_issue, pulls_for_caller,
                     show_with_comments, state_action)

routes = web.RouteTableDef()
PULLS = "/api/repositories/{owner}/{name}/pulls"


def _pull(request: web.Request, repo: dict, row: dict) -> dict:
    return present.pull(request.app[CONFIG].base_url, repo, row)


def _list_query(request: web.Request) -> dict:
    """The list's query; with ignoreUnknown=true, unknown keys and states are ignored."""
    raw = {key: request.query.getone(key) for key in request.query.keys()}
    lenient = load(PullListQuerySchema(only=("ignoreUnknown",)),
                   {"ignoreUnknown": raw.get("ignoreUnknown", "false")})["ignoreUnknown"]
    known = set(PullListQuerySchema().fields)
    unknown = sorted(set(raw) - known)
    if unknown and not lenient:
        raise BadRequest(f"unknown query parameter: {unknown[0]} (ignoreUnknown=true skips it)")
    raw = {k: v for k, v in raw.items() if k in known}
    if lenient and raw.get("state") not in (None, "open", "closed", "merged", "all"):
        raw.pop("state")
    return load(PullListQuerySchema(), raw)


@routes.get(PULLS)
@doc("Pull requests in a state (default open), newest first", query=PullListQuerySchema,
     responses={200: PullListSchema}, errors=(404,), public=True, tag="pulls",
     description="state: open, closed (closed without merging), merged, or all. Unknown "
                 "query parameters answer 400 unless ignoreUnknown=true.")
async def list_pulls(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    query = _list_query(request)
    rows, more = await request.app[STORE].issues.page(repo["id"], True, query["state"],
                                                      query["limit"], query["offset"])
    return json_response({"pullRequests": await pulls_for_caller(request, repo, rows),
                          "hasMore": more})


async def _head_repo(request: web.Request, base: dict, ref: dict | None) -> dict:
    """The repository the head branch lives in: this one, or a readable fork of it."""
    if ref is None or (ref["owner"].lower() == base["owner_username"].lower()
                       and ref["name"].lower() == base["name"].lower()):
        return base
    head = await load_repo(request, "read", owner=ref["owner"], name=ref["name"])
    if head["parent_id"] != base["id"]:
        raise BadRequest("headRepository: must be a fork of this repository")
    if head["visibility"] == "private" and base["visibility"] == "public":
        # Its commits would become readable to everyone through the public base.
        raise BadRequest("headRepository: a private fork cannot open a pull request "
                         "into a public repository")
    return head


@routes.post(PULLS)
@doc("Open a pull request from a branch of this repository or of a fork",
     body=PullCreateSchema, responses={201: PullEnvelopeSchema}, errors=(404, 409),
     tag="pulls", description="A missing branch is 400; an open pull request with the same "
                              "head and base is 409. mergeable comes from a real three-way merge.")
async def create_pull(request: web.Request) -> web.Response:
    user = require_user(request)
    repo = await load_repo(request)
    data = await read_json(request, PullCreateSchema())
    head_repo = await _head_repo(request, repo, data.get("headRepository"))
    base = data.get("base") or repo["default_branch"]
    files = request.app[REPO_FILES]
    if await files.run(head_repo["id"], lambda g: g.branch_oid(data["head"])) is None:
        raise BadRequest("head: branch not found")
    if await files.run(repo["id"], lambda g: g.branch_oid(base)) is None:
        raise BadRequest("base: branch not found")
    if head_repo["id"] == repo["id"] and data["head"] == base:
        raise BadRequest("head: must differ from base")
    row = await request.app[STORE].issues.create(
        repo_id=repo["id"], author_id=user["id"], title=data["title"], body=data["body"],
        labels=[], assignee_ids=[],
        pull={"head_repo_id": head_repo["id"], "head": data["head"], "base": base},
        # As on GitHub, the opened event comes before mergeability is known (null).
        emit=lambda row: [event(request, repo, "pull_request", {
            "action": "opened", "pullRequest": _pull(request, repo, row)})])
    row = await pulls.refresh(request.app, row)
    [body] = await pulls_for_caller(request, repo, [row])
    return json_response({"pullRequest": body}, status=201)


@routes.get(PULLS + "/{number}")
@doc("One pull request with its comments", query=PageQuerySchema,
     responses={200: PullWithCommentsSchema}, errors=(404,), public=True, tag="pulls")
async def get_pull(request: web.Request) -> web.Response:
    return await show_with_comments(request, True)


@routes.patch(PULLS + "/{number}")
@doc("Edit title, body, state (open/closed) or base; merged only through merge",
     body=PullUpdateSchema, responses={200: PullEnvelopeSchema}, errors=(403, 404, 409),
     tag="pulls")
async def patch_pull(request: web.Request) -> web.Response:
    user = require_user(request)
    repo = await load_repo(request)
    item = await load_issue(request, repo, True)
    data = await read_json(request, PullUpdateSchema())
    check_edit(repo, item, user, data)
    if item["merged"] and ("state" in data or "base" in data):
        raise Conflict("a merged pull request cannot change state or base")
    if "base" in data and await request.app[REPO_FILES].run(
            repo["id"], lambda g: g.branch_oid(data["base"])) is None:
        raise BadRequest("base: branch not found")
    row = await request.app[STORE].issues.update(
        item["id"], data, emit=lambda row: [event(request, repo, "pull_request", {
            "action": state_action(item, row), "pullRequest": _pull(request, repo, row),
            "changes": sorted(data)})])
    if "base" in data or data.get("state") == "open":
        row = await pulls.refresh(request.app, row)
    [body] = await pulls_for_caller(request, repo, [row])
    return json_response({"pullRequest": body})


@routes.post(PULLS + "/{number}/merge")
@doc("Merge into the base branch: merge commit, squash, or fast-forward (write access)",
     body=MergeSchema, responses={200: PullEnvelopeSchema}, errors=(403, 404, 409), tag="pulls",
     description="409 when the pull request is not open, on a conflict, when a fast-forward "
                 "is impossible, or when the base branch moved during the merge.")
async def merge_pull(request: web.Request) -> web.Response:
    user = require_user(request)
    repo = await load_repo(request, "write")
    item = await load_issue(request, repo, True)
    data = await read_json(request, MergeSchema())
    store = request.app[STORE]
    # The claim is taken in the database, so exactly one merge (or a close) wins even
    # when several processes serve the same pull request.
    if not await store.issues.claim_merge(item["id"]):
        raise Conflict("pull request is not open, or another merge of it is under way")
    try:
        new, heads = await pulls.merge(request.app, item, user, data["method"],
                                       data.get("message"))
    except BaseException:
        await asyncio.shield(store.issues.release_merge(item["id"]))
        raise
    ref = f"refs/heads/{item['base']}"
    push = await request.app[REPO_FILES].run(
        repo["id"], lambda g: push_data(g, ref, heads.base, new, []))
    row = await store.issues.mark_merged(
        item["id"], user["id"], new, heads.head, heads.base,
        emit=lambda row: [
            event(request, repo, "pull_request", {"action": "merged",
                                                  "pullRequest": _pull(request, repo, row),
                                                  "method": data["method"]}),
            event(request, repo, "push", push)])
    [body] = await pulls_for_caller(request, repo, [row])
    await request.app[STORE].repos.touch(repo["id"])
    return json_response({"pullRequest": body})


@routes.post(PULLS + "/{number}/comments")
@doc("Comment on a pull request (any signed-in reader)", body=CommentCreateSchema,
     responses={201: CommentEnvelopeSchema}, errors=(404,), tag="pulls")
async def comment_pull(request: web.Request) -> web.Response:
    return await add_comment(request, True)


@routes.get(PULLS + "/{number}/comments")
@doc("A pull request's comments, oldest first", query=PageQuerySchema,
     responses={200: CommentListSchema}, errors=(404,), public=True, tag="pulls")
async def pull_comments(request: web.Request) -> web.Response:
    return await list_comments(request, True)



