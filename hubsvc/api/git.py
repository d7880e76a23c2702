"""Git browsing: branches, commits, a commit's diff, trees and files."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any, TypeVar

from aiohttp import web

from schemas.git import (
    BranchListSchema,
    CommitListSchema,
    CommitsQuerySchema,
    DiffSchema,
    FileEnvelopeSchema,
    FileQuerySchema,
    ReadmeQuerySchema,
    ReadmeSchema,
    TreeQuerySchema,
    TreeSchema,
)

from ..errors import NotFound
from ..git.answers import AT_COMMIT, DIFFS, ensure_prune_stamp
from ..git.files import REPO_FILES
from ..git.protocol import stream_blob
from ..git.repo import GitRepo
from ..git.signatures import signed_of_kept
from ..keys import CONFIG
from ..policy import requires
from ..services.signatures import unsigned, verifications
from ..web.markdown import render
from ..web.openapi import doc
from ..web.permissions import load_repo
from ..web.rest import json_response, read_query, shared

routes = web.RouteTableDef()
VERIFICATION_DOC = (
    "Each commit's `verification`, as GitHub's: a commit signed over SSH (`git config "
    "gpg.format ssh`) by a key on an account whose e-mail is its committer's is "
    "`{verified: true, reason: valid, signer: username}`; otherwise `verified: false` with "
    "`unsigned`, `unknown_key`, `bad_email` or `invalid`. Who holds a key is read on every "
    "answer, so an answer with a signed commit is revalidated rather than kept as immutable."
)
T = TypeVar("T")
REPO = "/api/repositories/{owner}/{name}"
_OID_RE = re.compile(r"^[0-9a-f]{40}$")
RAW_RESPONSE = {
    "description": "JSON, or with return=1 the raw bytes under a safe type: text/plain for "
    "text, the image's own for images, else application/octet-stream",
    "content": {
        "application/json": {"schema": FileEnvelopeSchema},
        **{
            media: {"schema": {"type": "string", "format": "binary"}}
            for media in (
                "text/plain",
                "image/png",
                "image/jpeg",
                "image/gif",
                "image/webp",
                "image/bmp",
                "image/x-icon",
                "application/octet-stream",
            )
        },
    },
}


def _etag(*parts: str) -> str:
    return '"' + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32] + '"'


def _cache_headers(repo: dict, etag: str, immutable: bool) -> dict[str, str]:
    """Answers addressed by a commit oid never change; others are revalidated."""
    scope = "public" if repo["visibility"] == "public" else "private"
    control = f"{scope}, max-age=31536000, immutable" if immutable else f"{scope}, no-cache"
    return {"ETag": etag, "Cache-Control": control}


def _held(request: web.Request) -> set[str]:
    """The ETags the client says it holds (If-None-Match)."""
    return {t.strip() for t in request.headers.get("If-None-Match", "").split(",")}


def _fresh(request: web.Request, etag: str) -> bool:
    return etag in _held(request)


async def _read_at(
    request: web.Request,
    repo: dict,
    branch: str | None,
    etag_of: Callable[[str], str],
    work: Callable[[GitRepo, str], T],
    weight: Callable[[Any], int],
) -> tuple[str | None, str, T | None]:
    """Resolve branch (default: the default branch) and call work(git, oid), in one git hop.

    (oid, etag, result): oid is None for an empty repository; result is None, work never
    called, when the client already holds the etag. One hop, not two: each costs a
    thread hand-off both ways, a tenth of a millisecond on a busy machine. None at all
    when the branch's tip is read on the loop and the answer for it was kept: the etag
    names the commit, path and page, so a kept answer is the one work would give.
    """
    rev = branch or repo["default_branch"]
    held = _held(request)
    files = request.app[REPO_FILES]
    tip = files.tip(repo["id"], rev)
    if tip is not None:
        etag = etag_of(tip)
        if etag in held:
            return tip, etag, None
        kept = AT_COMMIT.get(etag)
        if kept is not None:
            return tip, etag, kept

    def read(git: GitRepo) -> tuple[str | None, str, T | None]:
        oid = git.resolve(rev)
        if oid is None:
            if git.is_empty():
                return None, "", None
            raise NotFound("branch not found")
        etag = etag_of(oid)
        if etag in held:
            return oid, etag, None
        result = work(git, oid)
        AT_COMMIT.put(etag, result, weight(result))
        return oid, etag, result

    return await files.run(repo["id"], read)


def _page_weight(page: tuple[list[dict], bool]) -> int:
    """About the bytes a kept tree page holds."""
    return 200 * len(page[0])


def _file_weight(found: dict) -> int:
    """About the bytes a kept file holds: its text, or its raw bytes."""
    return 200 + len(found.get("content") or found.get("data") or b"")


def _answer(
    request: web.Request, repo: dict, data: dict, etag: str, immutable: bool
) -> web.Response:
    return json_response(data, headers=_cache_headers(repo, etag, immutable))


@routes.get(REPO + "/branches")
@doc(
    "Branches by name, with their head commit",
    responses={200: BranchListSchema},
    errors=(404,),
    public=True,
    tag="git",
)
@requires("repo.read")
async def branches(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    found = await request.app[REPO_FILES].run(repo["id"], lambda g: g.branches())
    for branch in found:
        branch["isDefault"] = branch["name"] == repo["default_branch"]
    return json_response({"branches": found, "hasMore": False})


@routes.get(REPO + "/commits")
@doc(
    "Commits reachable from a branch, tag or oid, newest first",
    query=CommitsQuerySchema,
    responses={200: CommitListSchema, 304: "not modified"},
    errors=(404,),
    public=True,
    tag="git",
    description=VERIFICATION_DOC,
)
@requires("repo.read")
async def commits(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    query = read_query(request, shared(CommitsQuerySchema))
    rev = query.get("branch") or repo["default_branch"]

    def page(g: GitRepo) -> tuple[str | None, list[dict], bool, list[str]]:
        oid, items, more = g.commits_page(rev, query["limit"], query["skip"])
        # Which are signed: a header look, kept by oid, so unsigned pages cost nothing more.
        return oid, items, more, g.signed_of([item["oid"] for item in items])

    # Resolving and walking in one thread hop; the log is cheap next to a second hop.
    oid, items, more, signed = await request.app[REPO_FILES].run(repo["id"], page)
    if oid is None:
        return json_response({"commits": [], "hasMore": False})
    etag_parts = ["commits", oid, str(query["limit"]), str(query["skip"])]
    immutable = bool(_OID_RE.match(query.get("branch", "")))
    checks: dict[str, dict] = {}
    if signed:
        # Who holds a key changes while the commits do not: the answer is revalidated.
        checks = await verifications(request.app, repo["id"], items, signed)
        etag_parts.append(_verified_part(checks))
        immutable = False
    etag = _etag(*etag_parts)
    if _fresh(request, etag):
        return web.Response(status=304, headers=_cache_headers(repo, etag, immutable))
    # Items are shared between answers (kept by oid): each answer gets its own copies.
    shown = [{**item, "verification": checks.get(item["oid"]) or unsigned()} for item in items]
    return _answer(request, repo, {"commits": shown, "hasMore": more}, etag, immutable)


def _verified_part(checks: dict[str, dict]) -> str:
    """What the verifications add to an ETag."""
    return ",".join(f"{oid}:{v['reason']}:{v['signer'] or ''}" for oid, v in sorted(checks.items()))


@routes.get(REPO + "/commits/{oid}/diff")
@doc(
    "The diff of one commit against its first parent (the empty tree for a root commit)",
    responses={200: DiffSchema, 304: "not modified"},
    errors=(400, 404),
    public=True,
    tag="git",
    description="oid: a full commit id, or 7+ hex characters naming one commit (400 when "
    "several match). Capped as on GitHub: files are listed by path up to "
    "`[git] max_diff_files` (default 300) and patches hold `[git] max_diff_bytes` "
    "(default 5 MiB) of text in all, at most 1 MiB per file; a file with a side "
    "over 4 MiB is listed without a patch. Whatever was cut says `truncated: true`, "
    "on the file and on the answer; `stats.filesChanged` counts every changed file. "
    + VERIFICATION_DOC,
)
@requires("repo.read")
async def diff(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    oid = request.match_info["oid"]
    if not _OID_RE.match(oid):  # a short id (7+ hex, unambiguous) names the commit too
        oid = await request.app[REPO_FILES].run(repo["id"], lambda g: g.expand_oid(oid)) or oid
    etag = _etag("diff", oid)
    files = request.app[REPO_FILES]
    if _fresh(request, etag) and _OID_RE.match(oid):
        # An unsigned commit's diff never changes; a signed one's verification may.
        signed = signed_of_kept(oid)
        if signed is None:
            signed = bool(await files.run(repo["id"], lambda g: g.signed_of([oid])))
        if not signed:
            return web.Response(status=304, headers=_cache_headers(repo, etag, True))
    limits = request.app[CONFIG]["git"]
    # Kept by repository and oid, with the prune stamp the commit was read under: a
    # prune in any process replaces the stamp, so a pruned commit is never answered.
    key = (repo["id"], oid, limits["max_diff_bytes"], limits["max_diff_files"])
    stamp = files.prune_stamp(repo["id"])
    kept = DIFFS.get(key) if stamp is not None else None
    if kept is not None and kept[0] == stamp:
        data, signed_oids = kept[1], kept[2]
    else:

        def read(g: GitRepo) -> tuple[dict, list[str]]:
            read_under = ensure_prune_stamp(g.path)  # before the objects are read
            data = g.diff(oid, limits["max_diff_bytes"], limits["max_diff_files"])
            signed_oids = g.signed_of([data["commit"]["oid"]])
            if read_under is not None:
                weight = len(data["commit"]["message"]) + sum(
                    300 + len(f["patch"]) for f in data["files"]
                )
                DIFFS.put(key, (read_under, data, signed_oids), weight)
            return data, signed_oids

        data, signed_oids = await files.run(repo["id"], read)
    commit = data["commit"]
    verification = unsigned()
    immutable = True
    if signed_oids:
        checks = await verifications(request.app, repo["id"], [commit], signed_oids)
        verification = checks[commit["oid"]]
        etag = _etag("diff", oid, _verified_part(checks))
        immutable = False
        if _fresh(request, etag):
            return web.Response(status=304, headers=_cache_headers(repo, etag, False))
    data = {**data, "commit": {**commit, "verification": verification}}
    return _answer(request, repo, data, etag, immutable)


@routes.get(REPO + "/tree")
@doc(
    "Entries of a directory, directories first",
    query=TreeQuerySchema,
    responses={200: TreeSchema, 304: "not modified"},
    errors=(404,),
    public=True,
    tag="git",
    description="Paged: `limit` entries (default and most: `[git] max_tree_entries`, 1000 "
    "unless configured; larger values are lowered to it) from `offset`; "
    "`hasMore` says another page follows. `size` is read from each object's "
    "header, as `git ls-tree -l` does.",
)
@requires("repo.read")
async def tree(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    query = read_query(request, shared(TreeQuerySchema))
    most = request.app[CONFIG]["git"]["max_tree_entries"]
    limit, offset = min(query.get("limit", most), most), query["offset"]
    oid, etag, page = await _read_at(
        request,
        repo,
        query.get("branch"),
        lambda oid: _etag("tree", oid, query["path"], str(limit), str(offset)),
        lambda g, oid: g.tree_page(oid, query["path"], limit, offset),
        _page_weight,
    )
    if oid is None:
        return json_response({"files": [], "isEmpty": True})
    immutable = bool(_OID_RE.match(query.get("branch", "")))
    if page is None:
        return web.Response(status=304, headers=_cache_headers(repo, etag, immutable))
    entries, more = page
    return _answer(
        request, repo, {"files": entries, "isEmpty": False, "hasMore": more}, etag, immutable
    )


@routes.get(REPO + "/file")
@doc(
    "One file: JSON (base64 for binary), or with return=1 the raw bytes",
    query=FileQuerySchema,
    responses={200: RAW_RESPONSE, 304: "not modified"},
    errors=(404,),
    public=True,
    tag="git",
    description="A file over `[git] max_blob_bytes` (default 10 MiB) comes in JSON without "
    "its content: `content` is empty and `truncated: true`, with its `size`, "
    "`isBinary` and `encoding`. `return=1` serves any size, streamed from git "
    "with its Content-Length.",
)
@requires("repo.read")
async def file(request: web.Request) -> web.StreamResponse:
    repo = await load_repo(request)
    query = read_query(request, shared(FileQuerySchema))
    files, limits = request.app[REPO_FILES], request.app[CONFIG]["git"]
    path, most = query["path"], limits["max_blob_bytes"]
    oid, etag, found = await _read_at(
        request,
        repo,
        query.get("branch"),
        lambda oid: _etag("file", oid, path, str(query["raw"])),
        lambda g, oid: g.raw_blob(oid, path, most) if query["raw"] else g.file(oid, path, most),
        _file_weight,
    )
    if oid is None:
        raise NotFound("file not found: the repository is empty")
    immutable = bool(_OID_RE.match(query.get("branch", "")))
    headers = _cache_headers(repo, etag, immutable)
    if found is None:
        return web.Response(status=304, headers=headers)
    if query["raw"]:
        blob = found
        headers.update(
            {
                "X-Content-Type-Options": "nosniff",
                "Content-Security-Policy": "default-src 'none'; sandbox",
                "Content-Type": blob["contentType"],
            }
        )
        if blob["data"] is None:
            return await stream_blob(
                request,
                files.path(repo["id"]),
                blob["oid"],
                blob["size"],
                headers,
                limits["timeout_seconds"],
            )
        return web.Response(body=blob["data"], headers=headers)
    return _answer(request, repo, {"file": found}, etag, immutable)


README_NAMES = ("readme.md", "readme.markdown", "readme")


@routes.get(REPO + "/readme")
@doc(
    "The README at the root, rendered from Markdown to sanitized HTML",
    query=ReadmeQuerySchema,
    responses={200: ReadmeSchema, 304: "not modified"},
    errors=(404,),
    public=True,
    tag="git",
    description="The first of README.md, README.markdown or README (any case) at the root "
    "of the branch, rendered with markdown-it-py (CommonMark, tables, strikethrough) and "
    "sanitized with nh3, for a page to show as it is. 404 when there is none.",
)
@requires("repo.read")
async def readme(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    query = read_query(request, shared(ReadmeQuerySchema))
    most = request.app[CONFIG]["git"]["max_blob_bytes"]

    def find(g: GitRepo, oid: str) -> dict:
        entries, _ = g.tree_page(oid, "", 1000, 0)
        names = {e["name"].lower(): e["name"] for e in entries if e["type"] == "file"}
        found = next((names[n] for n in README_NAMES if n in names), None)
        if found is None:
            raise NotFound("no README")
        return g.file(oid, found, most)

    oid, etag, data = await _read_at(
        request,
        repo,
        query.get("branch"),
        lambda oid: _etag("readme", oid),
        find,
        _file_weight,
    )
    if oid is None:
        raise NotFound("no README: the repository is empty")
    immutable = bool(_OID_RE.match(query.get("branch", "")))
    if data is None:
        return web.Response(status=304, headers=_cache_headers(repo, etag, immutable))
    text = data["content"] if data["encoding"] == "utf-8" else ""
    return _answer(request, repo, {"path": data["path"], "html": render(text)}, etag, immutable)
