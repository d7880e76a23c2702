"""Leases: which process runs the work that must run once, and which processes are alive."""

from __future__ import annotations

from typing import Any

from ..errors import Unavailable
from .base import Table, quiet_writes, reads

PROCESS = "process:"  # a process's own row: alive while it is renewed

# One statement, portable to SQLite (3.35+) and PostgreSQL: the row is inserted, or
# renewed by its holder, or taken over once it has expired; RETURNING gives a row only
# when this holder has it now.
_TAKE = (
    "INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?)"
    " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder,"
    " expires_at = excluded.expires_at"
    " WHERE leases.holder = excluded.holder OR leases.expires_at < ?"
    " RETURNING holder"
)


class LeaseLost(Unavailable):
    """This process no longer holds the lease it acts under: the work stops here."""

    def __init__(self, name: str) -> None:
        super().__init__(f"the {name} lease is held by another process now")


def take(conn: Any, name: str, holder: str, now: float, ttl: float) -> bool:
    """Take or renew a lease inside the caller's transaction; whether holder has it."""
    row = conn.execute(_TAKE, (name, holder, now + ttl, now)).fetchone()
    return row is not None


def fence(conn: Any, name: str, holder: str, now: float) -> None:
    """Raise LeaseLost unless holder holds the lease, locking its row till the commit.

    The no-op UPDATE takes the row's lock (PostgreSQL re-checks the condition against a
    takeover that commits meanwhile), so a claim made under it can never interleave
    with another process taking the lease over.
    """
    row = conn.execute(
        "UPDATE leases SET expires_at = expires_at"
        " WHERE name = ? AND holder = ? AND expires_at >= ? RETURNING holder",
        (name, holder, now),
    ).fetchone()
    if row is None:
        raise LeaseLost(name)


def gone(column: str) -> str:
    """SQL true when the process named by column has no live heartbeat (one ? for now)."""
    return (
        f"NOT EXISTS (SELECT 1 FROM leases hb WHERE hb.name = '{PROCESS}' || {column}"
        " AND hb.expires_at >= ?)"
    )


def _beat(conn: Any, holder: str, lease: str | None, now: float, ttl: float) -> bool:
    take(conn, PROCESS + holder, holder, now, ttl)
    return lease is not None and take(conn, lease, holder, now, ttl)


class LeaseStore(Table):
    """The leases table: take, renew, release; and the heartbeats of running processes."""

    async def beat(self, holder: str, lease: str | None, now: float, ttl: float) -> bool:
        """Renew this process's heartbeat and take or renew the lease (None: only the
        heartbeat); whether it is held.

        A quiet write: no read cache holds leases, and a beat every RENEW seconds from
        each process emptied every process's caches as often (a p99 spike under load).
        """
        return bool(await self.db.quiet_write(_beat, holder, lease, now, ttl))

    @quiet_writes
    def give_up(self, conn, holder: str, lease: str) -> None:
        """Free one lease of holder (its heartbeat stays): another process may take it now."""
        conn.execute("DELETE FROM leases WHERE name = ? AND holder = ?", (lease, holder))

    @quiet_writes
    def release(self, conn, holder: str) -> None:
        """Give up every lease of holder and its heartbeat (a clean shutdown)."""
        conn.execute("DELETE FROM leases WHERE holder = ?", (holder,))

    @quiet_writes
    def forget(self, conn, holders: list[str]) -> None:
        """Drop the rows of processes known dead: their lease is free and their work left."""
        for holder in holders:
            conn.execute("DELETE FROM leases WHERE holder = ?", (holder,))

    @quiet_writes
    def prune(self, conn, before: float) -> int:
        """Drop heartbeats that expired before the time (a gone process stays gone)."""
        return conn.execute(
            "DELETE FROM leases WHERE name LIKE ? AND expires_at < ?", (PROCESS + "%", before)
        ).rowcount

    @reads
    def get(self, conn, name: str) -> dict[str, Any] | None:
        """A lease's row: holder and expires_at."""
        row = conn.execute(
            "SELECT holder, expires_at FROM leases WHERE name = ?", (name,)
        ).fetchone()
        return dict(row) if row else None

    @reads
    def processes(self, conn, now: float) -> list[str]:
        """The holder ids of processes whose heartbeat is live."""
        return [
            row[0]
            for row in conn.execute(
                "SELECT holder FROM leases WHERE name LIKE ? AND expires_at >= ? ORDER BY name",
                (PROCESS + "%", now),
            )
        ]

    @reads
    def all_processes(self, conn) -> list[str]:
        """The holder id of every heartbeat row, expired or not."""
        return [
            row[0]
            for row in conn.execute(
                "SELECT holder FROM leases WHERE name LIKE ? ORDER BY name", (PROCESS + "%",)
            )
        ]


IN_DOUBT = (
    "the process sending this stopped during the attempt; it is sent again under the same"
    " delivery id (it may have arrived: receivers drop repeats by that id)"
)
