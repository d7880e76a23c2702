"""The errors handlers raise: each an HTTP status and a message a person understands."""

from __future__ import annotations

from typing import Any


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


class Unprocessable(ApiError):
    status = 422


class PayloadTooLarge(ApiError):
    status = 413


class TooManyRequests(ApiError):
    status = 429


class Unavailable(ApiError):
    status = 503


class DiskFull(ApiError):
    """The disk under the data folder is full: 507, as WebDAV servers say it."""

    status = 507

    def __init__(self, detail: str = "") -> None:
        super().__init__("the server's disk is full")
        self.detail = detail


class DatabaseBusy(ApiError):
    """A write gave up waiting for the database lock: 503, to be retried."""

    status = 503
    retry_after = 1

    def __init__(self, waited: float = 0.0) -> None:
        super().__init__("the database is busy, try again")
        self.waited = waited
        self.headers["Retry-After"] = str(self.retry_after)


class DatabaseUnreachable(DatabaseBusy):
    """The database server cannot be reached (restarting, gone): 503, to be retried."""

    def __init__(self, detail: str = "") -> None:
        super().__init__()
        self.message = "the database cannot be reached, try again"
        self.args = (self.message,)
        self.detail = detail


class BodyTimeout(TimeoutError):
    """The client sent nothing of a request body for too long (set on the body stream)."""

    # A TimeoutError, so that aiohttp's own drain of an unread body after the answer
    # treats it as the end of lingering, not as an unhandled exception.


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
