"""Per-repository webhooks and their deliveries, each hook a consumer of the event log."""

from __future__ import annotations

import fnmatch
import json
import time
import uuid
from collections.abc import Callable
from typing import Any, overload

from ..errors import Conflict
from ..events.shape import Event
from ..timeutil import now_iso
from .base import Table, reads, writes
from .engines import Row
from .events import rows_to_events
from .log import move_cursor
from .queue import HOOKS

MAX_PER_REPO = 20
# What the deliveries list shows of a delivery (the body is not part of it).
SUMMARY = (
    "id, hook_id, event_id, guid, event_type, action, status, attempts, next_attempt_at,"
    " last_status, last_error, last_duration_ms, response_excerpt, created_at,"
    " delivered_at"
)


def cursor_name(hook_id: int) -> str:
    """The hook's row in event_cursors."""
    return f"hook:{hook_id}"


@overload
def _hook(row: None) -> None: ...
@overload
def _hook(row: Row) -> dict[str, Any]: ...
def _hook(row: Row | None) -> dict[str, Any] | None:
    if row is None:
        return None
    hook = dict(row)
    hook["events"] = json.loads(hook["events"])
    hook["active"] = bool(hook["active"])
    return hook


def matches(hook: dict[str, Any], event: Event) -> bool:
    """The hook wants this event: its type is listed, and a push is on a matching branch."""
    if event.type not in hook["events"]:
        return False
    if event.type == "push" and hook["branches"]:
        ref = event.data.get("ref", "")
        branch = ref[len("refs/heads/") :] if ref.startswith("refs/heads/") else ref
        return fnmatch.fnmatchcase(branch, hook["branches"])
    return True


def _head(conn) -> int:
    return conn.execute("SELECT COALESCE(MAX(id), 0) FROM events").fetchone()[0]


def _last_deliveries(conn, ids: list[int]) -> dict[int, dict[str, Any]]:
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = conn.execute(
        f"SELECT {SUMMARY} FROM hook_deliveries WHERE id IN (SELECT MAX(id) FROM hook_deliveries"
        f" WHERE hook_id IN ({marks}) AND attempts > 0 GROUP BY hook_id)",
        ids,
    )
    return {row["hook_id"]: dict(row) for row in rows}


class HookStore(Table):
    """Hooks, the deliveries queued for them, and their cursors in the log."""

    @writes
    def create(
        self,
        conn,
        repo_id: int,
        *,
        url: str,
        format: str,
        events: list[str],
        branches: str | None,
        secret: str | None,
        active: bool,
        created_by: int,
    ) -> dict[str, Any]:
        """A new hook; it hears of events committed from now on."""
        count = conn.execute("SELECT COUNT(*) FROM hooks WHERE repo_id = ?", (repo_id,)).fetchone()[
            0
        ]
        if count >= MAX_PER_REPO:
            raise Conflict(f"a repository has at most {MAX_PER_REPO} hooks")
        cur = conn.execute(
            "INSERT INTO hooks (repo_id, url, format, events, branches, secret, active,"
            " created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                repo_id,
                url,
                format,
                json.dumps(events),
                branches,
                secret or None,
                int(active),
                created_by,
                now_iso(),
            ),
        )
        hook_id = cur.fetchone()[0]
        move_cursor(conn, cursor_name(hook_id), _head(conn))
        return {
            **_hook(conn.execute("SELECT * FROM hooks WHERE id = ?", (hook_id,)).fetchone()),
            "last_delivery": None,
        }

    @reads
    def of_repo(
        self, conn, repo_id: int, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """A repository's hooks, oldest first, each with its last attempted delivery."""
        rows = [
            _hook(r)
            for r in conn.execute(
                "SELECT * FROM hooks WHERE repo_id = ? ORDER BY id LIMIT ? OFFSET ?",
                (repo_id, limit + 1, offset),
            )
        ]
        more = len(rows) > limit
        rows = rows[:limit]
        last = _last_deliveries(conn, [h["id"] for h in rows])
        for hook in rows:
            hook["last_delivery"] = last.get(hook["id"])
        return rows, more

    @reads
    def get(self, conn, repo_id: int | None, hook_id: int) -> dict[str, Any] | None:
        """One hook (of that repository, unless repo_id is None)."""
        hook = _hook(
            conn.execute(
                "SELECT * FROM hooks WHERE id = ? AND (? IS NULL OR repo_id = ?)",
                (hook_id, repo_id, repo_id),
            ).fetchone()
        )
        if hook is not None:
            hook["last_delivery"] = _last_deliveries(conn, [hook_id]).get(hook_id)
        return hook

    @reads
    def active_ids(self, conn) -> list[tuple[int, int]]:
        """(hook id, repository id) of every active hook: their workers start with the server."""
        return [
            (row[0], row[1])
            for row in conn.execute("SELECT id, repo_id FROM hooks WHERE active = 1")
        ]

    @writes
    def update(self, conn, hook_id: int, changes: dict[str, Any]) -> dict[str, Any] | None:
        """Change a hook's fields; made active again, it starts over from now, healthy."""
        before = conn.execute("SELECT active FROM hooks WHERE id = ?", (hook_id,)).fetchone()
        if before is None:
            return None
        columns = {
            k: v
            for k, v in changes.items()
            if k in ("url", "format", "branches", "secret", "active")
        }
        if "events" in changes:
            columns["events"] = json.dumps(changes["events"])
        if "active" in columns:
            columns["active"] = int(columns["active"])
            if columns["active"] and not before["active"]:
                # Events of the time it was off are not sent (GitHub's inactive hooks too).
                columns.update(disabled_reason=None, failing_since=None)
                move_cursor(conn, cursor_name(hook_id), _head(conn))
            elif not columns["active"]:
                columns["disabled_reason"] = None
        if columns:
            sets = ", ".join(f"{k} = ?" for k in columns)
            conn.execute(f"UPDATE hooks SET {sets} WHERE id = ?", [*columns.values(), hook_id])
        return self.get.sync(self, conn, None, hook_id)

    @writes
    def delete(self, conn, hook_id: int) -> None:
        """Drop a hook, its deliveries and its cursor."""
        conn.execute("DELETE FROM hooks WHERE id = ?", (hook_id,))
        conn.execute("DELETE FROM event_cursors WHERE name = ?", (cursor_name(hook_id),))

    @writes
    def collect(
        self, conn, hook_id: int, render: Callable[[dict[str, Any], Event], str], limit: int
    ) -> int:
        """Queue the hook's matching events after its cursor and move it; how many were read.

        The rows and the cursor commit together, so a restart neither loses nor repeats one.
        """
        hook = _hook(conn.execute("SELECT * FROM hooks WHERE id = ?", (hook_id,)).fetchone())
        if hook is None or not hook["active"]:
            return 0
        row = conn.execute(
            "SELECT event_id FROM event_cursors WHERE name = ?", (cursor_name(hook_id),)
        ).fetchone()
        cursor = row[0] if row else 0
        rows = conn.execute(
            "SELECT * FROM events WHERE repo_id = ? AND id > ? ORDER BY id LIMIT ?",
            (hook["repo_id"], cursor, limit),
        ).fetchall()
        now, created = time.time(), now_iso()
        # The request that made each event goes with its delivery (X-Hubsvc-Request-Id).
        made_by = {int(row["id"]): row["request_id"] for row in rows}
        for event in rows_to_events(rows):
            if matches(hook, event):
                conn.execute(
                    "INSERT INTO hook_deliveries (hook_id, event_id, guid, event_type,"
                    " action, payload, next_attempt_at, created_at, request_id)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (
                        hook_id,
                        int(event.id),
                        str(uuid.uuid4()),
                        event.type,
                        event.data.get("action"),
                        render(hook, event),
                        now,
                        created,
                        made_by.get(int(event.id)),
                    ),
                )
        # Fewer than asked: every event of this repository up to the head has been seen.
        move_cursor(
            conn, cursor_name(hook_id), rows[-1]["id"] if len(rows) == limit else _head(conn)
        )
        return len(rows)

    @reads
    def due(self, conn, hook_id: int, limit: int) -> list[dict[str, Any]]:
        """The hook's pending deliveries in log order (they go out in this order)."""
        return [
            dict(r)
            for r in conn.execute(
                "SELECT * FROM hook_deliveries WHERE hook_id = ? AND status = 'pending'"
                " ORDER BY id LIMIT ?",
                (hook_id, limit),
            )
        ]

    @reads
    def due_hooks(self, conn, now: float) -> list[int]:
        """Hooks with a pending delivery due by now (queued or redelivered anywhere)."""
        return [
            row[0]
            for row in conn.execute(
                "SELECT DISTINCT hook_id FROM hook_deliveries"
                " WHERE status = 'pending' AND next_attempt_at <= ?",
                (now,),
            )
        ]

    @writes
    def claim(self, conn, delivery_id: int, holder: str, lease: str, now: float) -> bool:
        """Mark a pending delivery as being sent by holder, who must hold the lease now.

        False when another process is sending it (a ping); LeaseLost when the lease moved.
        """
        return HOOKS.claim(conn, delivery_id, holder, lease, now)

    @writes
    def settle_abandoned(
        self, conn, hook_id: int | None, now: float, mine: str | None = None
    ) -> int:
        """Release deliveries claimed by a gone process (or by mine), of one hook or all."""
        if hook_id is None:
            return HOOKS.settle_abandoned(conn, now, mine)
        return HOOKS.settle_abandoned(conn, now, mine, " AND hook_id = ?", (hook_id,))

    @writes
    def release_mine(self, conn, hook_id: int, now: float, mine: str) -> int:
        """Release the hook's deliveries mine claimed and never recorded (pings aside)."""
        return HOOKS.settle_abandoned(
            conn, now, mine, " AND hook_id = ? AND event_type <> 'ping'", (hook_id,)
        )

    @writes
    def record(
        self,
        conn,
        hook_id: int,
        results: list[dict[str, Any]],
        disable_after: float | None,
        holder: str,
    ) -> str | None:
        """Store attempts' outcomes; returns the reason when the hook was just disabled.

        Only deliveries holder still has claimed are written (one settled as abandoned
        meanwhile stays so). Without disable_after (a ping), the hook's health is left
        as it was.
        """
        now = time.time()
        for r in results:
            HOOKS.record(
                conn,
                r["id"],
                outcome=r["outcome"],
                error=r["error"],
                retry_at=r.get("retry_at"),
                holder=holder,
                extra={
                    "last_status": r["status"],
                    "last_duration_ms": r["duration_ms"],
                    "response_excerpt": r["excerpt"],
                },
            )
        if not results or disable_after is None:
            return None
        last = results[-1]
        if last["outcome"] == "delivered":
            conn.execute("UPDATE hooks SET failing_since = NULL WHERE id = ?", (hook_id,))
            return None
        # The hook fails since its first failure after the last success.
        if any(r["outcome"] == "delivered" for r in results):
            conn.execute("UPDATE hooks SET failing_since = ? WHERE id = ?", (now, hook_id))
        else:
            conn.execute(
                "UPDATE hooks SET failing_since = COALESCE(failing_since, ?) WHERE id = ?",
                (now, hook_id),
            )
        since = conn.execute("SELECT failing_since FROM hooks WHERE id = ?", (hook_id,)).fetchone()
        if since is None or now - since[0] < disable_after:
            return None
        hours = (now - since[0]) / 3600
        reason = (
            f"disabled after {hours:.3g} hours of failed deliveries; last: "
            f"{last['error'] or 'HTTP ' + str(last['status'])}"
        )[:500]
        conn.execute(
            "UPDATE hooks SET active = 0, disabled_reason = ? WHERE id = ?", (reason, hook_id)
        )
        return reason

    @writes
    def add_ping(
        self, conn, hook_id: int, payload: str, holder: str, request_id: str | None = None
    ) -> dict[str, Any]:
        """A ping delivery row, claimed by holder, which attempts it at once."""
        return dict(
            conn.execute(
                "INSERT INTO hook_deliveries (hook_id, guid, event_type, payload,"
                " next_attempt_at, created_at, claimed_by, request_id)"
                " VALUES (?, ?, 'ping', ?, ?, ?, ?, ?) RETURNING *",
                (hook_id, str(uuid.uuid4()), payload, time.time(), now_iso(), holder, request_id),
            ).fetchone()
        )

    @reads
    def deliveries(
        self, conn, hook_id: int, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """A hook's deliveries, newest first."""
        rows = [
            dict(r)
            for r in conn.execute(
                f"SELECT {SUMMARY} FROM hook_deliveries WHERE hook_id = ? ORDER BY id DESC"
                " LIMIT ? OFFSET ?",
                (hook_id, limit + 1, offset),
            )
        ]
        return rows[:limit], len(rows) > limit

    @reads
    def delivery(self, conn, hook_id: int, delivery_id: int) -> dict[str, Any] | None:
        """One delivery of the hook."""
        row = conn.execute(
            f"SELECT {SUMMARY} FROM hook_deliveries WHERE hook_id = ? AND id = ?",
            (hook_id, delivery_id),
        ).fetchone()
        return dict(row) if row else None

    @writes
    def redeliver(self, conn, hook_id: int, delivery_id: int) -> dict[str, Any] | None:
        """Queue a delivery again, now, with the same delivery id."""
        conn.execute(
            "UPDATE hook_deliveries SET status = 'pending', next_attempt_at = ?"
            " WHERE hook_id = ? AND id = ? AND claimed_by IS NULL",
            (time.time(), hook_id, delivery_id),
        )
        return self.delivery.sync(self, conn, hook_id, delivery_id)
