"""The in-process event bus and the one event shape shared by bus, webhook and WebSocket."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from .timeutil import now_iso

log = logging.getLogger("hubsvc.events")

EVENT_TYPES = ("issue", "pull_request", "push", "star", "fork")


@dataclass(frozen=True)
class Event:
    """{id, type, repository: {owner, name}, actor, data, createdAt}; action in data."""

    type: str
    repository: dict[str, str]
    actor: dict[str, Any] | None
    data: dict[str, Any]
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    createdAt: str = field(default_factory=now_iso)
    # Not part of the JSON shape: the repository's id, so subscribers can check access.
    repo_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON-ready data."""
        return {
            "id": self.id,
            "type": self.type,
            "repository": self.repository,
            "actor": self.actor,
            "data": self.data,
            "createdAt": self.createdAt,
        }


Handler = Callable[[Event], Awaitable[None]]


class _Subscriber:
    def __init__(self, name: str, handler: Handler, maxsize: int) -> None:
        self.name = name
        self.handler = handler
        self.queue: asyncio.Queue[Event] = asyncio.Queue(maxsize)
        self.task: asyncio.Task | None = None
        self.dropped = 0

    async def run(self) -> None:
        while True:
            event = await self.queue.get()
            try:
                await self.handler(event)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("subscriber %s failed on event %s", self.name, event.id)
            finally:
                self.queue.task_done()


class EventBus:
    """publish() never blocks; each subscriber drains its own bounded queue in its own task."""

    def __init__(self, queue_size: int = 10000) -> None:
        self.queue_size = queue_size
        self._subscribers: list[_Subscriber] = []

    def publish(self, event: Event) -> None:
        """Hand the event to every subscriber; call only after the transaction commits."""
        for sub in self._subscribers:
            try:
                sub.queue.put_nowait(event)
            except asyncio.QueueFull:
                sub.dropped += 1
                log.warning("subscriber %s is behind; dropped event %s", sub.name, event.id)

    def subscribe(self, handler: Handler, name: str = "", maxsize: int | None = None
                  ) -> Callable[[], None]:
        """Start delivering events to handler in its own task; returns an unsubscribe."""
        sub = _Subscriber(name or getattr(handler, "__qualname__", "subscriber"), handler,
                          maxsize or self.queue_size)
        sub.task = asyncio.get_running_loop().create_task(sub.run())
        self._subscribers.append(sub)

        def unsubscribe() -> None:
            if sub in self._subscribers:
                self._subscribers.remove(sub)
            if sub.task is not None:
                sub.task.cancel()

        return unsubscribe

    async def drain(self, timeout: float = 5.0) -> None:
        """Wait until every queued event has been handled (or the timeout passes)."""
        waits = [sub.queue.join() for sub in self._subscribers]
        if waits:
            try:
                await asyncio.wait_for(asyncio.gather(*waits), timeout)
            except asyncio.TimeoutError:
                log.warning("event bus did not drain within %.1f s", timeout)

    async def close(self) -> None:
        """Drain, then stop every subscriber task."""
        await self.drain()
        subs, self._subscribers = self._subscribers, []
        for sub in subs:
            if sub.task is not None:
                sub.task.cancel()
        await asyncio.gather(*(s.task for s in subs if s.task), return_exceptions=True)
