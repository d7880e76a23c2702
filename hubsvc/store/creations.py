"""Repositories whose row is written and whose folder is not made yet (no 201 sent)."""

from __future__ import annotations

from typing import Any

from .base import Table, reads, writes
from .leases import gone


class CreationStore(Table):
    """The repos_in_creation marks: set with the row (RepoStore.create), ended here."""

    @writes
    def done(self, conn, repo_id: int) -> bool:
        """The repository's folder is made: an ordinary repository from now on. False when
        recovery took its process for dead and removed it meanwhile."""
        return bool(
            conn.execute(
                "DELETE FROM repos_in_creation WHERE repo_id = ? RETURNING repo_id", (repo_id,)
            ).fetchone()
        )

    @reads
    def abandoned(self, conn, now: float) -> list[dict[str, Any]]:
        """Creations whose process is gone (no live heartbeat at now)."""
        return [
            dict(r)
            for r in conn.execute(
                "SELECT c.repo_id, c.holder FROM repos_in_creation c"
                f" WHERE {gone('c.holder')} ORDER BY c.repo_id",
                (now,),
            )
        ]

    @reads
    def made(self, conn) -> list[dict[str, Any]]:
        """Every repository not in creation: id and default branch (their folders should exist)."""
        return [
            dict(r)
            for r in conn.execute(
                "SELECT r.id, r.default_branch FROM repositories r"
                " WHERE NOT EXISTS (SELECT 1 FROM repos_in_creation c WHERE c.repo_id = r.id)"
                " ORDER BY r.id"
            )
        ]
