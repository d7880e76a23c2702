"""Pull requests: create, list, read, edit, merge, comments."""

from __future__ import annotations

import asyncio
import tempfile

from aiohttp import web

from schemas.common import PageQuerySchema
from schemas.issues import (
    CommentCreateSchema,
    CommentEnvelopeSchema,
    CommentListSchema,
    MergeSchema,
    PullCommitListSchema,
    PullCreateSchema,
    PullEnvelopeSchema,
    PullFileListSchema,
    PullListQuerySchema,
    PullListSchema,
    PullUpdateSchema,
    PullWithCommentsSchema,
)

from ..errors import ApiError, BadRequest, Conflict, Forbidden, NotFound, Unprocessable
from ..git.files import REPO_FILES
from ..git.objects import RANGE_COMMITS, RANGE_FILES
from ..git.ranges import TEXT_CHUNK
from ..keys import CONFIG, STORE
from ..policy import requires
from ..services import codeowners, pulls
from ..services.publish import event
from ..web import present
from ..web.auth import require_user
from ..web.openapi import doc
from ..web.permissions import allows, load_repo
from ..web.rest import json_response, read_json, read_query
from .issues import (
    ASSIGNEES_DOC,
    COMMENT_DELETE_DOC,
    COMMENT_EDIT_DOC,
    LIST_DESCRIPTION,
    add_comment,
    assignee_ids,
    check_edit,
    delete_comment,
    edit_changes,
    edit_comment,
    list_comments,
    list_filters,
    list_query,
    load_issue,
    milestone_fields,
    pulls_for_caller,
    show_with_comments,
    state_action,
)

routes = web.RouteTableDef()
PULLS = "/api/repositories/{owner}/{name}/pulls"


def _pull(request: web.Request, repo: dict, row: dict) -> dict:
    return present.pull(request.app[CONFIG].base_url, repo, row)


@routes.get(PULLS)
@doc(
    "Pull requests in a state (default open), newest first",
    query=PullListQuerySchema,
    responses={200: PullListSchema},
    errors=(400, 404),
    public=True,
    tag="pulls",
    description="state: open, closed (closed without merging), merged, or all. " + LIST_DESCRIPTION,
)
@requires("issues.read")
async def list_pulls(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    query = list_query(request, PullListQuerySchema)
    rows, more = await request.app[STORE].issues.page(
        repo["id"], True, query["state"], query["limit"], query["offset"], list_filters(query)
    )
    return json_response(
        {"pullRequests": await pulls_for_caller(request, repo, rows), "hasMore": more}
    )


async def _head_repo(request: web.Request, base: dict, ref: dict | None) -> dict:
    """The repository the head branch lives in: this one, or a readable fork of it."""
    if ref is None or (
        ref["owner"].lower() == base["owner_username"].lower()
        and ref["name"].lower() == base["name"].lower()
    ):
        return base
    try:
        head = await load_repo(request, "read", owner=ref["owner"], name=ref["name"])
    except NotFound:
        # The path's repository exists: a body naming one that doesn't (or that the caller
        # may not read: the same words) is a bad field, as GitHub's 422, not a missing page.
        raise Unprocessable("headRepository: no such repository") from None
    if head["parent_id"] != base["id"]:
        raise BadRequest("headRepository: must be a fork of this repository")
    if head["visibility"] == "private" and base["visibility"] == "public":
        # Its commits would become readable to everyone through the public base.
        raise BadRequest(
            "headRepository: a private fork cannot open a pull request into a public repository"
        )
    if (
        head["visibility"] == "private"
        and not allows(head["role"], "write")
        and not await pulls.readers_cover(request.app, base["id"], head["id"])
    ):
        # The base's readers would see the fork's commits through the pull request; a
        # mere reader of the fork may not share them (its writers may).
        raise Forbidden(
            "headRepository: opening a pull request from a private fork needs write access to it"
        )
    return head


@routes.post(PULLS)
@doc(
    "Open a pull request from a branch of this repository or of a fork",
    body=PullCreateSchema,
    responses={201: PullEnvelopeSchema},
    errors=(403, 404, 409, 422),
    tag="pulls",
    description=ASSIGNEES_DOC + " A missing branch is 400; an open pull request with the same "
    "head and base is 409. mergeable comes from a real three-way merge. "
    "From a private fork it needs write access to the fork (403), "
    "unless every reader of the base may read the fork; at every "
    "sync the head follows the fork only while that still holds, "
    "else it stays at its last shared commit.",
)
@requires("issues.write")
async def create_pull(request: web.Request) -> web.Response:
    user = require_user(request)
    repo = await load_repo(request)
    data = await read_json(request, PullCreateSchema())
    if (data["assignees"] or data.get("milestone")) and not allows(repo["role"], "triage"):
        raise Forbidden("triage access is required to set assignees or milestone")
    data = await milestone_fields(request, repo, data)
    head_repo = await _head_repo(request, repo, data.get("headRepository"))
    base = data.get("base") or repo["default_branch"]
    files = request.app[REPO_FILES]
    if await files.run(head_repo["id"], lambda g: g.branch_oid(data["head"])) is None:
        raise BadRequest("head: branch not found")
    if await files.run(repo["id"], lambda g: g.branch_oid(base)) is None:
        raise BadRequest("base: branch not found")
    if head_repo["id"] == repo["id"] and data["head"] == base:
        raise BadRequest("head: must differ from base")
    ids = await assignee_ids(request, repo, data["assignees"])
    row = await request.app[STORE].issues.create(
        repo_id=repo["id"],
        author_id=user["id"],
        title=data["title"],
        body=data["body"],
        labels=[],
        assignee_ids=ids,
        milestone_id=data.get("milestone_id"),
        pull={"head_repo_id": head_repo["id"], "head": data["head"], "base": base},
        # As on GitHub, the opened event comes before mergeability is known (null).
        emit=lambda row: [
            event(
                request,
                repo,
                "pull_request",
                {"action": "opened", "pullRequest": _pull(request, repo, row)},
            )
        ],
    )
    row = await pulls.refresh(request.app, row)
    if row["head_oid"] and row["base_oid"]:
        # CODEOWNERS on the base branch asks the owners of the changed paths to review.
        await codeowners.request_owners(
            request.app, repo, row, user, row["base_oid"], row["head_oid"]
        )
        row = {
            **row,
            **(await request.app[STORE].issues.get(repo["id"], row["number"], True) or {}),
        }
    [body] = await pulls_for_caller(request, repo, [row])
    return json_response({"pullRequest": body}, status=201)


# Reviewing: the range a pull request proposes, as GitHub shows it.

TEXT_IN_MEMORY = 256 << 10  # bytes of a .diff/.patch kept in memory before the spool file
DIFF_TEXT_LIMIT = 16 << 20  # bytes of .diff/.patch text served; larger ranges are 406


async def _range(request: web.Request, repo: dict, item: dict) -> tuple[str, str]:
    """(base, head) commits of a pull request: its tips now, or as they were when it merged."""
    if item["merged"] and item["base_oid"] and item["head_oid"]:
        return item["base_oid"], item["head_oid"]
    files = request.app[REPO_FILES]
    heads = await pulls.resolve_heads(request.app, item)
    head = heads.head or await files.run(repo["id"], lambda g: g.pull_ref(item["number"]))
    if head is None or heads.base is None:
        raise NotFound("the pull request's head or base branch no longer exists")
    return heads.base, head


@routes.get(PULLS + r"/{number:\d+}.{kind:diff|patch}")
@doc(
    "The pull request as `git diff` (.diff) or `git format-patch` (.patch) text",
    responses={
        200: {
            "description": "text/plain, as GitHub serves it",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        406: "the text would be larger than 16 MiB",
    },
    errors=(404,),
    public=True,
    tag="pulls",
    description=".diff is the three-dot diff (from the merge base to the head); .patch is "
    "one mail per commit of the head that the base lacks, oldest first. A merged "
    "pull request shows the range it merged.",
)
@requires("issues.read")
async def pull_text(request: web.Request) -> web.StreamResponse:
    repo = await load_repo(request)
    item = await load_issue(request, repo, True)
    base, head = await _range(request, repo, item)
    kind = request.match_info["kind"]
    files = request.app[REPO_FILES]
    # Spooled to disk past a small size: parallel requests for large ranges hold a chunk
    # of memory each, not the whole text (up to 16 MiB) until it is sent.
    with tempfile.SpooledTemporaryFile(TEXT_IN_MEMORY, dir=str(files.spool)) as spool:
        fits = await files.run(
            repo["id"], lambda g: g.range_text(base, head, kind, DIFF_TEXT_LIMIT, spool)
        )
        if not fits:
            raise ApiError("the diff is larger than 16 MiB: fetch the branches with git", 406)
        size = spool.tell()
        spool.seek(0)
        resp = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
        resp.content_length = size
        await resp.prepare(request)
        while chunk := await asyncio.to_thread(spool.read, TEXT_CHUNK):
            await resp.write(chunk)
        await resp.write_eof()
        return resp


@routes.get(PULLS + "/{number}/files")
@doc(
    "The files a pull request changes, with patches, by path",
    query=PageQuerySchema,
    responses={200: PullFileListSchema},
    errors=(404,),
    public=True,
    tag="pulls",
    description="Each file as in a commit's diff: path, oldPath, status, additions, "
    "deletions, binary, patch (hunks only). The range is GitHub's three-dot diff "
    "(merge base to head). Patches over 1 MiB are cut, the page holds "
    "`[git] max_diff_bytes` (default 5 MiB) of patch text in all, and files over "
    "20,000 changed lines or with a side over 4 MiB get none, all marked "
    f"truncated; the list stops at {RANGE_FILES}.",
)
@requires("issues.read")
async def pull_files(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    item = await load_issue(request, repo, True)
    page = read_query(request, PageQuerySchema())
    base, head = await _range(request, repo, item)
    budget = request.app[CONFIG]["git"]["max_diff_bytes"]
    found, total = await request.app[REPO_FILES].run(
        repo["id"],
        lambda g: g.range_files(base, head, page["limit"], page["offset"], max_bytes=budget),
    )
    return json_response(
        {
            "files": found,
            "totalFiles": total,
            "hasMore": page["offset"] + len(found) < min(total, RANGE_FILES),
        }
    )


@routes.get(PULLS + "/{number}/commits")
@doc(
    "The commits a pull request adds to its base, oldest first",
    query=PageQuerySchema,
    responses={200: PullCommitListSchema},
    errors=(404,),
    public=True,
    tag="pulls",
    description=f"As on GitHub, only the first {RANGE_COMMITS} are listed; totalCommits "
    "counts them all.",
)
@requires("issues.read")
async def pull_commits(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    item = await load_issue(request, repo, True)
    page = read_query(request, PageQuerySchema())
    base, head = await _range(request, repo, item)
    found, total = await request.app[REPO_FILES].run(
        repo["id"], lambda g: g.range_commits(base, head, page["limit"], page["offset"])
    )
    return json_response(
        {
            "commits": found,
            "totalCommits": total,
            "hasMore": page["offset"] + len(found) < min(total, RANGE_COMMITS),
        }
    )


@routes.get(PULLS + "/{number}")
@doc(
    "One pull request with its comments",
    query=PageQuerySchema,
    responses={200: PullWithCommentsSchema},
    errors=(404,),
    public=True,
    tag="pulls",
)
@requires("issues.read")
async def get_pull(request: web.Request) -> web.Response:
    return await show_with_comments(request, True)


@routes.patch(PULLS + "/{number}")
@doc(
    "Edit title, body, state (open/closed), base or assignees; merged only through merge",
    body=PullUpdateSchema,
    responses={200: PullEnvelopeSchema},
    errors=(403, 404, 409, 422),
    tag="pulls",
    description="Title, body and state: the author or triagers; assignees: triagers; "
    "base: writers. " + ASSIGNEES_DOC,
)
@requires("issues.write")
async def patch_pull(request: web.Request) -> web.Response:
    user = require_user(request)
    repo = await load_repo(request)
    item = await load_issue(request, repo, True)
    data = await read_json(request, PullUpdateSchema())
    check_edit(repo, item, user, data)
    if item["merged"] and ("state" in data or "base" in data):
        raise Conflict("a merged pull request cannot change state or base")
    if (
        "base" in data
        and await request.app[REPO_FILES].run(repo["id"], lambda g: g.branch_oid(data["base"]))
        is None
    ):
        raise BadRequest("base: branch not found")
    ids = await assignee_ids(request, repo, data["assignees"]) if "assignees" in data else None
    row = await request.app[STORE].issues.update(
        item["id"],
        await milestone_fields(request, repo, data),
        ids,
        emit=lambda row: [
            event(
                request,
                repo,
                "pull_request",
                {
                    "action": state_action(item, row),
                    "pullRequest": _pull(request, repo, row),
                    **edit_changes(item, row, data),
                },
            )
        ],
    )
    if "base" in data or data.get("state") == "open":
        row = await pulls.refresh(request.app, row)
    [body] = await pulls_for_caller(request, repo, [row])
    return json_response({"pullRequest": body})


@routes.post(PULLS + "/{number}/merge")
@doc(
    "Merge into the base branch: merge commit, squash, or fast-forward (write access)",
    body=MergeSchema,
    responses={200: PullEnvelopeSchema},
    errors=(403, 404, 405, 409),
    tag="pulls",
    description="409 when the pull request is not open, on a conflict, when a fast-forward "
    "is impossible, or when the base branch moved during the merge. With `sha`, 409 "
    '("Head branch was modified. Review and try the merge again.") unless the head is '
    "still that commit. 405 naming what is missing when the base branch's protection is "
    "not met yet (approvals, required status contexts, the head up to date with the "
    "base), as GitHub answers. The rules are judged, under the repository's merge lock, "
    "on the very head commit that is merged: a push to the head meanwhile is never "
    "merged unchecked.",
)
@requires("pulls.merge")
async def merge_pull(request: web.Request) -> web.Response:
    user = require_user(request)
    repo = await load_repo(request, "write")
    item = await load_issue(request, repo, True)
    data = await read_json(request, MergeSchema())
    row = await pulls.merge(
        request.app, repo, item, user, data["method"], data.get("message"), data.get("sha")
    )
    [body] = await pulls_for_caller(request, repo, [row])
    return json_response({"pullRequest": body})


@routes.post(PULLS + "/{number}/comments")
@doc(
    "Comment on a pull request (any signed-in reader)",
    body=CommentCreateSchema,
    responses={201: CommentEnvelopeSchema},
    errors=(404,),
    tag="pulls",
)
@requires("issues.comment")
async def comment_pull(request: web.Request) -> web.Response:
    return await add_comment(request, True)


@routes.get(PULLS + "/{number}/comments")
@doc(
    "A pull request's comments, oldest first",
    query=PageQuerySchema,
    responses={200: CommentListSchema},
    errors=(404,),
    public=True,
    tag="pulls",
)
@requires("issues.read")
async def pull_comments(request: web.Request) -> web.Response:
    return await list_comments(request, True)


@routes.patch(PULLS + "/{number}/comments/{id}")
@doc(
    "Edit a comment on a pull request",
    body=CommentCreateSchema,
    responses={200: CommentEnvelopeSchema},
    errors=(403, 404),
    tag="pulls",
    description=COMMENT_EDIT_DOC.format(event="pull_request"),
)
@requires("issues.write")
async def patch_pull_comment(request: web.Request) -> web.Response:
    return await edit_comment(request, True)


@routes.delete(PULLS + "/{number}/comments/{id}")
@doc(
    "Delete a comment on a pull request",
    responses={204: "deleted"},
    errors=(403, 404),
    tag="pulls",
    description=COMMENT_DELETE_DOC.format(event="pull_request"),
)
@requires("issues.write")
async def delete_pull_comment(request: web.Request) -> web.Response:
    return await delete_comment(request, True)
