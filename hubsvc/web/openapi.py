"""The OpenAPI document, generated from the routes and the schemas in schemas/."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from aiohttp import web
from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from marshmallow import Schema

from schemas.common import ErrorSchema
from schemas.paths import GIT_NAME, PATH_PARAMS

from .. import __version__
from ..policy import ACTIONS, PERSON_ONLY, action_of

ERROR_TEXT = {
    400: "bad request: malformed, a value of the wrong JSON type or out of range "
    "(the message names the field)",
    401: "authentication required, or a revoked or expired token",
    403: "signed in but not allowed, or the credential does not cover this: a token's "
    "scopes or repository list, the chat bot's scope, a cookie's cross-origin write",
    404: "not found, or private and not readable by the caller",
    405: "method not allowed",
    409: "conflict",
    410: "gone: the cursor is older than what is kept",
    413: "request body too large",
    415: "the body is not application/json (or application/*+json)",
    429: "too many requests (Retry-After says when to come back)",
    500: "unexpected failure (no details in the body)",
    503: "unavailable",
}
ALWAYS = (429, 500)
RENAMED_PREFIX = "/api/repositories/{owner}/{name}"
REPO = RENAMED_PREFIX
ISSUE = REPO + "/issues/{number}"
PULL = REPO + "/pulls/{number}"
ORG = "/api/orgs/{org}"
TEAM = ORG + "/teams/{team}"
_REPO_MADE = {"owner": "$response.body#/repo/owner/username", "name": "$response.body#/repo/name"}
# OpenAPI links, so a stateful client chains what it makes to what uses it: an operation
# that makes (or puts) something → the path of what it made, with where the path's new
# parameters come from in its answer. Every other operation at or under that path gets a
# link; parameters both paths share come from the request.
LINKS: dict[tuple[str, str], tuple[str, dict[str, str]]] = {
    ("post", "/api/repositories"): (REPO, _REPO_MADE),
    ("post", REPO + "/fork"): (REPO, _REPO_MADE),
    ("post", REPO + "/issues"): (ISSUE, {"number": "$response.body#/issue/number"}),
    ("post", ISSUE + "/comments"): (ISSUE + "/comments/{id}", {"id": "$response.body#/comment/id"}),
    ("post", REPO + "/pulls"): (PULL, {"number": "$response.body#/pullRequest/number"}),
    ("post", PULL + "/comments"): (PULL + "/comments/{id}", {"id": "$response.body#/comment/id"}),
    ("post", PULL + "/reviews"): (PULL + "/reviews", {}),
    ("post", REPO + "/hooks"): (REPO + "/hooks/{id}", {"id": "$response.body#/hook/id"}),
    ("post", REPO + "/milestones"): (
        REPO + "/milestones/{number}",
        {"number": "$response.body#/milestone/number"},
    ),
    ("post", REPO + "/releases"): (
        REPO + "/releases/{id}",
        {"id": "$response.body#/release/id"},
    ),
    ("post", REPO + "/releases/{id}/assets"): (
        REPO + "/releases/assets/{assetId}",
        {"assetId": "$response.body#/asset/id"},
    ),
    ("post", REPO + "/labels"): (REPO + "/labels/{label}", {"label": "$response.body#/label/name"}),
    ("post", ISSUE + "/reactions"): (
        ISSUE + "/reactions/{reactionId}",
        {"reactionId": "$response.body#/reaction/id"},
    ),
    ("post", ISSUE + "/comments/{id}/reactions"): (
        ISSUE + "/comments/{id}/reactions/{reactionId}",
        {"reactionId": "$response.body#/reaction/id"},
    ),
    ("put", REPO + "/collaborators/{username}"): (REPO + "/collaborators/{username}", {}),
    ("put", REPO + "/branches/{branch}/protection"): (REPO + "/branches/{branch}/protection", {}),
    ("post", REPO + "/statuses/{sha}"): (REPO + "/commits/{ref}", {"ref": "$request.path.sha"}),
    ("post", REPO + "/star"): (REPO + "/star", {}),
    ("post", "/api/users/me/tokens"): (
        "/api/users/me/tokens/{id}",
        {"id": "$response.body#/token/id"},
    ),
    ("post", "/api/orgs"): (ORG, {"org": "$response.body#/organization/name"}),
    ("put", ORG + "/members/{username}"): (ORG + "/members/{username}", {}),
    ("post", ORG + "/teams"): (TEAM, {"team": "$response.body#/team/name"}),
    ("put", TEAM + "/members/{username}"): (TEAM + "/members/{username}", {}),
    ("put", TEAM + "/repositories/{name}"): (TEAM + "/repositories/{name}", {}),
    ("post", "/api/admin/users"): (
        "/api/admin/users/{username}",
        {"username": "$response.body#/user/username"},
    ),
}


def doc(
    summary: str,
    *,
    body: type[Schema] | dict[str, Any] | None = None,
    query: type[Schema] | None = None,
    responses: dict[int, Any] | None = None,
    errors: Iterable[int] = (),
    public: bool = False,
    description: str = "",
    tag: str | None = None,
    plain_errors: bool = False,
    path: dict[str, dict[str, Any]] | None = None,
) -> Callable[[Callable], Callable]:
    """Attach the OpenAPI operation of a handler, next to its definition.

    `path` gives the schema of a path parameter that is not what its name says elsewhere
    (schemas.paths.PATH_PARAMS).
    """

    def attach(handler: Callable) -> Callable:
        handler.__apidoc__ = {  # type: ignore[attr-defined]  # read back by build_spec
            "summary": summary,
            "body": body,
            "query": query,
            "responses": responses or {},
            "errors": tuple(errors),
            "public": public,
            "description": description,
            "tag": tag,
            "plain_errors": plain_errors,
            "path": path or {},
        }
        return handler

    return attach


def _needs(action: str) -> str:
    """What a credential needs for an action, in words."""
    scope = ACTIONS[action]
    if action in PERSON_ONLY:
        return "; a signed-in session only (never a personal access token)."
    return f"; a personal access token needs `{scope}`." if scope else "."


def _response(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        return {"description": value}
    return {"description": "success", "content": {"application/json": {"schema": value}}}


def build_spec(app: web.Application) -> dict[str, Any]:
    """Walk the router and describe every documented route."""
    spec = APISpec(
        title="hubsvc",
        version=__version__,
        openapi_version="3.0.3",
        plugins=[MarshmallowPlugin()],
        info={
            "description": "Self-hostable repository hosting service API. JSON bodies are "
            "strictly typed: a boolean field takes only true or false, an integer field "
            'only a JSON integer, a string field only a string (no "yes", "1" or '
            '"5"); anything else is 400 naming the field, as is null where a field is '
            "not nullable. Query parameters are text and parsed: ?ignoreUnknown=true, "
            "?limit=5. Rate limits: a token bucket per client address (RateLimit-* headers, "
            "429 with Retry-After); GET /health is never limited, and git over HTTP of a "
            "signed-in user (a token, or a password already accepted) spends a larger "
            "bucket of that user's own ([rate_limit] git_burst, git_per_minute). "
            "A write that makes events (an issue, a comment, a star…) answers once they "
            "are stored; while the live WebSocket fan-out has more than 4 of them left to "
            "send, the answer waits for it to catch up, at most 1 s, and then carries "
            "Server-Timing: fanout;dur=<ms>: a burst of writes slows the writers, not "
            "every watcher's notifications."
        },
    )
    spec.components.security_scheme("bearer", {"type": "http", "scheme": "bearer"})
    spec.components.security_scheme("cookie", {"type": "apiKey", "in": "cookie", "name": "session"})
    # The chat bot: its key plus X-Chat-User-Id acts as the user of a verified link.
    spec.components.security_scheme(
        "chatBot", {"type": "apiKey", "in": "header", "name": "X-Chat-Bot-Key"}
    )
    spec.components.schema("Error", schema=ErrorSchema)
    paths: dict[str, dict[str, Any]] = {}
    for route in app.router.routes():
        method = route.method.lower()
        info = route.resource.get_info() if route.resource else {}
        path = info.get("formatter") or info.get("path")
        meta = getattr(route.handler, "__apidoc__", None)
        if method in ("head", "*") or path is None or meta is None:
            continue
        params = [
            {"in": "path", "name": name, "required": True, "schema": _path_schema(path, name, meta)}
            for name in re.findall(r"{([^}:]+)}", path)
        ]
        if meta["query"] is not None:
            params.append({"in": "query", "schema": meta["query"]})
        operation: dict[str, Any] = {
            "summary": meta["summary"],
            "tags": [meta["tag"] or _tag(path)],
            "responses": {str(code): _response(value) for code, value in meta["responses"].items()},
        }
        if meta["description"]:
            operation["description"] = meta["description"]
        action = action_of(route.handler)
        if action is not None:
            # The policy's requirement, as GitHub's docs print each endpoint's permission.
            operation["x-hubsvc-action"] = action
            operation["description"] = (
                operation.get("description", "") + f"\n\nPolicy: `{action}`" + _needs(action)
            ).strip()
        if params:
            operation["parameters"] = params
        if isinstance(meta["body"], dict):  # a body that is not JSON: {media type: schema}
            operation["requestBody"] = {
                "required": True,
                "content": {media: {"schema": schema} for media, schema in meta["body"].items()},
            }
        elif meta["body"] is not None:
            operation["requestBody"] = {
                "required": _body_required(meta["body"]),
                "content": {"application/json": {"schema": meta["body"]}},
            }
        # Any credential is checked, where none is needed too: a bad one is 401, one that
        # does not cover the route 403 (scopes.check_grant, botscope.bot_may).
        codes = set(meta["errors"]) | set(ALWAYS) | {401, 403}
        operation["security"] = [{"bearer": []}, {"cookie": []}, {"chatBot": []}]
        if meta["public"]:
            operation["security"].insert(0, {})
        if meta["body"] is not None or meta["query"] is not None:
            codes.add(400)
        if meta["body"] is not None and not isinstance(meta["body"], dict):
            codes.add(415)  # JSON bodies: any other Content-Type is refused
        # git shows its user an error body only in plain text (see errors.GIT_PATH).
        error_content = (
            {"text/plain": {"schema": {"type": "string"}}}
            if meta["plain_errors"]
            else {"application/json": {"schema": "Error"}}
        )
        for code in sorted(codes):
            operation["responses"].setdefault(
                str(code), {"description": ERROR_TEXT.get(code, "error"), "content": error_content}
            )
        if path.startswith(RENAMED_PREFIX):
            # A renamed repository's old path answers with a redirect to the new one.
            operation["responses"].setdefault(
                "301" if method == "get" else "308",
                {"description": "the repository was renamed: Location is the new path"},
            )
        paths.setdefault(path, {})[method] = operation
    _add_links(paths)
    for path, operations in paths.items():
        spec.path(path=path, operations=operations)
    return spec.to_dict()


def _body_required(body: type[Schema] | Schema) -> bool:
    """Whether a JSON body must be sent: an empty one reads as {} (rest.read_json), which
    only a schema without required fields takes."""
    schema = body() if isinstance(body, type) else body
    return any(field.required for field in schema.fields.values())


def _path_schema(path: str, name: str, meta: dict[str, Any]) -> dict[str, Any]:
    """What the handler accepts for a path parameter (other values answer 404)."""
    if name in meta["path"]:
        return meta["path"][name]
    if name == "name" and not path.startswith("/api/"):
        return GIT_NAME
    return PATH_PARAMS.get(name, {"type": "string"})


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith((prefix + "/", prefix + "."))


def _add_links(paths: dict[str, dict[str, Any]]) -> None:
    """Declare LINKS on the success answers of the operations that make things."""
    for (method, source), (target, made) in LINKS.items():
        operation = paths.get(source, {}).get(method)
        if operation is None:
            continue
        given = set(re.findall(r"{([^}:]+)}", source))
        links: dict[str, Any] = {}
        for path, operations in paths.items():
            if not _under(path, target):
                continue
            names = re.findall(r"{([^}:]+)}", path)
            parameters = {
                name: made.get(name, f"$request.path.{name}")
                for name in names
                if name in made or name in given
            }
            for other in operations:
                if (other, path) == (method, source):
                    continue
                pointer = path.replace("~", "~0").replace("/", "~1")
                key = re.sub(r"[^A-Za-z0-9]+", "_", f"{other} {path[len(target) :]}").strip("_")
                links[key] = {
                    "operationRef": f"#/paths/{pointer}/{other}",
                    "parameters": parameters,
                }
        for code, response in operation["responses"].items():
            if code.startswith("2") and links:
                response["links"] = links


def _tag(path: str) -> str:
    parts = [p for p in path.split("/") if p and not p.startswith("{")]
    if not parts:
        return "git"
    if parts[0] == "api" and len(parts) > 1:
        return parts[1]
    return parts[0]
