"""Who may do what to a repository: the one place that decides."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from aiohttp import web

from ..errors import Forbidden, NotFound
from ..keys import AUTH, STORE
from ..policy import Caps, action_of, decide, decide_action, readable
from ..store.access import LEVELS, Readable, role_named
from .auth import caps_of, current_user
from .names import path_username


def role_of(repo: dict[str, Any], user: dict[str, Any] | None) -> str | None:
    """owner, admin, maintain, write, triage or read; None when the user may not even read.

    repo["access"] is the viewer's level as store/access computes it, the one place.
    """
    return role_named(
        repo.get("access") if user is not None else None, repo["visibility"] == "public"
    )


def allows(role: str | None, need: str) -> bool:
    """Whether role reaches the level need."""
    return role is not None and LEVELS[role] >= LEVELS[need]


async def load_repo(
    request: web.Request,
    need: str = "read",
    owner: str | None = None,
    name: str | None = None,
    action: str | None = None,
) -> dict[str, Any]:
    """The repository of the path, checked: 404 if unreadable, 403 if readable but not enough.

    Enough is the user's role reaching need and the credential allowing action on this
    repository (the policy: scopes, a token's repositories by id); action defaults to
    the one the route declares. A repository named in a body is checked the same way.

    A renamed repository's old name still finds it: an API path answers 301 (308 for
    methods with a body) to the new one, a name given otherwise (git URLs, bodies) is
    followed silently. Either only for callers who may read it.
    """
    from_path = owner is None and name is None
    owner = path_username(request, owner if owner is not None else request.match_info["owner"])
    name = name if name is not None else request.match_info["name"]
    caps = caps_of(request.get(AUTH))
    repo, renamed = await find_repo(request.app[STORE], current_user(request), caps, owner, name)
    if renamed and from_path and request.path.startswith("/api/repositories/"):
        raise _moved(request, repo)
    return checked(repo, caps, action or action_of(request.match_info.handler) or "repo.read", need)


def role_for(repo: dict[str, Any], user: dict[str, Any] | None, caps: Caps | None) -> str | None:
    """The role a principal holds on repo: its user's, or a deploy key's on its one repository."""
    if caps is not None and caps.kind == "deploykey":
        # A deploy key has no user: its repository is all it reaches, public or not.
        if not caps.covers(repo["id"]):
            return None
        return "write" if caps.allows_scope("repo:write") else "read"
    return role_of(repo, user)


async def find_repo(
    store: Any, user: dict[str, Any] | None, caps: Caps | None, owner: str, name: str
) -> tuple[dict[str, Any], bool]:
    """The repository owner/name (or by a former name: renamed True) the principal may read.

    Request-free, so git over SSH asks exactly what HTTP does; 404 for missing and
    unreadable alike, so existence never leaks.
    """
    repos = store.repos
    viewer = user["id"] if user else 0
    repo = await repos.by_name(owner, name, viewer)
    renamed = False
    if repo is None:
        repo = await repos.by_old_name(owner, name, viewer)
        renamed = repo is not None
    role = role_for(repo, user, caps) if repo is not None else None
    if repo is None or role is None:
        raise NotFound("repository not found")
    repo["role"] = role
    return repo, renamed


def checked(repo: dict[str, Any], caps: Caps | None, action: str, need: str) -> dict[str, Any]:
    """repo, once the credential may take action on it and the role reaches need (else 403)."""
    decision = decide(caps, action, repo["id"], f"{repo['owner_username']}/{repo['name']}")
    if not decision.ok:
        raise Forbidden(decision.reason)
    if not allows(repo["role"], need):
        raise Forbidden(f"{need} access to this repository is required")
    return repo


def check_repo(request: web.Request, repo: dict[str, Any], action: str | None = None) -> None:
    """403 unless the credential may take action (default: the route's) on this repository."""
    decision = decide(
        caps_of(request.get(AUTH)),
        action or action_of(request.match_info.handler) or "repo.read",
        repo["id"],
        f"{repo['owner_username']}/{repo['name']}",
    )
    if not decision.ok:
        raise Forbidden(decision.reason)


def readable_by(request: web.Request) -> Readable | None:
    """What the request's credential lets a list, the feed or search hold (None: all its
    user may read); the store narrows its queries by it."""
    return readable(caps_of(request.get(AUTH)))


def check_action(request: web.Request, action: str) -> None:
    """403 naming what the credential lacks for an action beyond the route's own."""
    decision = decide_action(caps_of(request.get(AUTH)), action)
    if not decision.ok:
        raise Forbidden(decision.reason)


def _moved(request: web.Request, repo: dict[str, Any]) -> web.HTTPException:
    """A redirect from an old repository path to the same path under the current name."""
    parts = request.rel_url.raw_path.split("/")
    # /api/repositories/{owner}/{name}/… : the owner and name are the 4th and 5th parts.
    parts[3:5] = [quote(repo["owner_username"], safe=""), quote(repo["name"], safe="")]
    location = "/".join(parts)
    if request.rel_url.raw_query_string:
        location += "?" + request.rel_url.raw_query_string
    if request.method in ("GET", "HEAD"):
        return web.HTTPMovedPermanently(location)
    return web.HTTPPermanentRedirect(location)
