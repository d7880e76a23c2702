"""Users, their avatars and their access tokens."""

from __future__ import annotations

import json
import time
from typing import Any, overload

from ..errors import Conflict
from ..identity import Grant
from ..timeutil import now_iso
from .access import visible
from .base import Table, reads, row_dict, writes
from .engines import Conn, Row

USER_COLUMNS = (
    "id, username, email, name, password_hash, is_admin, bio, location, website, "
    "preferences, avatar_hash, created_at, updated_at, disabled, is_ghost, is_org"
)
_U_COLUMNS = ", ".join("u." + c.strip() for c in USER_COLUMNS.split(","))
# A personal access token without an expiry, as an epoch for the token cache.
NEVER = 2**62
MAX_PERSONAL_TOKENS = 100
# An administrator who can act: the flag set, the account enabled, not the ghost.
ACTIVE_ADMIN = "is_admin = 1 AND disabled = 0 AND is_ghost = 0"


@overload
def _user(row: None) -> None: ...
@overload
def _user(row: Row) -> dict[str, Any]: ...
def _user(row: Row | None) -> dict[str, Any] | None:
    user = row_dict(row)
    if user is not None:
        user["preferences"] = json.loads(user["preferences"])
        user["is_admin"] = bool(user["is_admin"])
        user["disabled"] = bool(user["disabled"])
        user["is_ghost"] = bool(user["is_ghost"])
        user["is_org"] = bool(user["is_org"])
    return user


def _pat(row: Row, names: list[str]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "created_at": row["created_at"],
        "expires_at": row["expires_at"],
        "last_used_at": row["last_used_at"],
        "scopes": json.loads(row["scopes"]) if row["scopes"] is not None else None,
        "repositories": names if row["limited"] else None,
    }


def _grant(scopes: str | None, limited: bool, repo_ids: list[int]) -> Grant | None:
    """A scoped token's grant from its stored row (None: a token with no limits)."""
    if scopes is None and not limited:
        return None
    return Grant(
        frozenset(json.loads(scopes)) if scopes is not None else None,
        frozenset(repo_ids) if limited else None,
    )


def _token_repo_names(conn, token_ids: list[int]) -> dict[int, list[str]]:
    """The current "owner/name" of each token's repositories its owner may read, by token id."""
    names: dict[int, list[str]] = {t: [] for t in token_ids}
    for start in range(0, len(token_ids), 500):
        chunk = token_ids[start : start + 500]
        # Only readable ones: the current name of a repository its owner lost is not theirs
        # to learn (the token cannot reach it either, while the loss lasts).
        rows = conn.execute(
            "SELECT tr.token_id, u.username || '/' || r.name AS full_name"
            " FROM token_repositories tr JOIN personal_tokens p ON p.id = tr.token_id"
            " JOIN repositories r ON r.id = tr.repo_id JOIN users u ON u.id = r.owner_id"
            f" WHERE tr.token_id IN ({','.join('?' * len(chunk))})"
            f" AND {visible('r', 'p.user_id')}"
            " ORDER BY u.username_key, r.name_key",
            chunk,
        )
        for row in rows:
            names[row["token_id"]].append(row["full_name"])
    return names


class UserStore(Table):
    """Accounts, settings, avatars and tokens."""

    @writes
    def create(
        self,
        conn,
        *,
        username: str,
        email: str,
        name: str,
        password_hash: str,
        is_admin: bool = False,
    ) -> dict[str, Any]:
        """Insert a user; the first account ever created is an administrator."""
        taken = conn.execute(
            "SELECT username_key = ? AS same_name FROM users"
            " WHERE username_key = ? OR email_key = ? LIMIT 1",
            (username.lower(), username.lower(), email.casefold()),
        ).fetchone()
        if taken is not None:
            raise Conflict(
                "username is taken" if taken["same_name"] else "e-mail is already registered"
            )
        # The very first account ever, not the first after every account was deleted (which
        # only happens when none was an administrator): a stranger's sign-up on an emptied
        # server gets no rights. One write transaction: two first sign-ups cannot both be.
        first = conn.execute(
            "SELECT NOT EXISTS (SELECT 1 FROM users WHERE is_ghost = 0)"
            " AND NOT EXISTS (SELECT 1 FROM deleted_users)"
        ).fetchone()[0]
        now = now_iso()
        # Past every id a deleted account had: ids are never handed out twice.
        cur = conn.execute(
            "INSERT INTO users (id, username, username_key, email, email_key, name,"
            " password_hash, is_admin, created_at, updated_at)"
            " VALUES ((SELECT MAX(id) FROM (SELECT MAX(id) AS id FROM users"
            " UNION ALL SELECT MAX(id) FROM deleted_users UNION ALL SELECT 0) k) + 1,"
            " ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                username,
                username.lower(),
                email,
                email.casefold(),
                name,
                password_hash,
                int(first or is_admin),
                now,
                now,
            ),
        )
        return self.by_id.sync(self, conn, cur.fetchone()[0])

    @reads
    def by_id(self, conn, user_id: int) -> dict[str, Any] | None:
        """One user by id."""
        return _user(
            conn.execute(f"SELECT {USER_COLUMNS} FROM users WHERE id = ?", (user_id,)).fetchone()
        )

    @reads
    def by_username(self, conn, username: str) -> dict[str, Any] | None:
        """One user by username, ignoring case."""
        return _user(
            conn.execute(
                f"SELECT {USER_COLUMNS} FROM users WHERE username_key = ?", (username.lower(),)
            ).fetchone()
        )

    @reads
    def by_usernames(self, conn, usernames: list[str]) -> dict[str, dict[str, Any]]:
        """People by lower-cased username, for the names that exist (never the ghost or an org)."""
        keys = sorted({u.lower() for u in usernames})
        if not keys:
            return {}
        marks = ",".join("?" * len(keys))
        rows = conn.execute(
            f"SELECT {USER_COLUMNS} FROM users WHERE username_key IN ({marks})"
            " AND is_ghost = 0 AND is_org = 0",
            keys,
        )
        return {row["username"].lower(): _user(row) for row in rows}

    @reads
    def by_login(self, conn, login: str) -> dict[str, Any] | None:
        """One user by e-mail or username; never an organization, which cannot sign in."""
        column = "email_key" if "@" in login else "username_key"
        key = login.casefold() if "@" in login else login.lower()
        return _user(
            conn.execute(
                f"SELECT {USER_COLUMNS} FROM users WHERE {column} = ? AND is_org = 0", (key,)
            ).fetchone()
        )

    @writes
    def update(self, conn, user_id: int, fields: dict[str, Any]) -> dict[str, Any]:
        """Change profile fields (name, email, bio, location, website, preferences)."""
        fields = dict(fields)
        if "email" in fields:
            clash = conn.execute(
                "SELECT 1 FROM users WHERE email_key = ? AND id != ?",
                (fields["email"].casefold(), user_id),
            ).fetchone()
            if clash:
                raise Conflict("e-mail is already registered")
            fields["email_key"] = fields["email"].casefold()
        if "preferences" in fields:
            fields["preferences"] = json.dumps(fields["preferences"])
        if fields:
            fields["updated_at"] = now_iso()
            assignments = ", ".join(f"{column} = ?" for column in fields)
            conn.execute(
                f"UPDATE users SET {assignments} WHERE id = ?", (*fields.values(), user_id)
            )
        return self.by_id.sync(self, conn, user_id)

    @writes
    def set_password(
        self, conn, user_id: int, password_hash: str, keep: bytes | None = None
    ) -> None:
        """Replace the password hash; end every credential (tokens, chat links) but keep."""
        conn.execute(
            "UPDATE users SET password_hash = ?, updated_at = ? WHERE id = ?",
            (password_hash, now_iso(), user_id),
        )
        # `keep` may be None (end them all): compared to NULL, nothing would be kept.
        conn.execute(
            "DELETE FROM tokens WHERE user_id = ? AND (? IS NULL OR hash <> ?)",
            (user_id, keep, keep),
        )
        conn.execute(
            "DELETE FROM personal_tokens WHERE user_id = ? AND (? IS NULL OR hash <> ?)",
            (user_id, keep, keep),
        )
        # A chat link lets the bot act as the user: it is a credential, and ends like one.
        conn.execute("DELETE FROM chat_links WHERE user_id = ?", (user_id,))

    def _keep_an_admin(self, conn, user_id: int) -> None:
        """409 when user_id is the last administrator who can act."""
        others = conn.execute(
            f"SELECT COUNT(*) FROM users WHERE {ACTIVE_ADMIN} AND id != ?", (user_id,)
        ).fetchone()[0]
        target = conn.execute(
            f"SELECT {ACTIVE_ADMIN} FROM users WHERE id = ?", (user_id,)
        ).fetchone()
        if target is not None and target[0] and others == 0:
            raise Conflict("the last administrator cannot be demoted, disabled or deleted")

    @writes
    def set_admin(self, conn, user_id: int, is_admin: bool) -> dict[str, Any]:
        """Grant or revoke administrator rights; the last administrator keeps them (409)."""
        if not is_admin:
            self._keep_an_admin(conn, user_id)
        conn.execute(
            "UPDATE users SET is_admin = ?, updated_at = ? WHERE id = ?",
            (int(is_admin), now_iso(), user_id),
        )
        return self.by_id.sync(self, conn, user_id)

    @writes
    def set_disabled(self, conn, user_id: int, disabled: bool) -> dict[str, Any]:
        """Disable or enable an account; the last administrator stays enabled (409)."""
        if disabled:
            self._keep_an_admin(conn, user_id)
            # Enabling again does not bring the bot back: the user links anew.
            conn.execute("DELETE FROM chat_links WHERE user_id = ?", (user_id,))
        conn.execute(
            "UPDATE users SET disabled = ?, updated_at = ? WHERE id = ?",
            (int(disabled), now_iso(), user_id),
        )
        return self.by_id.sync(self, conn, user_id)

    @writes
    def set_flags(
        self, conn, user_id: int, *, is_admin: bool | None = None, disabled: bool | None = None
    ) -> dict[str, Any]:
        """set_admin and set_disabled in one transaction (None: left as it is)."""
        if is_admin is not None:
            self.set_admin.sync(self, conn, user_id, is_admin)
        if disabled is not None:
            self.set_disabled.sync(self, conn, user_id, disabled)
        return self.by_id.sync(self, conn, user_id)

    @writes
    def apply_admin_names(self, conn, usernames: list[str]) -> tuple[list[str], list[str]]:
        """Grant the accounts named in security.admins, each name once ever: (granted, missing)."""
        granted, missing = [], []
        names = {name.lower(): name for name in usernames}
        for key in sorted(names):
            if conn.execute("SELECT 1 FROM admin_grants WHERE name_key = ?", (key,)).fetchone():
                continue  # applied at an earlier start: whoever holds the name now gets nothing
            user = conn.execute(
                "SELECT id, username, is_admin FROM users WHERE username_key = ? AND is_ghost = 0",
                (key,),
            ).fetchone()
            if user is None:
                missing.append(names[key])
            elif not user["is_admin"]:
                conn.execute(
                    "UPDATE users SET is_admin = 1, updated_at = ? WHERE id = ?",
                    (now_iso(), user["id"]),
                )
                granted.append(user["username"])
            user_id = None if user is None else user["id"]
            conn.execute(
                "INSERT INTO admin_grants (name_key, user_id, applied_at) VALUES (?, ?, ?)",
                (key, user_id, now_iso()),
            )
        return granted, missing

    @writes
    def delete(self, conn, user_id: int) -> list[int]:
        """Delete an account: its issues, comments and merges go to the ghost, its
        repositories go with it (their ids are returned, for the folders on disk)."""
        self._keep_an_admin(conn, user_id)
        sole = conn.execute(
            "SELECT o.username FROM org_members m JOIN users o ON o.id = m.org_id"
            " WHERE m.user_id = ? AND m.role = 'owner' AND NOT EXISTS (SELECT 1 FROM"
            " org_members k WHERE k.org_id = m.org_id AND k.role = 'owner' AND k.user_id != ?)"
            " ORDER BY o.username_key LIMIT 1",
            (user_id, user_id),
        ).fetchone()
        if sole is not None:
            raise Conflict(
                f"the last owner of the organization {sole[0]} can't go: make another owner first"
            )
        ghost = conn.execute(
            "SELECT id FROM users WHERE is_ghost = 1 ORDER BY id LIMIT 1"
        ).fetchone()[0]
        conn.execute("UPDATE issues SET author_id = ? WHERE author_id = ?", (ghost, user_id))
        conn.execute("UPDATE comments SET author_id = ? WHERE author_id = ?", (ghost, user_id))
        conn.execute("UPDATE pulls SET merged_by = ? WHERE merged_by = ?", (ghost, user_id))
        # Counters of other repositories: their stars, and the forks this user made.
        conn.execute(
            "UPDATE repositories SET star_count = star_count - 1 WHERE id IN"
            " (SELECT repo_id FROM stars WHERE user_id = ?)",
            (user_id,),
        )
        conn.execute(
            "UPDATE repositories SET fork_count = fork_count - (SELECT COUNT(*) FROM"
            " repositories f WHERE f.parent_id = repositories.id AND f.owner_id = :user)"
            " WHERE id IN (SELECT parent_id FROM repositories WHERE owner_id = :user)",
            {"user": user_id},
        )
        repos = [
            row[0]
            for row in conn.execute("SELECT id FROM repositories WHERE owner_id = ?", (user_id,))
        ]
        # Cascades take tokens, avatar, collaborations, stars, chat links and repositories.
        conn.execute("DELETE FROM users WHERE id = ?", (user_id,))
        conn.execute(
            "INSERT INTO deleted_users (id, deleted_at) VALUES (?, ?)"
            " ON CONFLICT (id) DO UPDATE SET deleted_at = excluded.deleted_at",
            (user_id, now_iso()),
        )
        return repos

    @reads
    def listing(self, conn, limit: int, offset: int) -> tuple[list[dict[str, Any]], bool]:
        """Every account but the ghost and organizations, oldest first."""
        rows = conn.execute(
            f"SELECT {USER_COLUMNS} FROM users WHERE is_ghost = 0 AND is_org = 0"
            " ORDER BY id LIMIT ? OFFSET ?",
            (limit + 1, offset),
        ).fetchall()
        return [_user(row) for row in rows[:limit]], len(rows) > limit

    @writes
    def set_avatar(
        self, conn, user_id: int, content_type: str, data: bytes, digest: str
    ) -> dict[str, Any]:
        """Store an avatar image and its content hash."""
        conn.execute(
            "INSERT INTO avatars (user_id, content_type, data) VALUES (?, ?, ?)"
            " ON CONFLICT (user_id) DO UPDATE"
            " SET content_type = excluded.content_type, data = excluded.data",
            (user_id, content_type, data),
        )
        conn.execute(
            "UPDATE users SET avatar_hash = ?, updated_at = ? WHERE id = ?",
            (digest, now_iso(), user_id),
        )
        return self.by_id.sync(self, conn, user_id)

    @writes
    def delete_avatar(self, conn, user_id: int) -> dict[str, Any]:
        """Remove the avatar, so the generated one is served."""
        conn.execute("DELETE FROM avatars WHERE user_id = ?", (user_id,))
        conn.execute(
            "UPDATE users SET avatar_hash = NULL, updated_at = ? WHERE id = ?", (now_iso(), user_id)
        )
        return self.by_id.sync(self, conn, user_id)

    @reads
    def avatar(self, conn, user_id: int) -> tuple[str, bytes] | None:
        """The uploaded avatar's content type and bytes."""
        row = conn.execute(
            "SELECT content_type, data FROM avatars WHERE user_id = ?", (user_id,)
        ).fetchone()
        return (row["content_type"], bytes(row["data"])) if row else None

    # Tokens: only their SHA-256 digest is stored.

    @writes
    def add_token(
        self,
        conn,
        user_id: int,
        digest: bytes,
        expires_at: int,
        ip: str | None = None,
        user_agent: str | None = None,
    ) -> int:
        """Record a new sign-in token digest and where it came from; its session id."""
        now = now_iso()
        return conn.execute(
            "INSERT INTO tokens (hash, user_id, created_at, expires_at, last_seen_at, ip,"
            " user_agent) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (digest, user_id, now, expires_at, now, ip, (user_agent or "")[:500] or None),
        ).fetchone()[0]

    @reads
    def sessions(self, conn, user_id: int) -> list[dict[str, Any]]:
        """A user's live sign-in tokens (sessions), newest first, with their digests."""
        rows = conn.execute(
            "SELECT id, hash, created_at, last_seen_at, ip, user_agent FROM tokens"
            " WHERE user_id = ? AND expires_at > ? ORDER BY id DESC",
            (user_id, int(time.time())),
        ).fetchall()
        return [{**dict(row), "hash": bytes(row["hash"])} for row in rows]

    @writes
    def end_session(self, conn, user_id: int, session_id: int) -> bytes | None:
        """Delete one of the user's sign-in tokens; its digest, or None (not theirs)."""
        row = conn.execute(
            "DELETE FROM tokens WHERE id = ? AND user_id = ? RETURNING hash", (session_id, user_id)
        ).fetchone()
        return bytes(row[0]) if row else None

    @writes
    def end_other_sessions(self, conn, user_id: int, keep: bytes | None) -> set[bytes]:
        """Delete every sign-in token of the user but keep; their digests."""
        rows = conn.execute(
            "DELETE FROM tokens WHERE user_id = ? AND (? IS NULL OR hash <> ?) RETURNING hash",
            (user_id, keep, keep),
        ).fetchall()
        return {bytes(row[0]) for row in rows}

    async def touch_token(self, digest: bytes) -> None:
        """Record that a sign-in token (a session) was used now (a write no cache holds)."""
        await self.db.quiet_write(_touch_token, digest)

    @writes
    def prune_tokens(self, conn, now: int | None = None) -> int:
        """Delete expired sign-in tokens; returns how many went."""
        # Expired personal access tokens stay: their owners see them listed as expired,
        # as on GitHub, until they delete them.
        cursor = conn.execute(
            "DELETE FROM tokens WHERE expires_at <= ?", (int(time.time()) if now is None else now,)
        )
        return cursor.rowcount

    @reads
    def token_owner(self, conn, digest: bytes) -> tuple[dict[str, Any], int] | None:
        """The user a live token belongs to and its expiry, or None."""
        row = conn.execute(
            f"SELECT t.expires_at AS token_expires, {_U_COLUMNS}"
            " FROM tokens t JOIN users u ON u.id = t.user_id"
            " WHERE t.hash = ? AND t.expires_at > ? AND u.disabled = 0",
            (digest, int(time.time())),
        ).fetchone()
        if row is None:
            return None
        user = _user(row)
        return user, user.pop("token_expires")

    @writes
    def revoke_token(self, conn, digest: bytes) -> None:
        """Delete a sign-in token or a personal access token."""
        conn.execute("DELETE FROM tokens WHERE hash = ?", (digest,))
        conn.execute("DELETE FROM personal_tokens WHERE hash = ?", (digest,))

    @reads
    def live_digests(self, conn, digests: list[bytes]) -> set[bytes]:
        """The digests among these that still authenticate someone."""
        now, live = int(time.time()), set[bytes]()
        for start in range(0, len(digests), 500):
            chunk = digests[start : start + 500]
            marks = ",".join("?" * len(chunk))
            live.update(
                row[0]
                for row in conn.execute(
                    f"SELECT t.hash FROM tokens t JOIN users u ON u.id = t.user_id"
                    f" WHERE t.hash IN ({marks}) AND t.expires_at > ? AND u.disabled = 0"
                    f" UNION ALL SELECT p.hash FROM personal_tokens p JOIN users u ON u.id = p.user_id"
                    f" WHERE p.hash IN ({marks}) AND (p.expires_at IS NULL OR p.expires_at > ?)"
                    f" AND u.disabled = 0",
                    (*chunk, now, *chunk, now),
                )
            )
        return live

    # Personal access tokens.

    @writes
    def add_personal_token(
        self,
        conn,
        user_id: int,
        name: str,
        digest: bytes,
        expires_at: int | None,
        scopes: list[str] | None = None,
        repo_ids: list[int] | None = None,
    ) -> dict[str, Any]:
        """Record a personal access token (limited to repo_ids if given); 409: name taken, too many."""
        count = conn.execute(
            "SELECT COUNT(*) FROM personal_tokens WHERE user_id = ?", (user_id,)
        ).fetchone()[0]
        if count >= MAX_PERSONAL_TOKENS:
            raise Conflict(f"a user may hold at most {MAX_PERSONAL_TOKENS} personal access tokens")
        row = conn.execute(
            "INSERT INTO personal_tokens"
            " (user_id, name, hash, created_at, expires_at, scopes, limited)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (user_id, name) DO NOTHING RETURNING id",
            (
                user_id,
                name,
                digest,
                now_iso(),
                expires_at,
                None if scopes is None else json.dumps(sorted(set(scopes))),
                int(repo_ids is not None),
            ),
        ).fetchone()
        if row is None:
            raise Conflict("a personal access token with this name exists")
        token_id = row[0]
        for repo_id in sorted(set(repo_ids or ())):
            conn.execute(
                "INSERT INTO token_repositories (token_id, repo_id) VALUES (?, ?)",
                (token_id, repo_id),
            )
        return _pat(
            conn.execute("SELECT * FROM personal_tokens WHERE id = ?", (token_id,)).fetchone(),
            _token_repo_names(conn, [token_id])[token_id],
        )

    @reads
    def personal_tokens(self, conn, user_id: int) -> list[dict[str, Any]]:
        """A user's personal access tokens, newest first (expired ones too)."""
        rows = conn.execute(
            "SELECT * FROM personal_tokens WHERE user_id = ? ORDER BY id DESC", (user_id,)
        ).fetchall()
        names = _token_repo_names(conn, [row["id"] for row in rows if row["limited"]])
        return [_pat(row, names.get(row["id"], [])) for row in rows]

    @writes
    def delete_personal_token(self, conn, user_id: int, token_id: int) -> bytes | None:
        """Delete one of the user's personal access tokens; its digest, or None."""
        row = conn.execute(
            "DELETE FROM personal_tokens WHERE id = ? AND user_id = ? RETURNING hash",
            (token_id, user_id),
        ).fetchone()
        return bytes(row[0]) if row else None

    @reads
    def personal_token_owner(
        self, conn, digest: bytes
    ) -> tuple[dict[str, Any], int, Grant | None] | None:
        """The user of a live personal access token, its expiry (NEVER for none), its grant."""
        row = conn.execute(
            "SELECT p.expires_at AS token_expires, p.scopes AS token_scopes,"
            f" p.limited AS token_limited, p.id AS token_id, {_U_COLUMNS}"
            " FROM personal_tokens p JOIN users u ON u.id = p.user_id"
            " WHERE p.hash = ? AND (p.expires_at IS NULL OR p.expires_at > ?)"
            " AND u.disabled = 0",
            (digest, int(time.time())),
        ).fetchone()
        if row is None:
            return None
        user = _user(row)
        expires = user.pop("token_expires")
        token_id, limited = user.pop("token_id"), bool(user.pop("token_limited"))
        repo_ids = []
        if limited:
            repo_ids = [
                r[0]
                for r in conn.execute(
                    "SELECT repo_id FROM token_repositories WHERE token_id = ?", (token_id,)
                )
            ]
        grant = _grant(user.pop("token_scopes"), limited, repo_ids)
        return user, NEVER if expires is None else expires, grant

    async def touch_personal_token(self, digest: bytes) -> None:
        """Record that a personal access token was used now (a write no cache holds)."""
        await self.db.quiet_write(_touch_personal_token, digest)

    @reads
    def count(self, conn) -> int:
        """How many accounts exist."""
        return conn.execute(
            "SELECT COUNT(*) FROM users WHERE is_ghost = 0 AND is_org = 0"
        ).fetchone()[0]

    @reads
    def profile_counts(self, conn, user_id: int) -> dict[str, int]:
        """Repositories owned and starred, for the profile (public ones only)."""
        row = conn.execute(
            "SELECT (SELECT COUNT(*) FROM repositories WHERE owner_id = ?"
            "        AND visibility = 'public') AS \"repositoryCount\","
            " (SELECT COUNT(*) FROM stars s JOIN repositories r ON r.id = s.repo_id"
            "   WHERE s.user_id = ? AND r.visibility = 'public') AS \"starCount\"",
            (user_id, user_id),
        ).fetchone()
        return dict(row)


def _touch_token(conn: Conn, digest: bytes) -> None:
    conn.execute("UPDATE tokens SET last_seen_at = ? WHERE hash = ?", (now_iso(), digest))


def _touch_personal_token(conn: Conn, digest: bytes) -> None:
    conn.execute("UPDATE personal_tokens SET last_used_at = ? WHERE hash = ?", (now_iso(), digest))
