"""The durable outbox of chat webhook deliveries."""

from __future__ import annotations

import time
import uuid
from typing import Any

from ..timeutil import now_iso
from .base import Table, reads, writes
from .log import move_cursor


class OutboxStore(Table):
    """Deliveries are rows first and HTTP requests second, so none is lost to a restart."""

    @writes
    def enqueue(
        self,
        conn,
        *,
        event_id: str,
        event_type: str,
        repo_id: int | None,
        payload: str,
        redelivery_of: int | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """Queue a body for delivery now; with cursor, the consumer has read event_id."""
        if cursor is not None:
            move_cursor(conn, cursor, int(event_id))
        cur = conn.execute(
            "INSERT INTO webhook_deliveries (guid, event_id, event_type, repo_id, payload,"
            " next_attempt_at, redelivery_of, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            " RETURNING id",
            (
                str(uuid.uuid4()),
                event_id,
                event_type,
                repo_id,
                payload,
                time.time(),
                redelivery_of,
                now_iso(),
            ),
        )
        return dict(
            conn.execute(
                "SELECT * FROM webhook_deliveries WHERE id = ?", (cur.fetchone()[0],)
            ).fetchone()
        )

    @reads
    def next_pending(self, conn) -> dict[str, Any] | None:
        """The oldest delivery still to send (deliveries go out in order)."""
        row = conn.execute(
            "SELECT * FROM webhook_deliveries WHERE status = 'pending' ORDER BY id LIMIT 1"
        ).fetchone()
        return dict(row) if row else None

    @writes
    def record_attempt(
        self,
        conn,
        delivery_id: int,
        *,
        status_code: int | None,
        error: str | None,
        duration_ms: int,
        outcome: str,
        retry_at: float | None = None,
    ) -> None:
        """Log one attempt and move the delivery to delivered, failed, or a later retry."""
        conn.execute(
            "INSERT INTO webhook_attempts (delivery_id, at, status_code, error,"
            " duration_ms) VALUES (?, ?, ?, ?, ?)",
            (delivery_id, now_iso(), status_code, error, duration_ms),
        )
        conn.execute(
            "UPDATE webhook_deliveries SET attempts = attempts + 1, status = ?, last_status = ?,"
            " last_error = ?, next_attempt_at = COALESCE(?, next_attempt_at),"
            " delivered_at = CASE WHEN ? = 'delivered' THEN ? ELSE delivered_at END"
            " WHERE id = ?",
            (outcome, status_code, error, retry_at, outcome, now_iso(), delivery_id),
        )

    @reads
    def recent(self, conn, limit: int, offset: int) -> tuple[list[dict[str, Any]], bool]:
        """Deliveries newest first, each with its attempts."""
        rows = [
            dict(r)
            for r in conn.execute(
                "SELECT * FROM webhook_deliveries ORDER BY id DESC LIMIT ? OFFSET ?",
                (limit + 1, offset),
            )
        ]
        more = len(rows) > limit
        rows = rows[:limit]
        by_id = {row["id"]: row for row in rows}
        for row in rows:
            row["attempt_list"] = []
        if by_id:
            marks = ",".join("?" * len(by_id))
            for attempt in conn.execute(
                f"SELECT * FROM webhook_attempts WHERE delivery_id IN ({marks}) ORDER BY id",
                list(by_id),
            ):
                by_id[attempt["delivery_id"]]["attempt_list"].append(dict(attempt))
        return rows, more

    @reads
    def get(self, conn, delivery_id: int) -> dict[str, Any] | None:
        """One delivery."""
        row = conn.execute(
            "SELECT * FROM webhook_deliveries WHERE id = ?", (delivery_id,)
        ).fetchone()
        return dict(row) if row else None

    @reads
    def counts(self, conn) -> dict[str, int]:
        """How many deliveries are in each status."""
        return {
            row[0]: row[1]
            for row in conn.execute(
                "SELECT status, COUNT(*) FROM webhook_deliveries GROUP BY status"
            )
        }

    @writes
    def first_sighting(self, conn, signature_digest: bytes, now: int, forget_before: int) -> bool:
        """Record an inbound request's signature; False when it was seen before (a replay)."""
        conn.execute("DELETE FROM webhook_inbound_seen WHERE seen_at < ?", (forget_before,))
        cur = conn.execute(
            "INSERT INTO webhook_inbound_seen (signature, seen_at) VALUES (?, ?)"
            " ON CONFLICT DO NOTHING",
            (signature_digest, now),
        )
        return cur.rowcount == 1


class MailStore(Table):
    """Outgoing e-mail, retried until sent or given up; failures stay visible."""

    @writes
    def enqueue(
        self, conn, messages: list[tuple[str, str, bytes]], cursor: tuple[str, int] | None = None
    ) -> list[int]:
        """Queue (recipient, subject, message)s for sending now; with cursor, mark it read."""
        if cursor is not None:
            move_cursor(conn, *cursor)
        return [
            conn.execute(
                "INSERT INTO mail_deliveries (recipient, subject, message, next_attempt_at,"
                " created_at) VALUES (?, ?, ?, ?, ?) RETURNING id",
                (recipient, subject, message, time.time(), now_iso()),
            ).fetchone()[0]
            for recipient, subject, message in messages
        ]

    @reads
    def due(self, conn, now: float) -> list[dict[str, Any]]:
        """Pending messages whose time has come, oldest first."""
        return [
            dict(r)
            for r in conn.execute(
                "SELECT * FROM mail_deliveries WHERE status = 'pending' AND next_attempt_at <= ?"
                " ORDER BY id LIMIT 20",
                (now,),
            )
        ]

    @reads
    def next_at(self, conn) -> float | None:
        """When the next pending message is due."""
        return conn.execute(
            "SELECT MIN(next_attempt_at) FROM mail_deliveries WHERE status = 'pending'"
        ).fetchone()[0]

    @writes
    def record(
        self, conn, mail_id: int, *, outcome: str, error: str | None, retry_at: float | None
    ) -> None:
        """One attempt's outcome; the body goes once the message is sent or given up."""
        conn.execute(
            "UPDATE mail_deliveries SET attempts = attempts + 1, status = ?, last_error = ?,"
            " next_attempt_at = COALESCE(?, next_attempt_at),"
            " message = CASE WHEN ? = 'pending' THEN message END,"
            " delivered_at = CASE WHEN ? = 'delivered' THEN ? END WHERE id = ?",
            (outcome, error, retry_at, outcome, outcome, now_iso(), mail_id),
        )

    @reads
    def recent(self, conn, limit: int, offset: int) -> tuple[list[dict[str, Any]], bool]:
        """Messages newest first, without their bodies."""
        rows = [
            dict(r)
            for r in conn.execute(
                "SELECT id, recipient, subject, status, attempts, next_attempt_at, last_error,"
                " created_at, delivered_at FROM mail_deliveries ORDER BY id DESC LIMIT ? OFFSET ?",
                (limit + 1, offset),
            )
        ]
        return rows[:limit], len(rows) > limit
