"""Discord's webhook body: one embed, inside every limit Discord checks, pinging nobody."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..text import cut, discord_escape, units

if TYPE_CHECKING:
    from ..shape import Message

# https://discord.com/developers/docs/resources/message#embed-object-embed-limits
TITLE, DESCRIPTION, FOOTER, AUTHOR = 256, 4096, 2048, 256
FIELDS, FIELD_NAME, FIELD_VALUE = 25, 256, 1024
TOTAL = 6000  # title, description, field names and values, footer and author name
CONTENT, USERNAME = 2000, 80
NAME = "hubsvc"
# Nothing in a message pings: '@everyone', '@here', <@&role> and <@user> in a title or a
# body stay text (embeds never ping, but content does; this covers both).
NO_MENTIONS: dict[str, list[str]] = {"parse": []}
TEST_COLOUR = 65280


def _description(msg: Message) -> str:
    parts = [discord_escape(msg.text)] if msg.text else []
    if msg.body:
        parts.append(msg.body)  # a person's Markdown, shown as they wrote it
    for commit in msg.commits:
        line = f"[`{commit.label}`]({commit.url}) {discord_escape(commit.text)}"
        parts.append(line + (f" — {discord_escape(commit.author)}" if commit.author else ""))
    if msg.more:
        parts.append(discord_escape(msg.more))
    return "\n".join(parts)


def _cap(lengths: list[int], total: int) -> int:
    """The largest cap c with sum(min(length, c)) <= total: the longest texts give way first."""
    low, high = 0, max(lengths)
    while low < high:
        mid = (low + high + 1) // 2
        if sum(min(length, mid) for length in lengths) <= total:
            low = mid
        else:
            high = mid - 1
    return low


def fit(embed: dict[str, Any]) -> dict[str, Any]:
    """Cut an embed's texts to their own limits, then the longest ones until all fit TOTAL."""
    embed["fields"] = embed.get("fields", [])[:FIELDS]
    slots: list[tuple[dict[str, Any], str, int]] = [
        (embed, "title", TITLE),
        (embed, "description", DESCRIPTION),
    ]
    if "author" in embed:
        slots.append((embed["author"], "name", AUTHOR))
    if "footer" in embed:
        slots.append((embed["footer"], "text", FOOTER))
    for item in embed["fields"]:
        slots += [(item, "name", FIELD_NAME), (item, "value", FIELD_VALUE)]
    slots = [slot for slot in slots if slot[1] in slot[0]]
    for holder, key, limit in slots:
        holder[key] = cut(holder[key], limit)
    lengths = [units(holder[key]) for holder, key, _ in slots]
    if sum(lengths) > TOTAL:
        cap = _cap(lengths, TOTAL)
        for holder, key, _ in slots:
            holder[key] = cut(holder[key], cap)
    if not embed.get("description"):
        embed.pop("description", None)  # an empty one is not a description
    return embed


def body(msg: Message) -> dict[str, Any]:
    """The webhook body of a message: {"username", "allowed_mentions", "embeds": [embed]}."""
    embed: dict[str, Any] = {
        "title": f"[{discord_escape(msg.repo)}] {discord_escape(msg.headline)}",
        "description": _description(msg),
        "url": msg.url,
        "color": msg.colour,
        # Field names and author names are not Markdown in Discord; values are.
        "fields": [
            {"name": name, "value": discord_escape(value) or "—", "inline": inline}
            for name, value, inline in msg.fields
        ],
    }
    if msg.timestamp:
        embed["timestamp"] = msg.timestamp
    if msg.actor:
        embed["author"] = {"name": msg.actor, "url": msg.actor_url}
        if msg.actor_icon:
            embed["author"]["icon_url"] = msg.actor_icon
    return {"username": NAME, "allowed_mentions": NO_MENTIONS, "embeds": [fit(embed)]}


def ping(home: str) -> dict[str, Any]:
    """The body of a connectivity test."""
    return {
        "username": NAME,
        "content": "hubsvc webhook test",
        "allowed_mentions": NO_MENTIONS,
        "embeds": [
            {
                "title": "hubsvc webhook test",
                "description": "It works.",
                "url": home,
                "color": TEST_COLOUR,
            }
        ],
    }
