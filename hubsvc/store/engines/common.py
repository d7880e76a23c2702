"""What both databases share: the write and event listeners, the health probes."""

from __future__ import annotations

import abc
import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ...errors import DatabaseBusy, DatabaseUnreachable, DiskFull

log = logging.getLogger("hubsvc.store")

PING_FRESH_SECONDS = 1.0


def _probe_write(conn: Any) -> None:
    conn.execute(
        "INSERT INTO health_probe (id, at) VALUES (1, ?)"
        " ON CONFLICT (id) DO UPDATE SET at = excluded.at",
        (int(time.time()),),
    )


class DatabaseBase(abc.ABC):
    """The listeners told of commits, and /health's probes; engines add read and write."""

    PROBE_SECONDS = 5.0
    write_timeout: float

    def __init__(self) -> None:
        # Bumped by every write, so read caches can tell their entries are stale.
        self.generation = 0
        # Told of events once the transaction that wrote them has committed.
        self.event_listeners: list[Callable[[list], None]] = []
        # Awaited after a write that made events, before its caller goes on (the bus
        # holds a writer back while the live fan-out is far behind).
        self.pacers: list[Callable[[], Awaitable[None]]] = []
        # Told after every committed write (other processes drop their read caches).
        self.write_listeners: list[Callable[[], None]] = []
        self._ping_ok_at = float("-inf")
        # How the last write ended ("ok", "busy", "full", "error") and when (monotonic),
        # for /health; the probe is a write of its own, cached for PROBE_SECONDS.
        self.last_write: tuple[str, float] = ("ok", 0.0)
        self._probe: tuple[str, float] | None = None
        self._probe_lock = asyncio.Lock()
        # Transactions asked for and not yet ended (metrics: the pool's use).
        self.in_use = 0

    def pool_use(self) -> tuple[int, int, int]:
        """(connections in use, connections at most, transactions waiting for one)."""
        return self.in_use, 1, 0

    @abc.abstractmethod
    async def _write(
        self, fn: Callable[..., Any], args: Any, kwargs: Any, deadline: float, quiet: bool = False
    ) -> Any:
        """Run fn(conn, *args, **kwargs) in one write transaction, giving up at deadline;
        quiet: a write no read cache holds (bumps no generation, tells no listener)."""

    async def quiet_write(self, fn: Callable[..., Any], *args: Any) -> Any:
        """A write of what no read cache holds (a token's last use): the caches of this and
        every other process stay. Each write emptied them all, and the requests after it
        all missed at once (a p99 spike under load)."""
        return await self._write(fn, args, {}, time.monotonic() + self.write_timeout, quiet=True)

    @abc.abstractmethod
    async def read(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run fn(conn, *args, **kwargs) in one read transaction."""

    def committed(self, events: list) -> None:
        """Tell the listeners (the bus) of events that just committed."""
        if events:
            for listener in self.event_listeners:
                listener(events)

    async def paced(self) -> None:
        """After events committed: wait while a pacer says their consumers are far behind."""
        for pacer in self.pacers:
            await pacer()

    async def write_state(self) -> str:
        """Whether a write can succeed: "ok", "busy", "full", "unavailable" or "error" (cached)."""
        probe = self._probe
        if probe is None or time.monotonic() - probe[1] >= self.PROBE_SECONDS:
            await self._probe_now()
        state, at = self._probe  # type: ignore[misc]  # set by _probe_now
        # A write that ended after the probe is newer news, either way: a probe can
        # succeed into WAL space already allocated while real writes, which grow the
        # file, fail; and a write that succeeds ends a fault the probe saw.
        last, last_at = self.last_write
        return last if last_at > at else state

    async def _probe_now(self) -> None:
        """Probe with a one-row write, unless a probe that ran while this waited did."""
        # Only a stale probe takes the lock: on the polled path an asyncio.Lock cost a
        # fifth of /health's own time.
        async with self._probe_lock:
            now = time.monotonic()
            if self._probe is None or now - self._probe[1] >= self.PROBE_SECONDS:
                try:
                    # A probe waits at most a second: /health must answer while writes queue.
                    # Quiet: the probe row is in no cache, and a probe every few seconds
                    # would empty every process's caches as often.
                    await self._write(
                        _probe_write, (), {}, now + min(self.write_timeout, 1.0), quiet=True
                    )
                    state = "ok"
                except DatabaseUnreachable:
                    state = "unavailable"
                except (DatabaseBusy, DiskFull) as exc:
                    state = "busy" if isinstance(exc, DatabaseBusy) else "full"
                except Exception:
                    log.exception("the /health write probe failed")
                    state = "error"
                self._probe = (state, time.monotonic())

    async def ping(self) -> bool:
        """True when the database answers a trivial query (a success is trusted for 1 s)."""
        # A health check polled thousands of times a second would spend most of its time
        # hopping to a reader thread; one answer a second says as much about liveness.
        if time.monotonic() - self._ping_ok_at < PING_FRESH_SECONDS:
            return True
        try:
            await asyncio.wait_for(self.read(lambda c: c.execute("SELECT 1").fetchone()), 2)
        except Exception:
            self._ping_ok_at = float("-inf")
            return False
        self._ping_ok_at = time.monotonic()
        return True
