"""A browsable API reference at /api/docs, from the Swagger UI assets a PyPI package ships."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web
from swagger_ui_bundle import swagger_ui_path

from ..policy import requires
from ..web.openapi import doc

routes = web.RouteTableDef()
ASSETS = Path(swagger_ui_path)
# Only these files are served: the name in the URL is looked up here, never joined blindly.
STATIC = {
    "swagger-ui.css": "text/css",
    "swagger-ui-bundle.js": "application/javascript",
    "swagger-ui-standalone-preset.js": "application/javascript",
    "favicon-32x32.png": "image/png",
    "favicon-16x16.png": "image/png",
}
PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>hubsvc API</title>
<link rel="stylesheet" href="/api/docs/static/swagger-ui.css">
<link rel="icon" type="image/png" href="/api/docs/static/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/api/docs/static/swagger-ui-bundle.js"></script>
<script src="/api/docs/static/swagger-ui-standalone-preset.js"></script>
<script src="/api/docs/init.js"></script>
</body>
</html>
"""
INIT = """window.ui = SwaggerUIBundle({
  url: "/api/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
  layout: "StandaloneLayout"
});
"""
# Everything the page loads comes from this server; nothing is fetched from the internet.
CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "script-src 'self'; frame-ancestors 'none'"
)
HTML = {"description": "HTML page", "content": {"text/html": {"schema": {"type": "string"}}}}


@routes.get("/api/docs")
@doc("Browsable API reference (Swagger UI)", public=True, tag="meta", responses={200: HTML})
@requires("public")
async def docs_page(request: web.Request) -> web.Response:
    return web.Response(
        text=PAGE,
        content_type="text/html",
        headers={"Content-Security-Policy": CSP, "X-Frame-Options": "DENY"},
    )


@routes.get("/api/docs/init.js")
@doc(
    "The docs page's start-up script",
    public=True,
    tag="meta",
    responses={
        200: {
            "description": "JavaScript",
            "content": {"application/javascript": {"schema": {"type": "string"}}},
        }
    },
)
@requires("public")
async def docs_init(request: web.Request) -> web.Response:
    return web.Response(text=INIT, content_type="application/javascript")


@routes.get("/api/docs/static/{file}")
@doc(
    "The docs page's assets, from the swagger-ui-bundle package",
    public=True,
    tag="meta",
    errors=(404,),
    path={"file": {"type": "string", "enum": sorted(STATIC)}},
    responses={
        200: {
            "description": "a CSS, JavaScript or image file",
            "content": {
                media: {"schema": {"type": "string", "format": "binary"}}
                for media in sorted(set(STATIC.values()))
            },
        }
    },
)
@requires("public")
async def docs_static(request: web.Request) -> web.StreamResponse:
    name = request.match_info["file"]
    if name not in STATIC:
        raise web.HTTPNotFound()
    return web.FileResponse(
        ASSETS / name,
        headers={"Content-Type": STATIC[name], "Cache-Control": "public, max-age=86400"},
    )
