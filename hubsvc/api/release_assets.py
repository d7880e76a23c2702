"""Release assets: uploaded into the data folder, downloaded as attachments, counted."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

from aiohttp import web

from schemas.common import PageQuerySchema
from schemas.releases import AssetEnvelopeSchema, AssetListSchema, AssetQuerySchema

from ..errors import NotFound
from ..events.shape import Event
from ..keys import CONFIG, STORE
from ..policy import requires
from ..services.publish import event
from ..services.releases import asset_path, place, remove_assets, uploaded
from ..web.auth import require_user
from ..web.openapi import doc
from ..web.permissions import load_repo
from ..web.present_planning import asset as asset_json
from ..web.rest import json_response, read_query
from .releases import DRAFTS_DOC, RELEASES, _id, _load, _writer

# Registered before releases' routes, so /releases/assets/… is never read as a release id.
routes = web.RouteTableDef()
# Served as a download whatever was declared: never rendered in the API's origin.
SAFE_TYPES = ("application/", "image/png", "image/jpeg", "image/gif", "text/plain")


@routes.get(RELEASES + "/assets/{assetId}")
@doc(
    "Download an asset (counted in downloadCount)",
    responses={200: "the asset's bytes, as an attachment"},
    errors=(404,),
    public=True,
    tag="releases",
    description="Content-Type as uploaded when it is a safe one to serve, else "
    "application/octet-stream; Content-Disposition: attachment with its name. " + DRAFTS_DOC,
)
@requires("repo.read")
async def download_asset(request: web.Request) -> web.StreamResponse:
    repo = await load_repo(request)
    found = await _asset(request, repo)
    path = asset_path(request.app, repo["id"], found["id"])
    if not await asyncio.to_thread(path.is_file):
        raise NotFound("asset not found")
    await request.app[STORE].releases.count_download(found["id"])
    kind = found["content_type"]
    if not kind.startswith(SAFE_TYPES) or kind.startswith("application/xhtml"):
        kind = "application/octet-stream"
    name = found["name"]
    ascii_name = name.encode("ascii", "replace").decode().replace('"', "_").replace("?", "_")
    return web.FileResponse(
        path,
        headers={
            "Content-Type": kind,
            "Content-Disposition": (
                f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name)}"
            ),
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "sandbox; default-src 'none'",
        },
    )


@routes.delete(RELEASES + "/assets/{assetId}")
@doc(
    "Delete an asset (write access)",
    responses={204: "deleted"},
    errors=(403, 404),
    tag="releases",
)
@requires("repo.write")
async def delete_asset(request: web.Request) -> web.Response:
    require_user(request)
    repo = await load_repo(request, "write")
    found = await _asset(request, repo)
    release = await request.app[STORE].releases.get(repo["id"], found["release_id"], True)

    def events(gone: bool) -> list[Event]:
        if not gone or release is None or release["draft"]:
            return []
        base = request.app[CONFIG].base_url
        body = {"action": "asset_deleted", "asset": asset_json(base, repo, found)}
        return [event(request, repo, "release", body)]

    if not await request.app[STORE].releases.delete_asset(found["id"], emit=events):
        raise NotFound("asset not found")
    await remove_assets(request.app, repo["id"], [found["id"]])
    return web.Response(status=204)


async def _asset(request: web.Request, repo: dict) -> dict:
    found = await request.app[STORE].releases.asset(repo["id"], _id(request.match_info["assetId"]))
    if found is None or (found["draft"] and not _writer(repo)):
        raise NotFound("asset not found")
    return found


@routes.get(RELEASES + "/{id}/assets")
@doc(
    "A release's assets, by name",
    query=PageQuerySchema,
    responses={200: AssetListSchema},
    errors=(400, 404),
    public=True,
    tag="releases",
    description=DRAFTS_DOC,
)
@requires("repo.read")
async def list_assets(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    found = await _load(request, repo)
    page = read_query(request, PageQuerySchema())
    rows = (await request.app[STORE].releases.assets([found["id"]]))[found["id"]]
    shown = rows[page["offset"] : page["offset"] + page["limit"]]
    base = request.app[CONFIG].base_url
    return json_response(
        {
            "assets": [asset_json(base, repo, a) for a in shown],
            "hasMore": len(rows) > page["offset"] + page["limit"],
        }
    )


@routes.post(RELEASES + "/{id}/assets")
@doc(
    "Upload an asset (write access): the raw body, its Content-Type kept",
    query=AssetQuerySchema,
    body={"application/octet-stream": {"type": "string", "format": "binary"}},
    responses={201: AssetEnvelopeSchema},
    errors=(400, 403, 404, 409, 413),
    tag="releases",
    description="Streamed to the data folder; past [git] max_object_bytes 413 and nothing "
    "is kept. A name the release has already is 409.",
)
@requires("repo.write")
async def upload_asset(request: web.Request) -> web.Response:
    user = require_user(request)
    repo = await load_repo(request, "write")
    found = await _load(request, repo)
    name = read_query(request, AssetQuerySchema())["name"]
    kind = request.content_type or "application/octet-stream"
    base = request.app[CONFIG].base_url
    target: list[Any] = []

    def events(row: dict) -> list[Event]:
        if found["draft"]:
            return []
        body = {"action": "asset_uploaded", "asset": asset_json(base, repo, row)}
        return [event(request, repo, "release", body)]

    async with uploaded(request) as (path, size):

        def put(asset_id: int) -> None:
            target.append(asset_path(request.app, repo["id"], asset_id))
            place(path, target[0])

        try:
            row = await request.app[STORE].releases.add_asset(
                found["id"], repo["id"], name, kind, size, user["id"], put, emit=events
            )
        except BaseException:
            # Moved into place but not committed: no row names it, so it goes.
            for left in target:
                left.unlink(missing_ok=True)
            raise
    return json_response({"asset": asset_json(base, repo, row)}, status=201)
