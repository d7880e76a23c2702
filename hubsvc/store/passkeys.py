"""Passkeys and security keys (WebAuthn credentials) and their ceremonies' challenges."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from ..errors import Conflict
from ..timeutil import now_iso
from .access import two_factor_on
from .base import Table, reads, writes
from .two_factor import REQUIRED_BY

MAX_PASSKEYS = 20
# Live challenges kept per user and ceremony (per sign-in, for a sign-in's); older ones go.
MAX_OPEN = 5
_COLUMNS = (
    "id, user_id, credential_id, public_key, sign_count, name, transports, created_at, last_used_at"
)


def _passkey(row: Any) -> dict[str, Any]:
    return {
        "id": row["id"],
        "user_id": row["user_id"],
        "credential_id": bytes(row["credential_id"]),
        "public_key": bytes(row["public_key"]),
        "sign_count": row["sign_count"],
        "name": row["name"],
        "transports": json.loads(row["transports"]),
        "created_at": row["created_at"],
        "last_used_at": row["last_used_at"],
    }


class PasskeyStore(Table):
    """A user's WebAuthn credentials, and the challenges of registrations and sign-ins."""

    def __init__(self, db: Any, changed: Callable[[], None] = lambda: None) -> None:
        super().__init__(db)
        # A passkey turns the second factor on or off: what an organization's rule lets
        # through changes with it, and the caches of it must hear.
        self.changed = changed

    @writes
    def add_challenge(
        self,
        conn,
        user_id: int,
        purpose: str,
        challenge: bytes,
        ttl: float,
        bound: bytes = b"",
    ) -> None:
        """Keep a ceremony's challenge for ttl seconds; expired ones of anyone go now, and
        the oldest of this user's beyond MAX_OPEN for the same ceremony."""
        now = time.time()
        conn.execute("DELETE FROM webauthn_challenges WHERE expires_at < ?", (now,))
        # A few open prompts (tabs, retries) at most: asking without end keeps no more rows.
        conn.execute(
            "DELETE FROM webauthn_challenges WHERE user_id = ? AND purpose = ? AND bound = ?"
            " AND challenge NOT IN (SELECT challenge FROM webauthn_challenges"
            " WHERE user_id = ? AND purpose = ? AND bound = ? ORDER BY expires_at DESC LIMIT ?)",
            (user_id, purpose, bound, user_id, purpose, bound, MAX_OPEN - 1),
        )
        conn.execute(
            "INSERT INTO webauthn_challenges (challenge, user_id, purpose, bound, expires_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (challenge, user_id, purpose, bound, now + ttl),
        )

    @writes
    def take_challenge(
        self,
        conn,
        challenge: bytes,
        purpose: str,
        *,
        user_id: int | None = None,
        bound: bytes = b"",
    ) -> int | None:
        """Use a live challenge up (once only, by one process); the user it was made for.

        A challenge of another purpose, another user or another sign-in is left alone.
        """
        sql = (
            "DELETE FROM webauthn_challenges WHERE challenge = ? AND purpose = ?"
            " AND bound = ? AND expires_at >= ?"
        )
        args: tuple[Any, ...] = (challenge, purpose, bound, time.time())
        if user_id is not None:
            sql, args = sql + " AND user_id = ?", (*args, user_id)
        row = conn.execute(sql + " RETURNING user_id", args).fetchone()
        return row["user_id"] if row is not None else None

    @reads
    def listing(self, conn, user_id: int) -> list[dict[str, Any]]:
        """A user's passkeys, oldest first."""
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM webauthn_credentials WHERE user_id = ? ORDER BY id",
            (user_id,),
        ).fetchall()
        return [_passkey(row) for row in rows]

    @reads
    def count(self, conn, user_id: int) -> int:
        """How many passkeys a user has (none: the passkey is no second factor of theirs)."""
        return conn.execute(
            "SELECT COUNT(*) FROM webauthn_credentials WHERE user_id = ?", (user_id,)
        ).fetchone()[0]

    async def add(self, *args: Any) -> dict[str, Any]:
        """insert, then tell the listeners a second factor came."""
        try:
            return await self.insert(*args)
        finally:
            self.changed()

    async def delete(self, user_id: int, passkey_id: int) -> bool:
        """remove, then tell the listeners a second factor went."""
        try:
            return await self.remove(user_id, passkey_id)
        finally:
            self.changed()

    @writes
    def insert(
        self,
        conn,
        user_id: int,
        credential_id: bytes,
        public_key: bytes,
        sign_count: int,
        name: str,
        transports: list[str],
    ) -> dict[str, Any]:
        """Register a verified credential; 409 when it is registered already or too many are."""
        taken = conn.execute(
            "SELECT user_id FROM webauthn_credentials WHERE credential_id = ?", (credential_id,)
        ).fetchone()
        if taken is not None:
            raise Conflict("this passkey is registered already")
        if (
            conn.execute(
                "SELECT COUNT(*) FROM webauthn_credentials WHERE user_id = ?", (user_id,)
            ).fetchone()[0]
            >= MAX_PASSKEYS
        ):
            raise Conflict(f"at most {MAX_PASSKEYS} passkeys per account: remove one first")
        row = conn.execute(
            "INSERT INTO webauthn_credentials (user_id, credential_id, public_key, sign_count,"
            " name, transports, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
            f" RETURNING {_COLUMNS}",
            (
                user_id,
                credential_id,
                public_key,
                sign_count,
                name,
                json.dumps(transports),
                now_iso(),
            ),
        ).fetchone()
        return _passkey(row)

    @reads
    def by_credential(self, conn, user_id: int, credential_id: bytes) -> dict[str, Any] | None:
        """The user's passkey with this credential id, or None (another user's too)."""
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM webauthn_credentials WHERE credential_id = ? AND user_id = ?",
            (credential_id, user_id),
        ).fetchone()
        return _passkey(row) if row is not None else None

    @writes
    def used(self, conn, passkey_id: int, seen_count: int, new_count: int) -> bool:
        """Store the counter an assertion reported, if no other use moved it meanwhile."""
        cursor = conn.execute(
            "UPDATE webauthn_credentials SET sign_count = ?, last_used_at = ?"
            " WHERE id = ? AND sign_count = ?",
            (new_count, now_iso(), passkey_id, seen_count),
        )
        return cursor.rowcount == 1

    @writes
    def remove(self, conn, user_id: int, passkey_id: int) -> bool:
        """Remove one of the user's passkeys; False when they have none by that id.

        409 when it is their last second factor and an organization they belong to
        requires one (checked in the delete's transaction, as turning TOTP off is).
        """
        cursor = conn.execute(
            "DELETE FROM webauthn_credentials WHERE id = ? AND user_id = ?", (passkey_id, user_id)
        )
        if cursor.rowcount != 1:
            return False
        if conn.execute(f"SELECT {two_factor_on('?')}", (user_id,)).fetchone()[0]:
            return True
        required = conn.execute(REQUIRED_BY, (user_id,)).fetchone()
        if required is not None:
            raise Conflict(
                f"the organization {required['username']} requires two-factor authentication"
                " of its members: leave it, or add another factor, before removing this passkey"
            )
        # The last factor gone: recovery codes left over from a TOTP turned off go too.
        conn.execute("DELETE FROM recovery_codes WHERE user_id = ?", (user_id,))
        return True
