"""Commit statuses from CI: posted by writers and their tokens, read by readers."""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from schemas.common import PageQuerySchema
from schemas.statuses import (
    CombinedStatusEnvelopeSchema,
    CommitStatusCreateSchema,
    CommitStatusEnvelopeSchema,
    CommitStatusListSchema,
)

from ..errors import NotFound
from ..git.files import REPO_FILES
from ..keys import CONFIG, STORE
from ..policy import requires
from ..services.publish import event
from ..store.statuses import combined
from ..web import present
from ..web.auth import require_user
from ..web.openapi import doc
from ..web.permissions import load_repo
from ..web.rest import json_response, read_json, read_query, shared

routes = web.RouteTableDef()
REPO = "/api/repositories/{owner}/{name}"
_SHA = re.compile(r"^[0-9a-f]{40}$")


def status_json(base_url: str, row: dict[str, Any]) -> dict[str, Any]:
    """A status as the API shows it."""
    return {
        "id": str(row["id"]),
        "state": row["state"],
        "context": row["context"],
        "targetUrl": row["target_url"],
        "description": row["description"],
        "creator": present._person(base_url, row, "creator", "creator_id"),
        "createdAt": row["created_at"],
        "updatedAt": row["created_at"],
    }


async def _commit(request: web.Request, repo: dict, rev: str) -> str:
    """The commit a ref names in the repository, else 404."""
    oid = await request.app[REPO_FILES].run(repo["id"], lambda g: g.resolve(rev))
    if oid is None:
        raise NotFound("no such commit")
    return oid


@routes.post(REPO + "/statuses/{sha}")
@doc(
    "Set a commit's status for a context (CI), as GitHub's",
    body=CommitStatusCreateSchema,
    responses={201: CommitStatusEnvelopeSchema},
    errors=(400, 403, 404),
    tag="statuses",
    description="Writers of the repository, and their personal access tokens (the "
    "`statuses:write` scope is enough). `:sha` is a full commit id of the repository (else "
    "404). Statuses are kept per commit and context, the latest counting; past 1,000 for "
    "one commit and context the oldest goes. Writes a `status` event.",
)
@requires("statuses.write")
async def create_status(request: web.Request) -> web.Response:
    user = require_user(request)
    repo = await load_repo(request, "write")
    sha = request.match_info["sha"].lower()
    data = await read_json(request, CommitStatusCreateSchema())
    if not _SHA.match(sha) or await _commit(request, repo, sha) != sha:
        raise NotFound("no such commit")
    base = request.app[CONFIG].base_url
    row = await request.app[STORE].statuses.add(
        repo["id"],
        sha,
        data["state"],
        data["context"],
        data["targetUrl"],
        data["description"],
        user["id"],
        emit=lambda row: [event(request, repo, "status", {"sha": sha, **status_json(base, row)})],
    )
    return json_response({"status": status_json(base, row)}, status=201)


@routes.get(REPO + "/commits/{ref}/statuses")
@doc(
    "A commit's statuses, newest first",
    query=PageQuerySchema,
    responses={200: CommitStatusListSchema},
    errors=(404,),
    public=True,
    tag="statuses",
    description="`:ref` is a branch, a tag or a commit id.",
)
@requires("statuses.read")
async def list_statuses(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    page = read_query(request, shared(PageQuerySchema))
    sha = await _commit(request, repo, request.match_info["ref"])
    rows, more = await request.app[STORE].statuses.page(
        repo["id"], sha, page["limit"], page["offset"]
    )
    base = request.app[CONFIG].base_url
    return json_response({"statuses": [status_json(base, r) for r in rows], "hasMore": more})


@routes.get(REPO + "/commits/{ref}/status")
@doc(
    "A commit's combined status: the latest status of each context",
    responses={200: CombinedStatusEnvelopeSchema},
    errors=(404,),
    public=True,
    tag="statuses",
    description="`:ref` is a branch, a tag or a commit id. state is failure when a latest "
    "status is failure or error, pending when one is pending or there is none, else "
    "success, as GitHub combines them.",
)
@requires("statuses.read")
async def combined_status(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    sha = await _commit(request, repo, request.match_info["ref"])
    rows = await request.app[STORE].statuses.latest(repo["id"], sha)
    base = request.app[CONFIG].base_url
    return json_response(
        {
            "status": {
                "state": combined([r["state"] for r in rows]),
                "sha": sha,
                "totalCount": len(rows),
                "statuses": [status_json(base, r) for r in rows],
            }
        }
    )
