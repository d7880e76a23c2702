"""Timestamps as the API writes them: ISO 8601 UTC ending in Z."""

from __future__ import annotations

import time
from datetime import UTC, datetime


def iso(epoch: float) -> str:
    """Epoch seconds as an ISO 8601 UTC string with a Z."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_iso() -> str:
    """The current time as the API writes it."""
    return iso(time.time())
