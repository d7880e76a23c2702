"""The dashboard's page and its assets, served from the package under a strict CSP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


# The pages the links of notices, events and Markdown name ({web_url}/owner/name/issues/3,
# /owner/name, /username): the same page, which routes itself from the path. Words the
# server uses at its root are no owner here, so /api/… and the rest still answer 404 JSON;
# git's own paths (/owner/name/info/refs, …/git-upload-pack) are other routes.
ROOT_WORDS = "api|auth|chat|health|ui|ws"
OWNER = r"(?!(?:" + ROOT_WORDS + r")(?:/|$))[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?"
NAME = r"(?!\.\.?(?:/|$))[A-Za-z0-9._-]{1,100}"
_REPO = "/{owner:" + OWNER + "}/{name:" + NAME + "}"
# Documented loosely: a path the routes do not take answers 404, as any other unknown
# path does (a pattern here would have to say what aiohttp decodes first).
LOOSE = {"type": "string", "minLength": 1}
PAGE_PARAMS: dict[str, dict[str, Any]] = {
    "owner": {**LOOSE, "description": "a user or an organization"},
    "name": {**LOOSE, "description": "a repository"},
    "ref": {**LOOSE, "description": "a commit, or a branch"},
}
ABOUT = (
    "The same page as /, for the links notices and rendered Markdown carry; it turns the "
    "path into its #/ route. It reads nothing: whether the repository exists, or may be "
    "read, is what the page's own API calls answer."
)


def _page() -> web.Response:
    return web.Response(
        body=(STATIC / "index.html").read_bytes(),
        content_type="text/html",
        charset="utf-8",
        headers={**HEADERS, "Cache-Control": "no-cache"},
    )


def _page_route(paths: tuple[str, ...], what: str, kinds: tuple[str, ...] = ()) -> Any:
    """One handler of the page for paths whose {kind} (if any) is one of kinds."""

    @doc(
        f"The dashboard's page at a forge's path: {what}",
        public=True,
        tag="meta",
        responses={200: HTML},
        errors=(404,),
        path={**PAGE_PARAMS, "kind": {"type": "string", "enum": list(kinds)}},
        description=ABOUT,
    )
    @requires("public")
    async def page(request: web.Request) -> web.Response:
        return _page()

    for path in paths:
        routes.get(path)(page)
    return page


PAGE_HANDLERS = (
    _page_route(("/{owner:" + OWNER + "}", _REPO), "a user or organization, a repository"),
    _page_route(
        (_REPO + "/{kind:issues|pulls|releases}",),
        "a repository's issues, pull requests or releases",
        ("issues", "pulls", "releases"),
    ),
    _page_route(
        (_REPO + r"/{kind:issues|pulls}/{number:[1-9]\d{0,11}}",),
        "an issue or a pull request",
        ("issues", "pulls"),
    ),
    _page_route(
        (_REPO + "/{kind:commit|commits}/{ref}",),
        "a commit, or a branch's commits",
        ("commit", "commits"),
    ),
)


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
    return _page()


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
