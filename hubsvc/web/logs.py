"""Logging: a request id on every line, and an access log that can be JSON lines."""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import time as _time

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from ..clients import client_ip
from ..errors import DatabaseBusy
from ..keys import AUTH, CONFIG
from ..requestid import request_id_var


class RequestIdFilter(logging.Filter):
    """Adds record.request_id from the request being served."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        return True


class FaultFilter(logging.Filter):
    """A background task's trace of a database restarting or busy, as one warning line."""

    # Every loop that logs its failure with a trace would print one per restart of the
    # database: what the operator needs is the one line saying what happened.
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, DatabaseBusy):
            record.msg, record.args = f"{record.getMessage()}: {exc}", None
            record.exc_info = record.exc_text = None
            if record.levelno > logging.WARNING:
                record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line; an access entry's fields are merged in."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}",
            "level": record.levelname,
            "logger": record.name,
            "request_id": getattr(record, "request_id", "-"),
            "message": record.getMessage(),
            **getattr(record, "fields", {}),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


PLAIN = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"
# The handler plain-text access lines may be written to directly (see AccessLogger).
_plain_handler: logging.StreamHandler | None = None


def setup_logging(level: int = logging.INFO, json_lines: bool = False) -> None:
    """Lines on stderr, each with the request id: plain text, or JSON objects."""
    global _plain_handler
    handler = logging.StreamHandler()
    handler.addFilter(RequestIdFilter())
    handler.addFilter(FaultFilter())
    handler.setFormatter(JsonFormatter() if json_lines else logging.Formatter(PLAIN))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    _plain_handler = None if json_lines else handler


class _Clock:
    """logging's asctime ("2026-01-02 03:04:05,678"), the seconds part formatted once a second."""

    def __init__(self) -> None:
        self.second, self.text = -1, ""

    def now(self) -> str:
        now = _time.time()
        second = int(now)
        if second != self.second:
            self.second, self.text = (
                second,
                _time.strftime("%Y-%m-%d %H:%M:%S", _time.localtime(second)),
            )
        return f"{self.text},{int((now - second) * 1000):03d}"


def _client(request: web.BaseRequest) -> str | None:
    """The client address as the rate limits see it: X-Forwarded-For only from a trusted proxy."""
    try:
        proxies = request.app[CONFIG]["server"]["trusted_proxies"]  # type: ignore[attr-defined]
    # A request that never reached the application (aiohttp refused its head, say a NUL
    # in a header) has no app: Request.app asserts that it was routed.
    except (AttributeError, KeyError, AssertionError):
        return request.remote
    # Without trusted proxies the peer is the client: no need to walk X-Forwarded-For.
    return (client_ip(request) or request.remote) if proxies else request.remote  # type: ignore[arg-type]


def _who_and_route(request: web.BaseRequest) -> tuple[str | None, str | None]:
    """The signed-in user's name and the route template a request matched (None: none)."""
    if not isinstance(request, web.Request):
        return None, None
    identity = request.get(AUTH)
    try:
        resource = request.match_info.route.resource
    except (AttributeError, AssertionError):  # refused before routing
        resource = None
    return (
        identity.user.get("username") if identity is not None else None,
        resource.canonical if resource is not None else None,
    )


class AccessLogger(AbstractAccessLogger):
    """One line per request; the query string is left out because it may carry a token."""

    json_lines = False
    # Whether [server] trusted_proxies names any (None: not known here, looked up per line).
    proxies: bool | None = None

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        if self.json_lines:
            entry = {
                "remote": _client(request),
                "method": request.method,
                "path": request.path,
                "status": response.status,
                "bytes": response.body_length,
                "ms": round(time * 1000, 2),
                "request_id": response.headers.get("X-Request-Id", "-"),
            }
            # What an operator searches by: who, and the route (one value per endpoint,
            # where the path holds names and numbers).
            entry["user"], entry["route"] = _who_and_route(request)
            self.logger.info("%(method)s %(path)s %(status)s", entry, extra={"fields": entry})
            return
        handler = _plain_handler
        logger = self.logger
        parts = (
            request.remote if self.proxies is False else _client(request),
            request.method,
            request.path,
            response.status,
            response.body_length,
            time,
            response.headers.get("X-Request-Id", "-"),
        )
        if (
            handler is not None
            and logger.isEnabledFor(logging.INFO)
            and logger.propagate
            and not logger.handlers
        ):
            # The same line the logging module would write, without building a LogRecord
            # for it: on a small request the access line cost as much as the request.
            _LINES.add(handler, (logger.name, request_id_var.get(), *parts))
            return
        logger.info("%s", _message(*parts))


def _message(
    remote: str | None, method: str, path: str, status: int, size: int, time: float, rid: str
) -> str:
    """An access line's message: '%(remote)s "%(method)s %(path)s" %(status)s …' as it was."""
    return f'{remote} "{method} {path}" {status} {size} {round(time * 1000, 2)}ms rid={rid}'


_CLOCK = _Clock()
# What an access line is made of: the logger's name, the context's request id, then
# _message's arguments.
_Entry = tuple[str, str, str | None, str, str, int, int, float, str]


class _Lines:
    """Access lines written together once per turn of the event loop.

    stderr is line-buffered, so each line was a write system call of its own; under load
    several requests end in one turn of the loop, and their lines now share one write,
    made before the loop waits for anything again (and at exit). What a line says is
    kept as it was when logged and formatted at the write, with the clock read once for
    all of them (they end within the same turn): reading and formatting the time was a
    fifth of a line's cost.
    """

    def __init__(self) -> None:
        self.pending: list[_Entry] = []
        self.handler: logging.StreamHandler | None = None

    def add(self, handler: logging.StreamHandler, entry: _Entry) -> None:
        if self.handler is not handler:
            self.flush()
            self.handler = handler
        self.pending.append(entry)
        if len(self.pending) == 1:
            try:
                asyncio.get_running_loop().call_soon(self.flush)
            except RuntimeError:  # no loop (a line logged outside a server): at once
                self.flush()

    def flush(self) -> None:
        if not self.pending or self.handler is None:
            return
        entries, self.pending = self.pending, []
        now = _CLOCK.now()
        text = "".join(
            f"{now} INFO {name} [{context}] "
            f"{_message(remote, method, path, status, size, seconds, rid)}\n"
            for name, context, remote, method, path, status, size, seconds, rid in entries
        )
        handler = self.handler
        assert handler.lock is not None  # a StreamHandler always has one
        with handler.lock:
            handler.stream.write(text)
            handler.flush()


_LINES = _Lines()
atexit.register(_LINES.flush)


class JsonAccessLogger(AccessLogger):
    json_lines = True


def access_logger(json_lines: bool, trusted_proxies: list[str]) -> type[AccessLogger]:
    """The access logger class for a server, told once whether any proxy is trusted: the
    line's address then needs no walk from the request to the configuration (four calls
    a line, a sixth of its cost)."""
    base = JsonAccessLogger if json_lines else AccessLogger
    return type(base.__name__, (base,), {"proxies": bool(trusted_proxies)})
