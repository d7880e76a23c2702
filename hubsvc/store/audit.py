"""Reading the security log, and the entries no other write carries."""

from __future__ import annotations

import json
from typing import Any

from .base import Table, reads, writes
from .seclog import Entry, append_entries


def _row(row: Any) -> dict[str, Any]:
    entry = dict(row)
    entry["data"] = json.loads(entry["data"])
    return entry


class AuditStore(Table):
    """Reading the security log (entries are written by the changes they record)."""

    @writes
    def record(self, conn, entries: list[Entry]) -> None:
        """Append entries that go with no other write (a refused sign-in, a change outside the store)."""
        append_entries(conn, entries)

    @reads
    def listing(
        self,
        conn,
        *,
        about_user: int | None = None,
        owner: int | None = None,
        before: int | None = None,
        limit: int = 30,
        action: str | None = None,
        actor: str | None = None,
    ) -> tuple[list[dict[str, Any]], bool]:
        """Entries newest first: of a user (actor or target), an owner, or all (neither given)."""
        where = []
        if about_user is not None:
            # Each arm by its own index.
            where.append(
                "id IN (SELECT id FROM security_log WHERE actor_id = :me"
                " UNION SELECT id FROM security_log WHERE user_id = :me"
                " UNION SELECT id FROM security_log WHERE owner_id = :me)"
            )
        if owner is not None:
            where.append("owner_id = :owner")
        if before is not None:
            where.append("id < :before")
        if action is not None:
            where.append("action = :action")
        if actor is not None:
            where.append("LOWER(actor_name) = :actor")
        sql = "SELECT * FROM security_log"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC LIMIT :limit"
        rows = conn.execute(
            sql,
            {
                "me": about_user,
                "owner": owner,
                "before": before,
                "action": action,
                "actor": None if actor is None else actor.lower(),
                "limit": limit + 1,
            },
        ).fetchall()
        return [_row(row) for row in rows[:limit]], len(rows) > limit

    @reads
    def sign_in_addresses(self, conn, user_id: int, ip: str) -> tuple[bool, bool]:
        """(any earlier sign-in of the user, one from ip) in the log."""
        row = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM security_log WHERE user_id = :u"
            "  AND action IN ('auth.sign-in', 'account.created')),"
            " EXISTS (SELECT 1 FROM security_log WHERE user_id = :u"
            "  AND action IN ('auth.sign-in', 'account.created') AND ip = :ip)",
            {"u": user_id, "ip": ip},
        ).fetchone()
        return bool(row[0]), bool(row[1])

    @writes
    def prune(self, conn, before_iso: str) -> int:
        """Drop entries older than before_iso ([security] log_days)."""
        return conn.execute("DELETE FROM security_log WHERE created_at < ?", (before_iso,)).rowcount
