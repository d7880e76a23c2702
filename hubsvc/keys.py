"""Every web.AppKey and web.RequestKey of the application, in one place."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from .identity import Identity

if TYPE_CHECKING:  # imported only for the type names, to avoid import cycles
    from .cluster.link import Cluster
    from .config import Config
    from .events.bus import EventBus
    from .store import Store

CONFIG: web.AppKey[Config] = web.AppKey("config")
STORE: web.AppKey[Store] = web.AppKey("store")
BUS: web.AppKey[EventBus] = web.AppKey("bus")
STATE = web.AppKey("state", dict)
# Set only when [redis] url is: the link to the other server processes.
CLUSTER: web.AppKey[Cluster] = web.AppKey("cluster")

REQUEST_ID = web.RequestKey("request_id", str)
# None for an anonymous request.
AUTH: web.RequestKey[Identity | None] = web.RequestKey("auth")
