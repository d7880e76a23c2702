"""The commands that link a chat account: /link, /link-email, /unlink, /link-status."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..notify.messages import GRAY, GREEN
from .calls import (
    Call,
    Field,
    Reply,
    UsageError,
    _bot,
)
from .client import segment

LINK_FIRST = "Link your chat account first: /link (or /link-email your@address)."


def _minutes_left(expires_at: str) -> int:
    try:
        expires = datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
    except ValueError:
        return 0
    return max(1, round((expires - datetime.now(UTC)).total_seconds() / 60))


async def link_command(call: Call, args: dict[str, Any]) -> Reply:
    data = await _bot(call, "POST", "/api/chat/link/generate", {"chatId": call.chat_id})
    minutes = _minutes_left(data["expiresAt"])
    return Reply(
        title="Link your account",
        url=data["url"],
        colour=GREEN,
        private=True,
        description=(
            f"Open this page within {minutes} minutes, sign in and confirm:"
            f"\n{data['url']}\n\nThe link works once; keep it to yourself."
        ),
    )


async def link_email_command(call: Call, args: dict[str, Any]) -> Reply:
    address = args["address"]
    if "@" not in address or len(address) > 254:
        raise UsageError(
            "Give the e-mail address of your account, e.g. /link-email ada@example.com."
        )
    data = await _bot(
        call, "POST", "/api/chat/link/generate", {"chatId": call.chat_id, "serviceEmail": address}
    )
    minutes = _minutes_left(data["expiresAt"])
    return Reply(
        title="Check your e-mail",
        colour=GREEN,
        private=True,
        description=(
            f"If an account has the address {address}, it has been sent a "
            f"link. Open it within {minutes} minutes, sign in and confirm."
        ),
    )


async def unlink_command(call: Call, args: dict[str, Any]) -> Reply:
    data = await _bot(call, "POST", "/api/chat/link/unlink", {"chatId": call.chat_id})
    if data["unlinked"]:
        return Reply(
            title="Unlinked",
            colour=GRAY,
            private=True,
            description="Your chat account is no longer linked; the bot now shows "
            "you public data only.",
        )
    return Reply(
        title="Not linked",
        colour=GRAY,
        private=True,
        description="Your chat account wasn't linked, so there was nothing to undo.",
    )


async def link_status_command(call: Call, args: dict[str, Any]) -> Reply:
    data = await _bot(call, "GET", f"/api/chat/link/status/{segment(call.chat_id)}")
    if not data["linked"]:
        return Reply(
            title="Not linked",
            colour=GRAY,
            private=True,
            description="Your chat account isn't linked. Use /link, or /link-email "
            "with your account's address, to link it.",
        )
    user = data["user"]
    who = user["username"] + (f" ({user['name']})" if user["name"] else "")
    return Reply(
        title="Linked",
        colour=GREEN,
        private=True,
        description=f"Your chat account is linked to {who}.",
        fields=[
            Field("Account", user["username"], True),
            Field("Verified", "yes" if data["verified"] else "no", True),
        ],
    )
