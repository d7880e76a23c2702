"""A cap on the git processes serving smart HTTP at once, in total and per client."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from aiohttp import web

from ..clients import client_group
from ..errors import Unavailable
from ..keys import CONFIG

log = logging.getLogger("hubsvc.git")
RETRY_AFTER = 2


class GitSlots:
    """Counts running git processes; a request past either cap is refused, not queued."""

    def __init__(self, total: int, per_client: int) -> None:
        self.total = total
        self.per_client = per_client
        self.running = 0
        self._by_client: dict[str, int] = {}

    def try_acquire(self, client: str) -> bool:
        """Take a slot for client, or False when the server or the client is at its cap."""
        mine = self._by_client.get(client, 0)
        if self.running >= self.total or mine >= self.per_client:
            return False
        self.running += 1
        self._by_client[client] = mine + 1
        return True

    def release(self, client: str) -> None:
        """Give back a slot taken by try_acquire."""
        self.running -= 1
        left = self._by_client[client] - 1
        if left:
            self._by_client[client] = left
        else:
            del self._by_client[client]  # so the table holds only clients with git running


GIT_SLOTS = web.AppKey("git_slots", GitSlots)


def make_slots(app: web.Application) -> None:
    """Create the limiter from [server] git_processes and git_processes_per_client."""
    server = app[CONFIG]["server"]
    app[GIT_SLOTS] = GitSlots(server["git_processes"], server["git_processes_per_client"])


@contextlib.contextmanager
def git_slot(request: web.Request) -> Iterator[None]:
    """Hold a git slot for the block; 503 with Retry-After when none is free."""
    with held_slot(request.app, client_group(request)):
        yield


@contextlib.contextmanager
def held_slot(app: web.Application, client: str) -> Iterator[None]:
    """Hold one of app's git slots for client (any transport); Unavailable when none is free."""
    slots = app[GIT_SLOTS]
    if not slots.try_acquire(client):
        # Refusing at once, rather than queueing, keeps a burst from holding sockets and
        # memory for work that would run minutes later; git retries on the user's word.
        cap = (
            "server.git_processes_per_client"
            if slots.running < slots.total
            else "server.git_processes"
        )
        log.warning("refused a git request from %s: %s reached", client, cap)
        error = Unavailable("too many git operations at once, try again shortly")
        error.headers["Retry-After"] = str(RETRY_AFTER)
        raise error
    try:
        yield
    finally:
        slots.release(client)
