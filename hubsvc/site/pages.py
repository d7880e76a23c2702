"""The dashboard's page and its assets, served from the package under a strict CSP."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from ..policy import requires
from ..web.openapi import doc

routes = web.RouteTableDef()
STATIC = Path(__file__).parent / "static"
TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
# Only the files shipped in static/ are served: a name in the URL is looked up in this
# table, never joined onto a path.
ASSETS = {p.name: p for p in STATIC.iterdir() if p.suffix in TYPES}
# Every script and style is a file of this server: no inline script or style, nothing
# from another origin; the WebSocket and fetches go to this origin only.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
HTML = {"description": "HTML page", "content": {"text/html": {"schema": {"type": "string"}}}}


@routes.get("/")
@doc(
    "The web dashboard (sign-in, live activity, repositories, search)",
    public=True,
    tag="meta",
    responses={200: HTML},
    description="One page that loads /ui/app.js; it uses only the public API (the session "
    "cookie from /auth/sign-in, /api/events and /ws) and routes by the URL's #fragment.",
)
@requires("public")
async def index(request: web.Request) -> web.Response:
    return web.Response(
        body=(STATIC / "index.html").read_bytes(),
        content_type="text/html",
        charset="utf-8",
        headers={**HEADERS, "Cache-Control": "no-cache"},
    )


@routes.get("/ui/{file}")
@doc(
    "The dashboard's scripts and styles",
    public=True,
    tag="meta",
    errors=(404,),
    path={"file": {"type": "string", "enum": sorted(ASSETS)}},
    responses={
        200: {
            "description": "a JavaScript module, a style sheet or an image",
            "content": {t: {"schema": {"type": "string"}} for t in sorted(set(TYPES.values()))},
        }
    },
)
@requires("public")
async def asset(request: web.Request) -> web.StreamResponse:
    path = ASSETS.get(request.match_info["file"])
    if path is None:
        raise web.HTTPNotFound()
    return web.FileResponse(
        path,
        headers={**HEADERS, "Content-Type": TYPES[path.suffix], "Cache-Control": "no-cache"},
    )
