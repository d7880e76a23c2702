"""The SQLite store: one module per aggregate, all SQL lives here."""

from __future__ import annotations

from pathlib import Path

from .chat import ChatStore
from .db import Database
from .issues import IssueStore
from .outbox import OutboxStore
from .repos import RepoStore
from .search import SearchStore
from .users import UserStore


class Store:
    """The database and the per-aggregate stores over it."""

    def __init__(self, path: str | Path, write_timeout_ms: int = 5000) -> None:
        self.db = Database(path, write_timeout_ms=write_timeout_ms)
        self.users = UserStore(self.db)
        self.repos = RepoStore(self.db)
        self.issues = IssueStore(self.db)
        self.search = SearchStore(self.db)
        self.chat = ChatStore(self.db)
        self.outbox = OutboxStore(self.db)

    async def open(self) -> None:
        """Open connections and apply migrations."""
        await self.db.open()

    async def close(self) -> None:
        """Close every connection."""
        await self.db.close()
