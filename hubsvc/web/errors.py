"""The one middleware that renders every failure as {"error": ...} (or as git reads it)."""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler
from marshmallow import ValidationError

from ..errors import (
    ApiError,
    BodyTimeout,
    DatabaseBusy,
    DatabaseUnreachable,
    DiskFull,
    validation_message,
)
from ..git.pktline import error_packet
from ..keys import REQUEST_ID, STATE
from ..store.engines import fault_of

log = logging.getLogger("hubsvc.errors")


def fault_counts(app: web.Application) -> Counter:
    """How many answers each fault ("full", "busy", "disconnect") caused since start."""
    return app[STATE].setdefault("faults", Counter())


def _client_gone(request: web.Request, exc: BaseException) -> bool:
    """True when exc comes from the client having closed its connection."""
    transport = request.transport
    return isinstance(exc, ConnectionError) and (transport is None or transport.is_closing())


def _gone_response() -> web.Response:
    # Nobody reads it: it is what the access log records, 499 as nginx logs it.
    return web.Response(status=499, reason="Client Closed Request")


# git prints the body of an error answer to its user only when it is text/plain, so the
# smart-HTTP routes answer errors in plain text (GitHub and Gitea do the same).
GIT_PATH = re.compile(r"^/(?!api/)[^/]+/[^/]+/(info/refs|git-upload-pack|git-receive-pack)$")
# Statuses git acts on itself: 401 makes it ask for credentials, 404 says "not found".
GIT_HANDLES = frozenset({401, 404})


def error_response(
    status: int,
    message: str,
    headers: dict[str, str] | None = None,
    plain: bool = False,
    **extra: Any,
) -> web.Response:
    """The one shape of every error answer."""
    if plain:
        return web.Response(
            status=status, text=message + "\n", content_type="text/plain", headers=headers
        )
    body = {"error": message, **extra}
    return web.Response(
        status=status, text=json.dumps(body), content_type="application/json", headers=headers
    )


def _git_rpc(request: web.Request) -> str | None:
    """The service of a POST from git itself (git-receive-pack, git-upload-pack), else None."""
    match = GIT_PATH.match(request.path)
    if (
        request.method == "POST"
        and match is not None
        and match[1] != "info/refs"
        and request.headers.get("User-Agent", "").startswith("git/")
    ):
        return match[1]
    return None


def push_refusal(
    message: str, headers: dict[str, str] | None = None, sideband: bool = True
) -> web.Response:
    """A refused push as git reads it: a 200 whose answer is git's fatal-error packet."""
    # git prints no body of a failed POST, only "RPC failed; HTTP 507" and then, having
    # sent nothing, "Everything up-to-date". Inside the protocol the reason reaches its
    # user as "remote: <message>" and git exits non-zero. Every git asks for
    # side-band-64k when pushing (receive-pack advertises it), so band 3 is what it reads.
    kept = {k: v for k, v in (headers or {}).items() if k.lower() == "connection"}
    return web.Response(
        status=200,
        body=error_packet(message, sideband=sideband),
        content_type="application/x-git-receive-pack-result",
        headers={"Cache-Control": "no-cache, max-age=0, must-revalidate", **kept},
    )


def error_answer(
    request: web.Request,
    status: int,
    message: str,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> web.Response:
    """error_response in the form this client reads: git's own packet, plain text or JSON."""
    service = _git_rpc(request) if status not in GIT_HANDLES else None
    if service is not None:
        push = service == "git-receive-pack"
        log.info(
            "refused a %s (%s): %s [request %s]",
            "push" if push else "fetch",
            status,
            message,
            request.get(REQUEST_ID, "-"),
        )
        # A fetch reads an ERR packet before any band is set up: git prints
        # "remote error: <message>" (protocol v0 and v2 alike).
        return push_refusal(message, headers, sideband=push)
    return error_response(
        status, message, headers, GIT_PATH.match(request.path) is not None, **extra
    )


_REASONS = {
    400: "bad request",
    401: "authentication required",
    403: "forbidden",
    404: "not found",
    405: "method not allowed",
    409: "conflict",
    408: "request timeout",
    413: "request body too large",
    415: "unsupported media type",
    429: "too many requests",
    500: "internal server error",
    503: "service unavailable",
}


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Render ApiError, ValidationError, HTTPException and crashes as JSON errors."""
    try:
        return await handler(request)
    except Exception as exc:
        return failure_answer(request, exc)


def failure_answer(request: web.Request, exc: Exception) -> web.StreamResponse:
    """The answer to a request whose handling raised exc; re-raises what is no failure (a
    redirect, any HTTPException below 400). Called from an except clause."""
    if isinstance(exc, DiskFull | DatabaseBusy):
        return _fault_response(request, exc)
    if isinstance(exc, ApiError):
        return error_answer(request, exc.status, exc.message, exc.headers, **exc.extra)
    if isinstance(exc, ValidationError):
        return error_answer(request, 400, validation_message(exc.messages))
    if isinstance(exc, web.HTTPException):
        if exc.status < 400:
            raise exc
        if exc.status == 405:
            message = f"method {request.method} not allowed"
        elif exc.status == 404:
            message = "not found"
        elif exc.status == 413:
            message = "request body too large"
        else:
            message = _REASONS.get(exc.status, exc.reason.lower())
        headers = {
            k: v
            for k, v in exc.headers.items()
            if k.lower() in ("allow", "retry-after", "www-authenticate")
        }
        return error_answer(request, exc.status, message, headers)
    if isinstance(exc, BodyTimeout):
        log.info("closed a request whose body stalled [request %s]", request.get(REQUEST_ID, "-"))
        return error_answer(
            request, 408, "the request body arrived too slowly", {"Connection": "close"}
        )
    if _client_gone(request, exc):
        fault_counts(request.app)["disconnect"] += 1
        log.info("client closed the connection [request %s]", request.get(REQUEST_ID, "-"))
        return _gone_response()
    if fault_of(exc) is not None:
        return _fault_response(request, exc)
    # The trace goes to the log with the request id; the body says nothing of it.
    log.error("unexpected error [request %s]", request.get(REQUEST_ID, "-"), exc_info=exc)
    return error_answer(request, 500, "internal server error")


def _fault_response(request: web.Request, exc: Exception) -> web.Response:
    """507 for a full disk, 503 with Retry-After for a busy database; one log line each."""
    rid = request.get(REQUEST_ID, "-")
    fault = fault_of(exc)
    fault_counts(request.app)[fault] += 1
    if fault == "full":
        detail = getattr(exc, "detail", "") or str(exc)
        # No traceback: the operator needs to free space, not read Python.
        log.error(
            "disk full: a write failed (%s); free space under the data folder [request %s]",
            detail,
            rid,
        )
        error: ApiError = exc if isinstance(exc, DiskFull) else DiskFull(str(exc))
    elif isinstance(exc, DatabaseUnreachable):
        log.warning(
            "database unreachable: %s; answered 503, the pool reconnects by itself [request %s]",
            exc.detail,
            rid,
        )
        error = exc
    else:
        waited = getattr(exc, "waited", 0.0)
        log.warning(
            "database busy: a write gave up after waiting %.1f s for the lock "
            "(database.write_timeout_ms); something holds a long write transaction "
            "[request %s]",
            waited,
            rid,
        )
        error = exc if isinstance(exc, DatabaseBusy) else DatabaseBusy(waited)
    return error_answer(request, error.status, error.message, error.headers)
