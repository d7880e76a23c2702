"""Every web.AppKey and web.RequestKey of the application, in one place."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from .identity import Identity

if TYPE_CHECKING:  # imported only for the type names, to avoid import cycles
    from .config import Config
    from .events.bus import EventBus
    from .store import Store

CONFIG: web.AppKey[Config] = web.AppKey("config")
STORE: web.AppKey[Store] = web.AppKey("store")
BUS: web.AppKey[EventBus] = web.AppKey("bus")
STATE = web.AppKey("state", dict)

REQUEST_ID = web.RequestKey("request_id", str)
# None for an anonymous request.
AUTH: web.RequestKey[Identity | None] = web.RequestKey("auth")
