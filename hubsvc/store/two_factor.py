"""Second factors: a user's TOTP secret, recovery codes, and the sign-in challenges between."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..errors import Conflict
from ..timeutil import now_iso
from .access import two_factor_on
from .base import Table, reads, writes

# Wrong codes one challenge takes before it is dropped (the sign-in budget bounds the rest).
CHALLENGE_FAILURES = 5
REQUIRED_BY = (
    "SELECT o.username FROM org_two_factor_rule r JOIN org_members m ON m.org_id = r.org_id"
    " JOIN users o ON o.id = r.org_id WHERE m.user_id = ? ORDER BY o.username_key LIMIT 1"
)


class TwoFactorStore(Table):
    """A user's second factors and the challenges of sign-ins halfway through."""

    def __init__(self, db: Any, grants_changed: Callable[[], None] = lambda: None) -> None:
        super().__init__(db)
        # Turning a factor on or off changes what an organization's rule lets through.
        self.grants_changed = grants_changed
        self.grants_listeners: list[Callable[[], None]] = []

    def _changed(self) -> None:
        self.grants_changed()
        for listener in self.grants_listeners:
            listener()

    @reads
    def state(self, conn, user_id: int) -> dict[str, Any]:
        """{totp, pending, enabled, recovery_left} of a user."""
        row = conn.execute(
            "SELECT confirmed FROM two_factor WHERE user_id = ?", (user_id,)
        ).fetchone()
        left = conn.execute(
            "SELECT COUNT(*) FROM recovery_codes WHERE user_id = ? AND used_at IS NULL", (user_id,)
        ).fetchone()[0]
        enabled = conn.execute(f"SELECT {two_factor_on('?')}", (user_id,)).fetchone()[0]
        return {
            "totp": bool(row and row["confirmed"]),
            "pending": bool(row and not row["confirmed"]),
            "enabled": bool(enabled),
            "recovery_left": int(left),
        }

    @reads
    def enabled(self, conn, user_id: int) -> bool:
        """Whether the user has a second factor on."""
        return bool(conn.execute(f"SELECT {two_factor_on('?')}", (user_id,)).fetchone()[0])

    @reads
    def secret(self, conn, user_id: int) -> tuple[bytes, bool, int] | None:
        """The encrypted TOTP secret, whether confirmed, and the last step taken."""
        row = conn.execute(
            "SELECT secret, confirmed, last_step FROM two_factor WHERE user_id = ?", (user_id,)
        ).fetchone()
        return (bytes(row["secret"]), bool(row["confirmed"]), row["last_step"]) if row else None

    @writes
    def enroll(self, conn, user_id: int, secret: bytes) -> None:
        """Start (or restart) a TOTP enrolment; 409 when one is already on."""
        row = conn.execute(
            "SELECT confirmed FROM two_factor WHERE user_id = ?", (user_id,)
        ).fetchone()
        if row is not None and row["confirmed"]:
            raise Conflict("two-factor authentication is already on: turn it off first")
        conn.execute("DELETE FROM two_factor WHERE user_id = ?", (user_id,))
        conn.execute(
            "INSERT INTO two_factor (user_id, secret, created_at) VALUES (?, ?, ?)",
            (user_id, secret, now_iso()),
        )

    @writes
    def confirm(self, conn, user_id: int, secret: bytes, step: int, codes: list[bytes]) -> bool:
        """Turn the pending secret on with the step its code was of, and set new recovery
        codes; False when it is no longer the pending one (a race, or restarted)."""
        done = conn.execute(
            "UPDATE two_factor SET confirmed = 1, last_step = ?, confirmed_at = ?"
            " WHERE user_id = ? AND secret = ? AND confirmed = 0",
            (step, now_iso(), user_id, secret),
        ).rowcount
        if done != 1:
            return False
        conn.execute("DELETE FROM recovery_codes WHERE user_id = ?", (user_id,))
        for code in codes:
            conn.execute(
                "INSERT INTO recovery_codes (user_id, hash) VALUES (?, ?)", (user_id, code)
            )
        return True

    def factors_changed(self) -> None:
        """Forget cached audiences after a second factor (a passkey too) came or went."""
        self._changed()

    async def turn_on(self, user_id: int, secret: bytes, step: int, codes: list[bytes]) -> bool:
        """confirm, then forget cached audiences (an organization's rule may now let them in)."""
        try:
            return await self.confirm(user_id, secret, step, codes)
        finally:
            self._changed()

    @writes
    def take_step(self, conn, user_id: int, step: int) -> bool:
        """Accept a TOTP time step once: only past the last one taken, in one statement, so
        two processes given the same code cannot both accept it."""
        return (
            conn.execute(
                "UPDATE two_factor SET last_step = ?"
                " WHERE user_id = ? AND confirmed = 1 AND last_step < ?",
                (step, user_id, step),
            ).rowcount
            == 1
        )

    @writes
    def take_recovery_code(self, conn, user_id: int, digest: bytes) -> bool:
        """Use a recovery code once: of two racing uses, one statement wins."""
        return (
            conn.execute(
                "UPDATE recovery_codes SET used_at = ?"
                " WHERE user_id = ? AND hash = ? AND used_at IS NULL",
                (now_iso(), user_id, digest),
            ).rowcount
            == 1
        )

    @writes
    def remove_totp(self, conn, user_id: int) -> None:
        """Turn TOTP off; 409 when that leaves no second factor while an organization the
        user belongs to requires one (checked in the same transaction as the delete)."""
        conn.execute("DELETE FROM two_factor WHERE user_id = ?", (user_id,))
        if conn.execute(f"SELECT {two_factor_on('?')}", (user_id,)).fetchone()[0]:
            return
        required = conn.execute(REQUIRED_BY, (user_id,)).fetchone()
        if required is not None:
            raise Conflict(
                f"the organization {required['username']} requires two-factor authentication"
                " of its members: leave it, or add another factor, before turning this off"
            )
        conn.execute("DELETE FROM recovery_codes WHERE user_id = ?", (user_id,))

    async def turn_off(self, user_id: int) -> None:
        """remove_totp, then forget cached audiences."""
        try:
            await self.remove_totp(user_id)
        finally:
            self._changed()

    @writes
    def reset(self, conn, user_id: int) -> bool:
        """An administrator's way out for a user who lost every factor: TOTP, recovery
        codes, passkeys and pending challenges go, whatever an organization requires (its
        rule then holds the user back until they enrol again); False when there was nothing."""
        had = conn.execute("DELETE FROM two_factor WHERE user_id = ?", (user_id,)).rowcount
        had += conn.execute("DELETE FROM recovery_codes WHERE user_id = ?", (user_id,)).rowcount
        had += conn.execute(
            "DELETE FROM webauthn_credentials WHERE user_id = ?", (user_id,)
        ).rowcount
        conn.execute("DELETE FROM webauthn_challenges WHERE user_id = ?", (user_id,))
        conn.execute("DELETE FROM sign_in_challenges WHERE user_id = ?", (user_id,))
        return had > 0

    # Sign-in challenges: only their digest is stored.

    @writes
    def add_challenge(self, conn, user_id: int, digest: bytes, expires_at: int) -> None:
        """Record a challenge (and drop the expired ones)."""
        conn.execute("DELETE FROM sign_in_challenges WHERE expires_at <= ?", (int(time.time()),))
        conn.execute(
            "INSERT INTO sign_in_challenges (hash, user_id, expires_at, created_at)"
            " VALUES (?, ?, ?, ?)",
            (digest, user_id, expires_at, now_iso()),
        )

    @reads
    def challenge_user(self, conn, digest: bytes) -> int | None:
        """The user of a live challenge, without using it up."""
        row = conn.execute(
            "SELECT user_id FROM sign_in_challenges WHERE hash = ? AND expires_at > ?",
            (digest, int(time.time())),
        ).fetchone()
        return row["user_id"] if row else None

    @writes
    def take_challenge(self, conn, digest: bytes) -> int | None:
        """Use a live challenge up: its user, to exactly one caller."""
        row = conn.execute(
            "DELETE FROM sign_in_challenges WHERE hash = ? AND expires_at > ? RETURNING user_id",
            (digest, int(time.time())),
        ).fetchone()
        return row["user_id"] if row else None

    @writes
    def fail_challenge(self, conn, digest: bytes) -> None:
        """Count a wrong code against a challenge; past CHALLENGE_FAILURES it is gone."""
        conn.execute(
            "UPDATE sign_in_challenges SET failures = failures + 1 WHERE hash = ?", (digest,)
        )
        conn.execute(
            "DELETE FROM sign_in_challenges WHERE hash = ? AND failures >= ?",
            (digest, CHALLENGE_FAILURES),
        )

    @reads
    def required_by(self, conn, user_id: int) -> str | None:
        """The name of an organization the user belongs to that requires a second factor."""
        row = conn.execute(REQUIRED_BY, (user_id,)).fetchone()
        return row["username"] if row else None
