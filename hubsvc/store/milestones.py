"""Milestones, numbered per repository, with open and closed counts read from the issues."""

from __future__ import annotations

from typing import Any

from ..errors import Conflict
from ..timeutil import now_iso
from .base import Table, reads, writes

# Counted when read (issues_milestone index), so the counts follow every state change.
_SELECT = """
SELECT m.*, u.username AS creator_username, u.name AS creator_name,
       u.avatar_hash AS creator_avatar_hash,
       (SELECT COUNT(*) FROM issues i WHERE i.milestone_id = m.id AND i.state = 'open')
         AS open_issues,
       (SELECT COUNT(*) FROM issues i WHERE i.milestone_id = m.id AND i.state = 'closed')
         AS closed_issues
  FROM milestones m
  LEFT JOIN users u ON u.id = m.creator_id
"""
STATES = {"open": "m.state = 'open'", "closed": "m.state = 'closed'", "all": "1 = 1"}
# GitHub's default order: due soonest first, those without a date last.
ORDERS = {
    "due_on": "CASE WHEN m.due_on IS NULL THEN 1 ELSE 0 END, m.due_on {d}, m.number {d}",
    "number": "m.number {d}",
}


def _title_taken(conn, repo_id: int, title: str, but: int = 0) -> None:
    if conn.execute(
        "SELECT 1 FROM milestones WHERE repo_id = ? AND title_key = ? AND id <> ?",
        (repo_id, title.lower(), but),
    ).fetchone():
        raise Conflict(f"a milestone titled {title} already exists")


class MilestoneStore(Table):
    """Milestones of a repository; issues point at one through milestone_id."""

    @reads
    def page(
        self, conn, repo_id: int, state: str, sort: str, direction: str, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """Milestones in a state (open, closed, all), due soonest first unless sorted."""
        order = ORDERS[sort].format(d="DESC" if direction == "desc" else "ASC")
        rows = conn.execute(
            _SELECT + f" WHERE m.repo_id = ? AND {STATES[state]} ORDER BY {order} LIMIT ? OFFSET ?",
            (repo_id, limit + 1, offset),
        ).fetchall()
        return [dict(r) for r in rows[:limit]], len(rows) > limit

    @reads
    def get(self, conn, repo_id: int, number: int) -> dict[str, Any] | None:
        """One milestone by number."""
        row = conn.execute(
            _SELECT + " WHERE m.repo_id = ? AND m.number = ?", (repo_id, number)
        ).fetchone()
        return dict(row) if row else None

    @writes
    def create(
        self,
        conn,
        repo_id: int,
        creator_id: int,
        title: str,
        description: str,
        due_on: str | None,
        state: str,
    ) -> dict[str, Any]:
        """A milestone under the repository's next milestone number; 409 on a taken title."""
        _title_taken(conn, repo_id, title)
        number = conn.execute(
            "UPDATE repositories SET next_milestone = next_milestone + 1 WHERE id = ?"
            " RETURNING next_milestone - 1",
            (repo_id,),
        ).fetchone()[0]
        now = now_iso()
        milestone_id = conn.execute(
            "INSERT INTO milestones (repo_id, number, title, title_key, description, due_on,"
            " state, creator_id, created_at, updated_at, closed_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                repo_id,
                number,
                title,
                title.lower(),
                description,
                due_on,
                state,
                creator_id,
                now,
                now,
                now if state == "closed" else None,
            ),
        ).fetchone()[0]
        return dict(conn.execute(_SELECT + " WHERE m.id = ?", (milestone_id,)).fetchone())

    @writes
    def update(self, conn, milestone_id: int, fields: dict[str, Any]) -> dict[str, Any] | None:
        """Change title, description, due date or state."""
        old = conn.execute("SELECT * FROM milestones WHERE id = ?", (milestone_id,)).fetchone()
        if old is None:
            return None
        now = now_iso()
        columns: dict[str, Any] = {"updated_at": now}
        if "title" in fields:
            _title_taken(conn, old["repo_id"], fields["title"], milestone_id)
            columns["title"] = fields["title"]
            columns["title_key"] = fields["title"].lower()
        for key, column in (("description", "description"), ("dueOn", "due_on")):
            if key in fields:
                columns[column] = fields[key]
        if "state" in fields and fields["state"] != old["state"]:
            columns["state"] = fields["state"]
            columns["closed_at"] = now if fields["state"] == "closed" else None
        sets = ", ".join(f"{c} = ?" for c in columns)
        conn.execute(
            f"UPDATE milestones SET {sets} WHERE id = ?", (*columns.values(), milestone_id)
        )
        return dict(conn.execute(_SELECT + " WHERE m.id = ?", (milestone_id,)).fetchone())

    @writes
    def delete(self, conn, milestone_id: int) -> dict[str, Any] | None:
        """Delete a milestone (its issues keep going, without one); the row it was."""
        row = conn.execute(_SELECT + " WHERE m.id = ?", (milestone_id,)).fetchone()
        if row is None:
            return None
        conn.execute(
            "UPDATE issues SET milestone_id = NULL WHERE milestone_id = ?", (milestone_id,)
        )
        conn.execute("DELETE FROM milestones WHERE id = ?", (milestone_id,))
        return dict(row)
