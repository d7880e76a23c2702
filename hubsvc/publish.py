"""Building and publishing repository events from a handler, after its write committed."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .auth import current_user
from .events import Event
from .keys import BUS, CONFIG
from .present import user_summary


def publish(request: web.Request, repo: dict[str, Any], type_: str, data: dict[str, Any],
            actor: dict[str, Any] | None = None) -> Event:
    """Publish an event of repo; call only once the transaction has committed."""
    actor = actor if actor is not None else current_user(request)
    return publish_event(request.app, repo, type_, data, actor)


def publish_event(app: web.Application, repo: dict[str, Any], type_: str, data: dict[str, Any],
                  actor: dict[str, Any] | None) -> Event:
    """Publish an event outside a request (a push recorded after the answer)."""
    event = Event(
        type=type_,
        repository={"owner": repo["owner_username"], "name": repo["name"]},
        actor=user_summary(app[CONFIG].base_url, actor) if actor else None,
        data=data,
        repo_id=str(repo["id"]),
    )
    app[BUS].publish(event)
    return event
