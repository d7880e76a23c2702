"""Upkeep as data grows: pruning what is past its use, and the planner's statistics."""

from __future__ import annotations

from typing import Any

from .base import Table, writes


class UpkeepStore(Table):
    """Scheduled housekeeping; each step is one short write transaction."""

    @writes
    def prune_deliveries(self, conn, before_iso: str) -> int:
        """Drop finished chat webhook deliveries (and their attempts) created before before_iso."""
        # By the (status, id) index: pending deliveries are never touched.
        cur = conn.execute(
            "DELETE FROM webhook_deliveries WHERE status IN ('delivered', 'failed')"
            " AND created_at < ?",
            (before_iso,),
        )
        return cur.rowcount

    @writes
    def prune_chat_notices(self, conn, before_iso: str) -> int:
        """Drop chat notices no bot acknowledged, of events older than before_iso."""
        # The queue holds only unacknowledged notices: small unless no bot runs at all.
        return conn.execute("DELETE FROM chat_notices WHERE created_at < ?", (before_iso,)).rowcount

    @writes
    def prune_sessions(self, conn, now: int) -> int:
        """Drop expired session tokens and chat link tokens (each by its expiry index)."""
        count = conn.execute("DELETE FROM tokens WHERE expires_at <= ?", (now,)).rowcount
        count += conn.execute("DELETE FROM chat_link_tokens WHERE expires_at <= ?", (now,)).rowcount
        return count

    @writes
    def optimize(self, conn) -> Any:
        """Refresh the planner's statistics where they went stale (SQLite's PRAGMA optimize)."""
        if self.db.sql.optimize is None:
            return []  # PostgreSQL's autovacuum analyzes on its own
        return conn.execute(self.db.sql.optimize).fetchall()
