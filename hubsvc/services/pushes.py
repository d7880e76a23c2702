"""What a push did: bookkeeping and one push event per ref update git applied."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import shutil
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

from ..errors import Conflict, DiskFull
from ..git.files import REPO_FILES
from ..git.process import GitError
from ..git.repo import GitRepo
from ..keys import STORE
from ..notify.leader import LEADER
from ..notify.messages import push_summary
from .publish import make_event

log = logging.getLogger("hubsvc.pushes")
ZERO = "0" * 40
PUSH_COMMITS_KEPT = 20


def _pick_default(current: str, branches: list[str]) -> str:
    for candidate in (current, "main", "master"):
        if candidate in branches:
            return candidate
    return sorted(branches)[0]


async def record_push(
    app: web.Application,
    repo: dict,
    updates: list[tuple[str, str, str]],
    actor: dict | None,
    flight: int | None = None,
    mark: Callable[[str], None] = lambda _phase: None,
    counts: dict[tuple[str, str, str], int] | None = None,
) -> None:
    """The bookkeeping and events of ref updates git applied: (old, new, ref) each.

    counts: the commit count of an update when known already (the pre-receive hook's).
    """
    files, store = app[REPO_FILES], app[STORE]
    after = await files.run(repo["id"], lambda g: g.head_oids())
    mark("refs")
    # The refs as they were before this push: what it changed, put back.
    before = dict(after)
    for old, _new, ref in updates:
        if old == ZERO:
            before.pop(ref, None)
        else:
            before[ref] = old
    had_branches = any(ref.startswith("refs/heads/") for ref in before)
    branches = [ref[len("refs/heads/") :] for ref in after if ref.startswith("refs/heads/")]
    new_default = None
    if branches and (not had_branches or repo["default_branch"] not in branches):
        picked = _pick_default(repo["default_branch"], branches)
        try:
            await files.run(repo["id"], lambda g: g.set_default_branch(picked))
            new_default = picked
        except GitError:
            # HEAD held (a writer's lock, fresh): the push's events matter more than the
            # default branch, which stays as it was, on disk and in the row alike.
            log.warning("could not point HEAD of repository %s at %s", repo["id"], picked)
    jobs = [
        (
            ref,
            old,
            new,
            [oid for name, oid in before.items() if name.startswith("refs/heads/") and name != ref],
            (counts or {}).get((old, new, ref)),
        )
        for old, new, ref in updates
    ]
    # Every update's data in one git hop: a push of a dozen tags paid a dozen hand-offs,
    # each two thread wake-ups, before its answer.
    found = await files.run(repo["id"], lambda g: [push_data(g, *job) for job in jobs])
    events = [make_event(app, repo, "push", data, actor) for data in found]
    mark("event-data")
    # The bookkeeping and the push events commit together; the refs seen move by this
    # push's own updates only (as `after` has them: tags peeled).
    changed = {ref: after.get(ref) for _old, _new, ref in updates}
    await store.repos.touch(
        repo["id"], new_default, refs_seen=changed, flight=flight, emit=lambda _: events
    )
    mark("transaction")


async def after_answer(
    app: web.Application,
    repo_id: int,
    tips: Sequence[str] = (),
    mark: Callable[[str], None] = lambda _phase: None,
) -> None:
    """A push's upkeep no one waits for: the commit-graph, then each new tip's history
    walked once, so history pages stay fast from the first one."""
    try:
        await app[REPO_FILES].run(repo_id, lambda g: g.write_commit_graph())
    except Exception as exc:
        log.warning(
            "commit-graph write failed for repository %s", repo_id, exc_info=not _disk_full(exc)
        )
    mark("commit-graph")
    if tips:
        try:
            await app[REPO_FILES].run(repo_id, lambda g: g.keep_history(tips))
        except Exception as exc:
            log.warning(
                "walking new history failed for repository %s: %s",
                repo_id,
                exc,
                exc_info=not _disk_full(exc),
            )
        mark("history")


def _disk_full(exc: BaseException) -> bool:
    """A full disk: one line says it all (the upkeep is only a speed-up, redone later)."""
    return (
        isinstance(exc, DiskFull)
        or getattr(exc, "errno", None) == errno.ENOSPC
        or "No space left on device" in str(exc)
    )


def push_data(
    git: GitRepo, ref: str, old: str, new: str, others: list[str], total: int | None = None
) -> dict:
    """A push event's data for one ref update, as GitHub describes one (total: its commit
    count, when known)."""
    created, deleted = old == ZERO, new == ZERO
    forced = not created and not deleted and not git.is_ancestor(old, new)
    commits = list[dict[str, Any]]()
    if ref.startswith("refs/heads/") and not deleted:
        # A new branch brings only what no other branch had; an update what old lacked.
        exclude = others if created else [old]
        commits, total = git.commits_new(new, exclude, PUSH_COMMITS_KEPT, total)
    else:
        total = 0
    data = {
        "ref": ref,
        "before": old,
        "after": new,
        "created": created,
        "deleted": deleted,
        "forced": forced,
        "commits": [
            {"oid": c["oid"], "message": c["message"], "author": c["author"]} for c in commits
        ],
        "totalCommits": total,
    }
    data["summary"] = push_summary(data)
    return data


async def reconcile(app: web.Application) -> int:
    """Record the pushes dead processes left in flight, from the refs they left; how many.

    A push whose process still renews its heartbeat is its own to record, never touched
    here; one journalled by a process that is gone is recorded once (its journal row goes
    in the transaction that writes its events).
    """
    files, store = app[REPO_FILES], app[STORE]
    done = 0
    for flight in await store.repos.pushes_in_flight(time.time()):
        try:
            seen = json.loads(flight["refs_seen"] or "{}")
            now = await files.run(flight["repo_id"], lambda g: g.head_oids())
            updates = [
                (seen.get(ref, ZERO), now.get(ref, ZERO), ref)
                for ref in sorted(set(seen) | set(now))
                if seen.get(ref) != now.get(ref)
            ]
            repo = await store.repos.by_id(flight["repo_id"])
            if not updates or repo is None:
                await store.repos.push_ended(flight["id"])
                continue
            actor = await store.users.by_id(flight["actor_id"]) if flight["actor_id"] else None
            log.warning(
                "recording a push to repository %s that process %s did not finish",
                repo["id"],
                flight["holder"] or "(an earlier run)",
            )
            await record_push(app, repo, updates, actor, flight["id"])
            await after_answer(app, repo["id"])
            done += 1
        except Conflict:
            pass  # its own process recorded it meanwhile (it was not dead, only slow)
        except Exception:
            log.exception("reconciling push %s failed", flight["id"])
    return done


def clean_quarantines(root: Path, older_than: float = 3600) -> int:
    """Remove receive-pack's incoming object folders left by killed pushes; returns how many."""
    removed, limit = 0, time.time() - older_than
    for objects in root.glob("*/*.git/objects"):
        for folder in objects.glob("tmp_objdir-incoming-*"):
            try:
                if folder.stat().st_mtime < limit:
                    shutil.rmtree(folder)
                    removed += 1
            except OSError:
                log.warning("could not remove %s", folder, exc_info=True)
    return removed


RECONCILE_SECONDS = 5.0  # how often the lease holder looks for pushes dead processes left
QUARANTINE_SECONDS = 3600.0


async def push_journal_ctx(app: web.Application) -> AsyncIterator[None]:
    """On the lease holder: reconcile pushes dead processes left in flight, at start and
    every RECONCILE_SECONDS; clear stale quarantines at start and hourly."""

    async def reconcile_now() -> None:
        await app[LEADER].forget_dead()  # a process of this host that exited is gone now
        await reconcile(app)

    async def clean() -> None:
        removed = await asyncio.to_thread(clean_quarantines, app[REPO_FILES].root)
        if removed:
            log.info("removed %d abandoned push quarantine folder(s)", removed)

    leader = app[LEADER]
    leader.add(leader.every("quarantine cleanup", QUARANTINE_SECONDS, clean, first_inline=True))
    leader.add(leader.every("push journal", RECONCILE_SECONDS, reconcile_now, first_inline=True))
    yield
