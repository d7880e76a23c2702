"""The body a hook receives for an event, in its format (discord, slack or json)."""

from __future__ import annotations

from typing import Any

from ..events import Event
from .messages import chat_message, ping_message

FORMATS = ("discord", "slack", "json")


def _slack(discord: dict[str, Any]) -> dict[str, Any]:
    """Slack's incoming-webhook shape from the Discord embed: text plus one attachment."""
    embed = discord["embeds"][0]
    title = embed.get("title", "")
    url = embed.get("url")
    # Slack reads &, < and > as markup: escape them in the text it shows.
    esc = lambda text: str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    headline = f"<{url}|{esc(title)}>" if url else esc(title)
    attachment: dict[str, Any] = {"color": f"#{embed.get('color', 0):06x}",
                                  "text": esc(embed.get("description") or "")}
    fields = [{"title": f["name"], "value": esc(f["value"]), "short": f.get("inline", True)}
              for f in embed.get("fields", [])]
    if fields:
        attachment["fields"] = fields
    return {"text": headline, "attachments": [attachment]}


def render(event: Event | None, format: str, base_url: str) -> dict[str, Any]:
    """The JSON body for event (None: a ping) in the hook's format."""
    if format == "json":
        if event is None:
            return {"type": "ping", "zen": "hubsvc webhook test"}
        return event.to_dict()
    discord = ping_message(base_url) if event is None else chat_message(event, base_url)
    if format == "slack":
        return _slack(discord)
    # Nobody is pinged by text in an event: @everyone and mentions stay plain text.
    return {**discord, "allowed_mentions": {"parse": []}}
