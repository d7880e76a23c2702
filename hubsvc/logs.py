"""Logging: a request id on every line, and an access log that can be JSON lines."""

from __future__ import annotations

import contextvars
import json
import logging

from aiohttp.abc import AbstractAccessLogger

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


class RequestIdFilter(logging.Filter):
    """Adds record.request_id from the request being served."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        return True


def setup_logging(level: int = logging.INFO) -> None:
    """Plain lines on stderr, each with the request id."""
    handler = logging.StreamHandler()
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


class AccessLogger(AbstractAccessLogger):
    """One line per request; the query string is left out because it may carry a token."""

    json_lines = False

    def log(self, request, response, time: float) -> None:
        entry = {
            "remote": request.remote,
            "method": request.method,
            "path": request.path,
            "status": response.status,
            "bytes": response.body_length,
            "ms": round(time * 1000, 2),
            "request_id": response.headers.get("X-Request-Id", "-"),
        }
        if self.json_lines:
            self.logger.info(json.dumps(entry))
        else:
            self.logger.info('%(remote)s "%(method)s %(path)s" %(status)s %(bytes)s %(ms)sms '
                             'rid=%(request_id)s', entry)


class JsonAccessLogger(AccessLogger):
    json_lines = True
