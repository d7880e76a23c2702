"""Chat account links and the one-time tokens that make them."""

from __future__ import annotations

import time
from typing import Any

from ..errors import BadRequest, Forbidden
from ..timeutil import now_iso
from .base import Table, reads, writes
from .users import USER_COLUMNS, _user

_U_COLUMNS = ", ".join("u." + c.strip() for c in USER_COLUMNS.split(","))
_LINKED_USER = (
    f"SELECT l.verified AS link_verified, {_U_COLUMNS}"
    " FROM chat_links l JOIN users u ON u.id = l.user_id WHERE l.chat_id = ?"
)


def _link(row: Any) -> dict[str, Any] | None:
    if row is None:
        return None
    user = _user(row)
    verified = bool(user.pop("link_verified"))
    return {"verified": verified, "user": user}


class ChatStore(Table):
    """Link tokens (kept as SHA-256 digests) and chat id -> user links."""

    @writes
    def add_token(
        self, conn, digest: bytes, chat_id: str, expires_at: int, email: str | None
    ) -> dict[str, Any] | None:
        """Record a token for chat_id; with email, bind it to that account and return it."""
        # The e-mail lookup is part of the insert: the same work whether or not an
        # account has that address.
        now = int(time.time())
        conn.execute("DELETE FROM chat_link_tokens WHERE expires_at <= ?", (now,))
        conn.execute(
            "INSERT INTO chat_link_tokens (hash, chat_id, user_id, created_at, expires_at)"
            " VALUES (?, ?, (SELECT id FROM users WHERE email_key = ?), ?, ?)",
            (digest, chat_id, email.casefold() if email else None, now_iso(), expires_at),
        )
        row = conn.execute(
            f"SELECT {_U_COLUMNS} FROM chat_link_tokens t JOIN users u ON u.id = t.user_id"
            " WHERE t.hash = ?",
            (digest,),
        ).fetchone()
        return _user(row)

    @reads
    def token_chat_id(self, conn, digest: bytes) -> str | None:
        """The chat id of a live (unused, unexpired) token, without using it up."""
        row = conn.execute(
            "SELECT chat_id FROM chat_link_tokens"
            " WHERE hash = ? AND used_at IS NULL AND expires_at > ?",
            (digest, int(time.time())),
        ).fetchone()
        return row["chat_id"] if row else None

    @writes
    def redeem(self, conn, digest: bytes, user_id: int) -> str:
        """Use up a token and link its chat id to user_id, replacing an earlier link."""
        row = conn.execute(
            "SELECT chat_id, user_id FROM chat_link_tokens"
            " WHERE hash = ? AND used_at IS NULL AND expires_at > ?",
            (digest, int(time.time())),
        ).fetchone()
        if row is None:
            raise BadRequest("token: invalid, already used or expired")
        if row["user_id"] is not None and row["user_id"] != user_id:
            raise Forbidden("this link was sent to another account")
        now = now_iso()
        conn.execute("UPDATE chat_link_tokens SET used_at = ? WHERE hash = ?", (now, digest))
        conn.execute(
            "INSERT INTO chat_links (chat_id, user_id, verified, created_at, verified_at)"
            " VALUES (?, ?, 1, ?, ?)"
            " ON CONFLICT (chat_id) DO UPDATE SET user_id = excluded.user_id, verified = 1,"
            " created_at = excluded.created_at, verified_at = excluded.verified_at",
            (row["chat_id"], user_id, now, now),
        )
        return row["chat_id"]

    @reads
    def link(self, conn, chat_id: str) -> dict[str, Any] | None:
        """The link of chat_id as {verified, user}, or None."""
        return _link(conn.execute(_LINKED_USER, (chat_id,)).fetchone())

    @reads
    def linked_user(self, conn, chat_id: str) -> dict[str, Any] | None:
        """The user a chat id acts as: only through a verified link."""
        link = self.link.sync(self, conn, chat_id)
        return link["user"] if link and link["verified"] else None

    @writes
    def unlink(self, conn, chat_id: str, user_id: int | None = None) -> bool:
        """Remove the link of chat_id (only if it is user_id's, when given); True if one went."""
        cur = conn.execute(
            "DELETE FROM chat_links WHERE chat_id = ? AND (? IS NULL OR user_id = ?)",
            (chat_id, user_id, user_id),
        )
        return cur.rowcount > 0
