"""Glue that turns a store's synchronous SQL functions into awaitable methods."""

from __future__ import annotations

import asyncio
import copy
import functools
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol, cast, overload

from ..requestid import current as current_request_id
from .engines import AnyDatabase, Row
from .log import append_events
from .seclog import AuditArg, append_entries, entries_of


class StoreMethod(Protocol):
    """An awaitable store method; `.sync` is the plain function for use inside a transaction."""

    sync: Callable[..., Any]

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


def reads(fn: Callable[..., Any]) -> StoreMethod:
    """Make `def f(self, conn, ...)` an awaitable method run on a read connection."""

    @functools.wraps(fn)
    async def method(self: Table, *args: Any, **kwargs: Any) -> Any:
        return await self.db.read(functools.partial(fn, self), *args, **kwargs)

    made = cast(StoreMethod, method)
    made.sync = fn  # lets a write transaction reuse the same query
    return made


def writes(fn: Callable[..., Any]) -> StoreMethod:
    """Make `def f(self, conn, ...)` an awaitable method run in one write transaction.

    With `emit=`, a function of the result giving the events the change makes, those
    events are appended to the log in the same transaction: the change and its events
    commit together or not at all. Listeners hear of them after the commit. `audit=`
    does the same for the security log: entries (`seclog.Entry`), or a function of the
    result giving them.
    """

    @functools.wraps(fn)
    async def method(
        self: Table,
        *args: Any,
        emit: Callable[[Any], list] | None = None,
        audit: AuditArg = None,
        **kwargs: Any,
    ) -> Any:
        if emit is None and audit is None:
            return await self.db.write(functools.partial(fn, self), *args, **kwargs)
        rid = current_request_id()  # read here: the transaction runs on another thread

        def with_events(conn: Any, *a: Any, **kw: Any) -> tuple[Any, list]:
            result = fn(self, conn, *a, **kw)
            append_entries(conn, entries_of(audit, result))
            return result, append_events(conn, emit(result) if emit is not None else [], rid)

        result, events = await self.db.write(with_events, *args, **kwargs)
        self.db.committed(events)
        if events:
            await self.db.paced()
        return result

    made = cast(StoreMethod, method)
    made.sync = fn
    return made


def quiet_writes(fn: Callable[..., Any]) -> StoreMethod:
    """`writes` for rows no read cache holds (the inbox, consumer cursors, leases).

    Such a write bumps no generation and pulses no other process: the background
    consumers write one per event, and each emptied the search and list caches (on
    PostgreSQL, whose commits are slower, for minutes after a burst of activity).
    """

    @functools.wraps(fn)
    async def method(self: Table, *args: Any) -> Any:
        return await self.db.quiet_write(functools.partial(fn, self), *args)

    made = cast(StoreMethod, method)
    made.sync = fn
    return made


class Table:
    """Base of the per-aggregate stores."""

    def __init__(self, db: AnyDatabase) -> None:
        self.db = db


@overload
def row_dict(row: None) -> None: ...
@overload
def row_dict(row: Row) -> dict[str, Any]: ...
def row_dict(row: Row | None) -> dict[str, Any] | None:
    """A row as a plain dict (None stays None)."""
    return dict(row) if row is not None else None


# How long a cached read answers at most when nothing is written (cached_until_write).
ROW_SECONDS = 2.0


def cached_until_write(ttl: float = ROW_SECONDS, size: int = 4096) -> Callable[..., Any]:
    """Keep a read's answers in memory until the next write, for at most ttl seconds.

    The hottest reads (a repository by name on every repository request) cost a hop to
    a reader thread that dwarfs the query; any write in this process bumps the database
    generation and so empties the cache, and ttl bounds how long a change made by another
    process (the admin commands) goes unseen. Callers get a copy they may change.

    Concurrent misses of one key share one read: under load the requests that find an
    entry expired (every ttl, and after each write) all wanted it at once, and each
    queued its own hop to the reader threads, which showed as the p99 spike.
    """

    def decorate(method: Callable[..., Any]) -> StoreMethod:
        attribute = f"_cache_{method.__name__}"

        @functools.wraps(method)
        async def wrapper(self: Table, *args: Any) -> Any:
            cache = self.__dict__.get(attribute)
            generation = self.db.generation
            if cache is None or cache[0] != generation:
                pending: dict[tuple[Any, ...], asyncio.Future[Any]] = {}
                cache = (generation, OrderedDict[tuple[Any, ...], tuple[Any, float]](), pending)
                setattr(self, attribute, cache)
            entries, pending = cache[1], cache[2]
            hit = entries.get(args)
            now = time.monotonic()
            if hit is not None and now - hit[1] < ttl:
                return copy.copy(hit[0])
            shared = pending.get(args)
            if shared is not None:
                try:
                    return copy.copy(await asyncio.shield(shared))
                except asyncio.CancelledError:
                    if not shared.cancelled():
                        raise  # this caller was cancelled
                    return await wrapper(self, *args)  # the one reading was: read again
            future = asyncio.get_running_loop().create_future()
            pending[args] = future
            try:
                result = await method(self, *args)
            except BaseException as exc:
                if isinstance(exc, asyncio.CancelledError):
                    future.cancel()
                else:
                    future.set_exception(exc)
                    future.exception()  # retrieved: nobody may be waiting for it
                raise
            finally:
                pending.pop(args, None)
            future.set_result(result)
            if self.db.generation == generation:  # nothing was written meanwhile
                entries[args] = (result, now)
                entries.move_to_end(args)
                while len(entries) > size:
                    entries.popitem(last=False)
            return copy.copy(result)

        made = cast(StoreMethod, wrapper)
        made.sync = getattr(method, "sync", method)
        return made

    return decorate
