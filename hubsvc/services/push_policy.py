"""Whether a push's ref updates may land, decided when git is about to move the refs.

A push is checked when it starts (info/refs, the POST), but its body may take minutes to
arrive: git's pre-receive hook asks again once the pack is in (hookcall.py), and this
answers with the credential, the pusher's grant, the token's limits and the branch rules
as they are then, not as they were when the push began.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from ..identity import Grant
from ..keys import STORE
from ..policy import Caps, decide
from ..web.permissions import allows, role_of
from .protection import ref_problems

# How a push's credential is found again: a personal access token or a sign-in token by
# its digest, a password by the account's password hash it was checked against.
TOKEN, SESSION, PASSWORD = "token", "session", "password"


@dataclass(frozen=True)
class Pusher:
    """Who pushes, with the credential the push's request proved."""

    user_id: int
    credential: str  # TOKEN, SESSION or PASSWORD; anything else pushes nothing
    digest: bytes | None = None  # a token's
    password_hash: str | None = None  # the hash the password matched


async def _credential(app: web.Application, pusher: Pusher) -> tuple[dict[str, Any], Grant | None]:
    """The pusher's account and token grant now; raises _Refused when the credential ended."""
    users = app[STORE].users
    if pusher.credential == TOKEN and pusher.digest is not None:
        found = await users.personal_token_owner(pusher.digest)
        if found is None or found[0]["id"] != pusher.user_id:
            raise _Refused(
                "this personal access token no longer works (deleted, expired, or its "
                "account disabled)"
            )
        return found[0], found[2]
    if pusher.credential == SESSION and pusher.digest is not None:
        session = await users.token_owner(pusher.digest)
        if session is None or session[0]["id"] != pusher.user_id:
            raise _Refused("this sign-in has ended")
        return session[0], None
    if pusher.credential == PASSWORD and pusher.password_hash is not None:
        user = await users.by_id(pusher.user_id)
        if user is None or user["password_hash"] != pusher.password_hash:
            raise _Refused("this account is gone or its password changed")
        return user, None
    raise _Refused("this credential cannot push")


class _Refused(Exception):
    """The push is refused for the one reason given."""


async def decide_push(
    app: web.Application,
    pusher: Pusher | None,
    repo_id: int,
    updates: list[tuple[str, str, str]],
    is_ancestor: Callable[[str, str], Awaitable[bool]],
) -> list[str]:
    """Why these ref updates may not land now (one line each, git prints them); [] lets them.

    is_ancestor(old, new) answers over the push's quarantined objects.
    """
    if pusher is None:
        return ["push refused: authentication required"]
    try:
        user, grant = await _credential(app, pusher)
    except _Refused as exc:
        return [f"push refused: {exc}"]
    if user["disabled"]:
        return ["push refused: this account is disabled"]
    repo = await app[STORE].repos.by_id(repo_id, user["id"])
    if repo is None:
        return ["push refused: the repository no longer exists"]
    full_name = f"{repo['owner_username']}/{repo['name']}"
    role = role_of(repo, user)
    if not allows(role, "write"):
        return [f"push refused: {user['username']} has no write access to {full_name}"]
    if pusher.credential == TOKEN:
        # The one policy, with the token's scopes and repositories as they are now.
        caps = Caps(
            "pat",
            grant.scopes if grant is not None else None,
            grant.repositories if grant is not None else None,
        )
        decision = decide(caps, "git.write", repo_id, full_name)
        if not decision.ok:
            return [f"push refused: {decision.reason}"]
    rules = await app[STORE].protection.rules(repo_id)
    return await ref_problems(rules, role, updates, is_ancestor)
