"""Releases' tags, made as a push makes a ref, and their asset files under the data folder."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aiohttp import web

from ..errors import PayloadTooLarge, Unprocessable
from ..git.files import REPO_FILES
from ..keys import CONFIG, STORE
from ..notify.leader import LEADER
from .protection import ZERO, ref_problems
from .pushes import record_push

CHUNK = 1 << 16


async def tag_commit(app: web.Application, repo: dict[str, Any], tag: str) -> str | None:
    """The commit a tag names now, or None when there is no such tag."""
    tags = await app[REPO_FILES].run(repo["id"], lambda g: g.tags())
    return next((t["oid"] for t in tags if t["name"] == tag), None)


async def target_commit(app: web.Application, repo: dict[str, Any], tag: str, target: str) -> str:
    """The commit a release would tag: the tag's when it exists, else target's (422)."""
    found = await tag_commit(app, repo, tag)
    if found is None:
        found = await app[REPO_FILES].run(repo["id"], lambda g: g.resolve(target))
    if found is None:
        raise Unprocessable(f"targetCommitish: no branch or commit {target} in this repository")
    return found


async def ensure_tag(
    app: web.Application, repo: dict[str, Any], user: dict[str, Any], tag: str, target: str
) -> str:
    """The commit of tag, made at target first when the tag is missing; 422 naming the field.

    A tag made here goes the way a pushed one does: the branch rules are asked about the
    ref update as the pre-receive hook asks them, the update is journalled before git moves
    the ref (compare-and-swap from nothing, so a tag pushed meanwhile wins), and it is
    recorded as a push, with its push event, in one transaction.
    """
    files, store = app[REPO_FILES], app[STORE]
    found = await tag_commit(app, repo, tag)
    if found is not None:
        return found
    oid = await files.run(repo["id"], lambda g: g.resolve(target))
    if oid is None:
        raise Unprocessable(f"targetCommitish: no branch or commit {target} in this repository")
    ref = f"refs/tags/{tag}"
    update = (ZERO, oid, ref)

    async def never(_old: str, _new: str) -> bool:
        return False  # nothing is overwritten: the tag is new

    rules = await store.protection.rules(repo["id"])
    problems = await ref_problems(rules, repo.get("role"), [update], never)
    if problems:
        raise Unprocessable("tagName: " + "; ".join(problems))
    refs_now = await files.run(repo["id"], lambda g: g.head_oids())
    flight = await store.repos.push_started(repo["id"], user["id"], refs_now, app[LEADER].holder)
    try:
        made = await files.run(repo["id"], lambda g: g.create_tag(tag, oid))
    except BaseException:
        await asyncio.shield(store.repos.push_ended(flight))
        raise
    if not made:
        await store.repos.push_ended(flight)
        found = await tag_commit(app, repo, tag)
        if found is None:
            raise Unprocessable(f"tagName: git refused to make the tag {tag}")
        return found
    await record_push(app, repo, [update], user, flight)
    return oid


def asset_path(app: web.Application, repo_id: int, asset_id: int) -> Path:
    """Where an asset's bytes live."""
    return app[REPO_FILES].assets(repo_id) / str(int(asset_id))


@contextlib.asynccontextmanager
async def uploaded(request: web.Request) -> AsyncIterator[tuple[Path, int]]:
    """The request body streamed into a file of its own under the data folder: (path, size).

    Past [git] max_object_bytes it stops with 413 and the file is gone; the file is
    removed after the block unless the block moved it into place.
    """
    limit = request.app[CONFIG]["git"]["max_object_bytes"]
    if request.content_length is not None and request.content_length > limit:
        raise PayloadTooLarge(f"an asset may be at most {limit} bytes ([git] max_object_bytes)")
    spool = request.app[REPO_FILES].spool
    fd, name = tempfile.mkstemp(prefix="asset-", dir=spool)
    path = Path(name)
    size = 0
    try:
        with os.fdopen(fd, "wb") as out:
            async for chunk in request.content.iter_chunked(CHUNK):
                size += len(chunk)
                if size > limit:
                    raise PayloadTooLarge(
                        f"an asset may be at most {limit} bytes ([git] max_object_bytes)"
                    )
                await asyncio.to_thread(out.write, chunk)
        yield path, size
    finally:
        path.unlink(missing_ok=True)


def place(source: Path, target: Path) -> None:
    """Move an uploaded file to where its asset lives (same file system: a rename)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(source, target)


async def remove_assets(app: web.Application, repo_id: int, asset_ids: list[int]) -> None:
    """Delete the files of assets whose rows are gone."""

    def remove() -> None:
        for asset_id in asset_ids:
            asset_path(app, repo_id, asset_id).unlink(missing_ok=True)

    await asyncio.to_thread(remove)
