"""The one event shape shared by the log, the bus, webhooks, the feed and the WebSocket."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..timeutil import now_iso

EVENT_TYPES = (
    "issue",
    "pull_request",
    "push",
    "star",
    "fork",
    "status",
    "milestone",
    "label",
    "reaction",
    "release",
)


@dataclass(frozen=True)
class Event:
    """{id, type, repository: {owner, name}, actor, data, createdAt}; action in data."""

    type: str
    repository: dict[str, str]
    actor: dict[str, Any] | None
    data: dict[str, Any]
    id: str = ""  # the log id, given when the event is written
    createdAt: str = field(default_factory=now_iso)
    # Not part of the JSON shape: the repository's id, so subscribers can check access.
    repo_id: str | None = None
    # Whether the repository was public when it happened (set when the log writes it):
    # a private-period event stays with those who could read the repository then.
    public: bool = True
    # Posted to /api/webhooks/chat, not made by the server: labelled wherever it shows,
    # and never a reason to e-mail or message anyone.
    inbound: bool = False

    @property
    def repo_number(self) -> int:
        """repo_id as a number; an event of no repository has none (ValueError)."""
        if self.repo_id is None:
            raise ValueError("the event names no repository")
        return int(self.repo_id)

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON-ready data."""
        return {
            "id": self.id,
            "type": self.type,
            "repository": self.repository,
            "actor": self.actor,
            "data": self.data,
            "createdAt": self.createdAt,
            "public": self.public,
            "inbound": self.inbound,
        }
