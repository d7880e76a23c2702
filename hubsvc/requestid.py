"""The id of the request being served, for log lines, git's hooks and the events it writes."""

from __future__ import annotations

import contextvars
import re

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
_VALID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
# Handed to git's processes, so the pre-receive hook's question carries the push's id.
ENV = "HUBSVC_REQUEST_ID"


def valid(value: str) -> bool:
    """Whether a client's or a hook's id may be taken as is (it lands in logs and headers)."""
    return bool(value) and _VALID.match(value) is not None


def current() -> str | None:
    """The request id of the running task, None outside a request."""
    rid = request_id_var.get()
    return None if rid == "-" else rid
