"""API errors and the one middleware that renders every failure as {"error": ...}."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from aiohttp import web
from marshmallow import ValidationError

from .keys import REQUEST_ID

log = logging.getLogger("hubsvc.errors")


class ApiError(Exception):
    """An error with an HTTP status and a message a person understands."""

    status = 400

    def __init__(self, message: str, status: int | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        self.extra = extra
        self.headers: dict[str, str] = {}


class BadRequest(ApiError):
    status = 400


class Unauthorized(ApiError):
    status = 401


class Forbidden(ApiError):
    status = 403


class NotFound(ApiError):
    status = 404


class Conflict(ApiError):
    status = 409


class PayloadTooLarge(ApiError):
    status = 413


class TooManyRequests(ApiError):
    status = 429


class Unavailable(ApiError):
    status = 503


def validation_message(messages: Any, prefix: str = "") -> str:
    """Flatten marshmallow's nested messages into one line naming the field."""
    if isinstance(messages, dict):
        for key, value in messages.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if key == "_schema":
                name = prefix
            return validation_message(value, name)
    if isinstance(messages, list) and messages:
        first = messages[0]
        if isinstance(first, (dict, list)):
            return validation_message(first, prefix)
        return f"{prefix}: {first}" if prefix else str(first)
    return f"{prefix}: invalid" if prefix else "invalid request"


# git prints the body of an error answer to its user only when it is text/plain, so the
# smart-HTTP routes answer errors in plain text (GitHub and Gitea do the same).
GIT_PATH = re.compile(r"^/(?!api/)[^/]+/[^/]+/(info/refs|git-upload-pack|git-receive-pack)$")


def error_response(status: int, message: str, headers: dict[str, str] | None = None,
                   plain: bool = False, **extra: Any) -> web.Response:
    """The one shape of every error answer."""
    if plain:
        return web.Response(status=status, text=message + "\n", content_type="text/plain",
                            headers=headers)
    body = {"error": message, **extra}
    return web.Response(status=status, text=json.dumps(body),
                        content_type="application/json", headers=headers)


_REASONS = {
    400: "bad request",
    401: "authentication required",
    403: "forbidden",
    404: "not found",
    405: "method not allowed",
    409: "conflict",
    413: "request body too large",
    415: "unsupported media type",
    429: "too many requests",
    500: "internal server error",
    503: "service unavailable",
}


@web.middleware
async def error_middleware(request: web.Request, handler):
    """Render ApiError, ValidationError, HTTPException and crashes as JSON errors."""
    plain = GIT_PATH.match(request.path) is not None
    try:
        return await handler(request)
    except ApiError as exc:
        return error_response(exc.status, exc.message, exc.headers, plain, **exc.extra)
    except ValidationError as exc:
        return error_response(400, validation_message(exc.messages), plain=plain)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        if exc.status == 405:
            message = f"method {request.method} not allowed"
        elif exc.status == 404:
            message = "not found"
        elif exc.status == 413:
            message = "request body too large"
        else:
            message = _REASONS.get(exc.status, exc.reason.lower())
        headers = {k: v for k, v in exc.headers.items()
                   if k.lower() in ("allow", "retry-after", "www-authenticate")}
        return error_response(exc.status, message, headers, plain)
    except Exception:
        # The trace goes to the log with the request id; the body says nothing of it.
        log.exception("unexpected error [request %s]", request.get(REQUEST_ID, "-"))
        return error_response(500, "internal server error", plain=plain)
