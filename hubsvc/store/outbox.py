"""The durable outbox of chat webhook deliveries."""

from __future__ import annotations

import time
import uuid
from typing import Any

from ..timeutil import now_iso
from .base import Table, reads, writes
from .log import claim_event
from .queue import MAIL, WEBHOOKS


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
    ) -> dict[str, Any] | None:
        """Queue a body for delivery now; with cursor, the consumer has read event_id.

        None when the cursor was past event_id already: queued once, by another process.
        """
        if cursor is not None and not claim_event(conn, cursor, int(event_id)):
            return None
        row = conn.execute(
            "INSERT INTO webhook_deliveries (guid, event_id, event_type, repo_id, payload,"
            " next_attempt_at, redelivery_of, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            " RETURNING *",
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
        ).fetchone()
        return dict(row)

    @reads
    def next_pending(self, conn) -> dict[str, Any] | None:
        """The oldest delivery still to send (deliveries go out in order), claimed or not."""
        row = conn.execute(
            "SELECT * FROM webhook_deliveries WHERE status = 'pending' ORDER BY id LIMIT 1"
        ).fetchone()
        return dict(row) if row else None

    @writes
    def claim(self, conn, delivery_id: int, holder: str, lease: str, now: float) -> bool:
        """Mark a pending delivery as being sent by holder, who must hold the lease now."""
        return WEBHOOKS.claim(conn, delivery_id, holder, lease, now)

    @writes
    def settle_abandoned(self, conn, now: float, mine: str | None = None) -> int:
        """Release deliveries claimed by a gone process (or by mine): sent again."""
        return WEBHOOKS.settle_abandoned(conn, now, mine)

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
        holder: str | None = None,
    ) -> None:
        """Log one attempt and move the delivery to delivered, failed, or a later retry.

        With holder, only while holder's claim stands (it was not settled as abandoned).
        """
        written = WEBHOOKS.record(
            conn,
            delivery_id,
            outcome=outcome,
            error=error,
            retry_at=retry_at,
            holder=holder,
            extra={"last_status": status_code},
        )
        if written:
            conn.execute(
                "INSERT INTO webhook_attempts (delivery_id, at, status_code, error,"
                " duration_ms) VALUES (?, ?, ?, ?, ?)",
                (delivery_id, now_iso(), status_code, error, duration_ms),
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
        """Queue (recipient, subject, message)s for sending now; with cursor, mark it read.

        Nothing is queued when the cursor was past the event: another process queued it.
        """
        if cursor is not None and not claim_event(conn, *cursor):
            return []
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
                " AND claimed_by IS NULL ORDER BY id LIMIT 20",
                (now,),
            )
        ]

    @reads
    def next_at(self, conn) -> float | None:
        """When the next pending message is due."""
        return conn.execute(
            "SELECT MIN(next_attempt_at) FROM mail_deliveries WHERE status = 'pending'"
            " AND claimed_by IS NULL"
        ).fetchone()[0]

    @writes
    def claim(self, conn, mail_id: int, holder: str) -> bool:
        """Mark a pending message as being sent by holder; False when another process has it.

        Not fenced by the lease (store/queue.py says why): any process sends what it queued.
        """
        return MAIL.claim(conn, mail_id, holder)

    @writes
    def settle_abandoned(self, conn, now: float, mine: str | None = None) -> int:
        """Release messages claimed by a gone process (or by mine): sent again."""
        return MAIL.settle_abandoned(conn, now, mine)

    @writes
    def record(
        self,
        conn,
        mail_id: int,
        *,
        outcome: str,
        error: str | None,
        retry_at: float | None,
        holder: str | None = None,
    ) -> None:
        """One attempt's outcome; the body goes once the message is sent or given up."""
        MAIL.record(conn, mail_id, outcome=outcome, error=error, retry_at=retry_at, holder=holder)

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
