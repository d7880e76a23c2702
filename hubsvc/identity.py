"""Who made a request: the signed-in user and the credential that proved it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Identity:
    """Who made a request and with which credential."""

    user: dict[str, Any]
    via: str  # "bearer", "cookie", "basic", "bot"
    token_digest: bytes | None = None
    personal: bool = False  # authenticated by a personal access token

    @property
    def id(self) -> int:
        return self.user["id"]
