"""Scopes of personal access tokens: which one each route needs, and the check."""

from __future__ import annotations

import re

from aiohttp import web

from ..errors import Forbidden
from ..identity import Grant
from .botscope import route_template

# GitHub's fine-grained tokens and Gitea's scoped ones, folded into this API's areas:
# repo (contents, git, the repository and its settings), issues (issues and pull
# requests), statuses, org, user, and admin. Write implies read.
AREAS = ("repo", "issues", "statuses", "org", "user")
SCOPES = tuple(f"{area}:{level}" for area in AREAS for level in ("read", "write")) + ("admin",)
_REPO = "/api/repositories/{owner}/{name}"
_STATUS_ROUTE = re.compile(
    r"^/api/repositories/\{owner\}/\{name\}/(statuses/|commits/[^/]+/status)"
)
# Readable without any scope, as GitHub's token metadata is.
_OPEN = frozenset(
    {"/health", "/api/openapi.json", "/api/docs", "/api/docs/init.js", "/", "/ui/{file}"}
)
# Answers that span repositories: a token limited to some repositories may not use them.
_ACROSS = frozenset({"/api/search", "/api/events", "/ws"})
GIT_ROUTE = re.compile(r"^/\{owner\}/\{name\}/")


def area_of(template: str) -> str:
    """The area a route template belongs to."""
    if template.startswith("/api/admin/"):
        return "admin"
    if template.startswith("/api/orgs"):
        return "org"
    if _STATUS_ROUTE.match(template):
        return "statuses"
    if template.startswith((_REPO + "/issues", _REPO + "/pulls")):
        # Merging writes the base branch: the repository's contents.
        return "repo" if template.endswith("/merge") else "issues"
    if template.startswith(("/api/repositories", "/api/webhooks/")) or template in _ACROSS:
        return "repo"
    if GIT_ROUTE.match(template):
        return "repo"
    return "user"


def scope_for(method: str, template: str) -> str | None:
    """The scope a request needs (None: none), by its route template and method."""
    if template in _OPEN or template.startswith("/api/docs/"):
        return None
    area = area_of(template)
    if area == "admin":
        return "admin"
    if GIT_ROUTE.match(template):
        # A fetch POSTs too; only receive-pack writes (smart HTTP checks info/refs by service).
        return "repo:write" if template.endswith("/git-receive-pack") else "repo:read"
    write = method not in ("GET", "HEAD", "OPTIONS")
    return f"{area}:{'write' if write else 'read'}"


def allows(grant: Grant, scope: str) -> bool:
    """Whether the grant holds scope (a write scope holds its read one)."""
    return scope in grant.scopes or (
        scope.endswith(":read") and scope[: -len("read")] + "write" in grant.scopes
    )


def check_grant(request: web.Request, grant: Grant, need: str | None = None) -> None:
    """403 naming what a scoped token lacks for this request; need overrides the route's."""
    template = route_template(request)
    if template is None:
        return
    scope = need or scope_for(request.method, template)
    if scope is not None and not allows(grant, scope):
        raise Forbidden(f"this personal access token lacks the {scope} scope")
    if grant.repositories is None:
        return
    if template in _ACROSS:
        raise Forbidden("this personal access token is limited to named repositories")
    owner, name = request.match_info.get("owner"), request.match_info.get("name")
    if owner is not None and name is not None:
        name = name[:-4] if name.lower().endswith(".git") else name
        if f"{owner}/{name}".lower() not in grant.repositories:
            raise Forbidden(f"this personal access token is not for {owner}/{name}")
