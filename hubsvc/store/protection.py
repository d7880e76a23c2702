"""Protected-branch rules of repositories."""

from __future__ import annotations

import fnmatch
import json
from typing import Any

from ..errors import Conflict
from ..timeutil import now_iso
from .base import Table, reads, writes
from .engines import Row

MAX_RULES = 100  # per repository


def _rule(row: Row) -> dict[str, Any]:
    rule = dict(row)
    rule["contexts"] = json.loads(rule["contexts"]) if rule["contexts"] is not None else None
    for flag in (
        "require_pr",
        "strict",
        "enforce_admins",
        "allow_force_pushes",
        "allow_deletions",
        "code_owner_reviews",
    ):
        rule[flag] = bool(rule[flag])
    return rule


def matches(pattern: str, branch: str) -> bool:
    """Whether a rule's pattern names a branch (a glob: `*` also matches `/`, as in git's sh)."""
    return fnmatch.fnmatchcase(branch, pattern)


class ProtectionStore(Table):
    """One rule per branch pattern of a repository."""

    @writes
    def put(self, conn, repo_id: int, pattern: str, rule: dict[str, Any]) -> dict[str, Any]:
        """Create or replace the rule of pattern; 409 past MAX_RULES rules."""
        now = now_iso()
        count = conn.execute(
            "SELECT COUNT(*) FROM branch_protections WHERE repo_id = ? AND pattern != ?",
            (repo_id, pattern),
        ).fetchone()[0]
        if count >= MAX_RULES:
            raise Conflict(f"a repository may have at most {MAX_RULES} protection rules")
        values = (
            int(rule["require_pr"]),
            int(rule["approvals"]),
            None if rule["contexts"] is None else json.dumps(rule["contexts"]),
            int(rule["strict"]),
            int(rule["enforce_admins"]),
            int(rule["allow_force_pushes"]),
            int(rule["allow_deletions"]),
            int(rule.get("code_owner_reviews", False)),
        )
        conn.execute(
            "INSERT INTO branch_protections (repo_id, pattern, require_pr, approvals, contexts,"
            " strict, enforce_admins, allow_force_pushes, allow_deletions, code_owner_reviews,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (repo_id, pattern) DO UPDATE SET require_pr = excluded.require_pr,"
            " approvals = excluded.approvals, contexts = excluded.contexts,"
            " strict = excluded.strict, enforce_admins = excluded.enforce_admins,"
            " allow_force_pushes = excluded.allow_force_pushes,"
            " allow_deletions = excluded.allow_deletions,"
            " code_owner_reviews = excluded.code_owner_reviews, updated_at = excluded.updated_at",
            (repo_id, pattern, *values, now, now),
        )
        return _rule(
            conn.execute(
                "SELECT * FROM branch_protections WHERE repo_id = ? AND pattern = ?",
                (repo_id, pattern),
            ).fetchone()
        )

    @reads
    def get(self, conn, repo_id: int, pattern: str) -> dict[str, Any] | None:
        """The rule of exactly this pattern."""
        row = conn.execute(
            "SELECT * FROM branch_protections WHERE repo_id = ? AND pattern = ?",
            (repo_id, pattern),
        ).fetchone()
        return _rule(row) if row is not None else None

    @writes
    def delete(self, conn, repo_id: int, pattern: str) -> bool:
        """Drop the rule of pattern; False when there was none."""
        cur = conn.execute(
            "DELETE FROM branch_protections WHERE repo_id = ? AND pattern = ?", (repo_id, pattern)
        )
        return cur.rowcount > 0

    @reads
    def rules(self, conn, repo_id: int) -> list[dict[str, Any]]:
        """Every rule of a repository, by pattern."""
        rows = conn.execute(
            "SELECT * FROM branch_protections WHERE repo_id = ? ORDER BY pattern", (repo_id,)
        ).fetchall()
        return [_rule(r) for r in rows]

    async def for_branch(self, repo_id: int, branch: str) -> list[dict[str, Any]]:
        """The rules whose pattern names branch."""
        return [r for r in await self.rules(repo_id) if matches(r["pattern"], branch)]
