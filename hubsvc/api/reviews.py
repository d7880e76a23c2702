"""Pull request reviews: verdicts and line comments on the diff, as GitHub's."""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from schemas.common import PageQuerySchema
from schemas.reviews import ReviewCreateSchema, ReviewEnvelopeSchema, ReviewListSchema

from ..errors import ApiError
from ..git.files import REPO_FILES
from ..git.objects import RANGE_FILES
from ..keys import CONFIG, STORE
from ..policy import requires
from ..services import pulls
from ..services.publish import event
from ..web import present
from ..web.auth import require_user
from ..web.markdown import with_html
from ..web.openapi import doc
from ..web.permissions import load_repo
from ..web.rest import json_response, read_json, read_query
from .issues import load_issue

routes = web.RouteTableDef()
REVIEWS = "/api/repositories/{owner}/{name}/pulls/{number}/reviews"
STATES = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "COMMENT": "COMMENTED"}
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", re.M)


def review_json(base_url: str, row: dict[str, Any], head_oid: str | None) -> dict[str, Any]:
    """A review as the API shows it; stale once the head has moved past its commit."""
    return {
        "id": str(row["id"]),
        "user": present._person(base_url, row, "user", "user_id"),
        "state": row["state"],
        "body": row["body"],
        "commitId": row["commit_id"],
        "stale": head_oid is not None and row["commit_id"] != head_oid,
        "comments": [
            {
                "id": str(c["id"]),
                "path": c["path"],
                "line": c["line"],
                "side": c["side"],
                "body": c["body"],
            }
            for c in row["comments"]
        ],
        "submittedAt": row["created_at"],
    }


def diff_lines(patch: str) -> dict[str, set[int]]:
    """The lines a patch shows, per side: LEFT (the base's) and RIGHT (the head's)."""
    sides: dict[str, set[int]] = {"LEFT": set(), "RIGHT": set()}
    old = new = 0
    for line in patch.split("\n"):
        hunk = _HUNK.match(line)
        if hunk:
            old, new = int(hunk[1]), int(hunk[3])
        elif line.startswith("-"):
            sides["LEFT"].add(old)
            old += 1
        elif line.startswith("+"):
            sides["RIGHT"].add(new)
            new += 1
        elif line.startswith(" "):
            sides["LEFT"].add(old)
            sides["RIGHT"].add(new)
            old, new = old + 1, new + 1
    return sides


async def _check_comments(
    request: web.Request, repo: dict, base: str, head: str, comments: list[dict]
) -> None:
    """422 naming the first comment on a file or line the pull request's diff does not show."""
    if not comments:
        return
    budget = request.app[CONFIG]["git"]["max_diff_bytes"]
    files, _ = await request.app[REPO_FILES].run(
        repo["id"], lambda g: g.range_files(base, head, RANGE_FILES, 0, max_bytes=budget)
    )
    shown = {f["path"]: diff_lines(f["patch"] or "") for f in files}
    for n, comment in enumerate(comments):
        lines = shown.get(comment["path"])
        if lines is None:
            raise ApiError(f"comments.{n}.path: {comment['path']} is not changed here", 422)
        if comment["line"] not in lines[comment["side"]]:
            raise ApiError(
                f"comments.{n}.line: line {comment['line']} ({comment['side']}) of "
                f"{comment['path']} is not in the diff",
                422,
            )


@routes.post(REVIEWS)
@doc(
    "Review a pull request: APPROVE, REQUEST_CHANGES or COMMENT, with line comments",
    body=ReviewCreateSchema,
    responses={201: ReviewEnvelopeSchema},
    errors=(400, 404, 422),
    tag="pulls",
    description="Any signed-in reader, as on GitHub; approvals count toward a protected "
    "branch only from people with write access. The author cannot approve or request "
    "changes on their own pull request (422); REQUEST_CHANGES and COMMENT need a body or "
    "comments (422); only an open pull request is reviewed (422). Each comment names a "
    "path the pull request changes and a line its diff shows on that side (else 422). "
    "At most 100 comments. The review keeps the head it was given on; a later push makes "
    "it stale. Writes a pull_request event with action `reviewed`.",
)
@requires("issues.write")
async def create_review(request: web.Request) -> web.Response:
    user = require_user(request)
    repo = await load_repo(request)
    item = await load_issue(request, repo, True)
    data = await read_json(request, ReviewCreateSchema())
    state = STATES[data["event"]]
    if item["state"] != "open" or item["merged"]:
        raise ApiError("only an open pull request can be reviewed", 422)
    if state != "COMMENTED" and item["author_id"] == user["id"]:
        raise ApiError(
            "the author cannot approve or request changes on their own pull request", 422
        )
    if state != "APPROVED" and not data["body"].strip() and not data["comments"]:
        raise ApiError("body: needed to request changes or comment (or give comments)", 422)
    heads = await pulls.resolve_heads(request.app, item)
    if heads.head is None or heads.base is None:
        raise ApiError("the pull request's head or base branch no longer exists", 422)
    await _check_comments(request, repo, heads.base, heads.head, data["comments"])
    base_url = request.app[CONFIG].base_url
    row = await request.app[STORE].reviews.add(
        item["id"],
        user["id"],
        state,
        data["body"],
        heads.head,
        data["comments"],
        emit=lambda row: [
            event(
                request,
                repo,
                "pull_request",
                {
                    "action": "reviewed",
                    "pullRequest": present.pull(base_url, repo, item),
                    "review": review_json(base_url, row, heads.head),
                },
            )
        ],
    )
    answer = review_json(base_url, row, heads.head)
    with_html(request, repo, answer)
    return json_response({"review": answer}, status=201)


@routes.get(REVIEWS)
@doc(
    "A pull request's reviews, oldest first",
    query=PageQuerySchema,
    responses={200: ReviewListSchema},
    errors=(404,),
    public=True,
    tag="pulls",
)
@requires("issues.read")
async def list_reviews(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    item = await load_issue(request, repo, True)
    page = read_query(request, PageQuerySchema())
    rows, more = await request.app[STORE].reviews.page(item["id"], page["limit"], page["offset"])
    heads = await pulls.resolve_heads(request.app, item)
    base_url = request.app[CONFIG].base_url
    reviews = [review_json(base_url, r, heads.head) for r in rows]
    with_html(request, repo, *reviews)
    return json_response({"reviews": reviews, "hasMore": more})
