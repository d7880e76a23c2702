"""Chat direct messages: an issue assigned to you, or @you, for the bot to send to your chat.

A durable consumer of the event log (cursor `chat-notify`) writes a notice for each
person an event concerns (see concern.py) whose `notifications.chat` preference is on
and who has a verified chat link, in the transaction that moves its cursor: a restart
neither loses nor repeats one. The bot reads them (GET /api/chat/notifications, a long
poll) and acknowledges what it sent. What it is told is decided again when it asks: a
notice whose user has since unlinked, turned notifications.chat off, been disabled or
lost read access is dropped, never shown.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from ..events.shape import Event
from ..keys import BUS, CONFIG, STORE
from ..links import SiteUrl
from .concern import concerned, wants
from .leader import LEADER, consumer

CURSOR = "chat-notify"
RECHECK = 1.0


class Doorbell:
    """Wakes the long polls waiting for notices (in this process) when some are queued."""

    def __init__(self) -> None:
        self.rung = asyncio.Event()
        self.closed = False

    def ring(self) -> None:
        """Notices were queued: every poll waiting now looks again."""
        self.rung.set()
        self.rung = asyncio.Event()

    def close(self) -> None:
        """The server is stopping: waiting polls answer now, later ones do not wait."""
        self.closed = True
        self.ring()


CHAT_NOTICES = web.AppKey("chat_notices", Doorbell)


class ChatNotifier:
    """Turns events into queued chat notices for the people they concern."""

    def __init__(self, app: web.Application) -> None:
        self.app = app

    async def on_event(self, event: Event) -> None:
        item, people = await concerned(self.app[STORE], event, "chat")
        if item is None:
            return  # names nobody: no mark needed, read again it still names nobody
        actor = event.actor["username"] if event.actor else None
        notices = [
            {
                "user_id": user["id"],
                "repo_id": event.repo_number,
                "type": event.type,
                "number": item["number"],
                "title": item["title"],
                "reason": reason,
                "actor": actor,
                "created_at": event.createdAt,
            }
            for user, reason in people
        ]
        # The cursor moves even when nobody is owed a notice now (switched off, not
        # linked): after a restart, an old event must not reach someone who has since
        # switched on.
        if await self.app[STORE].chat_notices.queue(int(event.id), notices, CURSOR):
            self.app[CHAT_NOTICES].ring()


def _present(site: SiteUrl, row: dict[str, Any]) -> dict[str, Any]:
    """A notice as the bot gets it, under the repository's current name."""
    return {
        "id": row["id"],
        "chatId": row["chat_id"],
        "username": row["username"],
        "reason": row["reason"],
        "actor": row["actor"],
        "title": row["title"],
        "number": row["number"],
        "url": site.issue(
            row["owner"], row["repo_name"], row["number"], row["type"] == "pull_request"
        ),
        "repository": {"owner": row["owner"], "name": row["repo_name"]},
        "type": row["type"],
        "createdAt": row["created_at"],
    }


def deliverable(row: dict[str, Any]) -> bool:
    """Whether a queued notice may still go out: linked, switched on, allowed to read."""
    return row["chat_id"] is not None and row["readable"] and wants(row, "chat")


async def take(app: web.Application, limit: int) -> tuple[list[dict[str, Any]], bool]:
    """Up to limit deliverable notices, oldest first, and whether more are queued.

    Notices that may no longer go out are deleted on the way, so they never come back
    (not even when the user switches on again or links another account).
    """
    store, site = app[STORE], app[CONFIG].base_url
    after, found = 0, list[dict[str, Any]]()
    while True:
        rows, more = await store.chat_notices.pending(after, limit - len(found))
        gone = [r["id"] for r in rows if not deliverable(r)]
        if gone:
            await store.chat_notices.drop(gone)
        found += [_present(site, r) for r in rows if deliverable(r)]
        if not more or len(found) >= limit:
            return found, more
        after = rows[-1]["id"]


async def poll(app: web.Application, limit: int, wait: float) -> tuple[list[dict[str, Any]], bool]:
    """take(), waiting up to `wait` seconds for a notice when none is queued."""
    bell = app[CHAT_NOTICES]
    deadline = asyncio.get_running_loop().time() + wait
    while True:
        rung = bell.rung  # taken before reading: a notice queued meanwhile still wakes us
        notices, more = await take(app, limit)
        left = deadline - asyncio.get_running_loop().time()
        if notices or more or left <= 0 or bell.closed:
            return notices, more
        with contextlib.suppress(asyncio.TimeoutError):
            # The lease holder queues the notices, maybe in another process whose
            # doorbell this one does not hear: look again every RECHECK seconds too.
            await asyncio.wait_for(rung.wait(), min(left, RECHECK))


async def chat_dm_ctx(app: web.Application) -> AsyncIterator[None]:
    """Read the log for chat notices from where the last run stopped (with a bot key)."""
    events, head = app[STORE].events, app[BUS].last_id
    if not app[CONFIG]["chat"]["bot_key"]:
        # No bot can fetch them: queue nothing, and keep the mark at the end of the log
        # (at start and at stop), so a key configured later does not replay the past.
        await events.set_cursor(CURSOR, head)
        yield
        await events.set_cursor(CURSOR, app[BUS].last_id)
        return
    # On the lease holder only: each event is turned into notices once, not per process.
    app[LEADER].add(consumer(app, CURSOR, ChatNotifier(app).on_event))
    yield


async def wake_polls(app: web.Application) -> None:
    """On shutdown: long polls answer at once instead of holding the server's stop."""
    app[CHAT_NOTICES].close()
