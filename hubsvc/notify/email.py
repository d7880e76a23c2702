"""E-mail notifications: an issue assigned to you, or @you in an issue, pull request or comment.

A durable consumer of the event log (cursor `email-notify`): each event is read once,
after a restart too, and its messages go to the mail queue, which retries them and shows
failures in GET /api/admin/deliveries. Only users who may read the repository now, whose
`notifications.email` preference is on, and who did not cause the event get one.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from aiohttp import web

from ..events.shape import Event
from ..keys import CONFIG, STORE
from .concern import concerned
from .leader import LEADER, consumer
from .mail import MAILER

log = logging.getLogger("hubsvc.notify.email")
CURSOR = "email-notify"


class EmailNotifier:
    """Turns events into e-mails for the people they concern."""

    def __init__(self, app: web.Application) -> None:
        self.app = app

    async def on_event(self, event: Event) -> None:
        item, people = await concerned(self.app[STORE], event, "email")
        if item is None:
            return  # it names nobody
        owner, name = event.repository["owner"], event.repository["name"]
        repo = f"{owner}/{name}"
        messages = []
        # The link is built here from the event's place, never taken from its data.
        link = item and self.app[CONFIG].base_url.issue(
            owner, name, int(item["number"]), pull=event.type == "pull_request"
        )
        for user, reason in people:
            if not user.get("email"):
                continue
            subject = f"[{repo}] {item['title']} (#{item['number']})"
            body = (
                f"{reason} by {event.actor['username'] if event.actor else 'someone'} "
                f"in {repo}.\n\n{item['title']}\n{link}\n\n"
                "You get this because notifications.email is on in your preferences.\n"
            )
            messages.append((user["email"], subject, body))
        if messages:
            # Queued with the mark, so a restart neither loses nor repeats one. Events that
            # mail no one need no mark: read again after a restart, they still mail no one.
            await self.app[MAILER].send_all(messages, (CURSOR, int(event.id)))


async def email_ctx(app: web.Application) -> AsyncIterator[None]:
    """Read the log for e-mail notifications on the lease holder, from where it stopped."""
    app[LEADER].add(consumer(app, CURSOR, EmailNotifier(app).on_event))
    yield
