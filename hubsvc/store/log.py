"""Writing the event log inside a change's own transaction (no Table machinery needed)."""

from __future__ import annotations

import dataclasses
import json

from ..events.shape import Event
from .engines import Conn, reserve_event_ids


def append_events(conn: Conn, events: list[Event], request_id: str | None = None) -> list[Event]:
    """Insert events inside the caller's transaction; returns them with their log ids.

    request_id names the request that made them (kept for the hook deliveries made of
    them, which another process may send).

    The ids are taken here, last in the transaction, under a lock held until it commits
    (SQLite's write lock and a counter row; PostgreSQL's advisory lock and a sequence):
    every other event-writing transaction waits for this one's commit, so ids are commit
    order, and a reader past id N has seen every event up to N.
    """
    if not events:
        return []
    rows = []
    for event in events:
        payload = event.to_dict()
        payload.pop("id")
        payload.pop("public")  # the column says it
        repo_id = int(event.repo_id) if event.repo_id else None
        # Read in the change's own transaction: what the repository is as it happens.
        row = (
            repo_id
            and conn.execute(
                "SELECT visibility FROM repositories WHERE id = ?", (repo_id,)
            ).fetchone()
        )
        public = not row or row[0] == "public"
        rows.append(
            (
                event.type,
                event.data.get("action"),
                repo_id,
                int(event.actor["id"]) if event.actor and event.actor.get("id") else None,
                json.dumps(payload, separators=(",", ":")),
                event.createdAt,
                int(public),
                request_id,
            )
        )
    first = reserve_event_ids(conn, len(rows))
    conn.executemany(
        "INSERT INTO events (id, type, action, repo_id, actor_id, payload, created_at, public,"
        " request_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(first + i, *row) for i, row in enumerate(rows)],
    )
    return [
        dataclasses.replace(event, id=str(first + i), public=bool(row[-2]))
        for i, (event, row) in enumerate(zip(events, rows, strict=True))
    ]


def move_cursor(conn: Conn, name: str, event_id: int) -> None:
    """Set a durable consumer's position inside the caller's transaction."""
    conn.execute(
        "INSERT INTO event_cursors (name, event_id) VALUES (?, ?)"
        " ON CONFLICT (name) DO UPDATE SET event_id = CASE WHEN excluded.event_id"
        " > event_cursors.event_id THEN excluded.event_id ELSE event_cursors.event_id END",
        (name, event_id),
    )


def claim_event(conn: Conn, name: str, event_id: int) -> bool:
    """Move a durable consumer's cursor up to event_id inside the caller's transaction.

    False when the cursor is already there or past it: another process (the previous
    lease holder) handled the event, and what it queued must not be queued again.
    """
    moved = conn.execute(
        "UPDATE event_cursors SET event_id = ? WHERE name = ? AND event_id < ? RETURNING name",
        (event_id, name, event_id),
    ).fetchone()
    if moved is not None:
        return True
    return (
        conn.execute(
            "INSERT INTO event_cursors (name, event_id) VALUES (?, ?)"
            " ON CONFLICT (name) DO NOTHING RETURNING name",
            (name, event_id),
        ).fetchone()
        is not None
    )
