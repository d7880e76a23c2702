"""SSH public keys: an account's keys and deploy keys of one repository."""

from __future__ import annotations

import time
from typing import Any

from ..timeutil import iso, now_iso
from .base import Table, reads, row_dict, writes

TOUCH_EVERY = 60.0  # seconds between two writes of a key's last_used_at
_SELECT = (
    "SELECT k.*, u.username AS username, u.disabled AS disabled, u.email AS email"
    " FROM ssh_keys k LEFT JOIN users u ON u.id = k.user_id"
)


class KeyTaken(Exception):
    """The key is already on an account or a repository: holder is that key's row."""

    def __init__(self, holder: dict[str, Any]) -> None:
        super().__init__("key already in use")
        self.holder = holder


class KeyStore(Table):
    """Keys by account or repository, and by fingerprint for the SSH server."""

    def __init__(self, db: Any) -> None:
        super().__init__(db)
        self._touched: dict[int, float] = {}  # key id → when this process last wrote it

    @reads
    def by_fingerprint(self, conn, fingerprint: str) -> dict[str, Any] | None:
        """The key with this fingerprint; a user key carries username, disabled and email."""
        row = conn.execute(_SELECT + " WHERE k.fingerprint = ?", (fingerprint,)).fetchone()
        return row_dict(row)

    @reads
    def by_fingerprints(self, conn, fingerprints: list[str]) -> dict[str, dict[str, Any]]:
        """The account keys among these fingerprints, by fingerprint (deploy keys left out)."""
        if not fingerprints:
            return {}
        marks = ", ".join("?" for _ in fingerprints)
        rows = conn.execute(
            _SELECT + f" WHERE k.fingerprint IN ({marks}) AND k.user_id IS NOT NULL",
            tuple(fingerprints),
        ).fetchall()
        return {r["fingerprint"]: dict(r) for r in rows}

    @reads
    def exists(self, conn, key_id: int) -> bool:
        """Whether the key is still there (an open SSH session ends when it is not)."""
        return conn.execute("SELECT 1 FROM ssh_keys WHERE id = ?", (key_id,)).fetchone() is not None

    @reads
    def get(self, conn, key_id: int) -> dict[str, Any] | None:
        """One key by id."""
        return row_dict(conn.execute(_SELECT + " WHERE k.id = ?", (key_id,)).fetchone())

    @reads
    def of_user(self, conn, user_id: int) -> list[dict[str, Any]]:
        """An account's keys, oldest first."""
        rows = conn.execute(_SELECT + " WHERE k.user_id = ? ORDER BY k.id", (user_id,))
        return [dict(r) for r in rows.fetchall()]

    @reads
    def of_repo(self, conn, repo_id: int) -> list[dict[str, Any]]:
        """A repository's deploy keys, oldest first."""
        rows = conn.execute(_SELECT + " WHERE k.repo_id = ? ORDER BY k.id", (repo_id,))
        return [dict(r) for r in rows.fetchall()]

    @writes
    def add(
        self,
        conn,
        title: str,
        key: str,
        fingerprint: str,
        user_id: int | None = None,
        repo_id: int | None = None,
        read_only: bool = False,
    ) -> dict[str, Any]:
        """Add a key to an account or a repository; KeyTaken when it is on one already."""
        if (user_id is None) == (repo_id is None):
            raise ValueError("a key belongs to exactly one account or one repository")
        holder = conn.execute(_SELECT + " WHERE k.fingerprint = ?", (fingerprint,)).fetchone()
        if holder is not None:
            raise KeyTaken(dict(holder))
        cur = conn.execute(
            "INSERT INTO ssh_keys (user_id, repo_id, title, key, fingerprint, read_only,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (user_id, repo_id, title, key, fingerprint, int(read_only), now_iso()),
        )
        key_id = cur.fetchone()[0]
        return dict(conn.execute(_SELECT + " WHERE k.id = ?", (key_id,)).fetchone())

    @writes
    def delete(
        self, conn, key_id: int, user_id: int | None = None, repo_id: int | None = None
    ) -> dict[str, Any] | None:
        """Delete a key of this account or repository; the deleted row, or None."""
        if (user_id is None) == (repo_id is None):
            raise ValueError("name the key's account or its repository")
        column = "user_id" if user_id is not None else "repo_id"
        row = conn.execute(
            _SELECT + f" WHERE k.id = ? AND k.{column} = ?", (key_id, user_id or repo_id)
        ).fetchone()
        if row is None:
            return None
        conn.execute("DELETE FROM ssh_keys WHERE id = ?", (key_id,))
        return dict(row)

    async def touch(self, key_id: int) -> None:
        """Move a key's last_used_at to now, writing at most once a minute per key."""
        now = time.time()
        if now - self._touched.get(key_id, 0.0) < TOUCH_EVERY:
            return
        self._touched[key_id] = now
        if len(self._touched) > 10000:  # forget the oldest half rather than grow without end
            for old in sorted(self._touched, key=self._touched.__getitem__)[:5000]:
                del self._touched[old]
        await self._touch(key_id, iso(now), iso(now - TOUCH_EVERY))

    @writes
    def _touch(self, conn, key_id: int, now: str, before: str) -> None:
        # the condition keeps several processes to one write a minute between them
        conn.execute(
            "UPDATE ssh_keys SET last_used_at = ? WHERE id = ?"
            " AND (last_used_at IS NULL OR last_used_at <= ?)",
            (now, key_id, before),
        )
