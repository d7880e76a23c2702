"""Reactions on issues, pull requests and their comments: once per person, kind and subject."""

from __future__ import annotations

from typing import Any

from ..timeutil import now_iso
from .base import Table, reads, writes
from .engines import Conn

KINDS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")
ON_ITEM = 0  # comment_id of a reaction on the issue or pull request itself
_SELECT = (
    "SELECT r.*, u.username, u.name, u.avatar_hash FROM reactions r"
    " JOIN users u ON u.id = r.user_id"
)


def counts(conn: Conn, issue_ids: list[int], comment_ids: list[int] | None = None) -> dict:
    """{subject id: {kind: count}}: issues' own (comment_ids None) or comments', one query."""
    if comment_ids is None:
        ids, column, where = issue_ids, "issue_id", f"comment_id = {ON_ITEM} AND issue_id"
    else:
        ids, column, where = comment_ids, "comment_id", "comment_id"
    found: dict[int, dict[str, int]] = {}
    if not ids:
        return found
    rows = conn.execute(
        f"SELECT {column} AS subject, content, COUNT(*) AS n FROM reactions"
        f" WHERE {where} IN ({','.join('?' * len(ids))}) GROUP BY {column}, content",
        list(ids),
    )
    for row in rows:
        found.setdefault(row["subject"], {})[row["content"]] = row["n"]
    return found


def attach(conn: Conn, rows: list[dict[str, Any]], on_comments: bool = False) -> None:
    """Give issue or comment rows their reaction counts (key reaction_counts)."""
    ids = [r["id"] for r in rows]
    found = counts(conn, [], ids) if on_comments else counts(conn, ids)
    for row in rows:
        row["reaction_counts"] = found.get(row["id"], {})


class ReactionStore(Table):
    """Reactions by subject: an issue (comment_id 0) or one of its comments."""

    @writes
    def add(
        self, conn, issue_id: int, comment_id: int, user_id: int, content: str
    ) -> tuple[dict[str, Any], bool]:
        """The person's reaction of this kind, made now unless they had it: (row, made)."""
        made = conn.execute(
            "INSERT INTO reactions (issue_id, comment_id, user_id, content, created_at)"
            " VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (issue_id, comment_id, user_id, content) DO NOTHING RETURNING id",
            (issue_id, comment_id, user_id, content, now_iso()),
        ).fetchone()
        row = conn.execute(
            _SELECT + " WHERE r.issue_id = ? AND r.comment_id = ? AND r.user_id = ?"
            " AND r.content = ?",
            (issue_id, comment_id, user_id, content),
        ).fetchone()
        return dict(row), made is not None

    @reads
    def page(
        self, conn, issue_id: int, comment_id: int, content: str | None, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """Reactions of a subject, oldest first, of one kind when content is given."""
        where = "r.issue_id = ? AND r.comment_id = ?"
        params: list[int | str] = [issue_id, comment_id]
        if content is not None:
            where += " AND r.content = ?"
            params.append(content)
        rows = conn.execute(
            _SELECT + f" WHERE {where} ORDER BY r.id LIMIT ? OFFSET ?", (*params, limit + 1, offset)
        ).fetchall()
        return [dict(r) for r in rows[:limit]], len(rows) > limit

    @reads
    def get(self, conn, issue_id: int, comment_id: int, reaction_id: int) -> dict | None:
        """One reaction of a subject."""
        row = conn.execute(
            _SELECT + " WHERE r.id = ? AND r.issue_id = ? AND r.comment_id = ?",
            (reaction_id, issue_id, comment_id),
        ).fetchone()
        return dict(row) if row else None

    @writes
    def delete(self, conn, reaction_id: int) -> bool:
        """Delete a reaction; False when it was gone."""
        return (
            conn.execute(
                "DELETE FROM reactions WHERE id = ? RETURNING id", (reaction_id,)
            ).fetchone()
            is not None
        )
