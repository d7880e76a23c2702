"""The merge journal: a pull request held for one merge, and the tips the merge moves."""

from __future__ import annotations

import json
import time
from typing import Any

from ..errors import Conflict
from ..timeutil import now_iso
from .base import Table, reads, writes
from .issues import MERGE_CLAIM_STALE, issue_row
from .leases import gone

_JOURNAL = (
    "SELECT m.issue_id, m.repo_id, m.actor_id, m.holder, m.method, m.base_oid, m.head_oid,"
    " m.new_oid, i.number, p.base"
    " FROM merges_in_flight m JOIN issues i ON i.id = m.issue_id"
    " JOIN pulls p ON p.issue_id = m.issue_id"
)


class MergeStore(Table):
    """Claims, journal rows and the merged mark; a row per merge under way."""

    @writes
    def claim(
        self, conn, issue_id: int, repo_id: int, actor_id: int, method: str, holder: str | None
    ) -> bool:
        """Hold an open, unmerged pull request for one merge by process holder; False when
        another merge holds it (a journalled one until it is finished or undone)."""
        if conn.execute(
            "SELECT 1 FROM merges_in_flight WHERE issue_id = ?", (issue_id,)
        ).fetchone():
            return False
        now = int(time.time())
        cur = conn.execute(
            "UPDATE pulls SET merging_since = ? WHERE issue_id = ? AND merged = 0"
            " AND (merging_since IS NULL OR merging_since <= ?)"
            " AND EXISTS (SELECT 1 FROM issues WHERE id = ? AND state = 'open')",
            (now, issue_id, now - MERGE_CLAIM_STALE, issue_id),
        )
        if cur.rowcount != 1:
            return False
        conn.execute(
            "INSERT INTO merges_in_flight (issue_id, repo_id, actor_id, holder, method, started_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (issue_id, repo_id, actor_id, holder, method, now_iso()),
        )
        return True

    @writes
    def moving(self, conn, issue_id: int, base_oid: str, head_oid: str, new_oid: str) -> None:
        """Journal the base branch's move from base_oid to new_oid, before git makes it."""
        conn.execute(
            "UPDATE merges_in_flight SET base_oid = ?, head_oid = ?, new_oid = ?"
            " WHERE issue_id = ?",
            (base_oid, head_oid, new_oid, issue_id),
        )

    @writes
    def release(self, conn, issue_id: int) -> None:
        """Give a merge up (the base branch did not move): the pull request is free again."""
        conn.execute("DELETE FROM merges_in_flight WHERE issue_id = ?", (issue_id,))
        conn.execute("UPDATE pulls SET merging_since = NULL WHERE issue_id = ?", (issue_id,))

    @writes
    def finish(
        self,
        conn,
        issue_id: int,
        user_id: int | None,
        merge_commit: str,
        head_oid: str,
        base_oid: str,
        ref: str,
    ) -> dict[str, Any]:
        """Close a pull request as merged, its journal row gone with it (409 when another
        process finished or undid it first); the refs seen follow the base branch."""
        if not conn.execute(
            "DELETE FROM merges_in_flight WHERE issue_id = ? RETURNING issue_id", (issue_id,)
        ).fetchone():
            raise Conflict("this merge was settled already")
        now = now_iso()
        conn.execute(
            "UPDATE issues SET state = 'closed', closed_at = ?, updated_at = ? WHERE id = ?",
            (now, now, issue_id),
        )
        conn.execute(
            "UPDATE pulls SET merged = 1, merged_at = ?, merged_by = ?, merge_commit = ?,"
            " head_oid = ?, base_oid = ?, mergeable = NULL, merging_since = NULL"
            " WHERE issue_id = ?",
            (now, user_id, merge_commit, head_oid, base_oid, issue_id),
        )
        # The merge's move is recorded like a push's: a dead push reconciled later must
        # not take it for its own.
        row = conn.execute(
            "SELECT r.id, r.refs_seen FROM repositories r JOIN issues i ON i.repo_id = r.id"
            " WHERE i.id = ?",
            (issue_id,),
        ).fetchone()
        seen = json.loads(row["refs_seen"] or "null")
        if seen is not None:
            seen[ref] = merge_commit
        conn.execute(
            "UPDATE repositories SET refs_seen = ?, updated_at = ? WHERE id = ?",
            (None if seen is None else json.dumps(seen), now, row["id"]),
        )
        return issue_row(conn, self.db.sql, issue_id)

    @reads
    def get(self, conn, issue_id: int) -> dict[str, Any] | None:
        """The journal row of a merge under way, with the pull request's number and base."""
        row = conn.execute(_JOURNAL + " WHERE m.issue_id = ?", (issue_id,)).fetchone()
        return dict(row) if row else None

    @reads
    def abandoned(self, conn, now: float) -> list[dict[str, Any]]:
        """Merges whose process is gone (no live heartbeat at now, or none named)."""
        return [
            dict(r)
            for r in conn.execute(
                _JOURNAL + f" WHERE m.holder IS NULL OR {gone('m.holder')} ORDER BY m.issue_id",
                (now,),
            )
        ]
