"""A merge's last step (merged, its events) and its recovery when its process died."""

from __future__ import annotations

import logging
import time
from typing import Any

from aiohttp import web

from ..errors import Conflict
from ..git.files import REPO_FILES
from ..keys import CONFIG, STORE
from ..web import present
from .publish import make_event
from .pushes import push_data

log = logging.getLogger("hubsvc.pulls")


async def finish_merge(
    app: web.Application,
    repo: dict[str, Any],
    issue_id: int,
    base: str,
    user: dict[str, Any] | None,
    method: str,
    new: str,
    head_oid: str,
    base_oid: str,
) -> dict[str, Any]:
    """Mark a merge whose base branch moved: merged, with its `merged` and push events in
    the same transaction as its journal row's end; 409 when it was settled already."""
    ref = f"refs/heads/{base}"
    push = await app[REPO_FILES].run(repo["id"], push_data, ref, base_oid, new, [])
    base_url = app[CONFIG].base_url
    return await app[STORE].merges.finish(
        issue_id,
        user and user["id"],
        new,
        head_oid,
        base_oid,
        ref,
        emit=lambda row: [
            make_event(
                app,
                repo,
                "pull_request",
                {
                    "action": "merged",
                    "pullRequest": present.pull(base_url, repo, row),
                    "method": method,
                },
                user,
            ),
            make_event(app, repo, "push", push, user),
        ],
    )


async def settle(app: web.Application, journal: dict[str, Any]) -> dict[str, Any] | None:
    """Finish a journalled merge whose base branch moved, or undo one whose did not.

    The merged row when it is finished here; None when it was undone.
    """
    store, files = app[STORE], app[REPO_FILES]
    issue_id, repo_id, new = journal["issue_id"], journal["repo_id"], journal["new_oid"]
    repo = await store.repos.by_id(repo_id)
    if new is None or repo is None:
        await store.merges.release(issue_id)
        return None
    tip = await files.run(repo_id, lambda g: g.branch_oid(journal["base"]))
    # A push on top of the merge since then keeps it on the branch: merged all the same.
    landed = tip == new or (
        tip is not None and await files.run(repo_id, lambda g: g.is_ancestor(new, tip))
    )
    if not landed:
        await store.merges.release(issue_id)
        return None
    user = await store.users.by_id(journal["actor_id"]) if journal["actor_id"] else None
    return await finish_merge(
        app,
        repo,
        issue_id,
        journal["base"],
        user,
        journal["method"],
        new,
        journal["head_oid"],
        journal["base_oid"],
    )


async def reconcile_merges(app: web.Application) -> tuple[int, int]:
    """Settle the merges dead processes left: (finished, undone)."""
    finished = undone = 0
    for journal in await app[STORE].merges.abandoned(time.time()):
        try:
            row = await settle(app, journal)
        except Conflict:
            continue  # its own process settled it meanwhile (it was slow, not dead)
        except Exception:
            log.exception("settling the merge of pull request %s failed", journal["issue_id"])
            continue
        log.warning(
            "%s the merge of pull request #%s of repository %s that process %s left",
            "finished" if row else "undid",
            journal["number"],
            journal["repo_id"],
            journal["holder"] or "(an earlier run)",
        )
        if row:
            finished += 1
        else:
            undone += 1
    return finished, undone
