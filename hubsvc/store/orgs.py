"""Organizations, their members and teams, and the teams' repositories."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

from ..errors import Conflict, Unprocessable
from ..timeutil import now_iso
from .access import Readable, narrowed, two_factor_on
from .base import StoreMethod, Table, reads, writes

# Bounds, as the rest of the API has them.
MAX_ORGS_PER_USER = 100  # memberships of one user
MAX_MEMBERS = 10000  # per organization
MAX_TEAMS = 100  # per organization
MAX_TEAM_MEMBERS = 1000  # per team
MAX_TEAM_REPOS = 1000  # per team

_ORG = (
    "SELECT o.id, o.username, o.name, o.bio AS description, o.avatar_hash, o.created_at,"
    " (SELECT COUNT(*) FROM org_members c WHERE c.org_id = o.id) AS member_count,"
    " (SELECT COUNT(*) FROM teams t WHERE t.org_id = o.id) AS team_count,"
    " EXISTS (SELECT 1 FROM org_two_factor_rule tr WHERE tr.org_id = o.id) AS require_two_factor,"
    " (SELECT m.role FROM org_members m WHERE m.org_id = o.id AND m.user_id = ?) AS role"
    " FROM users o WHERE o.username_key = ? AND o.is_org = 1"
)
_TEAM = (
    "SELECT t.id, t.org_id, t.name, t.description, t.permission, t.created_at,"
    " (SELECT COUNT(*) FROM team_members m WHERE m.team_id = t.id) AS member_count,"
    " (SELECT COUNT(*) FROM team_repos r WHERE r.team_id = t.id) AS repo_count"
    " FROM teams t"
)
# The newest event before a grant begins: events before it stay closed to the grantee.
_NEWEST_EVENT = "(SELECT COALESCE(MAX(id), 0) FROM events)"


def changes_grants(method: StoreMethod) -> StoreMethod:
    """After the write (committed or not), forget every cached audience: grants changed."""

    @functools.wraps(method)
    async def wrapper(self: OrgStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return await method(self, *args, **kwargs)
        finally:
            self.grants_changed()
            for listener in self.grants_listeners:  # other processes' caches (Redis)
                listener()

    made = cast(StoreMethod, wrapper)
    made.sync = method.sync
    return made


def _page(rows: list, limit: int) -> tuple[list[dict[str, Any]], bool]:
    return [dict(r) for r in rows[:limit]], len(rows) > limit


def _count(conn: Any, sql: str, *args: Any) -> int:
    return conn.execute(sql, args).fetchone()[0]


class OrgStore(Table):
    """Organizations are rows of users (is_org = 1); the rest is theirs."""

    def __init__(self, db: Any, grants_changed: Callable[[], None] = lambda: None) -> None:
        super().__init__(db)
        self.grants_changed = grants_changed
        self.grants_listeners: list[Callable[[], None]] = []

    @writes
    def create(self, conn, owner_id: int, name: str, description: str) -> int:
        """A new organization owned by owner_id; 409 when the name is taken."""
        if conn.execute("SELECT 1 FROM users WHERE username_key = ?", (name.lower(),)).fetchone():
            raise Conflict("name: this name is taken (users and organizations share names)")
        self._check_memberships(conn, owner_id)
        now = now_iso()
        # Past every id a deleted account had, as users.create: ids are never reused. The
        # e-mail key only fills the column (it has no @, so no sign-in ever finds it).
        org_id = conn.execute(
            "INSERT INTO users (id, username, username_key, email, email_key, name,"
            " password_hash, bio, is_org, created_at, updated_at)"
            " SELECT COALESCE(MAX(ids.id), 0) + 1, ?, ?, '', ?, '', '', ?, 1, ?, ?"
            " FROM (SELECT id FROM users UNION ALL SELECT id FROM deleted_users) ids"
            " RETURNING id",
            (name, name.lower(), "org:" + name.lower(), description, now, now),
        ).fetchone()[0]
        conn.execute(
            "INSERT INTO org_members (org_id, user_id, role, since_event, created_at)"
            f" VALUES (?, ?, 'owner', {_NEWEST_EVENT}, ?)",
            (org_id, owner_id, now),
        )
        return org_id

    def _check_memberships(self, conn: Any, user_id: int) -> None:
        if (
            _count(conn, "SELECT COUNT(*) FROM org_members WHERE user_id = ?", user_id)
            >= MAX_ORGS_PER_USER
        ):
            raise Conflict(f"a user may belong to at most {MAX_ORGS_PER_USER} organizations")

    @reads
    def by_name(self, conn, name: str, viewer: int = 0) -> dict[str, Any] | None:
        """An organization by name, with counts and the viewer's role (None: not a member)."""
        row = conn.execute(_ORG, (viewer, name.lower())).fetchone()
        return dict(row) if row is not None else None

    @reads
    def of_user(self, conn, user_id: int, limit: int, offset: int) -> tuple[list, bool]:
        """Organizations a user belongs to, by name."""
        rows = conn.execute(
            "SELECT o.id, o.username, o.name, o.bio AS description, o.avatar_hash,"
            " o.created_at, m.role,"
            " (SELECT COUNT(*) FROM org_members c WHERE c.org_id = o.id) AS member_count,"
            " (SELECT COUNT(*) FROM teams t WHERE t.org_id = o.id) AS team_count,"
            " EXISTS (SELECT 1 FROM org_two_factor_rule tr WHERE tr.org_id = o.id)"
            " AS require_two_factor"
            " FROM org_members m JOIN users o ON o.id = m.org_id"
            " WHERE m.user_id = ? ORDER BY o.username_key LIMIT ? OFFSET ?",
            (user_id, limit + 1, offset),
        ).fetchall()
        return _page(rows, limit)

    @writes
    def update(self, conn, org_id: int, fields: dict[str, Any]) -> None:
        """Change the description or display name."""
        columns = {"description": "bio", "name": "name"}
        changes = {columns[k]: v for k, v in fields.items() if k in columns}
        if changes:
            assignments = ", ".join(f"{column} = ?" for column in changes)
            conn.execute(
                f"UPDATE users SET {assignments}, updated_at = ? WHERE id = ?",
                (*changes.values(), now_iso(), org_id),
            )

    @changes_grants
    @writes
    def set_two_factor_rule(self, conn, org_id: int, user_id: int, required: bool) -> None:
        """Require a second factor of members (or stop); 409 unless user_id, who asks, has one."""
        if not required:
            conn.execute("DELETE FROM org_two_factor_rule WHERE org_id = ?", (org_id,))
            return
        if not conn.execute(f"SELECT {two_factor_on('?')}", (user_id,)).fetchone()[0]:
            raise Conflict(
                "requireTwoFactor: turn on two-factor authentication for your own account"
                " first, or the rule would shut you out too"
            )
        conn.execute(
            "INSERT INTO org_two_factor_rule (org_id, created_at) VALUES (?, ?)"
            " ON CONFLICT (org_id) DO NOTHING",
            (org_id, now_iso()),
        )

    # Members

    @reads
    def members(
        self, conn, org_id: int, limit: int, offset: int, role: str | None = None
    ) -> tuple[list[dict[str, Any]], bool]:
        """Members with their role (all, or those of one role), by username."""
        where, args = ("AND m.role = ?", (role,)) if role is not None else ("", ())
        rows = conn.execute(
            "SELECT u.id, u.username, u.name, u.avatar_hash, m.role FROM org_members m"
            f" JOIN users u ON u.id = m.user_id WHERE m.org_id = ? {where}"
            " ORDER BY u.username_key LIMIT ? OFFSET ?",
            (org_id, *args, limit + 1, offset),
        ).fetchall()
        return _page(rows, limit)

    def _keep_an_owner(self, conn: Any, org_id: int, user_id: int) -> None:
        others = _count(
            conn,
            "SELECT COUNT(*) FROM org_members WHERE org_id = ? AND role = 'owner' AND user_id != ?",
            org_id,
            user_id,
        )
        if not others:
            raise Conflict(
                "the last owner of an organization can't leave it or stop being an owner:"
                " make another member an owner first"
            )

    @changes_grants
    @writes
    def set_member(self, conn, org_id: int, user_id: int, role: str) -> bool:
        """Add a member or change their role; True when newly added. 409 for the last owner."""
        current = conn.execute(
            "SELECT role FROM org_members WHERE org_id = ? AND user_id = ?", (org_id, user_id)
        ).fetchone()
        if current is None:
            self._check_memberships(conn, user_id)
            if (
                _count(conn, "SELECT COUNT(*) FROM org_members WHERE org_id = ?", org_id)
                >= MAX_MEMBERS
            ):
                raise Conflict(f"an organization has at most {MAX_MEMBERS} members")
            conn.execute(
                "INSERT INTO org_members (org_id, user_id, role, since_event, created_at)"
                f" VALUES (?, ?, ?, {_NEWEST_EVENT}, ?)",
                (org_id, user_id, role, now_iso()),
            )
            return True
        if current["role"] == "owner" and role != "owner":
            self._keep_an_owner(conn, org_id, user_id)
        conn.execute(
            "UPDATE org_members SET role = ? WHERE org_id = ? AND user_id = ?",
            (role, org_id, user_id),
        )
        return False

    @changes_grants
    @writes
    def remove_member(self, conn, org_id: int, user_id: int) -> bool:
        """A member leaves (or is removed): their teams of the org go too, and the grants
        made for the membership. 409: last owner."""
        current = conn.execute(
            "SELECT role FROM org_members WHERE org_id = ? AND user_id = ?", (org_id, user_id)
        ).fetchone()
        if current is None:
            return False
        if current["role"] == "owner":
            self._keep_an_owner(conn, org_id, user_id)
        conn.execute(
            "DELETE FROM team_members WHERE user_id = ?"
            " AND team_id IN (SELECT id FROM teams WHERE org_id = ?)",
            (user_id, org_id),
        )
        # What they were given for being a member (admin of the repositories they
        # created or forked into it) ends with the membership.
        conn.execute(
            "DELETE FROM collaborators WHERE user_id = ? AND with_membership = 1"
            " AND repo_id IN (SELECT id FROM repositories WHERE owner_id = ?)",
            (user_id, org_id),
        )
        conn.execute("DELETE FROM org_members WHERE org_id = ? AND user_id = ?", (org_id, user_id))
        return True

    @reads
    def repositories(self, conn, org_id: int) -> list[dict[str, Any]]:
        """Every repository of the organization: id and name (to recheck open sockets)."""
        return [
            dict(r)
            for r in conn.execute(
                "SELECT id, name FROM repositories WHERE owner_id = ? ORDER BY id", (org_id,)
            )
        ]

    # Teams

    @writes
    def create_team(
        self, conn, org_id: int, name: str, description: str, permission: str
    ) -> dict[str, Any]:
        """A new team with no members and no repositories; 409 when the name is taken."""
        if conn.execute(
            "SELECT 1 FROM teams WHERE org_id = ? AND name_key = ?", (org_id, name.lower())
        ).fetchone():
            raise Conflict("name: the organization has a team of this name")
        if _count(conn, "SELECT COUNT(*) FROM teams WHERE org_id = ?", org_id) >= MAX_TEAMS:
            raise Conflict(f"an organization has at most {MAX_TEAMS} teams")
        team_id = conn.execute(
            "INSERT INTO teams (org_id, name, name_key, description, permission, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
            (org_id, name, name.lower(), description, permission, now_iso()),
        ).fetchone()[0]
        return dict(conn.execute(_TEAM + " WHERE t.id = ?", (team_id,)).fetchone())

    @reads
    def team(self, conn, org_id: int, name: str) -> dict[str, Any] | None:
        """One team of an organization by name (ignoring case)."""
        row = conn.execute(
            _TEAM + " WHERE t.org_id = ? AND t.name_key = ?", (org_id, name.lower())
        ).fetchone()
        return dict(row) if row is not None else None

    @reads
    def teams(
        self, conn, org_id: int, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """An organization's teams by name."""
        rows = conn.execute(
            _TEAM + " WHERE t.org_id = ? ORDER BY t.name_key LIMIT ? OFFSET ?",
            (org_id, limit + 1, offset),
        ).fetchall()
        return _page(rows, limit)

    @changes_grants
    @writes
    def update_team(self, conn, team_id: int, fields: dict[str, Any]) -> dict[str, Any]:
        """Rename a team, change its description or its permission (at once, everywhere)."""
        changes = {k: v for k, v in fields.items() if k in ("name", "description", "permission")}
        if "name" in changes:
            clash = conn.execute(
                "SELECT 1 FROM teams WHERE name_key = ? AND id != ?"
                " AND org_id = (SELECT org_id FROM teams WHERE id = ?)",
                (changes["name"].lower(), team_id, team_id),
            ).fetchone()
            if clash:
                raise Conflict("name: the organization has a team of this name")
            changes["name_key"] = changes["name"].lower()
        if changes:
            assignments = ", ".join(f"{column} = ?" for column in changes)
            conn.execute(
                f"UPDATE teams SET {assignments} WHERE id = ?", (*changes.values(), team_id)
            )
        return dict(conn.execute(_TEAM + " WHERE t.id = ?", (team_id,)).fetchone())

    @changes_grants
    @writes
    def delete_team(self, conn, team_id: int) -> None:
        """Delete a team: its grants end with it."""
        conn.execute("DELETE FROM teams WHERE id = ?", (team_id,))

    @changes_grants
    @writes
    def add_team_member(self, conn, team: dict[str, Any], user_id: int) -> bool:
        """Put an organization member on a team; True when newly added (422: not a member)."""
        if not conn.execute(
            "SELECT 1 FROM org_members WHERE org_id = ? AND user_id = ?", (team["org_id"], user_id)
        ).fetchone():
            raise Unprocessable("username: not a member of the organization")
        if conn.execute(
            "SELECT 1 FROM team_members WHERE team_id = ? AND user_id = ?", (team["id"], user_id)
        ).fetchone():
            return False
        if (
            _count(conn, "SELECT COUNT(*) FROM team_members WHERE team_id = ?", team["id"])
            >= MAX_TEAM_MEMBERS
        ):
            raise Conflict(f"a team has at most {MAX_TEAM_MEMBERS} members")
        conn.execute(
            "INSERT INTO team_members (team_id, user_id, since_event, created_at)"
            f" VALUES (?, ?, {_NEWEST_EVENT}, ?)",
            (team["id"], user_id, now_iso()),
        )
        return True

    @changes_grants
    @writes
    def remove_team_member(self, conn, team_id: int, user_id: int) -> bool:
        """Take someone off a team; True when they were on it."""
        return (
            conn.execute(
                "DELETE FROM team_members WHERE team_id = ? AND user_id = ?", (team_id, user_id)
            ).rowcount
            > 0
        )

    @reads
    def team_members(
        self, conn, team_id: int, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """A team's members by username."""
        rows = conn.execute(
            "SELECT u.id, u.username, u.name, u.avatar_hash FROM team_members m"
            " JOIN users u ON u.id = m.user_id WHERE m.team_id = ?"
            " ORDER BY u.username_key LIMIT ? OFFSET ?",
            (team_id, limit + 1, offset),
        ).fetchall()
        return _page(rows, limit)

    @changes_grants
    @writes
    def set_team_repo(self, conn, team_id: int, repo_id: int, permission: str | None) -> bool:
        """Give a team a repository (permission None: the team's); True when newly given."""
        existed = conn.execute(
            "SELECT 1 FROM team_repos WHERE team_id = ? AND repo_id = ?", (team_id, repo_id)
        ).fetchone()
        if existed is None and (
            _count(conn, "SELECT COUNT(*) FROM team_repos WHERE team_id = ?", team_id)
            >= MAX_TEAM_REPOS
        ):
            raise Conflict(f"a team has at most {MAX_TEAM_REPOS} repositories")
        conn.execute(
            "INSERT INTO team_repos (team_id, repo_id, permission, since_event, created_at)"
            f" VALUES (?, ?, ?, {_NEWEST_EVENT}, ?)"
            " ON CONFLICT (team_id, repo_id) DO UPDATE SET permission = excluded.permission",
            (team_id, repo_id, permission, now_iso()),
        )
        return existed is None

    @changes_grants
    @writes
    def remove_team_repo(self, conn, team_id: int, repo_id: int) -> bool:
        """Take a repository from a team; True when it had it."""
        return (
            conn.execute(
                "DELETE FROM team_repos WHERE team_id = ? AND repo_id = ?", (team_id, repo_id)
            ).rowcount
            > 0
        )

    @reads
    def team_repos(
        self, conn, team_id: int, limit: int, offset: int, within: Readable | None = None
    ) -> tuple[list[dict[str, Any]], bool]:
        """A team's repositories with the permission each grants, by name."""
        rows = conn.execute(
            "SELECT r.id, r.name, r.visibility, COALESCE(g.permission, t.permission)"
            " AS permission FROM team_repos g JOIN teams t ON t.id = g.team_id"
            f" JOIN repositories r ON r.id = g.repo_id WHERE g.team_id = ?{narrowed(within)}"
            " ORDER BY r.name_key LIMIT ? OFFSET ?",
            (team_id, limit + 1, offset),
        ).fetchall()
        return _page(rows, limit)
