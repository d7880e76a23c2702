"""The notifications inbox: who follows which issue or pull request, and their threads."""

from __future__ import annotations

from typing import Any

from ..timeutil import now_iso
from .access import Readable, narrowed, visible
from .base import Table, quiet_writes, reads, writes
from .log import claim_event

# Reasons a person's own part in a thread subscribes them (GitHub's), and the ones that
# name them directly: both count as participating.
DIRECT = ("assign", "mention", "review_requested", "team_mention")
PARTICIPATING = (*DIRECT, "author", "comment", "state_change")

_THREAD = (
    "SELECT t.*, i.number, i.title, i.is_pull, i.state, r.name AS repo_name, r.visibility,"
    " o.username AS owner, s.subscribed AS sub_subscribed, s.ignored AS sub_ignored,"
    " s.reason AS sub_reason, s.created_at AS sub_created_at"
    " FROM notification_threads t JOIN issues i ON i.id = t.issue_id"
    " JOIN repositories r ON r.id = t.repo_id JOIN users o ON o.id = r.owner_id"
    " LEFT JOIN issue_subscriptions s ON s.issue_id = t.issue_id AND s.user_id = t.user_id"
)
# A thread shows only while its person may read the repository: a lost grant hides it.
_MINE = f" WHERE t.user_id = ? AND {visible('r', 't.user_id')}"


def _thread(row: Any) -> dict[str, Any]:
    return dict(row)


class NotificationStore(Table):
    """Subscriptions and threads, written by the inbox consumer and read per person."""

    @quiet_writes
    def record(
        self,
        conn,
        cursor: str,
        event_id: int,
        issue_id: int,
        repo_id: int,
        when: str,
        comment_id: int | None,
        joined: dict[int, str],
        direct: dict[int, str],
        watchers: set[int],
        actor_id: int | None,
    ) -> list[int] | None:
        """One event's effect on the inbox, with the consumer's cursor; who got a thread.

        joined: people whose own act subscribes them (no thread for their own act);
        direct: people the event names ({user: reason}), subscribed and told unless they
        ignore the thread; watchers: people watching the repository. None: the event
        was handled already (by an earlier lease holder).
        """
        if not claim_event(conn, cursor, event_id):
            return None
        now = now_iso()
        for user_id, reason in {**joined, **direct}.items():
            # A mention or an assignment subscribes again who unsubscribed; an ignored
            # thread stays ignored.
            conn.execute(
                "INSERT INTO issue_subscriptions (issue_id, user_id, subscribed, ignored,"
                " reason, created_at) VALUES (?, ?, 1, 0, ?, ?)"
                " ON CONFLICT (issue_id, user_id) DO UPDATE SET subscribed = 1,"
                " reason = CASE WHEN issue_subscriptions.subscribed = 1"
                " THEN issue_subscriptions.reason ELSE excluded.reason END"
                " WHERE issue_subscriptions.ignored = 0",
                (issue_id, user_id, reason, now),
            )
        subs = {
            row["user_id"]: row
            for row in conn.execute(
                "SELECT user_id, subscribed, ignored, reason FROM issue_subscriptions"
                " WHERE issue_id = ?",
                (issue_id,),
            )
        }
        told: dict[int, str] = {}
        for user_id, row in subs.items():
            if row["subscribed"] and not row["ignored"]:
                told[user_id] = row["reason"]
        for user_id in watchers:
            if user_id not in subs:
                told[user_id] = "subscribed"
        for user_id, reason in direct.items():
            row = subs.get(user_id)
            if row is None or not row["ignored"]:
                told[user_id] = reason
        told.pop(actor_id or 0, None)
        for user_id, reason in told.items():
            conn.execute(
                "INSERT INTO notification_threads (user_id, issue_id, repo_id, reason, unread,"
                " updated_at, event_id, comment_id) VALUES (?, ?, ?, ?, 1, ?, ?, ?)"
                " ON CONFLICT (user_id, issue_id) DO UPDATE SET reason = excluded.reason,"
                " unread = 1, updated_at = excluded.updated_at, event_id = excluded.event_id,"
                " comment_id = excluded.comment_id, repo_id = excluded.repo_id",
                (user_id, issue_id, repo_id, reason, when, event_id, comment_id),
            )
        return sorted(told)

    @reads
    def page(
        self,
        conn,
        user_id: int,
        within: Readable | None,
        limit: int,
        offset: int,
        filters: dict[str, Any],
    ) -> tuple[list[dict[str, Any]], bool]:
        """A person's threads, most recently updated first, as GitHub's filters choose."""
        where: list[str] = [_MINE + narrowed(within)]
        params: list[Any] = [user_id]
        if not filters.get("all"):
            where.append("t.unread = 1")
        if filters.get("participating"):
            where.append(f"t.reason IN ({', '.join('?' * len(PARTICIPATING))})")
            params += PARTICIPATING
        if filters.get("since"):
            where.append("t.updated_at >= ?")
            params.append(filters["since"])
        if filters.get("before"):
            where.append("t.updated_at < ?")
            params.append(filters["before"])
        if filters.get("repo_id") is not None:
            where.append("t.repo_id = ?")
            params.append(filters["repo_id"])
        rows = conn.execute(
            _THREAD
            + " AND ".join(where)
            + " ORDER BY t.updated_at DESC, t.id DESC LIMIT ? OFFSET ?",
            (*params, limit + 1, offset),
        ).fetchall()
        return [_thread(r) for r in rows[:limit]], len(rows) > limit

    @reads
    def unread_count(self, conn, user_id: int, within: Readable | None = None) -> int:
        """How many of a person's threads they may read are unread."""
        return conn.execute(
            "SELECT COUNT(*) FROM notification_threads t"
            " JOIN repositories r ON r.id = t.repo_id"
            + _MINE
            + narrowed(within)
            + " AND t.unread = 1",
            (user_id,),
        ).fetchone()[0]

    @reads
    def thread(
        self, conn, user_id: int, thread_id: int, within: Readable | None = None
    ) -> dict[str, Any] | None:
        """One of a person's threads, if they may still read its repository."""
        row = conn.execute(
            _THREAD + _MINE + narrowed(within) + " AND t.id = ?", (user_id, thread_id)
        ).fetchone()
        return _thread(row) if row is not None else None

    @reads
    def threads_of(self, conn, issue_id: int, user_ids: list[int]) -> list[dict[str, Any]]:
        """The threads of an issue for these people (for the live inbox message)."""
        if not user_ids:
            return []
        marks = ", ".join("?" * len(user_ids))
        rows = conn.execute(
            _THREAD + f" WHERE t.issue_id = ? AND t.user_id IN ({marks})", (issue_id, *user_ids)
        ).fetchall()
        return [_thread(r) for r in rows]

    @writes
    def mark_read(self, conn, user_id: int, thread_id: int) -> None:
        """A thread read now."""
        conn.execute(
            "UPDATE notification_threads SET unread = 0, last_read_at = ?"
            " WHERE id = ? AND user_id = ?",
            (now_iso(), thread_id, user_id),
        )

    @writes
    def mark_all_read(
        self, conn, user_id: int, up_to: str, within: Readable | None, repo_id: int | None = None
    ) -> int:
        """Every unread thread updated at or before up_to read now; how many."""
        extra, params = "", [user_id, up_to]
        if repo_id is not None:
            extra, params = " AND t.repo_id = ?", [*params, repo_id]
        return conn.execute(
            "UPDATE notification_threads SET unread = 0, last_read_at = ? WHERE id IN ("
            " SELECT t.id FROM notification_threads t JOIN repositories r ON r.id = t.repo_id"
            + _MINE
            + narrowed(within)
            + " AND t.unread = 1 AND t.updated_at <= ?"
            + extra
            + ")",
            (now_iso(), *params),
        ).rowcount

    @reads
    def subscription(self, conn, issue_id: int, user_id: int) -> dict[str, Any] | None:
        """A person's subscription to an issue or pull request, if any."""
        row = conn.execute(
            "SELECT * FROM issue_subscriptions WHERE issue_id = ? AND user_id = ?",
            (issue_id, user_id),
        ).fetchone()
        return dict(row) if row is not None else None

    @writes
    def subscribe(
        self, conn, issue_id: int, user_id: int, subscribed: bool, ignored: bool
    ) -> dict[str, Any]:
        """Set a person's subscription (GitHub's: subscribed, or ignored, or neither)."""
        conn.execute(
            "INSERT INTO issue_subscriptions (issue_id, user_id, subscribed, ignored, reason,"
            " created_at) VALUES (?, ?, ?, ?, 'subscribed', ?)"
            " ON CONFLICT (issue_id, user_id) DO UPDATE SET subscribed = excluded.subscribed,"
            " ignored = excluded.ignored, reason = CASE WHEN excluded.subscribed = 1"
            " AND issue_subscriptions.subscribed = 0 THEN 'subscribed'"
            " ELSE issue_subscriptions.reason END",
            (issue_id, user_id, int(subscribed), int(ignored), now_iso()),
        )
        return dict(
            conn.execute(
                "SELECT * FROM issue_subscriptions WHERE issue_id = ? AND user_id = ?",
                (issue_id, user_id),
            ).fetchone()
        )

    @reads
    def repo_watcher(self, conn, repo_id: int) -> int | None:
        """The person who owns a repository (an organization watches nothing)."""
        row = conn.execute(
            "SELECT u.id FROM repositories r JOIN users u ON u.id = r.owner_id"
            " WHERE r.id = ? AND u.is_org = 0",
            (repo_id,),
        ).fetchone()
        return row[0] if row is not None else None

    @reads
    def team_member_ids(self, conn, org: str, team: str) -> list[int]:
        """The members of an organization's team, named as @org/team is."""
        rows = conn.execute(
            "SELECT m.user_id FROM teams t JOIN users o ON o.id = t.org_id AND o.is_org = 1"
            " JOIN team_members m ON m.team_id = t.id"
            " WHERE o.username_key = ? AND t.name_key = ?",
            (org.lower(), team.lower()),
        ).fetchall()
        return [r[0] for r in rows]
