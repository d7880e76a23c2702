"""Who may do what to a repository: the one place that computes it, and the audience of one.

A user's permission on a repository is the highest of its grants: owning it, owning the
organization that owns it, being a member of that organization (read, GitHub's default
base permission), a team's grant and a collaborator's grant; an organization that requires a
second factor holds back the grants of those without one. Every check reads it from
here: `visible` (lists, search, the feed), `read_then` (private-period events), `level`
(the repository's `permission`, load_repo, reviews' approvers) and `Audience` (WebSocket,
e-mail and chat fan-out).
"""

from __future__ import annotations

from typing import NamedTuple

from ..events.shape import Event

# Levels as GitHub names them; owner is the owning user, or an owner of the owning org.
LEVELS = {"read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5, "owner": 6}
ROLES = {number: name for name, number in LEVELS.items()}
OWNER = LEVELS["owner"]
MEMBER_BASE = LEVELS["read"]  # what every organization member holds on its repositories


def _level_of(column: str) -> str:
    """SQL turning a permission name column into its level."""
    return (
        f"CASE {column} WHEN 'read' THEN 1 WHEN 'triage' THEN 2 WHEN 'write' THEN 3"
        " WHEN 'maintain' THEN 4 WHEN 'admin' THEN 5 ELSE 0 END"
    )


def two_factor_on(user: str) -> str:
    """SQL: whether user (an SQL expression) has a second factor on: a confirmed TOTP or a
    passkey (this is the one definition every rule reads)."""
    # user appears once (it may be a ? placeholder); the two kinds are asked of its row.
    return (
        f"EXISTS (SELECT 1 FROM users tfu WHERE tfu.id = {user} AND (EXISTS (SELECT 1 FROM"
        " two_factor tfo WHERE tfo.user_id = tfu.id AND tfo.confirmed = 1) OR EXISTS"
        " (SELECT 1 FROM webauthn_credentials wfo WHERE wfo.user_id = tfu.id)))"
    )


def two_factor_kept(owner_id: str, user: str) -> str:
    """SQL: whether user's grants on a repository of owner_id count: its owner requires no
    second factor (only organizations can), or the user has one."""
    return (
        f"(NOT EXISTS (SELECT 1 FROM org_two_factor_rule tfr WHERE tfr.org_id = {owner_id})"
        f" OR {two_factor_on(user)})"
    )


def two_factor_held(repo: str, user: str) -> str:
    """SQL: whether user belongs to repo's organization (or collaborates on repo) but the
    organization's rule holds their grant back, for want of a second factor."""
    return (
        f"(EXISTS (SELECT 1 FROM org_two_factor_rule tfr WHERE tfr.org_id = {repo}.owner_id)"
        f" AND NOT {two_factor_on(user)}"
        f" AND (EXISTS (SELECT 1 FROM org_members tfm WHERE tfm.org_id = {repo}.owner_id"
        f" AND tfm.user_id = {user}) OR EXISTS (SELECT 1 FROM collaborators tfc"
        f" WHERE tfc.repo_id = {repo}.id AND tfc.user_id = {user})))"
    )


def grants(repo: str, user: str | None = None) -> str:
    """SQL rows (user_id, level, since, watch) of the grants on repo (an alias of repositories).

    With user (an SQL expression), only that user's. `since` is the newest event before
    the grant began: a grant does not open the repository's private past. watch: the
    grant makes its holder a watcher (all but an organization member's base read, so a
    large organization's members are not told of every repository's every event).
    """
    return grants_on(f"{repo}.id", f"{repo}.owner_id", user)


def grants_on(repo_id: str, owner_id: str, user: str | None = None) -> str:
    """grants() of the repository repo_id owned by owner_id (SQL expressions)."""

    def who(column: str) -> str:
        return f" AND {column} = {user}" if user is not None else ""

    def kept(column: str) -> str:
        # An organization requiring a second factor holds back the grants of those
        # without one: membership, teams and collaborators alike (GitHub removes them).
        return f" AND {two_factor_kept(owner_id, column)}"

    # A team grant began when both the membership and the team's repository had.
    team_since = (
        "CASE WHEN gtm.since_event > gtr.since_event THEN gtm.since_event ELSE gtr.since_event END"
    )
    return (
        f"SELECT {owner_id} AS user_id, {OWNER} AS level, 0 AS since, 1 AS watch"
        f" FROM users gow WHERE gow.id = {owner_id} AND gow.is_org = 0{who('gow.id')}"
        " UNION ALL"
        f" SELECT gom.user_id, CASE WHEN gom.role = 'owner' THEN {OWNER} ELSE {MEMBER_BASE} END,"
        " gom.since_event, CASE WHEN gom.role = 'owner' THEN 1 ELSE 0 END"
        f" FROM org_members gom WHERE gom.org_id = {owner_id}"
        f"{who('gom.user_id')}{kept('gom.user_id')}"
        " UNION ALL"
        f" SELECT gtm.user_id, {_level_of('COALESCE(gtr.permission, gt.permission)')}, {team_since}, 1"
        " FROM team_repos gtr JOIN teams gt ON gt.id = gtr.team_id"
        " JOIN team_members gtm ON gtm.team_id = gtr.team_id"
        f" WHERE gtr.repo_id = {repo_id}{who('gtm.user_id')}{kept('gtm.user_id')}"
        " UNION ALL"
        f" SELECT gc.user_id, {_level_of('gc.permission')}, gc.since_event, 1 FROM collaborators gc"
        f" WHERE gc.repo_id = {repo_id}{who('gc.user_id')}{kept('gc.user_id')}"
    )


def level(repo: str, user: str) -> str:
    """SQL: user's highest level on repo (NULL: no grant; a public repository still reads)."""
    return f"(SELECT MAX(g.level) FROM ({grants(repo, user)}) g)"


def visible(repo: str, user: str) -> str:
    """SQL: whether user may read repo now."""
    return f"({repo}.visibility = 'public' OR EXISTS ({grants(repo, user)}))"


def read_then(repo: str, user: str, event: str) -> str:
    """SQL: whether user could read event (a private-period one of repo) then, and may now."""
    return f"EXISTS (SELECT 1 FROM ({grants(repo, user)}) g WHERE g.since < {event}.id)"


# The viewer bound as :viewer, for the queries that name their parameters.
VISIBLE = visible("r", ":viewer")
READ_THEN = read_then("r", ":viewer", "e")


class Readable(NamedTuple):
    """What a credential's lists may hold beyond its user's reach (policy.readable makes it)."""

    repositories: frozenset[int] | None  # ids; None: every one the user may read
    private: bool  # private repositories too
    event_types: tuple[str, ...] | None  # None: every type


def narrowed(within: Readable | None, repo: str = "r", event: str | None = None) -> str:
    """SQL (" AND …") keeping only what within allows; ids and types are bound as literals
    from integers and the fixed event types, never from user text."""
    if within is None:
        return ""
    parts = []
    if within.repositories is not None:
        ids = ", ".join(str(int(i)) for i in sorted(within.repositories))
        parts.append(f"{repo}.id IN ({ids})" if ids else "1 = 0")
    if not within.private:
        parts.append(f"{repo}.visibility = 'public'")
    if event is not None and within.event_types is not None:
        types = ", ".join(f"'{t}'" for t in within.event_types if t.isidentifier())
        parts.append(f"{event}.type IN ({types})" if types else "1 = 0")
    return "".join(" AND " + part for part in parts)


def role_named(level_value: int | None, public: bool) -> str | None:
    """A level as its role name; a public repository is read by anyone."""
    if level_value:
        return ROLES[int(level_value)]
    return "read" if public else None


class Audience(NamedTuple):
    """Who may read a repository's events, and who watches it."""

    readers: set[int] | None  # None: it is public
    watchers: set[int]
    # Everyone with a grant -> the newest event id before their grant (owner: 0).
    since: dict[int, int]

    def may_read(self, user_id: int, event: Event) -> bool:
        """Whether user_id may read event: now, and for a private-period one, then too."""
        if event.public:
            return self.readers is None or user_id in self.readers
        return int(event.id) > self.since.get(user_id, 1 << 62)
