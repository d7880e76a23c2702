"""What the chat bot may do on a linked user's behalf: an allow-list of routes."""

from __future__ import annotations

from aiohttp import web

# A GitHub App's user-to-server token can do only what both the user and the app may;
# here the app's part is this list. It holds what chat commands need (read what the
# user may read, list, search, fork, open issues and comment, the chat link endpoints)
# and nothing that would let a leaked bot key take an account over: no tokens,
# password, settings, e-mail, administration, hooks, deletes, visibility, collaborators
# or git. An allow-list, so a route added later is outside the scope until named here.
_REPO = "/api/repositories/{owner}/{name}"
_ISSUE = _REPO + "/issues/{number}"
_PULL = _REPO + "/pulls/{number}"

BOT_SCOPE: frozenset[tuple[str, str]] = frozenset(
    [
        ("GET", path)
        for path in (
            "/health",
            "/api/openapi.json",
            "/api/users/me",
            "/api/users/me/summary",
            "/api/users/{username}",
            "/api/users/{username}/profile",
            "/api/users/{username}/avatar",
            "/api/users/{username}/repositories",
            "/api/search",
            "/api/events",
            _REPO,
            _REPO + "/branches",
            _REPO + "/commits",
            _REPO + "/commits/{oid}/diff",
            _REPO + "/tree",
            _REPO + "/file",
            _REPO + "/forks",
            _REPO + "/stars",
            _REPO + "/compare/{spec}",
            _REPO + "/commits/{ref}/statuses",
            _REPO + "/commits/{ref}/status",
            _REPO + "/events",
            _REPO + "/issues",
            _ISSUE,
            _ISSUE + "/comments",
            _REPO + "/pulls",
            _PULL,
            _PULL + "/comments",
            _PULL + "/commits",
            _PULL + "/files",
            _PULL + ".{kind}",
            "/api/chat/link/status/{chatId}",
            "/api/chat/notifications",
        )
    ]
    + [
        ("POST", path)
        for path in (
            _REPO + "/fork",
            _REPO + "/issues",
            _ISSUE + "/comments",
            _PULL + "/comments",
            "/api/chat/link/generate",
            "/api/chat/link/unlink",
            "/api/chat/notifications/ack",
        )
    ]
)


def route_template(request: web.Request) -> str | None:
    """The matched route's path template ("/api/repositories/{owner}/{name}"), or None."""
    info = request.match_info
    if info.http_exception is not None:  # no route: the 404 or 405 answers for itself
        return None
    resource = info.route.resource
    return resource.canonical if resource is not None else None


def bot_may(request: web.Request) -> bool:
    """Whether the chat bot's scope covers this request (HEAD as GET)."""
    template = route_template(request)
    if template is None:
        return True
    method = "GET" if request.method == "HEAD" else request.method
    return (method, template) in BOT_SCOPE
