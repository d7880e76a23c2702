"""Protected branches: the rules, managed by the repository's admins, read by its readers."""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from schemas.protection import (
    ProtectionEnvelopeSchema,
    ProtectionUpdateSchema,
)

from ..errors import BadRequest, NotFound
from ..keys import STORE
from ..policy import requires
from ..services import audit
from ..web.auth import require_user
from ..web.openapi import doc
from ..web.permissions import load_repo
from ..web.rest import json_response, read_json

routes = web.RouteTableDef()
PROTECTION = "/api/repositories/{owner}/{name}/branches/{branch:.+}/protection"
# Safe in git's pre-receive hook (a sh `case` pattern): no spaces, quotes or newlines.
_PATTERN = re.compile(r"^(?![-/])[A-Za-z0-9._/*?-]{1,255}$")
WHO = (
    "`:branch` is a branch name or a glob (`*` and `?`; `*` matches `/` too), URL-encoded. "
    "Readers of the repository may read the rules (GitHub shows them to writers); its "
    "admins (owner or admin collaborators) set and remove them, others get 403."
)


def _pattern(request: web.Request) -> str:
    pattern = request.match_info["branch"]
    if not _PATTERN.match(pattern):
        raise BadRequest("branch: a name or glob of A-Z a-z 0-9 . _ / * ? - (1-255)")
    return pattern


def protection_json(rule: dict[str, Any]) -> dict[str, Any]:
    """A stored rule as the API shows it."""
    return {
        "pattern": rule["pattern"],
        "requiredStatusChecks": None
        if rule["contexts"] is None
        else {"strict": rule["strict"], "contexts": rule["contexts"]},
        "requiredPullRequestReviews": {
            "requiredApprovingReviewCount": rule["approvals"],
            "requireCodeOwnerReviews": rule["code_owner_reviews"],
        }
        if rule["require_pr"]
        else None,
        "enforceAdmins": rule["enforce_admins"],
        "allowForcePushes": rule["allow_force_pushes"],
        "allowDeletions": rule["allow_deletions"],
        "createdAt": rule["created_at"],
        "updatedAt": rule["updated_at"],
    }


@routes.put(PROTECTION)
@doc(
    "Protect the branches a name or pattern matches",
    body=ProtectionUpdateSchema,
    responses={200: ProtectionEnvelopeSchema},
    errors=(400, 403, 404, 409),
    tag="repositories",
    description=WHO + " With requiredPullRequestReviews, pushes to the branch are refused by git "
    "(`remote: main is protected: changes must go through a pull request`) and merges need "
    "that many approvals from writers; requiredStatusChecks lists contexts that must be "
    "`success` on the head (strict: the head contains the base). Force-pushes and "
    "deletion are refused unless allowed. The whole rule is replaced.",
)
@requires("repo.admin")
async def put_protection(request: web.Request) -> web.Response:
    require_user(request)
    repo = await load_repo(request, "admin")
    pattern = _pattern(request)
    data = await read_json(request, ProtectionUpdateSchema())
    checks, reviews = data["requiredStatusChecks"], data["requiredPullRequestReviews"]
    rule = await request.app[STORE].protection.put(
        repo["id"],
        pattern,
        {
            "require_pr": reviews is not None,
            "approvals": reviews["requiredApprovingReviewCount"] if reviews else 0,
            "code_owner_reviews": bool(reviews and reviews["requireCodeOwnerReviews"]),
            "contexts": sorted(set(checks["contexts"])) if checks else None,
            "strict": bool(checks and checks["strict"]),
            "enforce_admins": data["enforceAdmins"],
            "allow_force_pushes": data["allowForcePushes"],
            "allow_deletions": data["allowDeletions"],
        },
        audit=audit.entry(request, "repo.protection.set", repo=repo, data={"pattern": pattern}),
    )
    return json_response({"protection": protection_json(rule)})


@routes.get(PROTECTION)
@doc(
    "The protection rule of a branch name or pattern",
    responses={200: ProtectionEnvelopeSchema},
    errors=(400, 404),
    public=True,
    tag="repositories",
    description=WHO + " 404 when no rule has exactly this pattern.",
)
@requires("repo.read")
async def get_protection(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    rule = await request.app[STORE].protection.get(repo["id"], _pattern(request))
    if rule is None:
        raise NotFound("branch not protected")
    return json_response({"protection": protection_json(rule)})


@routes.delete(PROTECTION)
@doc(
    "Remove the protection rule of a branch name or pattern",
    responses={204: "removed"},
    errors=(400, 403, 404),
    tag="repositories",
    description=WHO,
)
@requires("repo.admin")
async def delete_protection(request: web.Request) -> web.Response:
    require_user(request)
    repo = await load_repo(request, "admin")
    pattern = _pattern(request)
    entry = audit.entry(request, "repo.protection.removed", repo=repo, data={"pattern": pattern})
    if not await request.app[STORE].protection.delete(repo["id"], pattern, audit=audit.when(entry)):
        raise NotFound("branch not protected")
    return web.Response(status=204)
