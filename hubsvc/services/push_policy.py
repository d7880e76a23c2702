"""Whether a push's ref updates may land, decided when git is about to move the refs.

A push is checked when it starts (info/refs, the POST), but its body may take minutes to
arrive: git's pre-receive hook asks again once the pack is in (push_hooks.py), and this
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
# its digest, a password by the account's password hash it was checked against, an SSH
# key (a user's, or a repository's deploy key) by its fingerprint.
TOKEN, SESSION, PASSWORD = "token", "session", "password"
SSHKEY, DEPLOYKEY = "sshkey", "deploykey"
# GitHub's words, which users of deploy keys know.
READ_ONLY_KEY = "ERROR: The key you are authenticating with has been marked as read only."


@dataclass(frozen=True)
class Pusher:
    """Who pushes, with the credential the push's request proved."""

    user_id: int  # 0 for a deploy key, which has no user
    credential: str  # TOKEN, SESSION, PASSWORD, SSHKEY or DEPLOYKEY; else pushes nothing
    digest: bytes | None = None  # a token's
    password_hash: str | None = None  # the hash the password matched
    fingerprint: str | None = None  # an SSH key's


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
    if pusher.credential == SSHKEY and pusher.fingerprint is not None:
        key = await app[STORE].keys.by_fingerprint(pusher.fingerprint)
        if key is None or key["user_id"] != pusher.user_id:
            raise _Refused("this SSH key was removed")
        user = await users.by_id(pusher.user_id)
        if user is None:
            raise _Refused("this account is gone")
        return user, None
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
    if pusher.credential == DEPLOYKEY:
        return await _deploy_key_push(app, pusher, repo_id, updates, is_ancestor)
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


async def _deploy_key_push(
    app: web.Application,
    pusher: Pusher,
    repo_id: int,
    updates: list[tuple[str, str, str]],
    is_ancestor: Callable[[str, str], Awaitable[bool]],
) -> list[str]:
    """A deploy key's push: its one repository, while it exists and may write; then the rules."""
    key = await app[STORE].keys.by_fingerprint(pusher.fingerprint or "")
    if key is None or key["repo_id"] != repo_id:
        return ["push refused: this deploy key was removed"]
    if key["read_only"]:
        return [READ_ONLY_KEY]
    caps = Caps("deploykey", frozenset({"repo:write"}), frozenset({repo_id}))
    decision = decide(caps, "git.write", repo_id, str(repo_id))
    if not decision.ok:
        return [f"push refused: {decision.reason}"]
    rules = await app[STORE].protection.rules(repo_id)
    return await ref_problems(rules, "write", updates, is_ancestor)
