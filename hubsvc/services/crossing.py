"""What crosses processes through Redis ([redis] url): events, caches, limits, revocations."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from ..cluster.buckets import RedisBucket
from ..cluster.counts import SharedCounts
from ..cluster.link import Cluster
from ..keys import BUS, CLUSTER, CONFIG, STORE
from ..notify.hub import HUB
from ..web.auth import TOKEN_CACHE
from ..web.ratelimit import GIT_LIMITER, LIMITER, SIGN_IN_LIMITER
from .revoke import credentials_ended, user_changed

log = logging.getLogger("hubsvc.cluster")
# A pulse lost on the way (Redis restarting) is made good by reading the log's head.
POLL_SECONDS = 5.0
SHARED_COUNTS = web.AppKey("shared_counts", SharedCounts)


def join_cluster(app: web.Application) -> None:
    """Make this app one of several processes: called by create_app when [redis] url is set."""
    settings = app[CONFIG]["redis"]
    cluster = Cluster(settings["url"], settings["prefix"])
    app[CLUSTER] = cluster
    for key, name in ((LIMITER, "api"), (SIGN_IN_LIMITER, "sign-in"), (GIT_LIMITER, "git")):
        if key in app:
            app[key] = RedisBucket(cluster.redis, cluster.key("rate", name), app[key])
    app[SHARED_COUNTS] = SharedCounts(cluster.redis, cluster.key("ws"), cluster.process_id)
    cluster.on("pulse", lambda m: _pulse(app, m))
    cluster.on("credentials", lambda m: _credentials(app, m))
    cluster.on("user", lambda m: _user(app, m))
    # repo None: an organization's grants changed, every cached audience may be stale
    cluster.on(
        "audience",
        lambda m: app[STORE].repos.forget_audience(None if m["repo"] is None else int(m["repo"])),
    )
    cluster.on("recheck", lambda m: _recheck(app, m))
    cluster.on(
        "inbox",
        lambda m: app[HUB].inbox(int(m["user"]), bool(m["public"]), m["message"], tell=False),
    )
    cluster.on_reconnect.append(lambda: _missed(app))


def _pulse(app: web.Application, message: dict[str, Any]) -> None:
    """Another process committed a write, events up to head among them."""
    # Read caches keyed on the generation (a repository by name, search) start over.
    app[STORE].db.generation += 1
    app[BUS].heard(int(message.get("head") or 0))


def _credentials(app: web.Application, message: dict[str, Any]) -> None:
    digests = message.get("digests")
    keep = message.get("keep")
    credentials_ended(
        app,
        int(message["user"]),
        None if digests is None else {bytes.fromhex(d) for d in digests},
        None if keep is None else bytes.fromhex(keep),
        tell=False,
    )


async def _user(app: web.Application, message: dict[str, Any]) -> None:
    user_id = int(message["user"])
    user_changed(app, user_id, tell=False)
    if app[HUB].by_user.get(user_id):  # open sockets follow its notifications.web setting
        user = await app[STORE].users.by_id(user_id)
        if user is not None:
            web_on = ((user.get("preferences") or {}).get("notifications") or {}).get("web", True)
            app[HUB].set_web(user_id, bool(web_on))


async def _recheck(app: web.Application, message: dict[str, Any]) -> None:
    repo_id = int(message["repo"])
    app[STORE].repos.forget_audience(repo_id)
    await app[HUB].recheck(repo_id, message["repository"], tell=False)


async def _missed(app: web.Application) -> None:
    """After Redis came back: whatever was said meanwhile is lost, so drop every cache."""
    store = app[STORE]
    store.db.generation += 1
    store.repos.forget_audience()
    app[TOKEN_CACHE].clear()
    app[BUS].heard(await store.events.last_id())


async def _poll(app: web.Application) -> None:
    while True:
        await asyncio.sleep(POLL_SECONDS)
        try:
            app[BUS].heard(await app[STORE].events.last_id())
        except Exception:
            log.exception("reading the event log's head failed")


async def cluster_ctx(app: web.Application) -> AsyncIterator[None]:
    """Connect to Redis and tell the others of this process's writes, for the app's life."""
    cluster = app[CLUSTER]
    try:
        await cluster.start()
    except Exception as exc:
        raise RuntimeError(f"cannot reach Redis at [redis] url {cluster.url}: {exc}") from exc
    store = app[STORE]
    bus = app[BUS]
    cluster.pulse_with(lambda: {"head": bus.last_id})
    store.db.write_listeners.append(cluster.pulse)
    store.repos.audience_listeners.append(lambda repo_id: cluster.tell("audience", repo=repo_id))
    store.orgs.grants_listeners.append(lambda: cluster.tell("audience", repo=None))
    store.two_factor.grants_listeners.append(lambda: cluster.tell("audience", repo=None))
    counts = app[SHARED_COUNTS]
    app[HUB].shared = counts
    counts.start()
    # Commits made between this process reading the head and subscribing.
    bus.heard(await store.events.last_id())
    poller = asyncio.get_running_loop().create_task(_poll(app))
    yield
    poller.cancel()
    store.db.write_listeners.remove(cluster.pulse)
    await counts.stop()
    await cluster.stop()
