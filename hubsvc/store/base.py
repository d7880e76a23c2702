"""Glue that turns a store's synchronous SQL functions into awaitable methods."""

from __future__ import annotations

import functools
from typing import Any, Callable

from .db import Database


def reads(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Make `def f(self, conn, ...)` an awaitable method run on a read connection."""

    @functools.wraps(fn)
    async def method(self: "Table", *args: Any, **kwargs: Any) -> Any:
        return await self.db.read(functools.partial(fn, self), *args, **kwargs)

    method.sync = fn  # lets a write transaction reuse the same query
    return method


def writes(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Make `def f(self, conn, ...)` an awaitable method run in one write transaction.

    With `emit=`, a function of the result giving the events the change makes, those
    events are appended to the log in the same transaction: the change and its events
    commit together or not at all. Listeners hear of them after the commit.
    """

    @functools.wraps(fn)
    async def method(self: "Table", *args: Any, emit: Callable[[Any], list] | None = None,
                     **kwargs: Any) -> Any:
        if emit is None:
            return await self.db.write(functools.partial(fn, self), *args, **kwargs)

        def with_events(conn: Any, *a: Any, **kw: Any) -> tuple[Any, list]:
            from .events import append_events  # events.py imports this module
            result = fn(self, conn, *a, **kw)
            return result, append_events(conn, emit(result))

        result, events = await self.db.write(with_events, *args, **kwargs)
        self.db.committed(events)
        return result

    method.sync = fn
    return method


class Table:
    """Base of the per-aggregate stores."""

    def __init__(self, db: Database) -> None:
        self.db = db


def row_dict(row: Any) -> dict[str, Any] | None:
    """A sqlite3.Row as a plain dict (None stays None)."""
    return dict(row) if row is not None else None
