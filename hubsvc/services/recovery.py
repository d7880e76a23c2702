"""What a killed process left half done, finished or undone by whichever process recovers.

Merges (merge_journal.settle) and new repositories whose folder was never made; pushes
have their own journal (pushes.reconcile). At start, and every RECOVER_SECONDS on the
lease holder, so a process of several that dies is recovered by the others without a
restart.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

from aiohttp import web

from ..git.files import REPO_FILES
from ..keys import STORE
from ..notify.leader import LEADER
from .merge_journal import reconcile_merges

log = logging.getLogger("hubsvc.recovery")
RECOVER_SECONDS = 5.0


async def remove_unfinished_repos(app: web.Application) -> int:
    """Remove the repositories whose creator died before their folder was made; how many.

    Their creator never answered 201, so the client saw the create fail: the name is
    free again and a retry makes exactly what it asked for (autoInit included).
    """
    store, files = app[STORE], app[REPO_FILES]
    removed = 0
    for creation in await store.creations.abandoned(time.time()):
        repo_id = creation["repo_id"]
        try:
            await store.repos.delete(repo_id)
            await files.remove(repo_id)
        except Exception:
            log.exception("removing unfinished repository %s failed", repo_id)
            continue
        log.warning(
            "removed repository %s: process %s died before its folder was made (no 201 sent)",
            repo_id,
            creation["holder"],
        )
        removed += 1
    return removed


async def remake_lost_folders(app: web.Application) -> int:
    """Make an empty folder for each repository whose row has none; how many.

    A row with no folder and no creation mark predates the mark (a process killed
    mid-create before it existed) or lost its folder on disk: its issues and pull
    requests may be in use, so it is kept and made an empty repository, which is what
    its git routes then serve (they answered 500 before).
    """
    files = app[REPO_FILES]
    rows = await app[STORE].creations.made()
    missing = await asyncio.to_thread(lambda: [r for r in rows if not files.path(r["id"]).exists()])
    for row in missing:
        try:
            await files.create(row["id"], row["default_branch"])
            if await app[STORE].repos.by_id(row["id"]) is None:  # deleted meanwhile
                await files.remove(row["id"])
                continue
        except Exception:
            log.exception("making a folder for repository %s failed", row["id"])
            continue
        log.warning("repository %s had no folder on disk: made it an empty repository", row["id"])
    return len(missing)


async def recover(app: web.Application) -> None:
    """Recover what processes that are gone left half done."""
    await app[LEADER].forget_dead()  # a process of this host that exited is gone now
    await reconcile_merges(app)
    await remove_unfinished_repos(app)


async def recovery_ctx(app: web.Application) -> AsyncIterator[None]:
    """On the lease holder: recover at start and every RECOVER_SECONDS."""
    leader = app[LEADER]
    # Once at start (and daily): a look at every repository's folder.
    leader.add(
        leader.every("lost folders", 86400, lambda: remake_lost_folders(app), first_inline=True)
    )
    leader.add(leader.every("recovery", RECOVER_SECONDS, lambda: recover(app), first_inline=True))
    yield
