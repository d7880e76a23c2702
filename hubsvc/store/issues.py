"""Issues, pull requests and their comments; numbers from the repository's counter."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from ..errors import Conflict
from ..timeutil import now_iso
from .access import LEVELS, level
from .base import Table, cached_until_write, reads, writes
from .engines import Conn, Row
from .issue_rows import ISSUE_SELECT, issue_rows, issue_select
from .labels import ensure_labels
from .reactions import ON_ITEM, attach

COMMENT_SELECT = """
SELECT c.*, u.username AS author_username, u.name AS author_name,
       u.avatar_hash AS author_avatar_hash
  FROM comments c
  LEFT JOIN users u ON u.id = c.author_id
"""

# Pull request list filters: `closed` means closed without being merged.
PULL_STATES = {
    "open": "i.state = 'open'",
    "closed": "i.state = 'closed' AND p.merged = 0",
    "merged": "p.merged = 1",
    "all": "1 = 1",
}
ISSUE_STATES = {"open": "i.state = 'open'", "closed": "i.state = 'closed'", "all": "1 = 1"}
# The most rows a page's plan is made for, unless it asks for more (the default is 30).
PAGE_CAP = 31
# A merge holds its claim for seconds; one older than this belongs to a dead process.
MERGE_CLAIM_STALE = 600


def issue_row(conn: Conn, sql: Any, issue_id: int) -> dict[str, Any]:
    """One issue or pull request by id, as the API presents it (inside a transaction)."""
    rows = conn.execute(
        "WITH page AS MATERIALIZED (SELECT id AS hit FROM issues WHERE id = ?)"
        + issue_select(sql, None),
        (issue_id,),
    ).fetchall()
    return issue_rows(conn, rows)[0]


def _comments(conn: Conn, rows: list[Row]) -> list[dict[str, Any]]:
    found = [dict(r) for r in rows]
    attach(conn, found, on_comments=True)
    return found


def _set_assignees(conn: Conn, issue_id: int, user_ids: list[int]) -> None:
    conn.execute("DELETE FROM issue_assignees WHERE issue_id = ?", (issue_id,))
    conn.executemany(
        "INSERT INTO issue_assignees (issue_id, user_id, position) VALUES (?, ?, ?)",
        [(issue_id, uid, pos) for pos, uid in enumerate(dict.fromkeys(user_ids))],
    )


class IssueStore(Table):
    """Issues and pull requests share one table and one number sequence per repository."""

    @writes
    def create(
        self,
        conn,
        *,
        repo_id: int,
        author_id: int,
        title: str,
        body: str,
        labels: list[str],
        assignee_ids: list[int],
        pull: dict[str, Any] | None = None,
        milestone_id: int | None = None,
    ) -> dict[str, Any]:
        """Insert an issue (or, with pull, a pull request) under the next number."""
        if pull is not None:
            clash = conn.execute(
                "SELECT i.number FROM pulls p JOIN issues i ON i.id = p.issue_id"
                " WHERE i.repo_id = ? AND i.state = 'open' AND p.head_repo_id = ?"
                " AND p.head = ? AND p.base = ?",
                (repo_id, pull["head_repo_id"], pull["head"], pull["base"]),
            ).fetchone()
            if clash is not None:
                raise Conflict(f"pull request #{clash[0]} is already open for this head and base")
        # The counter row is bumped in this same transaction, so numbers never collide.
        number = conn.execute(
            "UPDATE repositories SET next_number = next_number + 1 WHERE id = ?"
            " RETURNING next_number - 1",
            (repo_id,),
        ).fetchone()[0]
        now = now_iso()
        cur = conn.execute(
            "INSERT INTO issues (repo_id, number, is_pull, title, body, author_id, labels,"
            " created_at, updated_at, milestone_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " RETURNING id",
            (
                repo_id,
                number,
                int(pull is not None),
                title,
                body,
                author_id,
                json.dumps(labels),
                now,
                now,
                milestone_id,
            ),
        )
        issue_id = cur.fetchone()[0]
        ensure_labels(conn, repo_id, labels)
        _set_assignees(conn, issue_id, assignee_ids)
        if pull is not None:
            conn.execute(
                "INSERT INTO pulls (issue_id, head_repo_id, head, base, head_oid, base_oid,"
                " mergeable) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    issue_id,
                    pull["head_repo_id"],
                    pull["head"],
                    pull["base"],
                    pull.get("head_oid"),
                    pull.get("base_oid"),
                    pull.get("mergeable"),
                ),
            )
        return self._one(conn, issue_id)

    def _one(self, conn, issue_id: int) -> dict[str, Any]:
        return issue_row(conn, self.db.sql, issue_id)

    @reads
    def assignable(self, conn, repo_id: int, user_ids: list[int]) -> set[int]:
        """Which of user_ids may be assigned here, as on GitHub: triage access or more, or
        membership of the organization that owns the repository."""
        ids = sorted({int(i) for i in user_ids})
        if not ids:
            return set()
        marks = ", ".join("?" for _ in ids)
        rows = conn.execute(
            "SELECT u.id FROM users u JOIN repositories r ON r.id = ?"
            f" WHERE u.id IN ({marks}) AND ({level('r', 'u.id')} >= {LEVELS['triage']}"
            " OR EXISTS (SELECT 1 FROM org_members m"
            " WHERE m.org_id = r.owner_id AND m.user_id = u.id))",
            (repo_id, *ids),
        )
        return {row["id"] for row in rows}

    @reads
    def get(self, conn, repo_id: int, number: int, is_pull: bool) -> dict[str, Any] | None:
        """One issue or pull request by number."""
        rows = conn.execute(
            "WITH page AS MATERIALIZED (SELECT id AS hit FROM issues"
            " WHERE repo_id = ? AND number = ? AND is_pull = ?)" + issue_select(self.db.sql, None),
            (repo_id, number, int(is_pull)),
        ).fetchall()
        found = issue_rows(conn, rows)
        return found[0] if found else None

    @reads
    def page(
        self,
        conn,
        repo_id: int,
        is_pull: bool,
        state: str,
        limit: int,
        offset: int,
        filters: dict[str, Any] | None = None,
    ) -> tuple[list[dict[str, Any]], bool]:
        """A page of issues or pull requests in a state, filtered and sorted as GitHub's lists are.

        filters: labels (all must be on the item), assignee (a username, "none" or "*"),
        milestone (a number, "none" or "*"),
        author, since (updated at or after), sort (created, updated, comments) and
        direction (asc, desc). The default order is the issues_list index's.
        """
        filters = filters or {}
        where = [
            "i.repo_id = ?",
            # A literal, not a parameter: PostgreSQL keeps one generic plan per prepared
            # statement, and pull requests may be a few among many issues (16 times
            # slower with is_pull a parameter: 100,000 issues, 100 pull requests, 175 ms
            # against 11 ms planned with the value).
            f"i.is_pull = {int(is_pull)}",
            (PULL_STATES if is_pull else ISSUE_STATES)[state],
        ]
        params: list[Any] = [repo_id]
        for label in filters.get("labels", ()):
            where.append(self.db.sql.json_array_has_lower("i.labels"))
            params.append(label.lower())
        assignee = filters.get("assignee")
        if assignee == "none":
            where.append("NOT EXISTS (SELECT 1 FROM issue_assignees a WHERE a.issue_id = i.id)")
        elif assignee == "*":
            where.append("EXISTS (SELECT 1 FROM issue_assignees a WHERE a.issue_id = i.id)")
        elif assignee is not None:
            where.append(
                "EXISTS (SELECT 1 FROM issue_assignees a JOIN users au2"
                " ON au2.id = a.user_id WHERE a.issue_id = i.id AND au2.username_key = ?)"
            )
            params.append(assignee.lower())
        if filters.get("author") is not None:
            where.append("i.author_id = (SELECT id FROM users WHERE username_key = ?)")
            params.append(filters["author"].lower())
        milestone = filters.get("milestone")
        if milestone == "none":
            where.append("i.milestone_id IS NULL")
        elif milestone == "*":
            where.append("i.milestone_id IS NOT NULL")
        elif milestone is not None:
            where.append(
                "i.milestone_id = (SELECT id FROM milestones WHERE repo_id = ? AND number = ?)"
            )
            params.extend([repo_id, int(milestone)])
        if filters.get("since") is not None:
            where.append("i.updated_at >= ?")
            params.append(filters["since"])
        direction = "ASC" if filters.get("direction") == "asc" else "DESC"
        key = {"updated": "i.updated_at", "comments": "i.comment_count"}.get(
            filters.get("sort", "created")
        )
        order = f"{key} {direction}, i.number {direction}" if key else f"i.number {direction}"
        # The page's ids first, from the issues (and pulls, for a pull's state) alone; the
        # row with its access checks is then built for those rows only. As one statement,
        # PostgreSQL computed every column for the OFFSET rows it skipped, too. Assignees,
        # labels, reactions and review requests come along as JSON columns: one statement.
        # The outer LIMIT, a literal at least the inner one, tells a generic plan how
        # few ids the page holds: with only `LIMIT ?` PostgreSQL guessed 10% of the table
        # and hash-joined every issue, assignee and reaction (10,000 issues: a page took
        # 28 ms of server CPU). Two values, so two prepared statements, not one a limit.
        cap = PAGE_CAP if limit < PAGE_CAP else max(limit + 1, 101)
        rows = conn.execute(
            "WITH page AS MATERIALIZED (SELECT w.hit FROM (SELECT i.id AS hit FROM issues i"
            " LEFT JOIN pulls p ON p.issue_id = i.id WHERE "
            + " AND ".join(where)
            + f" ORDER BY {order} LIMIT ? OFFSET ?) w LIMIT {cap})"
            + issue_select(self.db.sql, is_pull)
            + f" ORDER BY {order}",
            (*params, limit + 1, offset),
        ).fetchall()
        issues = issue_rows(conn, rows[:limit])
        return issues, len(rows) > limit

    async def listed(
        self,
        repo_id: int,
        is_pull: bool,
        state: str,
        limit: int,
        offset: int,
        filters: dict[str, Any] | None = None,
    ) -> tuple[list[dict[str, Any]], bool, str]:
        """page(), with a digest of its rows, kept as the repository by name is (until a
        write, at most 2 s): a list read again answers from memory, and the digest makes
        its ETag without the body being built. The rows are shared: change copies only."""
        key = tuple(
            sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in (filters or {}).items())
        )
        return await self._listed(repo_id, is_pull, state, limit, offset, key)

    @cached_until_write()
    @reads
    def _listed(
        self, conn, repo_id: int, is_pull: bool, state: str, limit: int, offset: int, key: tuple
    ) -> tuple[list[dict[str, Any]], bool, str]:
        filters = {k: list(v) if isinstance(v, tuple) else v for k, v in key}
        rows, more = self.page.sync(self, conn, repo_id, is_pull, state, limit, offset, filters)
        return rows, more, hashlib.blake2b(repr(rows).encode(), digest_size=16).hexdigest()

    @writes
    def update(
        self, conn, issue_id: int, fields: dict[str, Any], assignee_ids: list[int] | None = None
    ) -> dict[str, Any]:
        """Change title, body, state, labels, assignees or a pull request's base."""
        now = now_iso()
        columns: dict[str, Any] = {}
        for key in ("title", "body"):
            if key in fields:
                columns[key] = fields[key]
        if "labels" in fields:
            columns["labels"] = json.dumps(fields["labels"])
            repo_id = conn.execute("SELECT repo_id FROM issues WHERE id = ?", (issue_id,))
            ensure_labels(conn, repo_id.fetchone()[0], fields["labels"])
        if "milestone_id" in fields:
            columns["milestone_id"] = fields["milestone_id"]
        # Checked here, in the write's own transaction: the handler's look at `merged` came
        # before a merge racing this edit could finish (both answered 200 on PostgreSQL).
        if ("state" in fields or "base" in fields) and conn.execute(
            "SELECT 1 FROM pulls WHERE issue_id = ? AND merged = 1", (issue_id,)
        ).fetchone():
            raise Conflict("a merged pull request cannot change state or base")
        if "state" in fields:
            current = conn.execute("SELECT state FROM issues WHERE id = ?", (issue_id,)).fetchone()
            if current["state"] != fields["state"] and self._merging(conn, issue_id):
                raise Conflict("the pull request is being merged")
            if current["state"] != fields["state"]:
                columns["state"] = fields["state"]
                columns["closed_at"] = now if fields["state"] == "closed" else None
        columns["updated_at"] = now
        assignments = ", ".join(f"{column} = ?" for column in columns)
        conn.execute(f"UPDATE issues SET {assignments} WHERE id = ?", (*columns.values(), issue_id))
        if assignee_ids is not None:
            _set_assignees(conn, issue_id, assignee_ids)
        if "base" in fields:
            conn.execute(
                "UPDATE pulls SET base = ?, base_oid = NULL, mergeable = NULL WHERE issue_id = ?",
                (fields["base"], issue_id),
            )
        return self._one(conn, issue_id)

    @writes
    def delete(self, conn, issue_id: int) -> None:
        """Delete an issue with its comments."""
        conn.execute("DELETE FROM issues WHERE id = ?", (issue_id,))

    # Comments

    @writes
    def add_comment(
        self, conn, issue_id: int, author_id: int, body: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Add a comment; returns it and the issue with its new count."""
        now = now_iso()
        cur = conn.execute(
            "INSERT INTO comments (issue_id, author_id, body, created_at,"
            " updated_at) VALUES (?, ?, ?, ?, ?) RETURNING id",
            (issue_id, author_id, body, now, now),
        )
        comment_id = cur.fetchone()[0]
        conn.execute(
            "UPDATE issues SET comment_count = comment_count + 1, updated_at = ? WHERE id = ?",
            (now, issue_id),
        )
        comment = conn.execute(COMMENT_SELECT + " WHERE c.id = ?", (comment_id,)).fetchall()
        return _comments(conn, comment)[0], self._one(conn, issue_id)

    @reads
    def comments(
        self, conn, issue_id: int, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """Comments in the order they were written."""
        rows = conn.execute(
            COMMENT_SELECT + " WHERE c.issue_id = ? ORDER BY c.id LIMIT ? OFFSET ?",
            (issue_id, limit + 1, offset),
        ).fetchall()
        return _comments(conn, rows[:limit]), len(rows) > limit

    @reads
    def comment(self, conn, issue_id: int, comment_id: int) -> dict[str, Any] | None:
        """One comment of an issue or pull request."""
        rows = conn.execute(
            COMMENT_SELECT + " WHERE c.id = ? AND c.issue_id = ?", (comment_id, issue_id)
        ).fetchall()
        return _comments(conn, rows)[0] if rows else None

    @writes
    def edit_comment(
        self, conn, comment_id: int, body: str
    ) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """Change a comment's body and mark it edited; returns it and its issue (None if gone)."""
        now = now_iso()
        row = conn.execute(
            "UPDATE comments SET body = ?, updated_at = ?, edited = 1 WHERE id = ?"
            " RETURNING issue_id",
            (body, now, comment_id),
        ).fetchone()
        if row is None:
            return None
        issue_id = row[0]
        conn.execute("UPDATE issues SET updated_at = ? WHERE id = ?", (now, issue_id))
        comment = conn.execute(COMMENT_SELECT + " WHERE c.id = ?", (comment_id,)).fetchall()
        return _comments(conn, comment)[0], self._one(conn, issue_id)

    @writes
    def delete_comment(self, conn, comment_id: int) -> dict[str, Any] | None:
        """Delete a comment; returns its issue with the new count (None if it was gone)."""
        row = conn.execute(
            "DELETE FROM comments WHERE id = ? RETURNING issue_id", (comment_id,)
        ).fetchone()
        if row is None:
            return None
        # A comment's reactions go with it (no foreign key: ON_ITEM is not a comment).
        conn.execute(
            "DELETE FROM reactions WHERE issue_id = ? AND comment_id = ? AND comment_id <> ?",
            (row[0], comment_id, ON_ITEM),
        )
        conn.execute(
            "UPDATE issues SET comment_count = comment_count - 1, updated_at = ? WHERE id = ?",
            (now_iso(), row[0]),
        )
        return self._one(conn, row[0])

    # Pull request merge state

    @reads
    def open_pulls_touching(self, conn, repo_id: int, branch: str) -> list[dict[str, Any]]:
        """Open pull requests whose base or head is this branch of this repository."""
        # Two index lookups (this repository's open pulls; pulls by head), not an OR
        # across both tables, which made SQLite walk every issue on every push.
        rows = conn.execute(
            ISSUE_SELECT + " WHERE i.id IN ("
            "  SELECT j.id FROM issues j JOIN pulls b ON b.issue_id = j.id"
            "   WHERE j.repo_id = ? AND j.is_pull = 1 AND j.state = 'open' AND b.base = ?"
            "  UNION SELECT issue_id FROM pulls WHERE head_repo_id = ? AND head = ?)"
            " AND i.is_pull = 1 AND i.state = 'open' ORDER BY i.id",
            (repo_id, branch, repo_id, branch),
        ).fetchall()
        return [dict(r) for r in rows]

    @writes
    def set_mergeable(
        self,
        conn,
        issue_id: int,
        head_oid: str | None,
        base_oid: str | None,
        mergeable: bool | None,
    ) -> None:
        """Record the result of a merge check for the heads it was computed on."""
        # A merged pull request keeps the tips it merged: a check of a push that raced
        # the merge may finish after it.
        conn.execute(
            "UPDATE pulls SET head_oid = ?, base_oid = ?, mergeable = ?"
            " WHERE issue_id = ? AND merged = 0",
            (head_oid, base_oid, None if mergeable is None else int(mergeable), issue_id),
        )

    @staticmethod
    def _merging(conn, issue_id: int) -> bool:
        row = conn.execute(
            "SELECT merging_since FROM pulls WHERE issue_id = ?", (issue_id,)
        ).fetchone()
        return bool(
            row and row["merging_since"] and row["merging_since"] > time.time() - MERGE_CLAIM_STALE
        )
