"""Who may read a repository and its events: SQL fragments and the audience of one."""

from __future__ import annotations

from typing import NamedTuple

from ..events.shape import Event

VISIBLE = """(r.visibility = 'public' OR r.owner_id = :viewer OR EXISTS (
    SELECT 1 FROM collaborators vc WHERE vc.repo_id = r.id AND vc.user_id = :viewer))"""
# Who could read a private-period event e of r then, and may still: the owner, and
# collaborators whose grant came before it (a grant does not open the private past).
READ_THEN = """(r.owner_id = :viewer OR EXISTS (
    SELECT 1 FROM collaborators tc WHERE tc.repo_id = r.id AND tc.user_id = :viewer
    AND tc.since_event < e.id))"""


class Audience(NamedTuple):
    """Who may read a repository's events, and who watches it."""

    readers: set[int] | None  # None: it is public
    watchers: set[int]
    # Owner and collaborators -> the newest event id before their grant (owner: 0).
    since: dict[int, int]

    def may_read(self, user_id: int, event: Event) -> bool:
        """Whether user_id may read event: now, and for a private-period one, then too."""
        if event.public:
            return self.readers is None or user_id in self.readers
        return int(event.id) > self.since.get(user_id, 1 << 62)
