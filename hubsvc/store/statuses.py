"""Commit statuses posted by CI: kept per commit and context, newest counting."""

from __future__ import annotations

from typing import Any

from ..timeutil import now_iso
from .base import Table, reads, writes
from .engines import Row

PER_CONTEXT = 1000  # statuses kept per commit and context, as GitHub's limit
_SELECT = (
    "SELECT s.*, u.username AS creator_username, u.name AS creator_name,"
    " u.avatar_hash AS creator_avatar_hash"
    " FROM commit_statuses s LEFT JOIN users u ON u.id = s.creator_id"
)
# The newest status of each context of a commit.
LATEST = (
    "s.id = (SELECT MAX(l.id) FROM commit_statuses l"
    " WHERE l.repo_id = s.repo_id AND l.sha = s.sha AND l.context = s.context)"
)
# GitHub's combined state of a commit's latest statuses (NULL: none).
COMBINED = (
    "CASE WHEN COUNT(*) = 0 THEN NULL"
    " WHEN SUM(CASE WHEN s.state IN ('failure', 'error') THEN 1 ELSE 0 END) > 0 THEN 'failure'"
    " WHEN SUM(CASE WHEN s.state = 'pending' THEN 1 ELSE 0 END) > 0 THEN 'pending'"
    " ELSE 'success' END"
)


def combined(states: list[str]) -> str:
    """The combined state of the latest statuses: failure, pending or success."""
    if any(s in ("failure", "error") for s in states):
        return "failure"
    if not states or "pending" in states:
        return "pending"
    return "success"


def _status(row: Row) -> dict[str, Any]:
    return dict(row)


class StatusStore(Table):
    """Statuses of the commits of a repository."""

    @writes
    def add(
        self,
        conn,
        repo_id: int,
        sha: str,
        state: str,
        context: str,
        target_url: str | None,
        description: str | None,
        creator_id: int,
    ) -> dict[str, Any]:
        """Record a status; past PER_CONTEXT for its commit and context, the oldest goes."""
        cur = conn.execute(
            "INSERT INTO commit_statuses (repo_id, sha, state, context, target_url, description,"
            " creator_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (repo_id, sha, state, context, target_url, description, creator_id, now_iso()),
        )
        status_id = cur.fetchone()[0]
        conn.execute(
            "DELETE FROM commit_statuses WHERE repo_id = ? AND sha = ? AND context = ? AND id <="
            " (SELECT id FROM commit_statuses WHERE repo_id = ? AND sha = ? AND context = ?"
            "  ORDER BY id DESC LIMIT 1 OFFSET ?)",
            (repo_id, sha, context, repo_id, sha, context, PER_CONTEXT),
        )
        return _status(conn.execute(_SELECT + " WHERE s.id = ?", (status_id,)).fetchone())

    @reads
    def page(
        self, conn, repo_id: int, sha: str, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """A commit's statuses, newest first."""
        rows = conn.execute(
            _SELECT + " WHERE s.repo_id = ? AND s.sha = ? ORDER BY s.id DESC LIMIT ? OFFSET ?",
            (repo_id, sha, limit + 1, offset),
        ).fetchall()
        return [_status(r) for r in rows[:limit]], len(rows) > limit

    @reads
    def latest(self, conn, repo_id: int, sha: str) -> list[dict[str, Any]]:
        """The newest status of each context of a commit, by context."""
        rows = conn.execute(
            _SELECT + f" WHERE s.repo_id = ? AND s.sha = ? AND {LATEST} ORDER BY s.context",
            (repo_id, sha),
        ).fetchall()
        return [_status(r) for r in rows]
