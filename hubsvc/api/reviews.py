"""Pull request reviews: verdicts and line comments on the diff, as GitHub's."""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from schemas.common import PageQuerySchema
from schemas.issues import PullEnvelopeSchema
from schemas.reviews import (
    ReviewCreateSchema,
    ReviewEnvelopeSchema,
    ReviewListSchema,
    ReviewRequestSchema,
)

from ..errors import ApiError, Forbidden
from ..git.files import REPO_FILES
from ..git.objects import RANGE_FILES
from ..keys import CONFIG, STORE
from ..policy import requires
from ..services import codeowners, pulls
from ..services.publish import event
from ..web import present
from ..web.auth import require_user
from ..web.markdown import with_html
from ..web.openapi import doc
from ..web.permissions import allows, load_repo
from ..web.rest import json_response, read_json, read_query, shared
from .issues import load_issue, pulls_for_caller

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
    page = read_query(request, shared(PageQuerySchema))
    rows, more = await request.app[STORE].reviews.page(item["id"], page["limit"], page["offset"])
    heads = await pulls.resolve_heads(request.app, item)
    base_url = request.app[CONFIG].base_url
    reviews = [review_json(base_url, r, heads.head) for r in rows]
    with_html(request, repo, *reviews)
    return json_response({"reviews": reviews, "hasMore": more})


REQUESTS = "/api/repositories/{owner}/{name}/pulls/{number}/requested_reviewers"


async def _requested(request: web.Request) -> tuple[dict, dict, dict, dict, dict, dict]:
    """The caller, repository, pull request, and the people and teams the body names.

    422 naming the people who do not exist, may not read the repository or wrote the
    pull request, and the teams the repository's organization does not have.
    """
    user = require_user(request)
    repo = await load_repo(request)
    item = await load_issue(request, repo, True)
    data = await read_json(request, ReviewRequestSchema())
    if not allows(repo["role"], "triage") and item["author_id"] != user["id"]:
        raise Forbidden("only the author or someone with triage access may request reviews")
    if not data["reviewers"] and not data["teamReviewers"]:
        raise ApiError("reviewers: give reviewers or teamReviewers", 422)
    people, teams = await codeowners.resolve(
        request.app,
        repo,
        {"@" + n for n in data["reviewers"]}
        | {f"@{repo['owner_username']}/{t}" for t in data["teamReviewers"]},
    )
    audience = await request.app[STORE].repos.audience(repo["id"])
    found = {u["username"].lower() for u in people.values()}
    missing = [n for n in data["reviewers"] if n.lower() not in found]
    if missing:
        raise ApiError("reviewers: no such user: " + ", ".join(missing), 422)
    readers = None if audience is None else audience.readers
    outside = [
        u["username"] for u in people.values() if readers is not None and u["id"] not in readers
    ]
    if outside:
        raise ApiError("reviewers: cannot read this repository: " + ", ".join(outside), 422)
    if item["author_id"] in people:
        raise ApiError(
            "reviewers: the author cannot review their own pull request: "
            + people[item["author_id"]]["username"],
            422,
        )
    names = {t["name"].lower() for t in teams.values()}
    unknown = [t for t in data["teamReviewers"] if t.lower() not in names]
    if unknown:
        raise ApiError(
            f"teamReviewers: no such team of {repo['owner_username']}: " + ", ".join(unknown), 422
        )
    return user, repo, item, people, teams, data


async def _answer(request: web.Request, repo: dict, item: dict, status: int) -> web.Response:
    row = await request.app[STORE].issues.get(repo["id"], item["number"], True)
    [body] = await pulls_for_caller(request, repo, [row or item])
    return json_response({"pullRequest": body}, status=status)


@routes.post(REQUESTS)
@doc(
    "Ask people and teams to review a pull request",
    body=ReviewRequestSchema,
    responses={201: PullEnvelopeSchema},
    errors=(400, 403, 404, 422),
    tag="pulls",
    description="The author or someone with triage access. Reviewers must exist, read the "
    "repository and not be the author; teams are the owning organization's (else 422 naming "
    "them). Each new request writes a pull_request event with action `review_requested` "
    "(requestedReviewer or requestedTeam): the inbox (reason review_requested), e-mail and "
    "chat notices follow from it. A review by the person answers their request.",
)
@requires("issues.write")
async def request_reviewers(request: web.Request) -> web.Response:
    user, repo, item, people, teams, _ = await _requested(request)
    if item["state"] != "open":
        raise ApiError("only an open pull request can be reviewed", 422)
    await codeowners.request_reviews(request.app, repo, item, user, people, teams)
    return await _answer(request, repo, item, 201)


@routes.delete(REQUESTS)
@doc(
    "Withdraw review requests",
    body=ReviewRequestSchema,
    responses={200: PullEnvelopeSchema},
    errors=(400, 403, 404, 422),
    tag="pulls",
    description="Each withdrawn request writes a pull_request event with action "
    "`review_request_removed`.",
)
@requires("issues.write")
async def remove_reviewers(request: web.Request) -> web.Response:
    _, repo, item, people, teams, _ = await _requested(request)
    base_url = request.app[CONFIG].base_url
    shown = present.pull(base_url, repo, item)

    def removed(result: tuple[list[int], list[int]]) -> list:
        users, team_ids = result
        return [
            event(
                request,
                repo,
                "pull_request",
                {
                    "action": "review_request_removed",
                    "pullRequest": shown,
                    "requestedReviewer": present.user_summary(base_url, people[u]),
                },
            )
            for u in users
        ] + [
            event(
                request,
                repo,
                "pull_request",
                {
                    "action": "review_request_removed",
                    "pullRequest": shown,
                    "requestedTeam": present.team_summary(teams[t]),
                },
            )
            for t in team_ids
        ]

    await request.app[STORE].reviews.withdraw(item["id"], list(people), list(teams), emit=removed)
    return await _answer(request, repo, item, 200)
