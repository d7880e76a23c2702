"""Pull request merging and the mergeable flag, kept current as branches move."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from ..errors import ApiError, Conflict
from ..events.shape import Event
from ..git.files import REPO_FILES, RepoFiles
from ..keys import STORE
from ..notify.leader import LEADER, consumer
from . import codeowners
from .merge_journal import finish_merge, settle
from .protection import merge_problems

log = logging.getLogger("hubsvc.pulls")
ZERO = "0" * 40


@dataclass
class Heads:
    """Where a pull request's two branches point, as seen in the base repository."""

    head: str | None
    base: str | None


def _pull_ref(number: int) -> str:
    return f"refs/pull/{number}/head"


async def shares_fork(app: web.Application, pull: dict[str, Any]) -> bool:
    """Whether a fork's new commits may enter the base repository now.

    The fork is public; or the base is private and either the pull request's author may
    write to the fork (their own work, which they chose to share) or every reader of
    the base may read the fork anyway.
    """
    if pull.get("head_repo_visibility") == "public":
        return True
    if pull.get("base_visibility") != "private":
        return False
    if pull.get("author_writes_head"):
        return True
    return await readers_cover(app, pull["repo_id"], pull["head_repo_id"])


async def readers_cover(app: web.Application, base_id: int, head_id: int) -> bool:
    """Whether everyone who may read base_id may read head_id too."""
    base = await app[STORE].repos.audience(base_id)
    head = await app[STORE].repos.audience(head_id)
    if base is None or head is None:
        return False
    if head.readers is None:
        return True
    return base.readers is not None and base.readers <= head.readers


async def resolve_heads(app: web.Application, pull: dict[str, Any]) -> Heads:
    """Both branch tips; refs/pull/N/head follows the head (fetched first from a fork).

    A fork's commits enter the base repository only while shares_fork holds, checked
    at every sync; otherwise the head stays at its last shared commit, so a fork made
    private, or an author who lost write access to it, leaks no later work.
    """
    files = app[REPO_FILES]
    repo_id = pull["repo_id"]
    head_repo = pull["head_repo_id"]
    base_oid = await files.run(repo_id, lambda g: g.branch_oid(pull["base"]))
    if head_repo is None:
        return Heads(None, base_oid)
    if head_repo == repo_id:
        head_oid = await files.run(repo_id, lambda g: g.branch_oid(pull["head"]))
        if head_oid is not None:
            await files.run(repo_id, lambda g: g.set_pull_ref(pull["number"], head_oid))
    elif await shares_fork(app, pull):
        head_oid = await files.run(head_repo, lambda g: g.branch_oid(pull["head"]))
        if head_oid is not None:
            source = files.path(head_repo)
            await files.run(
                repo_id, lambda g: g.fetch_commit(source, head_oid, _pull_ref(pull["number"]))
            )
    else:
        head_oid = await files.run(repo_id, lambda g: g.pull_ref(pull["number"]))
    return Heads(head_oid, base_oid)


async def check_mergeable(files: RepoFiles, repo_id: int, heads: Heads) -> bool | None:
    """A real three-way merge of the two tips; None when a branch is gone."""
    if heads.head is None or heads.base is None:
        return None
    tree = await files.run(repo_id, lambda g: g.merge_tree(heads.base, heads.head))
    return tree is not None


async def refresh(app: web.Application, pull: dict[str, Any]) -> dict[str, Any]:
    """Recompute and store mergeable for the pull request's current tips."""
    files = app[REPO_FILES]
    heads = await resolve_heads(app, pull)
    mergeable = await check_mergeable(files, pull["repo_id"], heads)
    await app[STORE].issues.set_mergeable(pull["id"], heads.head, heads.base, mergeable)
    return {
        **pull,
        "head_oid": heads.head,
        "base_oid": heads.base,
        "mergeable": None if mergeable is None else int(mergeable),
    }


async def merge_holds(
    app: web.Application, repo: dict[str, Any], pull: dict[str, Any]
) -> list[str] | None:
    """What holds the merge now, as merge would answer it for repo's caller; None once
    merged or closed, [] when nothing does (the caller may still lack write access)."""
    if pull["merged"] or pull["state"] != "open":
        return None
    heads = await resolve_heads(app, pull)
    if heads.head is None:
        return ["the head branch no longer exists"]
    if heads.base is None:
        return ["the base branch no longer exists"]
    holds = []
    known = pull["head_oid"] == heads.head and pull["base_oid"] == heads.base
    if known and pull["mergeable"] is not None and not pull["mergeable"]:
        holds.append(f"the head conflicts with {pull['base']}: merge {pull['base']} into it first")
    return holds + await merge_problems(app, repo, pull, heads.base, heads.head)


MERGE_LOCKS = web.AppKey("merge_locks", defaultdict)
HEAD_MOVED = "Head branch was modified. Review and try the merge again."


async def merge(
    app: web.Application,
    repo: dict[str, Any],
    pull: dict[str, Any],
    user: dict[str, Any],
    method: str,
    message: str | None,
    sha: str | None = None,
) -> dict[str, Any]:
    """Merge a pull request into its base as the base's rules allow; the merged row.

    409 when it is not open, another merge of it is under way, the head is not `sha`,
    on a conflict, nothing to merge or a race; 405 naming what protection still needs.
    """
    store = app[STORE]
    # The claim is taken in the database, so exactly one merge (or a close) wins even
    # when several processes serve the same pull request. It is journalled with this
    # process's name: if the process dies, whichever process recovers it finishes the
    # merge or undoes it (merge_journal.settle).
    if not await store.merges.claim(pull["id"], repo["id"], user["id"], method, app[LEADER].holder):
        raise Conflict("pull request is not open, or another merge of it is under way")
    try:
        new, heads = await _merge_checked(app, repo, pull, user, method, message, sha)
    except BaseException:
        # Undone, unless the base branch moved all the same (then finished).
        journal = await asyncio.shield(store.merges.get(pull["id"]))
        if journal is not None:
            await asyncio.shield(settle(app, journal))
        raise
    assert heads.base is not None and heads.head is not None  # else 409 above
    try:
        return await asyncio.shield(
            finish_merge(
                app, repo, pull["id"], pull["base"], user, method, new, heads.head, heads.base
            )
        )
    except Conflict:
        # Settled by a process that took this one for dead: merged by it, as the branch moved.
        row = await store.issues.get(repo["id"], pull["number"], True)
        assert row is not None
        return row


async def _merge_checked(
    app: web.Application,
    repo: dict[str, Any],
    pull: dict[str, Any],
    user: dict[str, Any],
    method: str,
    message: str | None,
    sha: str | None,
) -> tuple[str, Heads]:
    """Under the repository's merge lock: read both tips once, check them, merge exactly them.

    The protection rules are judged on the head commit that is merged (not on a branch
    name read again later), so a push that lands meanwhile is neither checked nor
    merged; the base ref moves with a compare-and-swap against the tip the merge was
    computed on, so a push to the base that lands meanwhile makes this merge fail
    instead of being lost.
    """
    async with app[MERGE_LOCKS][pull["repo_id"]]:
        heads = await resolve_heads(app, pull)
        if heads.head is None:
            raise Conflict("the head branch no longer exists")
        if heads.base is None:
            raise Conflict("the base branch no longer exists")
        if sha is not None and sha != heads.head:
            raise Conflict(HEAD_MOVED)
        problems = await merge_problems(app, repo, pull, heads.base, heads.head)
        if problems:
            # GitHub answers 405 to a merge its branch protection does not allow yet.
            raise ApiError("; ".join(problems), 405)
        new = await _write_merge(app, pull, heads.base, heads.head, user, method, message)
        return new, heads


async def _write_merge(
    app: web.Application,
    pull: dict[str, Any],
    base: str,
    head: str,
    user: dict[str, Any],
    method: str,
    message: str | None,
) -> str:
    """Write head into the base branch, which must still be at base; the new tip."""
    files = app[REPO_FILES]
    repo_id = pull["repo_id"]
    if head == base or await files.run(repo_id, lambda g: g.is_ancestor(head, base)):
        raise Conflict("nothing to merge: the base branch already contains the head")
    name = user["name"] or user["username"]
    email = f"{user['username']}@users.noreply.hubsvc"
    if method == "fast-forward":
        if not await files.run(repo_id, lambda g: g.is_ancestor(base, head)):
            raise Conflict("cannot fast-forward: the base branch has commits the head lacks")
        new = head
    else:
        tree = await files.run(repo_id, lambda g: g.merge_tree(base, head))
        if tree is None:
            await app[STORE].issues.set_mergeable(pull["id"], head, base, False)
            raise Conflict("merge conflict: the branches change the same lines")
        if method == "merge":
            parents = [base, head]
            source = (
                pull["head_repo_owner"] + ":" + pull["head"]
                if pull["head_repo_owner"]
                else pull["head"]
            )
            text = (
                message or f"Merge pull request #{pull['number']} from {source}\n\n{pull['title']}"
            )
        else:
            parents = [base]
            text = message or f"{pull['title']} (#{pull['number']})\n\n{pull['body']}".rstrip()
        new = await files.run(repo_id, lambda g: g.commit_tree(tree, parents, text, name, email))
    # Journalled before the branch moves: a kill from here on is finished by recovery
    # when the branch moved, and undone when it did not.
    await app[STORE].merges.moving(pull["id"], base, head, new)
    if not await files.run(repo_id, lambda g: g.update_branch(pull["base"], new, base)):
        raise Conflict("the base branch moved while merging; try again")
    return new


CURSOR = "pull-sync"


async def _on_event(app: web.Application, event: Event) -> None:
    """A push to a branch re-checks the open pull requests on either side of it."""
    if event.type != "push" or not event.data.get("ref", "").startswith("refs/heads/"):
        return
    branch = event.data["ref"][len("refs/heads/") :]
    for pull in await app[STORE].issues.open_pulls_touching(event.repo_number, branch):
        try:
            pull = await refresh(app, pull)
        except Exception:
            log.exception("mergeable check failed for pull request %s", pull["id"])
            continue
        if pull["head"] == branch and pull["head_repo_id"] == event.repo_number:
            try:
                await _owners_of_push(app, pull, event)
            except Exception:
                log.exception("code owners of pull request %s could not be asked", pull["id"])
    # Marked after each push only: a new lease holder skims the other events again.
    await app[STORE].events.set_cursor(CURSOR, int(event.id))


async def _owners_of_push(app: web.Application, pull: dict[str, Any], event: Event) -> None:
    """New commits on a head: the code owners of paths it now changes are asked to review."""
    if not pull["head_oid"] or not pull["base_oid"]:
        return
    store = app[STORE]
    # The whole object (assignees, requests), as the events of the requests show it.
    pull = {**pull, **(await store.issues.get(pull["repo_id"], pull["number"], True) or {})}
    repo = await store.repos.by_id(pull["repo_id"])
    actor = await store.users.by_id(int(event.actor["id"])) if event.actor else None
    if repo is not None:
        await codeowners.request_owners(app, repo, pull, actor, pull["base_oid"], pull["head_oid"])


async def pull_sync_ctx(app: web.Application) -> AsyncIterator[None]:
    """The mergeable updater reads the log on the lease holder, from where it stopped."""
    app[LEADER].add(consumer(app, CURSOR, lambda event: _on_event(app, event)))
    yield
