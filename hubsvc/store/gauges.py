"""What a metrics scrape reads from the database: the log's head, cursors, queue depths."""

from __future__ import annotations

from dataclasses import dataclass

from .base import Table, reads

# The three delivery tables (store.queue) by the name metrics give them.
QUEUES = (
    ("outbox", "webhook_deliveries"),
    ("hooks", "hook_deliveries"),
    ("mail", "mail_deliveries"),
)


@dataclass(frozen=True)
class Snapshot:
    """The database's part of a scrape."""

    head: int  # the newest event id
    cursors: dict[str, int]  # each named durable consumer's position
    hooks_behind: int  # the furthest behind of the active hooks' cursors (0: none behind)
    queues: dict[str, dict[str, int]]  # queue -> pending / failed rows


class GaugeStore(Table):
    """One read transaction per scrape, never one per request."""

    @reads
    def snapshot(self, conn) -> Snapshot:
        """The event log's head, the consumers' cursors and the queues, read together."""
        head = conn.execute("SELECT MAX(id) FROM events").fetchone()[0] or 0
        cursors = {
            name: int(event_id)
            for name, event_id in conn.execute(
                "SELECT name, event_id FROM event_cursors WHERE name NOT LIKE 'hook:%'"
            )
        }
        # A hook per repository could be thousands of series: one figure for them all,
        # the active hook furthest behind (an inactive one is not read until it is on).
        row = conn.execute(
            "SELECT MIN(c.event_id) FROM hooks h JOIN event_cursors c"
            " ON c.name = 'hook:' || CAST(h.id AS TEXT) WHERE h.active = 1"
        ).fetchone()
        hooks_behind = max(0, head - int(row[0])) if row and row[0] is not None else 0
        queues: dict[str, dict[str, int]] = {}
        for queue, table in QUEUES:
            counts = {"pending": 0, "failed": 0}
            for status, count in conn.execute(
                f"SELECT status, COUNT(*) FROM {table} WHERE status IN ('pending', 'failed')"
                " GROUP BY status"
            ):
                counts[status] = int(count)
            queues[queue] = counts
        return Snapshot(head, cursors, hooks_behind, queues)
