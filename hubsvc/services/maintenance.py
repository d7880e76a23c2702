"""Periodic upkeep: pruning expired tokens, and (when asked) memory snapshots in the log."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tracemalloc
from collections.abc import AsyncIterator

from aiohttp import web

from ..keys import STORE
from ..notify.leader import LEADER

log = logging.getLogger("hubsvc.maintenance")
PRUNE_SECONDS = 3600
# HUBSVC_TRACEMALLOC=N logs, every N seconds, the allocation sites that grew most since
# the first snapshot: how benchmarks/soak.py finds what a long run accumulates.
TRACE_ENV = "HUBSVC_TRACEMALLOC"


async def _prune_tokens(app: web.Application) -> None:
    gone = await app[STORE].users.prune_tokens()
    if gone:
        log.info("pruned %d expired sign-in tokens", gone)


async def _trace_forever(every: float) -> None:
    tracemalloc.start(10)
    first = tracemalloc.take_snapshot()
    while True:
        await asyncio.sleep(every)
        snapshot = tracemalloc.take_snapshot()
        current, peak = tracemalloc.get_traced_memory()
        log.info(
            "tracemalloc: %.1f MB traced (peak %.1f MB); largest growth since start:",
            current / 1e6,
            peak / 1e6,
        )
        for stat in snapshot.compare_to(first, "lineno")[:15]:
            log.info("tracemalloc:   %s", stat)


async def maintenance_ctx(app: web.Application) -> AsyncIterator[None]:
    """Prune tokens at start and hourly (on the lease holder); trace memory when
    HUBSVC_TRACEMALLOC is set (in every process)."""
    leader = app[LEADER]
    leader.add(leader.every("token pruning", PRUNE_SECONDS, lambda: _prune_tokens(app)))
    tasks = []
    every = os.environ.get(TRACE_ENV, "")
    if every:
        tasks.append(asyncio.create_task(_trace_forever(float(every))))
    yield
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    if tracemalloc.is_tracing():
        tracemalloc.stop()
