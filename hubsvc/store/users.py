"""Users, their avatars and their access tokens."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from ..errors import Conflict
from ..timeutil import now_iso
from .base import Table, reads, row_dict, writes

USER_COLUMNS = (
    "id, username, email, name, password_hash, is_admin, bio, location, website, "
    "preferences, avatar_hash, created_at, updated_at"
)


def _user(row: sqlite3.Row | None) -> dict[str, Any] | None:
    user = row_dict(row)
    if user is not None:
        user["preferences"] = json.loads(user["preferences"])
        user["is_admin"] = bool(user["is_admin"])
    return user


class UserStore(Table):
    """Accounts, settings, avatars and tokens."""

    @writes
    def create(self, conn, *, username: str, email: str, name: str,
               password_hash: str) -> dict[str, Any]:
        """Insert a user; the first account ever created is an administrator."""
        taken = conn.execute(
            "SELECT username_key = ? AS same_name FROM users"
            " WHERE username_key = ? OR email_key = ? LIMIT 1",
            (username.lower(), username.lower(), email.casefold()),
        ).fetchone()
        if taken is not None:
            raise Conflict("username is taken" if taken["same_name"]
                           else "e-mail is already registered")
        first = conn.execute("SELECT NOT EXISTS (SELECT 1 FROM users)").fetchone()[0]
        now = now_iso()
        cur = conn.execute(
            "INSERT INTO users (username, username_key, email, email_key, name,"
            " password_hash, is_admin, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (username, username.lower(), email, email.casefold(), name, password_hash,
             int(first), now, now),
        )
        return self.by_id.sync(self, conn, cur.lastrowid)

    @reads
    def by_id(self, conn, user_id: int) -> dict[str, Any] | None:
        """One user by id."""
        return _user(conn.execute(f"SELECT {USER_COLUMNS} FROM users WHERE id = ?",
                                  (user_id,)).fetchone())

    @reads
    def by_username(self, conn, username: str) -> dict[str, Any] | None:
        """One user by username, ignoring case."""
        return _user(conn.execute(f"SELECT {USER_COLUMNS} FROM users WHERE username_key = ?",
                                  (username.lower(),)).fetchone())

    @reads
    def by_usernames(self, conn, usernames: list[str]) -> dict[str, dict[str, Any]]:
        """Users by lower-cased username, for the names that exist."""
        keys = sorted({u.lower() for u in usernames})
        if not keys:
            return {}
        marks = ",".join("?" * len(keys))
        rows = conn.execute(
            f"SELECT {USER_COLUMNS} FROM users WHERE username_key IN ({marks})", keys)
        return {row["username"].lower(): _user(row) for row in rows}

    @reads
    def by_login(self, conn, login: str) -> dict[str, Any] | None:
        """One user by e-mail or username."""
        column = "email_key" if "@" in login else "username_key"
        key = login.casefold() if "@" in login else login.lower()
        return _user(conn.execute(f"SELECT {USER_COLUMNS} FROM users WHERE {column} = ?",
                                  (key,)).fetchone())

    @writes
    def update(self, conn, user_id: int, fields: dict[str, Any]) -> dict[str, Any]:
        """Change profile fields (name, email, bio, location, website, preferences)."""
        fields = dict(fields)
        if "email" in fields:
            clash = conn.execute("SELECT 1 FROM users WHERE email_key = ? AND id != ?",
                                 (fields["email"].casefold(), user_id)).fetchone()
            if clash:
                raise Conflict("e-mail is already registered")
            fields["email_key"] = fields["email"].casefold()
        if "preferences" in fields:
            fields["preferences"] = json.dumps(fields["preferences"])
        if fields:
            fields["updated_at"] = now_iso()
            assignments = ", ".join(f"{column} = ?" for column in fields)
            conn.execute(f"UPDATE users SET {assignments} WHERE id = ?",
                         (*fields.values(), user_id))
        return self.by_id.sync(self, conn, user_id)

    @writes
    def set_password(self, conn, user_id: int, password_hash: str) -> None:
        """Replace the password hash and revoke every token of the user."""
        conn.execute("UPDATE users SET password_hash = ?, updated_at = ? WHERE id = ?",
                     (password_hash, now_iso(), user_id))
        conn.execute("DELETE FROM tokens WHERE user_id = ?", (user_id,))

    @writes
    def set_admin(self, conn, user_id: int, is_admin: bool) -> None:
        """Grant or revoke administrator rights."""
        conn.execute("UPDATE users SET is_admin = ? WHERE id = ?", (int(is_admin), user_id))

    @writes
    def set_avatar(self, conn, user_id: int, content_type: str, data: bytes,
                   digest: str) -> dict[str, Any]:
        """Store an avatar image and its content hash."""
        conn.execute("INSERT OR REPLACE INTO avatars (user_id, content_type, data)"
                     " VALUES (?, ?, ?)", (user_id, content_type, data))
        conn.execute("UPDATE users SET avatar_hash = ?, updated_at = ? WHERE id = ?",
                     (digest, now_iso(), user_id))
        return self.by_id.sync(self, conn, user_id)

    @writes
    def delete_avatar(self, conn, user_id: int) -> dict[str, Any]:
        """Remove the avatar, so the generated one is served."""
        conn.execute("DELETE FROM avatars WHERE user_id = ?", (user_id,))
        conn.execute("UPDATE users SET avatar_hash = NULL, updated_at = ? WHERE id = ?",
                     (now_iso(), user_id))
        return self.by_id.sync(self, conn, user_id)

    @reads
    def avatar(self, conn, user_id: int) -> tuple[str, bytes] | None:
        """The uploaded avatar's content type and bytes."""
        row = conn.execute("SELECT content_type, data FROM avatars WHERE user_id = ?",
                           (user_id,)).fetchone()
        return (row["content_type"], bytes(row["data"])) if row else None

    # Tokens: only their SHA-256 digest is stored.

    @writes
    def add_token(self, conn, user_id: int, digest: bytes, expires_at: int) -> None:
        """Record a new token digest; expired ones are pruned on the way."""
        conn.execute("DELETE FROM tokens WHERE expires_at <= ?", (int(time.time()),))
        conn.execute("INSERT INTO tokens (hash, user_id, created_at, expires_at)"
                     " VALUES (?, ?, ?, ?)", (digest, user_id, now_iso(), expires_at))

    @reads
    def token_owner(self, conn, digest: bytes) -> tuple[dict[str, Any], int] | None:
        """The user a live token belongs to and its expiry, or None."""
        row = conn.execute(
            f"SELECT t.expires_at AS token_expires, {', '.join('u.' + c.strip() for c in USER_COLUMNS.split(','))}"
            " FROM tokens t JOIN users u ON u.id = t.user_id"
            " WHERE t.hash = ? AND t.expires_at > ?", (digest, int(time.time())),
        ).fetchone()
        if row is None:
            return None
        user = _user(row)
        return user, user.pop("token_expires")

    @writes
    def revoke_token(self, conn, digest: bytes) -> None:
        """Delete a token."""
        conn.execute("DELETE FROM tokens WHERE hash = ?", (digest,))

    @reads
    def count(self, conn) -> int:
        """How many accounts exist."""
        return conn.execute("SELECT COUNT(*) FROM users").fetchone()[0]

    @reads
    def profile_counts(self, conn, user_id: int) -> dict[str, int]:
        """Repositories owned and starred, for the profile (public ones only)."""
        row = conn.execute(
            "SELECT (SELECT COUNT(*) FROM repositories WHERE owner_id = ?"
            "        AND visibility = 'public') AS repositoryCount,"
            " (SELECT COUNT(*) FROM stars s JOIN repositories r ON r.id = s.repo_id"
            "   WHERE s.user_id = ? AND r.visibility = 'public') AS starCount",
            (user_id, user_id)).fetchone()
        return dict(row)
