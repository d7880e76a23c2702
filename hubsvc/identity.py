"""Who made a request: the signed-in user and the credential that proved it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple


class Grant(NamedTuple):
    """What a scoped personal access token may do: its scopes and, if limited, repositories."""

    scopes: frozenset[str] | None  # None: every scope its owner has
    repositories: frozenset[int] | None  # repository ids; None: every one


@dataclass
class Identity:
    """Who made a request and with which credential."""

    user: dict[str, Any]
    via: str  # "bearer", "cookie", "basic", "bot"
    token_digest: bytes | None = None
    personal: bool = False  # authenticated by a personal access token
    grant: Grant | None = None  # a scoped personal access token's limits (None: none)

    @property
    def id(self) -> int:
        return self.user["id"]
