"""Writing the security log inside a change's own transaction (as log.py the events)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..timeutil import now_iso
from .engines import Conn

# Who an entry names: (id, name as it was then); an entry outlives what it names.
Named = tuple[int, str] | None


@dataclass(frozen=True)
class Entry:
    """One security event: what happened, who did it, to whom and where, from where."""

    action: str
    actor: Named = None
    user: Named = None  # the person it was done to
    owner: Named = None  # the organization, or the repository's owner
    repo: Named = None  # (id, "owner/name")
    ip: str | None = None
    user_agent: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


# What a store write takes as audit=: entries, or a function of its result giving them.
AuditArg = Entry | list[Entry] | Callable[[Any], "Entry | list[Entry] | None"] | None


def entries_of(audit: AuditArg, result: Any) -> list[Entry]:
    """The entries an audit= argument gives for a write's result."""
    if callable(audit):
        audit = audit(result)
    if audit is None:
        return []
    return [audit] if isinstance(audit, Entry) else list(audit)


def _part(named: Named) -> tuple[int | None, str | None]:
    return (None, None) if named is None else (named[0], named[1])


def append_entries(conn: Conn, entries: list[Entry]) -> None:
    """Insert entries inside the caller's transaction: they commit with the change or not at all."""
    for entry in entries:
        conn.execute(
            "INSERT INTO security_log (created_at, action, actor_id, actor_name, user_id,"
            " user_name, owner_id, owner_name, repo_id, repo_name, ip, user_agent, data)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                now_iso(),
                entry.action,
                *_part(entry.actor),
                *_part(entry.user),
                *_part(entry.owner),
                *_part(entry.repo),
                entry.ip,
                (entry.user_agent or "")[:500] or None,
                json.dumps(entry.data, sort_keys=True),
            ),
        )
