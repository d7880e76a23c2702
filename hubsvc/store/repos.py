"""Repositories, collaborators, stars and forks."""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, cast

from ..errors import Conflict, NotFound
from ..timeutil import now_iso
from .access import (
    VISIBLE,
    Audience,
    Readable,
    grants_on,
    level,
    narrowed,
    two_factor_held,
    visible,
)
from .base import ROW_SECONDS, StoreMethod, Table, cached_until_write, reads, row_dict, writes
from .leases import gone

# Columns of a repository row joined with its owner, its parent and the viewer's
# relation to it (bound as :viewer; 0 for anonymous). access: the viewer's level (access.py).
REPO_SELECT = f"""
SELECT r.id, r.owner_id, r.name, r.description, r.visibility, r.default_branch,
       r.parent_id, r.star_count, r.created_at, r.updated_at, r.private_lineage,
       u.username AS owner_username, u.name AS owner_name, u.avatar_hash AS owner_avatar_hash,
       u.is_org AS owner_is_org,
       p.name AS parent_name, pu.username AS parent_owner,
       {visible("p", ":viewer")} AS parent_visible,
       -- Forks the viewer may read: a private fork is not counted for others.
       (SELECT COUNT(*) FROM repositories f WHERE f.parent_id = r.id AND {visible("f", ":viewer")}
       ) AS fork_count,
       EXISTS (SELECT 1 FROM stars s WHERE s.repo_id = r.id AND s.user_id = :viewer) AS starred,
       {level("r", ":viewer")} AS access,
       {two_factor_held("r", ":viewer")} AS two_factor_held
  FROM repositories r
  JOIN users u ON u.id = r.owner_id
  LEFT JOIN repositories p ON p.id = r.parent_id
  LEFT JOIN users pu ON pu.id = p.owner_id
"""


# The one definition of "the viewer may read r", used by every list and search.
def _repo(row: Any) -> dict[str, Any] | None:
    repo = row_dict(row)
    if repo is not None:
        repo["starred"] = bool(repo["starred"])
    return repo


def _page(rows: list, limit: int) -> tuple[list, bool]:
    return rows[:limit], len(rows) > limit


# Audiences kept in memory: the WebSocket hub asks for one on every event. Each change of
# collaborators, stars, visibility or existence made here drops its repository's entry
# once committed; the time limit bounds what a change made by another process (the
# admin commands) can leave behind.
AUDIENCE_CACHE = 10000
AUDIENCE_SECONDS = 60.0


def changes_audience(method: StoreMethod) -> StoreMethod:
    """After the write commits, forget the cached audience of its repository (first arg)."""

    @functools.wraps(method)
    async def wrapper(self: RepoStore, repo_id: int, *args: Any, **kwargs: Any) -> Any:
        try:
            return await method(self, repo_id, *args, **kwargs)
        finally:
            self.forget_audience(repo_id)
            for listener in self.audience_listeners:
                listener(int(repo_id))

    made = cast(StoreMethod, wrapper)
    made.sync = method.sync
    return made


class RepoStore(Table):
    """Repository rows; the bare repositories on disk are the caller's (gitrepo)."""

    def __init__(self, db: Any) -> None:
        super().__init__(db)
        self._audiences: OrderedDict[int, tuple[Any, float]] = OrderedDict()
        self._audience_epoch = 0  # bumped by every forget: a read racing one is not kept
        # Told of the repository after a write that may change its audience (other
        # processes forget theirs).
        self.audience_listeners: list[Callable[[int], None]] = []

    def forget_audience(self, repo_id: int | None = None) -> None:
        """Drop one repository's cached audience, or every one."""
        self._audience_epoch += 1
        if repo_id is None:
            self._audiences.clear()
        else:
            self._audiences.pop(int(repo_id), None)

    async def audience(self, repo_id: int) -> Audience | None:
        """Readers, watchers and grants of a repository (readers None: it is public)."""
        repo_id = int(repo_id)
        hit = self._audiences.get(repo_id)
        now = time.monotonic()
        if hit is not None and now - hit[1] < AUDIENCE_SECONDS:
            self._audiences.move_to_end(repo_id)
            return hit[0]
        epoch = self._audience_epoch
        found = await self._audience(repo_id)
        if epoch == self._audience_epoch:
            self._audiences[repo_id] = (found, now)
            self._audiences.move_to_end(repo_id)
            while len(self._audiences) > AUDIENCE_CACHE:
                self._audiences.popitem(last=False)
        return found

    @writes
    def create(
        self,
        conn,
        *,
        owner_id: int,
        name: str,
        description: str,
        visibility: str,
        default_branch: str,
        parent_id: int | None = None,
        private_lineage: bool = False,
        admin_id: int | None = None,
        viewer: int = 0,
        holder: str | None = None,
    ) -> dict[str, Any]:
        """Insert a repository; 409 when the owner has one of that name.

        admin_id: a member who made an organization's repository: its admin while they
        stay a member (the grant ends with the membership, OrgStore.remove_member).
        With holder, the row is marked as in creation by that process until
        CreationStore.done (its folder made).
        """
        self._check_free(conn, owner_id, name)
        now = now_iso()
        repo_id = conn.execute(
            "INSERT INTO repositories (owner_id, name, name_key, description, visibility,"
            " default_branch, parent_id, private_lineage, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                owner_id,
                name,
                name.lower(),
                description,
                visibility,
                default_branch,
                parent_id,
                int(private_lineage),
                now,
                now,
            ),
        ).fetchone()[0]
        if holder is not None:
            conn.execute(
                "INSERT INTO repos_in_creation (repo_id, holder, started_at) VALUES (?, ?, ?)",
                (repo_id, holder, now),
            )
        if admin_id is not None:
            conn.execute(
                "INSERT INTO collaborators"
                " (repo_id, user_id, permission, created_at, since_event, with_membership)"
                " VALUES (?, ?, 'admin', ?, 0, 1)",
                (repo_id, admin_id, now),
            )
        # A new repository takes the name for good: an older rename's redirect ends here.
        conn.execute(
            "DELETE FROM repo_redirects WHERE owner_id = ? AND name_key = ?",
            (owner_id, name.lower()),
        )
        if parent_id is not None:
            conn.execute(
                "UPDATE repositories SET fork_count = fork_count + 1 WHERE id = ?", (parent_id,)
            )
        return self.by_id.sync(self, conn, repo_id, viewer or owner_id)

    def _check_free(self, conn, owner_id: int, name: str, exclude: int | None = None) -> None:
        row = conn.execute(
            "SELECT id FROM repositories WHERE owner_id = ? AND name_key = ?",
            (owner_id, name.lower()),
        ).fetchone()
        if row is not None and row["id"] != exclude:
            raise Conflict("a repository with this name already exists")

    @reads
    def by_id(self, conn, repo_id: int, viewer: int = 0) -> dict[str, Any] | None:
        """One repository by id, as seen by viewer."""
        return _repo(
            conn.execute(
                REPO_SELECT + " WHERE r.id = :id", {"id": repo_id, "viewer": viewer}
            ).fetchone()
        )

    async def by_name(self, owner: str, name: str, viewer: int = 0) -> dict[str, Any] | None:
        """One repository by owner username and name (ignoring case), as seen by viewer."""
        return await self._by_name(owner.lower(), name.lower(), viewer)

    @cached_until_write(ROW_SECONDS)
    @reads
    def _by_name(self, conn, owner: str, name: str, viewer: int) -> dict[str, Any] | None:
        # How long the cache below answers with this row, counted from before the read.
        fresh_until = time.monotonic() + ROW_SECONDS
        repo = _repo(
            conn.execute(
                REPO_SELECT + " WHERE u.username_key = :owner AND r.name_key = :name",
                {"owner": owner, "name": name, "viewer": viewer},
            ).fetchone()
        )
        if repo is not None:
            # What the row says, for an ETag made without building the answer; taken here,
            # once per read and off the event loop, not on every request the row serves.
            repo["row_digest"] = hashlib.blake2b(
                repr(tuple(repo.values())).encode(), digest_size=16
            ).hexdigest()
            # After the digest (not part of what the row says): an answer kept from the
            # row lives no longer than the row itself (api/repos.get_repo).
            repo["fresh_until"] = fresh_until
        return repo

    @reads
    def by_old_name(self, conn, owner: str, name: str, viewer: int = 0) -> dict[str, Any] | None:
        """The repository that once had this owner and name (renamed since), as seen by viewer."""
        return _repo(
            conn.execute(
                REPO_SELECT + " JOIN repo_redirects rd ON rd.repo_id = r.id AND rd.owner_id = u.id"
                " WHERE u.username_key = :owner AND rd.name_key = :name",
                {"owner": owner.lower(), "name": name.lower(), "viewer": viewer},
            ).fetchone()
        )

    @reads
    def of_owner(
        self,
        conn,
        owner_id: int,
        viewer: int,
        limit: int,
        offset: int,
        within: Readable | None = None,
    ) -> tuple[list[dict[str, Any]], bool]:
        """An owner's repositories the viewer may read, newest first."""
        rows = conn.execute(
            REPO_SELECT + f" WHERE r.owner_id = :owner AND {VISIBLE}{narrowed(within)}"
            " ORDER BY r.id DESC LIMIT :limit OFFSET :offset",
            {"owner": owner_id, "viewer": viewer, "limit": limit + 1, "offset": offset},
        )
        return _page([_repo(r) for r in rows], limit)

    @reads
    def starred_by(
        self,
        conn,
        user_id: int,
        viewer: int,
        limit: int,
        offset: int,
        within: Readable | None = None,
    ) -> tuple[list[dict[str, Any]], bool]:
        """Repositories a user starred that the viewer may read, most recently starred first."""
        # REPO_SELECT binds :viewer, so this query names its parameters too.
        rows = conn.execute(
            REPO_SELECT + " JOIN stars st ON st.repo_id = r.id AND st.user_id = :user"
            f" WHERE {VISIBLE}{narrowed(within)} ORDER BY st.created_at DESC, r.id DESC LIMIT :limit OFFSET :offset",
            {"user": user_id, "viewer": viewer, "limit": limit + 1, "offset": offset},
        )
        return _page([_repo(r) for r in rows], limit)

    @reads
    def forks(
        self,
        conn,
        repo_id: int,
        viewer: int,
        limit: int,
        offset: int,
        within: Readable | None = None,
    ) -> tuple[list[dict[str, Any]], bool]:
        """Forks of a repository that the viewer may read, newest first."""
        rows = conn.execute(
            REPO_SELECT + f" WHERE r.parent_id = :repo AND {VISIBLE}{narrowed(within)}"
            " ORDER BY r.id DESC LIMIT :limit OFFSET :offset",
            {"repo": repo_id, "viewer": viewer, "limit": limit + 1, "offset": offset},
        )
        return _page([_repo(r) for r in rows], limit)

    @reads
    def lost_forks(self, conn, org_id: int, user_id: int) -> list[dict[str, Any]]:
        """A user's private forks of an organization's private repositories that they may
        no longer read."""
        rows = conn.execute(
            "SELECT f.id, f.name, fu.username AS owner_username"
            " FROM repositories f JOIN users fu ON fu.id = f.owner_id"
            " JOIN repositories p ON p.id = f.parent_id"
            " JOIN users o ON o.id = p.owner_id AND o.is_org = 1"
            " WHERE f.owner_id = ? AND p.owner_id = ?"
            " AND p.visibility = 'private' AND f.visibility = 'private'"
            f" AND NOT {visible('p', 'f.owner_id')} ORDER BY f.id",
            (user_id, org_id),
        )
        return [dict(r) for r in rows]

    @reads
    def readable_ids(self, conn, repo_ids: list[int], viewer: int) -> set[int]:
        """Which of repo_ids the viewer may read."""
        ids = sorted({int(i) for i in repo_ids})[:1000]
        if not ids:
            return set()
        marks = ", ".join("?" for _ in ids)
        rows = conn.execute(
            "SELECT r.id FROM repositories r, (SELECT CAST(? AS BIGINT) AS id) v"
            f" WHERE r.id IN ({marks}) AND {visible('r', 'v.id')}",
            (viewer, *ids),
        )
        return {row["id"] for row in rows}

    @changes_audience
    @writes
    def update(self, conn, repo_id: int, fields: dict[str, Any], viewer: int) -> dict[str, Any]:
        """Change name, description, visibility or default branch."""
        current = conn.execute(
            "SELECT owner_id, name_key, private_lineage FROM repositories WHERE id = ?", (repo_id,)
        ).fetchone()
        if current is None:
            raise NotFound("repository not found")
        if fields.get("visibility") == "public" and current["private_lineage"]:
            raise Conflict("visibility: a fork of a private repository stays private")
        fields = dict(fields)
        if "name" in fields:
            self._check_free(conn, current["owner_id"], fields["name"], repo_id)
            fields["name_key"] = fields["name"].lower()
            if fields["name_key"] != current["name_key"]:
                # The old name keeps answering (301 for the API, git as before).
                conn.execute(
                    "DELETE FROM repo_redirects WHERE owner_id = ? AND name_key = ?",
                    (current["owner_id"], fields["name_key"]),
                )
                conn.execute(
                    "INSERT INTO repo_redirects (owner_id, name_key, repo_id, created_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (owner_id, name_key) DO UPDATE"
                    " SET repo_id = excluded.repo_id, created_at = excluded.created_at",
                    (current["owner_id"], current["name_key"], repo_id, now_iso()),
                )
        if "defaultBranch" in fields:
            fields["default_branch"] = fields.pop("defaultBranch")
        fields["updated_at"] = now_iso()
        assignments = ", ".join(f"{column} = ?" for column in fields)
        conn.execute(
            f"UPDATE repositories SET {assignments} WHERE id = ?", (*fields.values(), repo_id)
        )
        return self.by_id.sync(self, conn, repo_id, viewer)

    @writes
    def push_started(
        self,
        conn,
        repo_id: int,
        actor_id: int | None,
        refs_now: dict[str, str],
        holder: str | None = None,
    ) -> int:
        """Journal a push about to run in process holder; the refs as they are become the
        last seen if none were."""
        conn.execute(
            "UPDATE repositories SET refs_seen = ? WHERE id = ? AND refs_seen IS NULL",
            (json.dumps(refs_now), repo_id),
        )
        return conn.execute(
            "INSERT INTO pushes_in_flight (repo_id, actor_id, started_at, holder)"
            " VALUES (?, ?, ?, ?) RETURNING id",
            (repo_id, actor_id, now_iso(), holder),
        ).fetchone()[0]

    @writes
    def push_ended(self, conn, flight: int) -> None:
        """A journalled push that changed nothing."""
        conn.execute("DELETE FROM pushes_in_flight WHERE id = ?", (flight,))

    @reads
    def pushes_in_flight(self, conn, now: float | None = None) -> list[dict[str, Any]]:
        """Journalled pushes never recorded, with the refs last seen.

        With now: only those whose process is gone (no live heartbeat at now, or none
        named: journalled before processes had one), on repositories where no live
        process has a push under way, whose refs would be mistaken for the dead one's.
        """
        if now is None:
            return [
                dict(r)
                for r in conn.execute(
                    "SELECT f.id, f.repo_id, f.actor_id, f.holder, r.refs_seen"
                    " FROM pushes_in_flight f JOIN repositories r ON r.id = f.repo_id"
                    " ORDER BY f.id"
                )
            ]
        return [
            dict(r)
            for r in conn.execute(
                "SELECT f.id, f.repo_id, f.actor_id, f.holder, r.refs_seen"
                " FROM pushes_in_flight f JOIN repositories r ON r.id = f.repo_id"
                f" WHERE (f.holder IS NULL OR {gone('f.holder')})"
                " AND NOT EXISTS (SELECT 1 FROM pushes_in_flight o"
                f"  WHERE o.repo_id = f.repo_id AND o.holder IS NOT NULL AND NOT {gone('o.holder')})"
                " ORDER BY f.id",
                (now, now),
            )
        ]

    @writes
    def touch(
        self,
        conn,
        repo_id: int,
        default_branch: str | None = None,
        refs_seen: dict[str, str | None] | None = None,
        flight: int | None = None,
    ) -> None:
        """Record a push: updatedAt, and the default branch when the first one arrived.

        refs_seen holds the refs this push changed (None: deleted), merged into the last
        seen: only its own, so a push a dead process left unrecorded still shows as a
        difference between what was seen and what is on disk, for reconcile to record.
        """
        if refs_seen is not None:
            row = conn.execute(
                "SELECT refs_seen FROM repositories WHERE id = ?", (repo_id,)
            ).fetchone()
            seen = json.loads(row[0]) if row and row[0] else {}
            for ref, oid in refs_seen.items():
                if oid is None:
                    seen.pop(ref, None)
                else:
                    seen[ref] = oid
            conn.execute(
                "UPDATE repositories SET refs_seen = ? WHERE id = ?", (json.dumps(seen), repo_id)
            )
        if (
            flight is not None
            and not conn.execute(
                "DELETE FROM pushes_in_flight WHERE id = ? RETURNING id", (flight,)
            ).fetchone()
        ):
            # Recorded already (by the lease holder, which took this process for dead):
            # its events must not be written twice.
            raise Conflict("this push was recorded already")
        if default_branch is None:
            conn.execute(
                "UPDATE repositories SET updated_at = ? WHERE id = ?", (now_iso(), repo_id)
            )
        else:
            conn.execute(
                "UPDATE repositories SET updated_at = ?, default_branch = ? WHERE id = ?",
                (now_iso(), default_branch, repo_id),
            )

    @changes_audience
    @writes
    def delete(self, conn, repo_id: int) -> None:
        """Delete a repository row; its forks stay, with no parent."""
        row = conn.execute("SELECT parent_id FROM repositories WHERE id = ?", (repo_id,)).fetchone()
        if row is None:
            return
        if row["parent_id"] is not None:
            conn.execute(
                "UPDATE repositories SET fork_count = fork_count - 1 WHERE id = ?",
                (row["parent_id"],),
            )
        conn.execute("DELETE FROM repositories WHERE id = ?", (repo_id,))

    # Collaborators

    @changes_audience
    @writes
    def set_collaborator(self, conn, repo_id: int, user_id: int, permission: str) -> bool:
        """Add or change a collaborator; True when newly added.

        An owner's grant stands on its own: one that replaces a member's creation grant no
        longer ends with the membership (as an outside collaborator's on GitHub).
        """
        existed = conn.execute(
            "SELECT 1 FROM collaborators WHERE repo_id = ? AND user_id = ?", (repo_id, user_id)
        ).fetchone()
        conn.execute(
            "INSERT INTO collaborators (repo_id, user_id, permission, created_at, since_event)"
            " VALUES (?, ?, ?, ?, (SELECT COALESCE(MAX(id), 0) FROM events))"
            " ON CONFLICT (repo_id, user_id) DO UPDATE SET permission = excluded.permission,"
            " with_membership = 0",
            (repo_id, user_id, permission, now_iso()),
        )
        return existed is None

    @changes_audience
    @writes
    def remove_collaborator(self, conn, repo_id: int, user_id: int) -> bool:
        """Remove a collaborator; True when there was one."""
        cur = conn.execute(
            "DELETE FROM collaborators WHERE repo_id = ? AND user_id = ?", (repo_id, user_id)
        )
        return cur.rowcount > 0

    @reads
    def collaborators(
        self, conn, repo_id: int, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """Collaborators with their permission, in the order they were added."""
        rows = conn.execute(
            "SELECT u.id, u.username, u.name, u.avatar_hash, c.permission FROM collaborators c"
            " JOIN users u ON u.id = c.user_id WHERE c.repo_id = ?"
            " ORDER BY c.created_at, u.id LIMIT ? OFFSET ?",
            (repo_id, limit + 1, offset),
        )
        return _page([dict(r) for r in rows], limit)

    # Stars

    @changes_audience
    @writes
    def star(self, conn, repo_id: int, user_id: int, on: bool) -> tuple[bool, int]:
        """Star or unstar (idempotent); returns (changed, starCount)."""
        if on:
            cur = conn.execute(
                "INSERT INTO stars (repo_id, user_id, created_at) VALUES (?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                (repo_id, user_id, now_iso()),
            )
        else:
            cur = conn.execute(
                "DELETE FROM stars WHERE repo_id = ? AND user_id = ?", (repo_id, user_id)
            )
        changed = cur.rowcount > 0
        if changed:
            conn.execute(
                "UPDATE repositories SET star_count = star_count + ? WHERE id = ?",
                (1 if on else -1, repo_id),
            )
        count = conn.execute(
            "SELECT star_count FROM repositories WHERE id = ?", (repo_id,)
        ).fetchone()[0]
        return changed, count

    @reads
    def stargazers(
        self, conn, repo_id: int, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """Users who starred the repository, most recent first."""
        rows = conn.execute(
            "SELECT u.id, u.username, u.name, u.avatar_hash FROM stars s"
            " JOIN users u ON u.id = s.user_id WHERE s.repo_id = ?"
            f" ORDER BY {self.db.sql.star_order} DESC LIMIT ? OFFSET ?",
            (repo_id, limit + 1, offset),
        )
        return _page([dict(r) for r in rows], limit)

    @reads
    def _audience(self, conn, repo_id: int) -> Audience | None:
        row = conn.execute(
            "SELECT owner_id, visibility FROM repositories WHERE id = ?", (repo_id,)
        ).fetchone()
        if row is None:
            return None
        since: dict[int, int] = {}
        watching: set[int] = set()
        for user_id, begun, watch in conn.execute(
            # Ids, not parameters: the fragment names the repository and its owner often.
            "SELECT g.user_id, MIN(g.since), MAX(g.watch) FROM"
            f" ({grants_on(str(int(repo_id)), str(int(row['owner_id'])))}) g GROUP BY g.user_id"
        ):
            since[user_id] = begun
            if watch:
                watching.add(user_id)
        stargazers = {
            r[0] for r in conn.execute("SELECT user_id FROM stars WHERE repo_id = ?", (repo_id,))
        }
        readers = None if row["visibility"] == "public" else set(since)
        return Audience(readers, {*watching, *stargazers}, since)
