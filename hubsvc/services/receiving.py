"""One push's bookkeeping around git receive-pack, whichever transport carries it.

Smart HTTP and SSH both run git's receive-pack the same way: the push journalled
before git starts, the pre-receive hook asking decide_push, the updates git applied
read from the post-receive hook's file and recorded (events, updatedAt) before the
client hears the push ended, and upkeep once the answer is out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from .. import requestid
from ..git.files import REPO_FILES
from ..git.hook_socket import HOOK_SOCKET
from ..git.push_hooks import parse_push_counts, parse_ref_updates, quarantined_is_ancestor
from ..keys import CONFIG, STORE
from ..notify.leader import LEADER
from ..tasks import BACKGROUND
from .push_policy import Pusher, decide_push
from .push_timing import PushClock
from .pushes import after_answer, record_push

log = logging.getLogger("hubsvc.git")
ZERO = "0" * 40


@dataclass(frozen=True)
class Receiving:
    """What the transport runs git receive-pack with."""

    path: Path  # the repository
    hooks: Path  # core.hooksPath
    env: dict[str, str]  # the hooks' environment, the hook socket's secret among it
    record: Callable[[], Awaitable[None]]  # once git is done, before the answer ends


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

    counts_file = spool.with_suffix(".counts")
    counts: dict[tuple[str, str, str], int] = {}

    def take_updates() -> list[tuple[str, str, str]]:
        try:
            if counts_file.exists():
                counts.update(parse_push_counts(counts_file.read_text("utf-8", "replace")))
            return parse_ref_updates(spool.read_text("utf-8", "replace"))
        finally:
            spool.unlink(missing_ok=True)
            counts_file.unlink(missing_ok=True)

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

    env = {
        "HUBSVC_PUSH_LOG": str(spool),
        "HUBSVC_PUSH_COUNTS": str(counts_file),
        "HUBSVC_MAX_OBJECT_BYTES": str(app[CONFIG]["git"]["max_object_bytes"]),
    }
    rid = requestid.current()
    if rid is not None:  # the pre-receive hook hands it back with its question
        env[requestid.ENV] = rid
    path = files.path(repo["id"])

    async def decide(updates: list[tuple[str, str, str]], quarantine: dict[str, str]) -> list[str]:
        # Asked by git's pre-receive hook once the pack is in: as things are now.
        async def is_ancestor(old: str, new: str) -> bool:
            return await asyncio.to_thread(quarantined_is_ancestor, path, old, new, quarantine)

        return await decide_push(app, pusher, repo["id"], updates, is_ancestor)

    trace = spool.with_suffix(".trace")
    if clock.on:
        trace.mkdir()
        env["GIT_TRACE2_EVENT"] = str(trace)
    clock.mark("rules")
    try:
        # The pre-receive hook asks decide, then refuses files over max_object_bytes,
        # before any ref moves.
        with app[HOOK_SOCKET].push(decide) as hook_env:
            yield Receiving(path, files.hooks, {**env, **hook_env}, record)
        clock.mark("answer")
    finally:
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
        counts_file.unlink(missing_ok=True)  # the pre-receive hook's, of a push refused
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
