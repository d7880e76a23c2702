"""The `jobs` lease: one process at a time runs the work that must run once.

Every process renews a heartbeat row (`process:<holder>`) and tries to take or renew
the `jobs` lease in one write every RENEW seconds; a lease lives TTL seconds, so a dead
holder's work is taken over within TTL + RENEW. The holder runs every registered Job
(the senders, the durable event consumers, the periodic jobs) and, every POLL seconds,
each job's tick: how work queued by the other processes is found promptly. A process
that loses the lease stops its jobs; the sends themselves are fenced in the database
(store/leases.fence), so one that has not noticed yet cannot send either.

One lease for all jobs rather than one each: the jobs are light and share tables (a
consumer queues what a sender sends), one renewing write per process per RENEW seconds
stays one, and there is one place to look for who runs them (Synapse's
run_background_tasks_on names one worker the same way).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from ..errors import DatabaseBusy, DiskFull
from ..events.shape import Event
from ..keys import BUS, STORE
from ..store import Store

log = logging.getLogger("hubsvc.leader")

LEASE = "jobs"
TTL = 6.0  # seconds a lease lives unless renewed
RENEW = 2.0  # seconds between renewals
POLL = 0.5  # seconds between the holder's looks at what other processes queued


def _host() -> str:
    """This machine, and its process-id namespace when known (containers reuse pids)."""
    name = socket.gethostname().replace(":", "_")
    with contextlib.suppress(OSError):
        name += f"~{os.stat('/proc/self/ns/pid').st_ino}"
    return name


def holder_id() -> str:
    """host:pid:random, this process's name in the leases table."""
    return f"{_host()}:{os.getpid()}:{secrets.token_hex(4)}"


def dead_here(holder: str) -> bool:
    """Whether holder names a process of this host (and pid namespace) that has exited."""
    host, _, rest = holder.partition(":")
    pid_text = rest.partition(":")[0]
    if host != _host() or not pid_text.isdigit() or int(pid_text) == os.getpid():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists but is not ours to signal
        return False
    return False


@dataclass
class Job:
    """Work run only on the lease holder: started on taking it, stopped on losing it."""

    name: str
    start: Callable[[], Awaitable[None]]
    stop: Callable[[], Awaitable[None]]
    # Called every POLL seconds on the holder: look for work other processes queued.
    tick: Callable[[], Awaitable[None]] | None = None


def consumer(app: web.Application, name: str, handler: Callable[[Event], Awaitable[None]]) -> Job:
    """A durable consumer of the event log (its cursor row named name) as a job: it reads
    on the lease holder only, from where the last holder stopped (or from now, the first
    time), so each event is handled once overall, not once per process."""
    unsubscribe: Callable[[], None] | None = None

    async def start() -> None:
        nonlocal unsubscribe
        cursor = await app[STORE].events.start_cursor(name, app[BUS].last_id)
        unsubscribe = app[BUS].subscribe(handler, name=name, after=cursor)

    async def stop() -> None:
        nonlocal unsubscribe
        if unsubscribe is not None:
            unsubscribe()
            unsubscribe = None

    return Job(name, start, stop)


class Leader:
    """Holds (or waits for) the jobs lease, and runs the jobs while it holds it."""

    def __init__(
        self, store: Store, ttl: float = TTL, renew: float = RENEW, poll: float = POLL
    ) -> None:
        self.store = store
        self.holder = holder_id()
        self.ttl, self.renew, self.poll = ttl, renew, poll
        self.jobs: list[Job] = []
        self.running = False  # the jobs are started
        self.held_until = 0.0  # epoch: the lease is ours until then, as last renewed
        # Called by wake() on a process that does not hold the lease: how a cross-process
        # signal (Redis pub/sub) reaches the holder. Without one, the holder's poll finds
        # the work within POLL seconds.
        self.remote_wakers: list[Callable[[], None]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._lock = asyncio.Lock()
        self.starting = False  # in start(): the server does not answer yet
        # Draining: the lease was handed off; only the heartbeat is renewed (this
        # process's pushes in flight are still its own, not another's to recover).
        self.retiring = False
        # Called once the lease is handed off (with Redis: the others are told to take it).
        self.on_hand_off: list[Callable[[], None]] = []
        self._beat_now = False

    @property
    def held(self) -> bool:
        """Whether this process runs the jobs now (its lease has not run out)."""
        return self.running and time.time() < self.held_until

    def add(self, job: Job) -> None:
        """Register a job (before start)."""
        self.jobs.append(job)

    def every(
        self,
        name: str,
        seconds: float,
        fn: Callable[[], Awaitable[object]],
        first_inline: bool = False,
        now: bool = True,
    ) -> Job:
        """A job calling fn at once (now=False: after `seconds`) and then every `seconds`
        while the lease is held.

        With first_inline, the first call is made before the server starts answering,
        when this process takes the lease as it starts (as a single process always does).
        """
        task: asyncio.Task | None = None

        async def once() -> None:
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except (DiskFull, DatabaseBusy) as exc:  # one line: the operator frees space
                log.error("%s failed: %s; trying again in %g s", name, exc.message, seconds)
            except Exception:  # try again next round
                log.exception("%s failed", name)

        async def loop(wait: float) -> None:
            await asyncio.sleep(wait)
            while True:
                await once()
                await asyncio.sleep(seconds)

        async def start() -> None:
            nonlocal task
            inline = now and first_inline and self.starting
            if inline:
                await once()
            task = asyncio.get_running_loop().create_task(
                loop(0 if now and not inline else seconds)
            )

        async def stop() -> None:
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

        return Job(name, start, stop)

    def wake(self) -> None:
        """Work was queued: the holder looks at every queue now. The one call for wake-ups."""
        if self.running:
            self._wake.set()
        else:
            for waker in self.remote_wakers:
                waker()

    async def start(self) -> None:
        """Forget this host's dead processes, take the lease if free, then keep renewing."""
        self.starting = True
        try:
            await self.forget_dead()
            await self.beat()
        finally:
            self.starting = False
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def hand_off(self) -> None:
        """Stop the jobs and free the lease, keeping the heartbeat (a draining process)."""
        self.retiring = True
        async with self._lock:
            await self._stop_jobs()
            self.held_until = 0.0
            try:
                await self.store.leases.give_up(self.holder, LEASE)
            except Exception:
                log.exception("handing off the jobs lease failed; it expires in %.0f s", self.ttl)
                return
        log.info("handed off the jobs lease")
        for told in self.on_hand_off:
            told()

    def beat_soon(self) -> None:
        """Renew (and maybe take) the lease now rather than at the next round: it was freed."""
        self._beat_now = True
        self._wake.set()

    async def stop(self) -> None:
        """Stop the jobs and give the lease up, so another process takes it at once."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        async with self._lock:
            await self._stop_jobs()
        try:
            await self.store.leases.release(self.holder)
        except Exception:
            log.exception("releasing the jobs lease failed; it expires in %.0f s", self.ttl)

    async def forget_dead(self) -> None:
        """Free the rows of processes of this host that exited (a restart after a crash)."""
        dead = [h for h in await self.store.leases.all_processes() if dead_here(h)]
        lease = await self.store.leases.get(LEASE)
        if lease and dead_here(lease["holder"]) and lease["holder"] not in dead:
            dead.append(lease["holder"])
        if dead:
            log.info("processes %s exited: their lease and pushes are free", ", ".join(dead))
            await self.store.leases.forget(dead)

    async def beat(self) -> None:
        """Renew the heartbeat and the lease; start or stop the jobs as that came out."""
        async with self._lock:
            now = time.time()
            if self.retiring:
                try:
                    await self.store.leases.beat(self.holder, None, now, self.ttl)
                except Exception:
                    log.exception("renewing the heartbeat failed")
                return
            try:
                got = await self.store.leases.beat(self.holder, LEASE, now, self.ttl)
                if not got and await self._holder_died():
                    now = time.time()
                    got = await self.store.leases.beat(self.holder, LEASE, now, self.ttl)
            except (DiskFull, DatabaseBusy) as exc:
                log.error("renewing the jobs lease failed: %s", exc.message)
                got = None
            except Exception:
                log.exception("renewing the jobs lease failed")
                got = None
            if got:
                self.held_until = now + self.ttl
                if not self.running:
                    await self._start_jobs()
            elif got is False or time.time() >= self.held_until:
                # Taken by another process, or not renewed in time: stop before it sends.
                self.held_until = 0.0
                if self.running:
                    log.warning("lost the jobs lease: stopping the jobs that run once")
                    await self._stop_jobs()

    async def _holder_died(self) -> bool:
        """Whether the lease's holder was a process of this host that exited (then its
        rows are dropped: no need to wait for its lease to run out)."""
        lease = await self.store.leases.get(LEASE)
        if lease is None or not dead_here(lease["holder"]):
            return False
        log.info("the jobs lease holder %s exited: taking over", lease["holder"])
        await self.store.leases.forget([lease["holder"]])
        return True

    async def _start_jobs(self) -> None:
        log.info("took the jobs lease (%s): running the jobs that run once", self.holder)
        self.running = True
        for job in self.jobs:
            try:
                await job.start()
            except Exception:
                log.exception("starting %s failed", job.name)

    async def _stop_jobs(self) -> None:
        if not self.running:
            return
        self.running = False
        for job in reversed(self.jobs):
            try:
                await job.stop()
            except Exception:
                log.exception("stopping %s failed", job.name)

    async def tick(self) -> None:
        """Every job's look at its queues (the holder's poll)."""
        for job in self.jobs:
            if job.tick is not None and self.held:
                try:
                    await job.tick()
                except Exception:
                    log.exception("%s could not look at its queue", job.name)

    async def _run(self) -> None:
        next_beat = time.monotonic() + self.renew
        while True:
            wait = min(self.poll, max(0.0, next_beat - time.monotonic()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)
            self._wake.clear()
            if self._beat_now or time.monotonic() >= next_beat or (self.running and not self.held):
                self._beat_now = False
                next_beat = time.monotonic() + self.renew
                await self.beat()
            if self.held:
                await self.tick()


LEADER = web.AppKey("leader", Leader)
