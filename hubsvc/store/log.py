"""Writing the event log inside a change's own transaction (no Table machinery needed)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3

from ..events.shape import Event


def append_events(conn: sqlite3.Connection, events: list[Event]) -> list[Event]:
    """Insert events inside the caller's transaction; returns them with their log ids."""
    out = []
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
        cur = conn.execute(
            "INSERT INTO events (type, action, repo_id, actor_id, payload, created_at, public)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                event.type,
                event.data.get("action"),
                repo_id,
                int(event.actor["id"]) if event.actor and event.actor.get("id") else None,
                json.dumps(payload, separators=(",", ":")),
                event.createdAt,
                int(public),
            ),
        )
        out.append(dataclasses.replace(event, id=str(cur.lastrowid), public=public))
    return out


def move_cursor(conn: sqlite3.Connection, name: str, event_id: int) -> None:
    """Set a durable consumer's position inside the caller's transaction."""
    conn.execute(
        "INSERT INTO event_cursors (name, event_id) VALUES (?, ?)"
        " ON CONFLICT (name) DO UPDATE SET event_id = MAX(event_id, excluded.event_id)",
        (name, event_id),
    )


def claim_event(conn: sqlite3.Connection, name: str, event_id: int) -> bool:
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
