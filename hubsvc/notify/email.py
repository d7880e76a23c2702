"""E-mail notifications: an issue assigned to you, or @you in an issue, pull request or comment.

A durable consumer of the event log (cursor `email-notify`): each event is read once,
after a restart too, and its messages go to the mail queue, which retries them and shows
failures in GET /api/admin/deliveries. Only users who may read the repository now, whose
`notifications.email` preference is on, and who did not cause the event get one.
"""

from __future__ import annotations

import logging
import re
from typing import Any, AsyncIterator

from aiohttp import web

from ..events import Event
from ..keys import BUS, STORE
from ..mail import MAILER
from ..present import preferences

log = logging.getLogger("hubsvc.notify.email")
CURSOR = "email-notify"
MENTION = re.compile(r"(?<![\w@/.])@([A-Za-z0-9](?:[A-Za-z0-9_.-]{0,38}[A-Za-z0-9])?)")
MAX_MENTIONS = 20  # a message naming hundreds of people mails none past this


def mentions(*texts: str | None) -> list[str]:
    """The @usernames in the texts, in order, once each (case kept as written)."""
    seen: dict[str, str] = {}
    for text in texts:
        for name in MENTION.findall(text or ""):
            seen.setdefault(name.lower(), name)
    return list(seen.values())[:MAX_MENTIONS]


def _reasons(event: Event) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """The issue or pull request of an event, and {username: why} for whom to tell."""
    data = event.data
    item = data.get("issue") or data.get("pullRequest")
    if event.type not in ("issue", "pull_request") or not item:
        return None, {}
    action, why = data.get("action"), {}
    kind = "pull request" if event.type == "pull_request" else "issue"
    if action == "opened" or (action == "edited" and "assignees" in data.get("changes", ())):
        for person in item.get("assignees") or []:
            why[person["username"]] = f"you were assigned {kind} #{item['number']}"
    texts = [item.get("title"), item.get("body")] if action == "opened" else []
    if action == "commented":
        texts = [(data.get("comment") or {}).get("body")]
    for name in mentions(*texts):
        why.setdefault(name, f"you were mentioned in {kind} #{item['number']}")
    return item, why


class EmailNotifier:
    """Turns events into e-mails for the people they concern."""

    def __init__(self, app: web.Application) -> None:
        self.app = app

    async def on_event(self, event: Event) -> None:
        item, why = _reasons(event)
        if not why or event.repo_id is None:
            return
        store = self.app[STORE]
        actor = (event.actor or {}).get("username", "").lower()
        audience = await store.repos.audience(int(event.repo_id))
        users = await store.users.by_usernames([n for n in why if n.lower() != actor])
        repo = f"{event.repository['owner']}/{event.repository['name']}"
        reasons = {name.lower(): text for name, text in why.items()}
        sent = 0
        for user in users.values():
            if audience is None or (audience[0] is not None and user["id"] not in audience[0]):
                continue  # may not read the repository: no word of it
            if user.get("disabled") or not preferences(user)["notifications"]["email"] \
                    or not user.get("email"):
                continue
            reason = reasons[user["username"].lower()]
            subject = f"[{repo}] {item['title']} (#{item['number']})"
            body = (f"{reason} by {event.actor['username'] if event.actor else 'someone'} "
                    f"in {repo}.\n\n{item['title']}\n{item.get('url', '')}\n\n"
                    "You get this because notifications.email is on in your preferences.\n")
            await self.app[MAILER].send(user["email"], subject, body)
            sent += 1
        if sent:
            # Events that mailed no one need no mark: read again after a restart, they
            # still mail no one.
            await store.events.set_cursor(CURSOR, int(event.id))


async def email_ctx(app: web.Application) -> AsyncIterator[None]:
    """Read the log for e-mail notifications, from where the last run stopped."""
    store, notifier = app[STORE], EmailNotifier(app)
    cursor = await store.events.cursor(CURSOR)
    if cursor is None:
        cursor = app[BUS].last_id
        await store.events.set_cursor(CURSOR, cursor)
    unsubscribe = app[BUS].subscribe(notifier.on_event, name=CURSOR, after=cursor)
    yield
    unsubscribe()
