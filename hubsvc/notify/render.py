"""The body a hook receives for an event, in its format (discord, slack or json)."""

from __future__ import annotations

from typing import Any

from ..events.shape import Event
from .messages import render as render_event
from .messages import render_ping

FORMATS = ("discord", "slack", "json")


def render(event: Event | None, format: str, base_url: str) -> dict[str, Any]:
    """The JSON body for event (None: a ping) in the hook's format (see notify.messages)."""
    if event is None:
        return render_ping(format, base_url)[0]
    return render_event(event, format, base_url)[0]
