"""Pull request reviews and their line comments."""

from __future__ import annotations

from typing import Any

from ..timeutil import now_iso
from .access import LEVELS, level
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


def writers_verdict(repo: str) -> str:
    """SQL: review v is its author's latest verdict (not a comment) and they write to repo."""
    return (
        "v.state != 'COMMENTED' AND v.id = (SELECT MAX(l.id) FROM reviews l"
        " WHERE l.issue_id = v.issue_id AND l.user_id = v.user_id AND l.state != 'COMMENTED')"
        f" AND {level(repo, 'v.user_id')} >= {LEVELS['write']}"
    )


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
        # A review answers its reviewer's request, and their teams' (GitHub's).
        conn.execute(
            "DELETE FROM review_requests WHERE issue_id = ? AND user_id = ?", (issue_id, user_id)
        )
        conn.execute(
            "DELETE FROM team_review_requests WHERE issue_id = ? AND team_id IN"
            " (SELECT team_id FROM team_members WHERE user_id = ?)",
            (issue_id, user_id),
        )
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
            "SELECT v.user_id FROM reviews v JOIN repositories p ON p.id = ?"
            f" WHERE v.issue_id = ? AND {writers_verdict('p')}"
            " AND v.state = 'APPROVED' AND v.commit_id = ?",
            (repo_id, issue_id, head_oid),
        ).fetchall()
        return [r[0] for r in rows]

    @writes
    def request(
        self, conn, issue_id: int, user_ids: list[int], team_ids: list[int], by: int | None
    ) -> tuple[list[int], list[int]]:
        """Ask people and teams to review; returns those not asked already."""
        now = now_iso()
        users = [
            uid
            for uid in dict.fromkeys(user_ids)
            if conn.execute(
                "INSERT INTO review_requests (issue_id, user_id, requested_by, created_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (issue_id, uid, by, now),
            ).rowcount
        ]
        teams = [
            tid
            for tid in dict.fromkeys(team_ids)
            if conn.execute(
                "INSERT INTO team_review_requests (issue_id, team_id, requested_by, created_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (issue_id, tid, by, now),
            ).rowcount
        ]
        return users, teams

    @writes
    def withdraw(
        self, conn, issue_id: int, user_ids: list[int], team_ids: list[int]
    ) -> tuple[list[int], list[int]]:
        """Withdraw review requests; returns those that were there."""
        users = [
            uid
            for uid in dict.fromkeys(user_ids)
            if conn.execute(
                "DELETE FROM review_requests WHERE issue_id = ? AND user_id = ?", (issue_id, uid)
            ).rowcount
        ]
        teams = [
            tid
            for tid in dict.fromkeys(team_ids)
            if conn.execute(
                "DELETE FROM team_review_requests WHERE issue_id = ? AND team_id = ?",
                (issue_id, tid),
            ).rowcount
        ]
        return users, teams

    @reads
    def reviewed_by(self, conn, issue_id: int) -> set[int]:
        """Everyone who has reviewed a pull request."""
        rows = conn.execute("SELECT DISTINCT user_id FROM reviews WHERE issue_id = ?", (issue_id,))
        return {r[0] for r in rows}
