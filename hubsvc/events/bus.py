"""The in-process event bus: wakes each consumer of the log after a commit."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable

from ..errors import DatabaseBusy, DiskFull
from .shape import Event

log = logging.getLogger("hubsvc.events")

Handler = Callable[[Event], Awaitable[None]]
BATCH = 500
# Committed events handed straight to a subscriber that is caught up, so the common case
# costs no read of the log; past this many unhandled ones it reads the log instead.
PENDING_MAX = 1000
# The longest a write waits for a paced subscriber to catch up (EventBus.paced): a stuck
# one slows writers down, never stops them.
PACE_WAIT_MAX = 1.0
# A handler stopped by a full disk or a busy or unreachable database (DatabaseUnreachable
# is a DatabaseBusy) retries the same event, waiting from the first to the last of these
# seconds between tries, so nothing is skipped.
RETRY_FIRST, RETRY_MAX = 0.5, 10.0
# Seconds the current request's writes waited in EventBus.paced (a Server-Timing header).
paced_seconds: contextvars.ContextVar[float] = contextvars.ContextVar("paced_seconds", default=0.0)


class _Subscriber:
    """A consumer with a cursor in the log: it reads every event after it, at its own pace."""

    def __init__(self, name: str, handler: Handler, cursor: int, pace: int | None = None) -> None:
        self.name = name
        self.handler = handler
        self.cursor = cursor
        # Paced: writers wait while more than `pace` committed events are ahead of it.
        self.pace = pace
        self.waiters: list[tuple[int, asyncio.Future]] = []
        self.wake = asyncio.Event()
        self.idle = asyncio.Event()
        self.task: asyncio.Task | None = None
        self.pending: list[Event] = []
        self.reading = False  # behind: the next events come from the log

    def offer(self, events: list[Event]) -> None:
        """Keep committed events in memory when they follow on from what is queued."""
        if self.reading:
            return
        last = int(self.pending[-1].id) if self.pending else self.cursor
        if int(events[0].id) != last + 1 or len(self.pending) + len(events) > PENDING_MAX:
            self.pending.clear()
            self.reading = True
            return
        self.pending.extend(events)

    def behind(self, head: int) -> None:
        """Events up to head committed elsewhere: read them from the log, in order."""
        last = int(self.pending[-1].id) if self.pending else self.cursor
        if head > last:
            self.pending.clear()
            self.reading = True

    async def _next(
        self, read: Callable[[int, int], Awaitable[list[Event]]], head: Callable[[], int]
    ) -> list[Event]:
        if not self.reading:
            # Every commit is offered, so with nothing pending this one is caught up.
            batch, self.pending = self.pending, []
            return batch
        known = head()
        batch = await read(self.cursor, BATCH)
        if not batch and head() == known:
            # Caught up with the log: memory again from here. Not when a commit was
            # heard of during the read, which may have missed it: that one woke us.
            self.reading = False
        return batch

    async def run(
        self, read: Callable[[int, int], Awaitable[list[Event]]], head: Callable[[], int]
    ) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            while True:
                try:
                    batch = await self._next(read, head)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("subscriber %s could not read the event log", self.name)
                    await asyncio.sleep(1)
                    continue
                if not batch:
                    break
                for event in batch:
                    await self._handle(event)
                    self.cursor = int(event.id)
                    if self.waiters:
                        self._release()
            self.idle.set()

    async def _handle(self, event: Event) -> None:
        """Run the handler on one event; a full disk or busy database is waited out."""
        wait = RETRY_FIRST
        while True:
            try:
                await self.handler(event)
                return
            except asyncio.CancelledError:
                raise
            except (DiskFull, DatabaseBusy) as exc:
                # One line, no traceback: the operator frees space; the event is kept.
                log.error(
                    "subscriber %s: %s on event %s; trying again in %g s",
                    self.name,
                    exc.message,
                    event.id,
                    wait,
                )
                await asyncio.sleep(wait)
                wait = min(wait * 2, RETRY_MAX)
            except Exception:
                log.exception("subscriber %s failed on event %s", self.name, event.id)
                return

    def _release(self) -> None:
        """Wake the writers waiting for the cursor to reach their mark."""
        still = []
        for mark, waiter in self.waiters:
            if self.cursor >= mark:
                if not waiter.done():
                    waiter.set_result(None)
            else:
                still.append((mark, waiter))
        self.waiters = still

    async def caught_up_to(self, mark: int, timeout: float) -> None:
        """Return once the cursor reaches mark, or after timeout seconds."""
        if self.cursor >= mark:
            return
        waiter = asyncio.get_running_loop().create_future()
        self.waiters.append((mark, waiter))
        try:
            await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            pass


class EventBus:
    """Wakes each subscriber when events commit; subscribers read the log from their cursor.

    Nothing is dropped when a subscriber falls behind: the log holds what it has not
    read yet. The bus carries committed events only (see Database.committed).
    """

    def __init__(self, read: Callable[[int, int], Awaitable[list[Event]]] | None = None) -> None:
        self._read = read
        self._subscribers: list[_Subscriber] = []
        self.last_id = 0  # the newest committed event the bus has heard of

    def attach(self, read: Callable[[int, int], Awaitable[list[Event]]], last_id: int) -> None:
        """Read events with read(cursor, limit); the log ends at last_id for now."""
        self._read = read
        self.last_id = max(self.last_id, last_id)

    def publish(self, events: list[Event] | Event) -> None:
        """Committed events exist: wake every subscriber (never blocks)."""
        events = events if isinstance(events, list) else [events]
        for event in events:
            self.last_id = max(self.last_id, int(event.id))
        for sub in self._subscribers:
            if events:
                sub.offer(events)
            sub.idle.clear()
            sub.wake.set()

    def heard(self, head: int) -> None:
        """Another process committed events up to head: subscribers read them from the log.

        Ids are commit order, so every event up to head is in the log by now; each
        subscriber gets them once, in order, among its own process's.
        """
        if head <= self.last_id:
            return  # every subscriber has those pending, handled, or is reading the log
        self.last_id = head
        for sub in self._subscribers:
            sub.behind(head)
            sub.idle.clear()
            sub.wake.set()

    def subscribe(
        self, handler: Handler, name: str = "", after: int | None = None, pace: int | None = None
    ) -> Callable[[], None]:
        """Deliver events after `after` (default: from now on) to handler, in log order.

        With pace=N, a write that makes events waits (see paced) while this subscriber
        has more than N committed events left to handle.
        """
        sub = _Subscriber(
            name or getattr(handler, "__qualname__", "subscriber"),
            handler,
            self.last_id if after is None else after,
            pace,
        )
        read = self._read
        if read is None:
            raise RuntimeError("the event bus has no log to read")
        sub.task = asyncio.get_running_loop().create_task(sub.run(read, self._head))
        self._subscribers.append(sub)
        if sub.cursor < self.last_id:
            sub.reading = True
            sub.wake.set()
        else:
            sub.idle.set()

        def unsubscribe() -> None:
            if sub in self._subscribers:
                self._subscribers.remove(sub)
            if sub.task is not None:
                sub.task.cancel()
            for _, waiter in sub.waiters:  # writers paced by it need not wait any more
                if not waiter.done():
                    waiter.set_result(None)
            sub.waiters.clear()

        return unsubscribe

    def _head(self) -> int:
        return self.last_id

    async def paced(self) -> None:
        """Hold a writer back while a paced subscriber is more than its pace behind.

        The live WebSocket fan-out is paced: writers that commit faster than it can send
        would otherwise queue every watcher's notifications behind theirs. Waiting here
        moves that wait to the writers, as a broadcaster that sends before it answers
        does, for at most PACE_WAIT_MAX seconds.
        """
        for sub in self._subscribers:
            if sub.pace is not None and self.last_id - sub.cursor > sub.pace:
                start = time.monotonic()
                await sub.caught_up_to(self.last_id - sub.pace, PACE_WAIT_MAX)
                paced_seconds.set(paced_seconds.get() + time.monotonic() - start)

    async def drain(self, timeout: float = 5.0) -> None:
        """Wait until every subscriber has handled every event committed so far."""

        async def caught_up(sub: _Subscriber) -> None:
            while sub.cursor < self.last_id or sub.wake.is_set():
                sub.idle.clear()
                if sub.cursor < self.last_id:
                    sub.wake.set()
                await sub.idle.wait()

        if self._subscribers:
            try:
                await asyncio.wait_for(
                    asyncio.gather(*(caught_up(s) for s in self._subscribers)), timeout
                )
            except TimeoutError:
                log.warning("event bus did not drain within %.1f s", timeout)

    async def close(self) -> None:
        """Drain, then stop every subscriber task."""
        await self.drain()
        subs, self._subscribers = self._subscribers, []
        for sub in subs:
            if sub.task is not None:
                sub.task.cancel()
        await asyncio.gather(*(s.task for s in subs if s.task), return_exceptions=True)
