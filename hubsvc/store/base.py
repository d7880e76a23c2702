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
    """Make `def f(self, conn, ...)` an awaitable method run in one write transaction."""

    @functools.wraps(fn)
    async def method(self: "Table", *args: Any, **kwargs: Any) -> Any:
        return await self.db.write(functools.partial(fn, self), *args, **kwargs)

    method.sync = fn
    return method


class Table:
    """Base of the per-aggregate stores."""

    def __init__(self, db: Database) -> None:
        self.db = db


def row_dict(row: Any) -> dict[str, Any] | None:
    """A sqlite3.Row as a plain dict (None stays None)."""
    return dict(row) if row is not None else None
