"""The security log's entries from a request, and the e-mails that tell an account owner.

A change that is a store write records its entry in its own transaction: the handler
passes `audit=entry(request, ...)` to the store method. What is no store write (a refused
sign-in) is recorded with `record(...)`: one call either way.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from ..clients import client_ip
from ..keys import AUTH, CONFIG, STORE
from ..notify.mail import MAILER
from ..store.seclog import Entry, Named

log = logging.getLogger("hubsvc.audit")

_ME: Any = object()  # actor default: the request's signed-in user


def named(user: dict[str, Any] | None) -> Named:
    """An account (user or organization) as an entry names it."""
    return None if user is None else (user["id"], user["username"])


def named_repo(repo: dict[str, Any]) -> Named:
    """A repository as an entry names it, "owner/name"."""
    return (repo["id"], f"{repo['owner_username']}/{repo['name']}")


def repo_owner(repo: dict[str, Any]) -> Named:
    """The account owning a repository: whose log (or organization's) its entries join."""
    return (repo["owner_id"], repo["owner_username"])


def entry(
    request: web.Request,
    action: str,
    *,
    actor: Any = _ME,
    user: dict[str, Any] | None = None,
    owner: dict[str, Any] | Named = None,
    repo: dict[str, Any] | None = None,
    data: dict[str, Any] | None = None,
) -> Entry:
    """An entry of action by the request's user (or actor), from its address and user agent.

    A repository's entry joins its owner's log (an organization's audit log, or the
    owning person's security log) unless owner says otherwise.
    """
    if actor is _ME:
        identity = request.get(AUTH)
        actor = identity.user if identity is not None else None
    if isinstance(owner, dict):
        owner = named(owner)
    if owner is None and repo is not None:
        owner = repo_owner(repo)
    return Entry(
        action,
        actor=named(actor),
        user=named(user),
        owner=owner,
        repo=None if repo is None else named_repo(repo),
        ip=client_ip(request) or None,
        user_agent=request.headers.get("User-Agent"),
        data=data or {},
    )


async def record(request: web.Request, action: str, **parts: Any) -> None:
    """Append an entry that goes with no store write (the arguments are entry's)."""
    await request.app[STORE].audit.record([entry(request, action, **parts)])


async def notify_user(app: web.Application, user: dict[str, Any], subject: str, what: str) -> None:
    """E-mail an account's owner that something happened to their account's security."""
    config = app[CONFIG]
    body = (
        f"Hello {user.get('name') or user['username']},\n\n"
        f"{what}\n\n"
        f"Account: {user['username']} on {config.base_url}\n"
        f"Your security log: {config.base_url}/api/users/me/security-log\n\n"
        "If this was not you, change your password now: that ends every session and token.\n"
    )
    try:
        # Queued: a failure is retried and shows in GET /api/admin/deliveries.
        await app[MAILER].send(user["email"], f"[hubsvc] {subject}", body)
    except Exception as exc:  # the change it tells of is done; a lost e-mail must not undo it
        log.warning("could not e-mail user %s: %s: %s", user["id"], type(exc).__name__, exc)


async def sign_in_notice(
    request: web.Request, user: dict[str, Any], first: bool, seen_here: bool
) -> None:
    """After a sign-in: an e-mail when it came from an address this account never used
    (not on its first sign-in, which has no earlier address to differ from)."""
    if first or seen_here:
        return
    agent = request.headers.get("User-Agent", "an unknown client")
    await notify_user(
        request.app,
        user,
        "New sign-in to your account",
        f"Your account was signed in to from a new address: {client_ip(request)} ({agent}).",
    )


def when(entry_: Entry) -> Any:
    """audit= for a store write that answers whether it changed anything: the entry only then."""
    return lambda changed: entry_ if changed else None
