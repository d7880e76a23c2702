"""This process's Prometheus metrics: what each layer counts, exposed by api/metrics.

One registry per process (not prometheus-client's global one): every layer below the
API counts into it, and `GET /metrics` adds what is read at scrape time (the event
log, the queues, the pool, the lease; api/metrics.py). Counting stays cheap on the hot
paths: requests and WebSocket messages count into plain Python numbers (the event
loop's one thread), turned into metric families at scrape time.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Iterable
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

# No *_created series beside every counter and histogram: they double the output and
# Prometheus's rate() needs none of them.
disable_created_metrics()
REGISTRY = CollectorRegistry(auto_describe=True)
# process_start_time_seconds, process_resident_memory_bytes, CPU and open files (Linux).
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)

GIT_OPERATIONS = Counter(
    "hubsvc_git_operations_total",
    "git operations run by service (git-upload-pack, git-receive-pack, git-upload-archive), "
    "transport (http, ssh) and outcome (ok: git exited 0)",
    ("service", "transport", "outcome"),
    registry=REGISTRY,
)
GIT_SECONDS = Histogram(
    "hubsvc_git_operation_duration_seconds",
    "How long git operations ran, from git's start to its answer's end",
    ("service", "transport"),
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0),
    registry=REGISTRY,
)
GIT_BYTES = Counter(
    "hubsvc_git_bytes_total",
    "Bytes of git operations: received from clients (pushes, wants) and sent to them (packs)",
    ("service", "transport", "direction"),
    registry=REGISTRY,
)


class Tally:
    """A count bumped on a hot path as a plain integer, read at scrape time."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0


WS_MESSAGES = Tally()  # messages written to WebSockets (events, notifications, replies)


class _Tallies(Collector):
    def collect(self) -> Iterable[Any]:
        yield CounterMetricFamily(
            "hubsvc_websocket_messages_sent",
            "Messages written to WebSocket clients (events, notifications, replies)",
            value=WS_MESSAGES.n,
        )


REGISTRY.register(_Tallies())

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
HTTP_BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0)


class _Series:
    __slots__ = ("counts", "total")

    def __init__(self, size: int = len(HTTP_BOUNDS) + 1) -> None:
        self.counts = [0] * size  # per bucket, not yet cumulative
        self.total = 0.0


def _buckets(bounds: tuple[float, ...], counts: list[int]) -> list[tuple[str, float]]:
    """Cumulative (le, count) pairs, +Inf last, as a histogram family takes them."""
    buckets: list[tuple[str, float]] = []
    seen = 0
    for le, count in zip([*map(floatToGoString, bounds), "+Inf"], counts, strict=True):
        seen += count
        buckets.append((str(le), float(seen)))
    return buckets


class _Requests(Collector):
    """The request histogram, kept as plain lists by the event loop's one thread.

    Every request passes here: prometheus-client's Histogram takes a lock per bucket
    and per sum (3.4 µs a request measured here), these two increments well under one.
    """

    def __init__(self) -> None:
        self.series: dict[tuple[str, str, int], _Series] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, status)
        series = self.series.get(key)
        if series is None:
            if method not in _METHODS:
                key = ("other", route, status)  # any token is a method: no series per one
            series = self.series.get(key) or self.series.setdefault(key, _Series())
        series.counts[bisect_left(HTTP_BOUNDS, seconds)] += 1
        series.total += seconds

    def collect(self) -> Iterable[Any]:
        family = HistogramMetricFamily(
            "hubsvc_http_request_duration_seconds",
            "Requests by method, route template (never the raw path) and status: its "
            "_count is the request count; a WebSocket's lasts as long as the socket (101)",
            labels=["method", "route", "status"],
        )
        for (method, route, status), series in sorted(self.series.items()):
            family.add_metric(
                [method, route, str(status)], _buckets(HTTP_BOUNDS, series.counts), series.total
            )
        yield family


REQUESTS = _Requests()
REGISTRY.register(REQUESTS)
observe_request = REQUESTS.observe  # (method, route template, status, seconds)

DB_BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class PerThread:
    """Durations observed from several threads (the store's): each thread counts into
    lists of its own, without a lock per observation, and a scrape adds them up."""

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self._local = threading.local()
        self._parts: list[_Series] = []
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        try:
            series = self._local.series
        except AttributeError:
            series = self._local.series = _Series(len(self.bounds) + 1)
            with self._lock:
                self._parts.append(series)
        series.counts[bisect_left(self.bounds, seconds)] += 1
        series.total += seconds

    def merged(self) -> tuple[list[int], float]:
        with self._lock:
            parts = list(self._parts)
        counts = [0] * (len(self.bounds) + 1)
        for part in parts:
            for i, count in enumerate(part.counts):
                counts[i] += count
        return counts, sum(part.total for part in parts)


DB_READ = PerThread(DB_BOUNDS)
DB_WRITE = PerThread(DB_BOUNDS)


class _Transactions(Collector):
    def collect(self) -> Iterable[Any]:
        family = HistogramMetricFamily(
            "hubsvc_db_transaction_duration_seconds",
            "How long each read or write transaction held its database connection (its "
            "statements, and on PostgreSQL the conflicts it retried), by kind",
            labels=["kind"],
        )
        for kind, timings in (("read", DB_READ), ("write", DB_WRITE)):
            counts, total = timings.merged()
            family.add_metric([kind], _buckets(timings.bounds, counts), total)
        yield family


REGISTRY.register(_Transactions())


def git_operation(
    service: str, transport: str, started: float, received: int, sent: int, ok: bool
) -> None:
    """Count one git operation that started at time.monotonic() `started`."""
    GIT_OPERATIONS.labels(service, transport, "ok" if ok else "error").inc()
    GIT_SECONDS.labels(service, transport).observe(time.monotonic() - started)
    GIT_BYTES.labels(service, transport, "received").inc(received)
    GIT_BYTES.labels(service, transport, "sent").inc(sent)
