"""Releases of tags, their uploaded assets, and the tag list."""

from __future__ import annotations

from aiohttp import web

from schemas.common import PageQuerySchema
from schemas.releases import (
    ReleaseCreateSchema,
    ReleaseEnvelopeSchema,
    ReleaseListSchema,
    ReleaseUpdateSchema,
    TagListSchema,
)

from ..errors import Conflict, NotFound
from ..events.shape import Event
from ..git.files import REPO_FILES
from ..keys import CONFIG, STORE
from ..policy import requires
from ..services.publish import event
from ..services.releases import (
    ensure_tag,
    remove_assets,
    target_commit,
)
from ..web.auth import require_user
from ..web.openapi import doc
from ..web.permissions import allows, load_repo
from ..web.present_planning import release as release_json
from ..web.rest import json_response, read_json, read_query

routes = web.RouteTableDef()
REPO = "/api/repositories/{owner}/{name}"
RELEASES = REPO + "/releases"
DRAFTS_DOC = "Drafts are shown to those who may write to the repository only (404 to readers)."
TAG_PATH = {"tag": {"type": "string", "minLength": 1, "maxLength": 255}}


def _id(raw: str) -> int:
    if not raw.isdigit() or len(raw) > 18:
        raise NotFound("not found")
    return int(raw)


def _writer(repo: dict) -> bool:
    return allows(repo["role"], "write")


async def _shape(request: web.Request, repo: dict, rows: list[dict]) -> list[dict]:
    """Releases with their assets, one query for the assets of all of them."""
    assets = await request.app[STORE].releases.assets([r["id"] for r in rows])
    base = request.app[CONFIG].base_url
    return [release_json(base, repo, r, assets[r["id"]]) for r in rows]


def _events(
    request: web.Request, repo: dict, before: dict | None, after: dict | None, body: dict
) -> list[Event]:
    """The release event of a change: drafts' own changes are no one else's news."""
    was = before is not None and not before["draft"]
    now = after is not None and not after["draft"]
    if not was and not now:
        return []
    if now and not was:
        action = "published"
    elif after is None:
        action = "deleted"
    else:
        action = "edited" if now else "unpublished"
    return [event(request, repo, "release", {"action": action, "release": body})]


async def _load(request: web.Request, repo: dict) -> dict:
    found = await request.app[STORE].releases.get(
        repo["id"], _id(request.match_info["id"]), _writer(repo)
    )
    if found is None:
        raise NotFound("release not found")
    return found


async def _one(request: web.Request, repo: dict, row: dict | None) -> web.Response:
    if row is None:
        raise NotFound("release not found")
    [body] = await _shape(request, repo, [row])
    return json_response({"release": body})


@routes.get(RELEASES)
@doc(
    "Releases, newest first (drafts first, for writers)",
    query=PageQuerySchema,
    responses={200: ReleaseListSchema},
    errors=(400, 404),
    public=True,
    tag="releases",
    description=DRAFTS_DOC,
)
@requires("repo.read")
async def list_releases(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    page = read_query(request, PageQuerySchema())
    rows, more = await request.app[STORE].releases.page(
        repo["id"], _writer(repo), page["limit"], page["offset"]
    )
    return json_response({"releases": await _shape(request, repo, rows), "hasMore": more})


@routes.post(RELEASES)
@doc(
    "Create a release of a tag (write access), making the tag when it is missing",
    body=ReleaseCreateSchema,
    responses={201: ReleaseEnvelopeSchema},
    errors=(403, 404, 409, 422),
    tag="releases",
    description="A missing tag is made at targetCommitish (default: the default branch) "
    "the way a push makes one: the branch rules asked, journalled, a push event. A draft "
    "makes its tag when it is published. One release per tag (409). The release event "
    "(published) is written once a release is not a draft.",
)
@requires("repo.write")
async def create_release(request: web.Request) -> web.Response:
    user = require_user(request)
    repo = await load_repo(request, "write")
    data = await read_json(request, ReleaseCreateSchema())
    data.setdefault("targetCommitish", repo["default_branch"])
    store = request.app[STORE]
    if await store.releases.by_tag(repo["id"], data["tagName"], True) is not None:
        raise Conflict(f"tag {data['tagName']} already has a release")
    if data["draft"]:
        # A draft's tag is made when it is published; the target must exist now.
        await target_commit(request.app, repo, data["tagName"], data["targetCommitish"])
    else:
        await ensure_tag(request.app, repo, user, data["tagName"], data["targetCommitish"])
    base = request.app[CONFIG].base_url
    row = await store.releases.create(
        repo["id"],
        user["id"],
        data,
        emit=lambda row: _events(request, repo, None, row, release_json(base, repo, row, [])),
    )
    return json_response({"release": release_json(base, repo, row, [])}, status=201)


@routes.get(RELEASES + "/latest")
@doc(
    "The latest release: the newest published one that is not a prerelease",
    responses={200: ReleaseEnvelopeSchema},
    errors=(404,),
    public=True,
    tag="releases",
)
@requires("repo.read")
async def latest_release(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    return await _one(request, repo, await request.app[STORE].releases.latest(repo["id"]))


@routes.get(RELEASES + "/tags/{tag}")
@doc(
    "The release of a tag",
    responses={200: ReleaseEnvelopeSchema},
    errors=(404,),
    public=True,
    tag="releases",
    path=TAG_PATH,
    description=DRAFTS_DOC,
)
@requires("repo.read")
async def release_by_tag(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    row = await request.app[STORE].releases.by_tag(
        repo["id"], request.match_info["tag"], _writer(repo)
    )
    return await _one(request, repo, row)


@routes.get(RELEASES + "/{id}")
@doc(
    "One release with its assets",
    responses={200: ReleaseEnvelopeSchema},
    errors=(404,),
    public=True,
    tag="releases",
    description=DRAFTS_DOC,
)
@requires("repo.read")
async def get_release(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    return await _one(request, repo, await _load(request, repo))


@routes.patch(RELEASES + "/{id}")
@doc(
    "Edit a release (write access); publishing a draft makes its tag when missing",
    body=ReleaseUpdateSchema,
    responses={200: ReleaseEnvelopeSchema},
    errors=(403, 404, 409, 422),
    tag="releases",
    description="The release event's action: published (a draft made public), unpublished "
    "(back to a draft), edited; a draft's own edits write none.",
)
@requires("repo.write")
async def patch_release(request: web.Request) -> web.Response:
    user = require_user(request)
    repo = await load_repo(request, "write")
    found = await _load(request, repo)
    data = await read_json(request, ReleaseUpdateSchema())
    merged = {
        "tagName": found["tag_name"],
        "targetCommitish": found["target_commitish"],
        "draft": bool(found["draft"]),
        **data,
    }
    if merged["draft"]:
        await target_commit(request.app, repo, merged["tagName"], merged["targetCommitish"])
    else:
        await ensure_tag(request.app, repo, user, merged["tagName"], merged["targetCommitish"])
    store = request.app[STORE]
    assets = (await store.releases.assets([found["id"]]))[found["id"]]
    base = request.app[CONFIG].base_url
    row = await store.releases.update(
        found["id"],
        data,
        emit=lambda row: _events(
            request, repo, found, row, release_json(base, repo, row, assets) if row else {}
        ),
    )
    return await _one(request, repo, row)


@routes.delete(RELEASES + "/{id}")
@doc(
    "Delete a release and its assets (write access); its tag stays",
    responses={204: "deleted"},
    errors=(403, 404),
    tag="releases",
)
@requires("repo.write")
async def delete_release(request: web.Request) -> web.Response:
    require_user(request)
    repo = await load_repo(request, "write")
    found = await _load(request, repo)
    [body] = await _shape(request, repo, [found])
    gone = await request.app[STORE].releases.delete(
        found["id"],
        emit=lambda gone: [] if gone is None else _events(request, repo, found, None, body),
    )
    if gone is None:
        raise NotFound("release not found")
    await remove_assets(request.app, repo["id"], gone[1])
    return web.Response(status=204)


@routes.get(REPO + "/tags")
@doc(
    "Tags with the commits they name, by name",
    query=PageQuerySchema,
    responses={200: TagListSchema},
    errors=(400, 404),
    public=True,
    tag="releases",
)
@requires("git.read")
async def list_tags(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    page = read_query(request, PageQuerySchema())
    tags = await request.app[REPO_FILES].run(repo["id"], lambda g: g.tags())
    shown = tags[page["offset"] : page["offset"] + page["limit"]]
    return json_response(
        {
            "tags": [{"name": t["name"], "commit": {"oid": t["oid"]}} for t in shown],
            "hasMore": len(tags) > page["offset"] + page["limit"],
        }
    )
