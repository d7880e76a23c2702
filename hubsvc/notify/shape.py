"""The neutral message of an event, which every chat format renders."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Commit:
    """A commit line of a push message."""

    label: str  # the short oid
    url: str
    text: str  # the first line of its message (plain text)
    author: str


@dataclass
class Message:
    """What every format shows of an event; every text is plain unless named Markdown."""

    repo: str  # owner/name
    headline: str  # after "[owner/name] "
    url: str
    colour: int
    text: str = ""  # our own words (plain)
    body: str = ""  # Markdown a person wrote: an issue's body, a comment
    commits: list[Commit] = field(default_factory=list)
    more: str = ""  # "… and 3 more commits"
    fields: list[tuple[str, str, bool]] = field(default_factory=list)  # name, value, inline
    actor: str | None = None
    actor_url: str | None = None
    actor_icon: str | None = None
    timestamp: str | None = None

    @property
    def title(self) -> str:
        """The one-line plain title, as a notification shows it."""
        return f"[{self.repo}] {self.headline}"
