"""The event log: appended in the change's own transaction, read after a cursor."""

from __future__ import annotations

import json
from typing import Any

from ..events.shape import Event
from ..requestid import current as current_request_id
from .access import READ_THEN, VISIBLE, Readable, narrowed
from .base import Table, quiet_writes, reads, writes
from .engines import Row
from .log import append_events, move_cursor


def _event(row: Row) -> Event:
    payload = json.loads(row["payload"])
    return Event(
        type=payload["type"],
        repository=payload["repository"],
        actor=payload["actor"],
        data=payload["data"],
        id=str(row["id"]),
        createdAt=payload["createdAt"],
        repo_id=str(row["repo_id"]) if row["repo_id"] is not None else None,
        public=bool(row["public"]),
        inbound=bool(payload.get("inbound")),
    )


class EventStore(Table):
    """Reads of the log; writes happen with the change (Table methods' emit=)."""

    async def append(self, events: list[Event]) -> list[Event]:
        """Events that are a change of their own (an inbound webhook, a fork made on disk)."""
        written = await self.db.write(append_events, events, current_request_id())
        self.db.committed(written)
        if written:
            await self.db.paced()
        return written

    @reads
    def last_id(self, conn) -> int:
        """The newest event id, 0 when the log is empty."""
        row = conn.execute("SELECT MAX(id) FROM events").fetchone()
        return row[0] or 0

    @reads
    def repos_between(self, conn, after: int, upto: int) -> list[int]:
        """The repositories of the events after `after` up to `upto`."""
        return [
            row[0]
            for row in conn.execute(
                "SELECT DISTINCT repo_id FROM events WHERE id > ? AND id <= ?"
                " AND repo_id IS NOT NULL",
                (after, upto),
            )
        ]

    @reads
    def cursor(self, conn, name: str) -> int | None:
        """A durable consumer's position in the log (None: it never read any)."""
        row = conn.execute("SELECT event_id FROM event_cursors WHERE name = ?", (name,)).fetchone()
        return row[0] if row else None

    @quiet_writes
    def set_cursor(self, conn, name: str, event_id: int) -> None:
        """Move a durable consumer's position."""
        move_cursor(conn, name, event_id)

    @quiet_writes
    def start_cursor(self, conn, name: str, head: int) -> int:
        """A durable consumer's position; one that never read any starts at head, for good."""
        conn.execute(
            "INSERT INTO event_cursors (name, event_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (name, head),
        )
        return conn.execute(
            "SELECT event_id FROM event_cursors WHERE name = ?", (name,)
        ).fetchone()[0]

    @reads
    def pruned_through(self, conn) -> int:
        """Events up to this id were pruned: a cursor below it has missed some."""
        return conn.execute(
            "SELECT value FROM event_log_state WHERE name = 'pruned_through'"
        ).fetchone()[0]

    @reads
    def after(self, conn, cursor: int, limit: int) -> list[Event]:
        """Every event after cursor, oldest first (for the server's own consumers)."""
        return [
            _event(r)
            for r in conn.execute(
                "SELECT * FROM events WHERE id > ? ORDER BY id LIMIT ?", (cursor, limit)
            )
        ]

    @reads
    def visible_after(
        self,
        conn,
        viewer: int,
        cursor: int,
        limit: int,
        repo_id: int | None = None,
        within: Readable | None = None,
    ) -> tuple[list[Event], bool]:
        """Events the viewer may read, oldest first, after cursor.

        A public-period event: while the viewer may read the repository now. A private-
        period one: only for the owner and collaborators granted before it happened.
        """
        where = "e.repo_id = :repo" if repo_id is not None else "1 = 1"
        rows = conn.execute(
            "SELECT e.* FROM events e JOIN repositories r ON r.id = e.repo_id"
            f" WHERE e.id > :cursor AND {where} AND CASE WHEN e.public = 1 THEN {VISIBLE}"
            f" ELSE {READ_THEN} END{narrowed(within, 'r', 'e')} ORDER BY e.id LIMIT :limit",
            {"cursor": cursor, "viewer": viewer, "repo": repo_id, "limit": limit + 1},
        ).fetchall()
        return [_event(r) for r in rows[:limit]], len(rows) > limit

    @reads
    def visible_before(
        self,
        conn,
        viewer: int,
        before: int,
        after: int,
        limit: int,
        repo_id: int | None = None,
        within: Readable | None = None,
    ) -> tuple[list[Event], bool]:
        """Events the viewer may read, newest first, after `after` and before `before`."""
        where = "e.repo_id = :repo" if repo_id is not None else "1 = 1"
        rows = conn.execute(
            "SELECT e.* FROM events e JOIN repositories r ON r.id = e.repo_id"
            f" WHERE e.id < :before AND e.id > :after AND {where} AND CASE WHEN e.public = 1"
            f" THEN {VISIBLE} ELSE {READ_THEN} END{narrowed(within, 'r', 'e')}"
            " ORDER BY e.id DESC LIMIT :limit",
            {
                "before": before,
                "after": after,
                "viewer": viewer,
                "repo": repo_id,
                "limit": limit + 1,
            },
        ).fetchall()
        return [_event(r) for r in rows[:limit]], len(rows) > limit

    @writes
    def prune(self, conn, before_iso: str) -> int:
        """Drop events created before the time; remembers how far pruning went."""
        row = conn.execute(
            "SELECT MAX(id) FROM events WHERE created_at < ?", (before_iso,)
        ).fetchone()
        if row[0] is None:
            return 0
        cur = conn.execute("DELETE FROM events WHERE id <= ?", (row[0],))
        conn.execute(
            "UPDATE event_log_state SET value = ? WHERE name = 'pruned_through' AND value < ?",
            (row[0], row[0]),
        )
        return cur.rowcount


def rows_to_events(rows: list[Any]) -> list[Event]:
    """Rows of the events table as Events."""
    return [_event(r) for r in rows]
