"""Adding and removing SSH keys: the store's change, and the e-mail that tells the owner."""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from ..keys import CONFIG, STORE
from ..notify.mail import MAILER
from ..sshkeys import PublicKey
from ..tasks import BACKGROUND

log = logging.getLogger("hubsvc.keys")


def default_title(key: PublicKey) -> str:
    """A title for a key given none: its comment (as GitHub), else its kind."""
    # The comment is free text from the pasted line: it goes into lists and an e-mail.
    comment = " ".join("".join(c for c in key.comment if c.isprintable()).split())
    return (comment or key.kind)[:100]


async def add_user_key(
    app: web.Application, user: dict[str, Any], title: str, key: PublicKey
) -> dict[str, Any]:
    """Put a key on an account and e-mail its owner; KeyTaken when it is anywhere already."""
    row = await app[STORE].keys.add(title, key.line, key.fingerprint, user_id=user["id"])
    _mail(app, user, row, added=True)
    return row


async def remove_user_key(
    app: web.Application, user: dict[str, Any], key_id: int
) -> dict[str, Any] | None:
    """Take a key off an account and e-mail its owner; None when it is not theirs."""
    row = await app[STORE].keys.delete(key_id, user_id=user["id"])
    if row is not None:
        _mail(app, user, row, added=False)
    return row


async def add_deploy_key(
    app: web.Application, repo: dict[str, Any], title: str, key: PublicKey, read_only: bool
) -> dict[str, Any]:
    """Put a deploy key on a repository; KeyTaken when it is anywhere already."""
    return await app[STORE].keys.add(
        title, key.line, key.fingerprint, repo_id=repo["id"], read_only=read_only
    )


async def remove_deploy_key(
    app: web.Application, repo: dict[str, Any], key_id: int
) -> dict[str, Any] | None:
    """Take a deploy key off a repository; None when it is not one of its keys."""
    return await app[STORE].keys.delete(key_id, repo_id=repo["id"])


def _mail(app: web.Application, user: dict[str, Any], row: dict[str, Any], added: bool) -> None:
    # Off the request path, as the chat link's mail: the answer does not wait on SMTP.
    app[BACKGROUND].spawn(_send(app, user, row, added))


async def _send(
    app: web.Application, user: dict[str, Any], row: dict[str, Any], added: bool
) -> None:
    """E-mail the account's owner that a key was added or removed."""
    base = app[CONFIG].base_url
    if added:
        subject = "A new SSH key was added to your account"
        what = "was added to"
        advice = (
            "If you did not add it, remove it now in your account's keys and change your "
            "password: whoever added it can read and push your repositories over SSH."
        )
    else:
        subject = "An SSH key was removed from your account"
        what = "was removed from"
        advice = "If you did not remove it, change your password."
    body = (
        f"Hello {user['name'] or user['username']},\n\n"
        f'The SSH key "{row["title"]}" ({row["fingerprint"]}) {what} your account '
        f'"{user["username"]}" on {base}.\n\n{advice}\n'
    )
    try:
        # Queued: a failure is retried and shows in GET /api/admin/deliveries.
        await app[MAILER].send(user["email"], subject, body)
    except Exception as exc:
        log.warning(
            "could not send the key e-mail to user %s: %s: %s", user["id"], type(exc).__name__, exc
        )
