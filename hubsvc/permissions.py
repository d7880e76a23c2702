"""Who may do what to a repository: the one place that decides."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .auth import current_user
from .errors import Forbidden, NotFound
from .keys import STORE

LEVELS = {"read": 1, "write": 2, "admin": 3, "owner": 4}


def role_of(repo: dict[str, Any], user: dict[str, Any] | None) -> str | None:
    """owner, admin, write or read; None when the user may not even read."""
    if user is not None and repo["owner_id"] == user["id"]:
        return "owner"
    if user is not None and repo.get("collaborator"):
        return repo["collaborator"]
    return "read" if repo["visibility"] == "public" else None


def allows(role: str | None, need: str) -> bool:
    """Whether role reaches the level need."""
    return role is not None and LEVELS[role] >= LEVELS[need]


async def load_repo(request: web.Request, need: str = "read", owner: str | None = None,
                    name: str | None = None) -> dict[str, Any]:
    """The repository of the path, checked: 404 if unreadable, 403 if readable but not enough."""
    user = current_user(request)
    owner = owner if owner is not None else request.match_info["owner"]
    name = name if name is not None else request.match_info["name"]
    repo = await request.app[STORE].repos.by_name(owner, name, user["id"] if user else 0)
    role = role_of(repo, user) if repo is not None else None
    if role is None:
        # Missing and private-but-unreadable look the same, so existence never leaks.
        raise NotFound("repository not found")
    if not allows(role, need):
        raise Forbidden(f"{need} access to this repository is required")
    repo["role"] = role
    return repo
