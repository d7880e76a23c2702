"""One push's bookkeeping around git receive-pack, whichever transport carries it.

Smart HTTP and SSH both run git's receive-pack the same way: the push journalled
before git starts, the pre-receive hook asking decide_push and the checks of
push_checks (often started before it asks), the updates git applied read from the
post-receive hook's file and recorded (events, updatedAt) before the client hears the
push ended, and upkeep once the answer is out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from .. import requestid
from ..git.files import REPO_FILES
from ..git.hook_fifos import HOOK_FIFOS
from ..git.push_checks import (
    UNPACK_LIMIT,
    RefUpdate,
    check_push,
    pack_landed,
    parse_commands,
    quarantine_env,
)
from ..git.push_hooks import parse_ref_updates, quarantined_is_ancestor, within
from ..keys import CONFIG, STORE
from ..notify.leader import LEADER
from ..tasks import BACKGROUND
from .push_policy import Pusher, decide_push
from .push_timing import PushClock
from .pushes import after_answer, record_push

log = logging.getLogger("hubsvc.git")
ZERO = "0" * 40
POLL_SECONDS = 0.005  # how often a push's quarantine is looked for (no index-pack seen)


@dataclass(frozen=True)
class Receiving:
    """What the transport runs git receive-pack with."""

    path: Path  # the repository
    hooks: Path  # core.hooksPath
    env: dict[str, str]  # the hooks' environment, the hook's push folder among it
    record: Callable[[], Awaitable[None]]  # once git is done, before the answer ends
    # the request body is all in git: receive-pack's pid and the body's first bytes
    body_in: Callable[[int, bytes], None] = lambda pid, head: None


@contextlib.asynccontextmanager
async def receiving(
    app: web.Application,
    repo: dict,
    actor: dict | None,
    pusher: Pusher | None,
    clock: PushClock,
) -> AsyncIterator[Receiving]:
    """Journal the push, let git run receive-pack in the block, record what it applied."""
    files = app[REPO_FILES]
    # git's post-receive hook writes the updates it applied into a file of this push's
    # own, so two pushes landing at once each get their own events.
    fd, name = tempfile.mkstemp(prefix="push-", dir=files.spool)
    os.close(fd)
    spool = Path(name)
    try:
        # Journalled first: if this process dies while git runs, the next start records
        # whatever landed (pushes.reconcile).
        refs_now = await files.run(repo["id"], lambda g: g.head_oids())
        flight = await app[STORE].repos.push_started(
            repo["id"], actor and actor["id"], refs_now, app[LEADER].holder
        )
        clock.mark("journal")
    except BaseException:
        # Refused before git ran (a full disk, a busy database): no file may stay behind.
        spool.unlink(missing_ok=True)
        raise

    counts: dict[tuple[str, str, str], int] = {}  # filled by the pre-receive checks

    def take_updates() -> list[tuple[str, str, str]]:
        try:
            return parse_ref_updates(spool.read_text("utf-8", "replace"))
        finally:
            spool.unlink(missing_ok=True)

    landed = False
    tips: list[str] = []  # the branches' new tips, whose history upkeep walks once

    def spawn(updates: list[tuple[str, str, str]]) -> asyncio.Task:
        nonlocal landed
        landed = True
        tips.extend(new for _, new, ref in updates if ref.startswith("refs/heads/") and new != ZERO)
        return app[BACKGROUND].spawn(_after_push(app, repo, updates, actor, flight, clock, counts))

    async def record() -> None:
        updates = await asyncio.to_thread(take_updates)
        clock.mark("updates")
        if updates:
            # The push's events and bookkeeping commit before the client hears it ended;
            # the client hanging up must not cancel that, so it runs shielded.
            await asyncio.shield(spawn(updates))
        else:
            await asyncio.shield(app[STORE].repos.push_ended(flight))

    env = {"HUBSVC_PUSH_LOG": str(spool)}
    limit = app[CONFIG]["git"]["max_object_bytes"]
    rid = requestid.current()
    if rid is not None:  # git's processes carry the push's request id (README, request ids)
        env[requestid.ENV] = rid
    path = files.path(repo["id"])

    early = _Early(path, limit, clock)

    async def decide(updates: list[tuple[str, str, str]], quarantine: dict[str, str]) -> list[str]:
        # Asked by git's pre-receive hook once the pack is in: as things are now.
        if not updates:  # git runs the hook for one update at least: lines lost on the way
            return ["hubsvc: the hook's question named no ref update"]

        async def is_ancestor(old: str, new: str) -> bool:
            return await asyncio.to_thread(quarantined_is_ancestor, path, old, new, quarantine)

        checks = early.take(updates, quarantine)
        if checks is None:
            if not within(path, quarantine):
                return ["error: hubsvc could not check the pushed objects"]
            checks = asyncio.ensure_future(check_push(path, quarantine, updates, limit))
        try:
            # The server's decision while the checks finish: a refusal ends them.
            problems = await decide_push(app, pusher, repo["id"], updates, is_ancestor)
            if problems:
                return problems
            too_big, counted = await checks
        finally:
            if not checks.done():
                checks.cancel()
                await asyncio.gather(checks, return_exceptions=True)
        counts.update(counted)
        return too_big

    trace = spool.with_suffix(".trace")
    if clock.on:
        trace.mkdir()
        env["GIT_TRACE2_EVENT"] = str(trace)
    clock.mark("rules")
    try:
        # The pre-receive hook asks decide, which refuses files over max_object_bytes
        # too (the checks _Early started, or its own), before any ref moves.
        with app[HOOK_FIFOS].push(decide) as hook_env:
            yield Receiving(path, files.hooks, {**env, **hook_env}, record, early.start)
        clock.mark("answer")
    finally:
        await early.stop()
        if clock.on:
            clock.git_children(trace)
            shutil.rmtree(trace, ignore_errors=True)
        if spool.exists():
            # The answer failed after git applied the updates (a client that hung up):
            # the refs moved all the same, so they are recorded all the same.
            updates = take_updates()
            if updates:
                spawn(updates)
            else:
                app[BACKGROUND].spawn(app[STORE].repos.push_ended(flight))
        # What no one needs to wait for runs once the answer is out.
        if landed:
            app[BACKGROUND].spawn(_upkeep(app, repo["id"], clock, tips))
        else:
            clock.log(repo["id"])


async def _upkeep(app: web.Application, repo_id: int, clock: PushClock, tips: list[str]) -> None:
    await after_answer(app, repo_id, tips, clock.mark)
    clock.log(repo_id)


async def _after_push(
    app: web.Application,
    repo: dict,
    updates: list[tuple[str, str, str]],
    actor: dict | None,
    flight: int,
    clock: PushClock,
    counts: dict[tuple[str, str, str], int],
) -> None:
    """Record the push: updatedAt, default branch, one push event per ref."""
    try:
        await record_push(app, repo, updates, actor, flight, clock.mark, counts)
    except Exception:
        log.exception("recording a push to repository %s failed", repo["id"])


class _Early:
    """A push's pre-receive checks, started once index-pack's pack is in the quarantine.

    receive-pack then walks the pushed history for its connectivity check (one core,
    100-300 ms here on a 5,000-commit push) before it runs the hook; the checks run
    meanwhile on the other, and the hook's question finds them done or nearly.
    """

    def __init__(self, repo: Path, limit: int, clock: PushClock) -> None:
        self.repo, self.limit, self.clock = repo, limit, clock
        self.task: asyncio.Task | None = None
        self.quarantine: Path | None = None
        self.updates: list[RefUpdate] = []
        self.asked = False  # the hook has asked: too late to start

    def start(self, pid: int, head: bytes) -> None:
        """The body is in receive-pack pid: look for its pack when the commands are known."""
        updates, objects = parse_commands(head)
        late = self.asked or self.task is not None
        if late or updates is None or (objects is not None and objects < UNPACK_LIMIT):
            return  # loose objects, or commands the head does not hold: checked when asked
        if all(new == ZERO for _, new, _ in updates):
            return  # deletions only: no pack comes, nothing to look for
        self.updates = updates
        self.task = asyncio.ensure_future(self._run(pid))

    async def _run(self, pid: int) -> tuple[list[str], dict[RefUpdate, int]]:
        self.quarantine = found = await pack_landed(self.repo / "objects", pid, POLL_SECONDS)
        started = time.perf_counter()
        try:
            return await check_push(
                self.repo, quarantine_env(self.repo, found), self.updates, self.limit
            )
        finally:
            self.clock.span("early-checks", time.perf_counter() - started)

    def take(self, updates: list[RefUpdate], env: dict[str, str]) -> asyncio.Future | None:
        """The checks already running on the hook's quarantine for these updates, if any."""
        task, self.task, self.asked = self.task, None, True
        if task is None:
            return None
        asked = env.get("GIT_QUARANTINE_PATH")
        if (
            self.quarantine is None
            or not asked
            or Path(asked).resolve() != self.quarantine.resolve()
            or not set(updates) <= set(self.updates)
        ):
            task.cancel()  # not found yet (or another quarantine): checked from scratch
            return None
        return task

    async def stop(self) -> None:
        """End checks nobody asked for (a push refused or failed before its hook)."""
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
