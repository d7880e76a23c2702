"""Slack's incoming-webhook body: a fallback text and blocks, inside Slack's limits."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..text import ELLIPSIS, cut, slack_escape

if TYPE_CHECKING:
    from ..shape import Message

# https://api.slack.com/reference/block-kit/blocks
HEADER, SECTION, FIELD, FIELDS, CONTEXT, BLOCKS = 150, 3000, 2000, 10, 3000, 50
TEXT = 500  # the notification text: Slack takes 40,000, a notification shows a line
_HALF_ENTITY = re.compile(r"&[a-z]{0,3}" + ELLIPSIS)


def _mrkdwn(text: str, limit: int) -> str:
    """Escaped text cut to limit, never leaving half an &amp; behind."""
    return _HALF_ENTITY.sub(ELLIPSIS, cut(text, limit))


def _link(url: str, label: str) -> str:
    return f"<{url}|{label}>"


def _description(msg: Message) -> str:
    parts = [slack_escape(msg.text)] if msg.text else []
    if msg.body:
        parts.append(slack_escape(msg.body))  # code fences read the same in Slack
    for commit in msg.commits:
        line = f"{_link(commit.url, f'`{commit.label}`')} {slack_escape(commit.text)}"
        parts.append(line + (f" — {slack_escape(commit.author)}" if commit.author else ""))
    if msg.more:
        parts.append(slack_escape(msg.more))
    return "\n".join(parts)


def body(msg: Message) -> dict[str, Any]:
    """The webhook body of a message: {"text", "blocks"}."""
    blocks: list[dict[str, Any]] = [
        # plain_text is never parsed: no mentions, no links, nothing to escape.
        {
            "type": "header",
            "text": {"type": "plain_text", "text": cut(msg.title, HEADER), "emoji": True},
        }
    ]
    description = _description(msg)
    if description:
        blocks.append(
            {"type": "section", "text": {"type": "mrkdwn", "text": _mrkdwn(description, SECTION)}}
        )
    if msg.fields:
        blocks.append(
            {
                "type": "section",
                "fields": [
                    {"type": "mrkdwn", "text": _mrkdwn(f"*{name}*\n{slack_escape(value)}", FIELD)}
                    for name, value, _ in msg.fields[:FIELDS]
                ],
            }
        )
    context = _link(msg.url, "Open")
    if msg.actor:
        context = f"by {_link(msg.actor_url or msg.url, slack_escape(msg.actor))} · {context}"
    blocks.append(
        {"type": "context", "elements": [{"type": "mrkdwn", "text": _mrkdwn(context, CONTEXT)}]}
    )
    text = _link(msg.url, _mrkdwn(slack_escape(msg.title), TEXT))
    return {"text": text, "blocks": blocks[:BLOCKS]}


def ping(home: str) -> dict[str, Any]:
    """The body of a connectivity test."""
    text = f"hubsvc webhook test: it works. {_link(home, 'Open')}"
    return {"text": text, "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]}
