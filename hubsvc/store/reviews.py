"""Pull request reviews and their line comments."""

from __future__ import annotations

from typing import Any

from ..timeutil import now_iso
from .base import Table, reads, writes

_SELECT = (
    "SELECT r.*, u.username AS user_username, u.name AS user_name,"
    " u.avatar_hash AS user_avatar_hash FROM reviews r LEFT JOIN users u ON u.id = r.user_id"
)


def _comments(conn: Any, review_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    found: dict[int, list[dict[str, Any]]] = {i: [] for i in review_ids}
    if review_ids:
        marks = ", ".join("?" * len(review_ids))
        for row in conn.execute(
            f"SELECT * FROM review_comments WHERE review_id IN ({marks}) ORDER BY id", review_ids
        ):
            found[row["review_id"]].append(dict(row))
    return found


class ReviewStore(Table):
    """Reviews of pull requests."""

    @writes
    def add(
        self,
        conn,
        issue_id: int,
        user_id: int,
        state: str,
        body: str,
        commit_id: str,
        comments: list[dict[str, Any]],
    ) -> dict[str, Any]:
        """Record a review with its line comments."""
        cur = conn.execute(
            "INSERT INTO reviews (issue_id, user_id, state, body, commit_id, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
            (issue_id, user_id, state, body, commit_id, now_iso()),
        )
        review_id = cur.fetchone()[0]
        conn.executemany(
            "INSERT INTO review_comments (review_id, path, line, side, body) VALUES (?, ?, ?, ?, ?)",
            [(review_id, c["path"], c["line"], c["side"], c["body"]) for c in comments],
        )
        row = dict(conn.execute(_SELECT + " WHERE r.id = ?", (review_id,)).fetchone())
        row["comments"] = _comments(conn, [row["id"]])[row["id"]]
        return row

    @reads
    def page(
        self, conn, issue_id: int, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """A pull request's reviews, oldest first, with their comments."""
        rows = [
            dict(r)
            for r in conn.execute(
                _SELECT + " WHERE r.issue_id = ? ORDER BY r.id LIMIT ? OFFSET ?",
                (issue_id, limit + 1, offset),
            )
        ]
        rows, more = rows[:limit], len(rows) > limit
        comments = _comments(conn, [r["id"] for r in rows])
        for row in rows:
            row["comments"] = comments[row["id"]]
        return rows, more

    @reads
    def approvers(self, conn, issue_id: int, repo_id: int, head_oid: str) -> list[int]:
        """Writers whose latest verdict on the pull request approves its current head."""
        rows = conn.execute(
            "SELECT r.user_id FROM reviews r JOIN repositories p ON p.id = ?"
            " WHERE r.issue_id = ? AND r.state != 'COMMENTED' AND r.id = ("
            "  SELECT MAX(l.id) FROM reviews l WHERE l.issue_id = r.issue_id"
            "  AND l.user_id = r.user_id AND l.state != 'COMMENTED')"
            " AND r.state = 'APPROVED' AND r.commit_id = ?"
            " AND (p.owner_id = r.user_id OR EXISTS (SELECT 1 FROM collaborators c"
            "  WHERE c.repo_id = p.id AND c.user_id = r.user_id"
            "  AND c.permission IN ('write', 'admin')))",
            (repo_id, issue_id, head_oid),
        ).fetchall()
        return [r[0] for r in rows]
