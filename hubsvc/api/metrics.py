"""GET /metrics for Prometheus: this process's counts, and what is read at scrape time.

Served two ways, each process its own figures (no multiprocess mode: every process has
its own port, and Prometheus scrapes each): on the API's port to `Authorization: Bearer
<[metrics] token>` only (404 to everyone else, administrators included), and, with
`[metrics] port`, on a listener of its own that no API route shares. What needs the
database (the event log's head, the consumers' lag, the queues) is read once per
scrape, never per request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..keys import CLUSTER, CONFIG, STORE
from ..metrics import REGISTRY
from ..notify.hub import HUB
from ..notify.leader import LEADER
from ..policy import requires
from ..store.gauges import Snapshot
from ..web.auth import METRICS_PATH, metrics_secret_ok
from ..web.openapi import doc

log = logging.getLogger("hubsvc.metrics")
routes = web.RouteTableDef()
REDIS_PING_SECONDS = 1.0


class _ScrapeState:
    """What one scrape read: filled by `gather` before the registry is rendered."""

    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None
        self.redis_up: int | None = None


class AppCollector(Collector):
    """The gauges of one application: read from it and the database at scrape time."""

    def __init__(self, app: web.Application) -> None:
        self.app = app
        self.state = _ScrapeState()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    async def gather(self) -> None:
        """Read what the gauges show: one read transaction, and a Redis ping."""
        state = _ScrapeState()
        try:
            state.snapshot = await self.app[STORE].gauges.snapshot()
        except Exception as exc:  # the database down: the rest is still worth having
            log.warning("metrics: the database could not be read (%s)", exc)
        cluster = self.app.get(CLUSTER)
        if cluster is not None:
            try:
                async with asyncio.timeout(REDIS_PING_SECONDS):
                    await cluster.redis.ping()
                state.redis_up = 1
            except Exception:
                state.redis_up = 0
        self.state = state

    def collect(self) -> Iterable[Any]:
        app, state = self.app, self.state
        hub = app.get(HUB)
        yield GaugeMetricFamily(
            "hubsvc_websocket_connections",
            "WebSocket clients connected to this process",
            value=len(hub.clients) if hub is not None else 0,
        )
        leader = app.get(LEADER)
        yield GaugeMetricFamily(
            "hubsvc_lease_held",
            "1 while this process holds the jobs lease (deliveries, durable consumers)",
            value=1 if leader is not None and leader.held else 0,
        )
        in_use, most, waiting = app[STORE].db.pool_use()
        yield GaugeMetricFamily(
            "hubsvc_db_connections_in_use",
            "Database connections lent out (SQLite: transactions running or queued)",
            value=in_use,
        )
        yield GaugeMetricFamily(
            "hubsvc_db_connections_max", "[database] pool_size (SQLite: writer + readers)", most
        )
        yield GaugeMetricFamily(
            "hubsvc_db_requests_waiting",
            "Transactions waiting for a free connection (PostgreSQL)",
            value=waiting,
        )
        if state.redis_up is not None:
            yield GaugeMetricFamily(
                "hubsvc_redis_up", "1 when this process reached Redis at the scrape", state.redis_up
            )
        snap = state.snapshot
        yield GaugeMetricFamily(
            "hubsvc_database_up",
            "1 when the scrape could read the database",
            value=1 if snap is not None else 0,
        )
        if snap is None:
            return
        yield GaugeMetricFamily(
            "hubsvc_event_log_head", "The newest event id in the log", value=snap.head
        )
        lag = GaugeMetricFamily(
            "hubsvc_consumer_lag_events",
            "Events a durable consumer has yet to handle (head - its cursor); `hooks` is "
            "the repository hook furthest behind",
            labels=["consumer"],
        )
        for name, cursor in sorted(snap.cursors.items()):
            lag.add_metric([name], max(0, snap.head - cursor))
        lag.add_metric(["hooks"], snap.hooks_behind)
        yield lag
        depth = GaugeMetricFamily(
            "hubsvc_queue_pending",
            "Deliveries waiting to be sent (or retried): outbox (chat webhook), hooks, mail",
            labels=["queue"],
        )
        failed = GaugeMetricFamily(
            "hubsvc_queue_failed",
            "Deliveries given up on and kept (until [events] retention_days)",
            labels=["queue"],
        )
        for queue, counts in snap.queues.items():
            depth.add_metric([queue], counts["pending"])
            failed.add_metric([queue], counts["failed"])
        yield depth
        yield failed


METRICS = web.AppKey("metrics", AppCollector)


async def exposition(app: web.Application) -> web.Response:
    """The text exposition: this process's counters, then the scrape-time gauges."""
    collector = app[METRICS]
    await collector.gather()
    body = generate_latest(REGISTRY) + generate_latest(collector.registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


@routes.get(METRICS_PATH)
@doc(
    "Prometheus metrics of this process (operators only)",
    public=True,
    tag="operations",
    errors=(404,),
    responses={
        200: {
            "description": "Prometheus text exposition format",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    },
    description="Only to `Authorization: Bearer <[metrics] token>`; 404 to every other "
    "request, whatever it carries (a session, a token, an administrator's), and to all "
    "while no token is configured. `[metrics] port` serves the same on a listener of its "
    "own. Each process answers for itself.",
)
@requires("metrics")
async def metrics(request: web.Request) -> web.Response:
    return await exposition(request.app)


def _listener_app(app: web.Application) -> web.Application:
    """The [metrics] port's application: /metrics and nothing else."""

    async def serve(request: web.Request) -> web.Response:
        token = app[CONFIG]["metrics"]["token"]
        if token and not metrics_secret_ok(request, token):  # the token, when set, here too
            raise web.HTTPNotFound()
        return await exposition(app)

    listener = web.Application()
    listener.router.add_get(METRICS_PATH, serve)
    return listener


async def metrics_ctx(app: web.Application) -> AsyncIterator[None]:
    """[metrics] port: a listener of its own, started and stopped with the application."""
    settings = app[CONFIG]["metrics"]
    runner = None
    if settings["port"]:
        runner = web.AppRunner(_listener_app(app), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, settings["host"], settings["port"]).start()
        log.info("metrics on http://%s:%s%s", settings["host"], settings["port"], METRICS_PATH)
    yield
    if runner is not None:
        await runner.cleanup()
