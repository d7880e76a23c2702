"""Direct messages: the notices the service queues for linked users, sent one at a time.

`Pump` long-polls GET /api/chat/notifications with the bot key, hands each notice to the
front end's `send`, then acknowledges through the last one handled: each notice is sent
at least once (one sent just before the bot stopped, unacknowledged, is sent again).
`send` raises Undeliverable when trying again cannot help (the user closed their direct
messages, the chat id is no user of this platform): that notice is logged and
acknowledged. Any other failure is tried again after a growing pause, in order, up to
MAX_TRIES times.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from .calls import Reply
from .client import ApiClient, ServiceError, Unreachable

log = logging.getLogger("hubsvc.bot.notices")

PATH = "/api/chat/notifications"
WAIT = 20  # seconds a poll waits at the service: inside the client's 30 s timeout
LIMIT = 50
MAX_TRIES = 10
PAUSE, PAUSE_MAX = 2.0, 300.0  # after a failure, doubling up to five minutes

Send = Callable[[dict[str, Any]], Awaitable[None]]


class Undeliverable(Exception):
    """This notice can never be sent to its chat user; it is dropped."""


def notice_reply(notice: dict[str, Any]) -> Reply:
    """The message of a notice, for any front end."""
    repo = f"{notice['repository']['owner']}/{notice['repository']['name']}"
    reason = notice["reason"]
    by = f" by {notice['actor']}" if notice.get("actor") else ""
    return Reply(
        title=f"{repo}#{notice['number']} {notice['title']}",
        description=f"{reason[:1].upper()}{reason[1:]}{by} in {repo}.",
        url=notice["url"],
        private=True,
        footer="You get this because notifications.chat is on in your settings.",
    )


class Pump:
    """Fetches notices, sends each through `send`, acknowledges the ones handled."""

    def __init__(
        self,
        api: ApiClient,
        send: Send,
        *,
        wait: int = WAIT,
        limit: int = LIMIT,
        pause: float = PAUSE,
    ) -> None:
        self.api, self.send = api, send
        self.wait, self.limit, self.pause = wait, limit, pause
        self.handled = self.acked = 0  # notice ids: sent or given up / acknowledged
        self.tries: dict[int, int] = {}

    async def run(self) -> None:
        """Deliver until cancelled, pausing longer after each failure in a row."""
        failures = 0
        while True:
            retry_after = None
            try:
                if await self.run_once():
                    failures = 0
                    continue
            except (ServiceError, Unreachable) as exc:
                log.warning("chat notices: the service failed: %s", exc)
                retry_after = getattr(exc, "retry_after", None)
            except Exception:
                log.exception("chat notices: unexpected failure")
            failures += 1
            await asyncio.sleep(retry_after or min(PAUSE_MAX, self.pause * 2 ** (failures - 1)))

    async def run_once(self) -> bool:
        """One poll: send what came, acknowledge it; False when a send must be retried."""
        await self.acknowledge()
        page = await self.api.request("GET", PATH, params={"limit": self.limit, "wait": self.wait})
        done = await self.deliver(page["notifications"])
        await self.acknowledge()
        return done

    async def deliver(self, notices: list[dict[str, Any]]) -> bool:
        """Send notices in order; stop at the first that should be tried again."""
        for notice in notices:
            try:
                await self.send(notice)
            except asyncio.CancelledError:
                raise
            except Undeliverable as exc:
                log.info(
                    "chat notice %s to chat user %s cannot be delivered: %s",
                    notice["id"],
                    notice["chatId"],
                    exc,
                )
            except Exception as exc:
                tries = self.tries.get(notice["id"], 0) + 1
                if tries < MAX_TRIES:
                    self.tries[notice["id"]] = tries
                    log.warning(
                        "chat notice %s: sending failed (try %d of %d): %s: %s",
                        notice["id"],
                        tries,
                        MAX_TRIES,
                        type(exc).__name__,
                        exc,
                    )
                    return False
                log.error(
                    "chat notice %s: given up after %d tries: %s: %s",
                    notice["id"],
                    tries,
                    type(exc).__name__,
                    exc,
                )
            self.tries.pop(notice["id"], None)
            self.handled = notice["id"]
        return True

    async def acknowledge(self) -> None:
        """Tell the service what was handled (kept to retry when the service fails)."""
        if self.handled <= self.acked:
            return
        try:
            await self.api.request("POST", PATH + "/ack", body={"through": self.handled})
        except ServiceError as exc:
            if exc.status in (401, 429) or exc.status >= 500:
                raise
            # Refused for good (the service has no such notice): asking again cannot help.
            log.error("chat notices: acknowledging through %s was refused: %s", self.handled, exc)
        self.acked = self.handled
