"""Direct messages owed to linked chat accounts, until the bot acknowledges them."""

from __future__ import annotations

import json
from typing import Any

from ..errors import BadRequest
from .access import VISIBLE
from .base import Table, reads, writes
from .log import move_cursor

NOTICE_FIELDS = ("user_id", "repo_id", "type", "number", "title", "reason", "actor", "created_at")
# What the bot may be told of each pending notice as things stand now: the user's newest
# verified link, whether the user may still read the repository, and its current name.
_PENDING = (
    "SELECT n.*, u.username, u.preferences, u.disabled,"
    " (SELECT l.chat_id FROM chat_links l WHERE l.user_id = n.user_id AND l.verified = 1"
    "  ORDER BY l.verified_at DESC, l.chat_id LIMIT 1) AS chat_id,"
    f" o.username AS owner, r.name AS repo_name, {VISIBLE.replace(':viewer', 'n.user_id')}"
    " AS readable"
    " FROM chat_notices n JOIN users u ON u.id = n.user_id"
    " JOIN repositories r ON r.id = n.repo_id JOIN users o ON o.id = r.owner_id"
    " WHERE n.id > ? ORDER BY n.id LIMIT ?"
)


def _pending(row: Any) -> dict[str, Any]:
    notice = dict(row)
    notice["preferences"] = json.loads(notice["preferences"])
    notice["disabled"] = bool(notice["disabled"])
    notice["readable"] = bool(notice["readable"])
    return notice


class ChatNoticeStore(Table):
    """The queue of chat notices: written with the consumer's cursor, read in id order."""

    @writes
    def queue(self, conn, event_id: int, notices: list[dict[str, Any]], cursor: str) -> int:
        """Queue notices for users with a verified link and mark event_id read; how many."""
        move_cursor(conn, cursor, event_id)
        queued = 0
        for notice in notices:
            # The link is checked in the insert: an unlinked user is owed nothing.
            queued += conn.execute(
                f"INSERT INTO chat_notices (event_id, {', '.join(NOTICE_FIELDS)})"
                f" SELECT ?, {', '.join('?' * len(NOTICE_FIELDS))} WHERE EXISTS (SELECT 1"
                " FROM chat_links WHERE user_id = ? AND verified = 1) ON CONFLICT DO NOTHING",
                (event_id, *(notice[f] for f in NOTICE_FIELDS), notice["user_id"]),
            ).rowcount
        return queued

    @reads
    def pending(self, conn, after: int, limit: int) -> tuple[list[dict[str, Any]], bool]:
        """Notices after id `after`, oldest first, each with its user's state now."""
        rows = conn.execute(_PENDING, (after, limit + 1)).fetchall()
        return [_pending(r) for r in rows[:limit]], len(rows) > limit

    @writes
    def drop(self, conn, ids: list[int]) -> int:
        """Delete notices that can no longer be delivered."""
        marks = ",".join("?" * len(ids))
        return conn.execute(f"DELETE FROM chat_notices WHERE id IN ({marks})", ids).rowcount

    @writes
    def acknowledge(self, conn, through: int) -> int:
        """Delete every notice up to id `through`; 400 for an id never handed out."""
        if through > self.db.sql.highest_id(conn, "chat_notices"):
            raise BadRequest("through: no notice has this id yet")
        return conn.execute("DELETE FROM chat_notices WHERE id <= ?", (through,)).rowcount
