"""Building repository events; they are written to the log with the change they describe."""

from __future__ import annotations

import dataclasses
from typing import Any

from aiohttp import web

from ..events.shape import Event
from ..keys import CONFIG, STORE
from ..web.auth import current_user
from ..web.present import user_summary


def make_event(
    app: web.Application,
    repo: dict[str, Any],
    type_: str,
    data: dict[str, Any],
    actor: dict[str, Any] | None,
) -> Event:
    """An event of repo, not yet written (its id comes from the log)."""
    return Event(
        type=type_,
        repository={"owner": repo["owner_username"], "name": repo["name"]},
        actor=user_summary(app[CONFIG].base_url, actor) if actor else None,
        data=data,
        repo_id=str(repo["id"]),
    )


def event(
    request: web.Request,
    repo: dict[str, Any],
    type_: str,
    data: dict[str, Any],
    actor: dict[str, Any] | None = None,
) -> Event:
    """An event of repo by the request's user, for a store write's emit=."""
    return make_event(
        request.app, repo, type_, data, actor if actor is not None else current_user(request)
    )


async def publish(
    request: web.Request,
    repo: dict[str, Any],
    type_: str,
    data: dict[str, Any],
    actor: dict[str, Any] | None = None,
    inbound: bool = False,
) -> Event:
    """Write an event that is a change of its own (no other row changes with it)."""
    made = event(request, repo, type_, data, actor)
    if inbound:
        made = dataclasses.replace(made, inbound=True)
    [written] = await request.app[STORE].events.append([made])
    return written
