"""Whom an event concerns and why: assignees, @mentions, review requests, for e-mail and chat.

Both notifiers ask the same question; only the preference they honour differs
(`notifications.email`, `notifications.chat`).
"""

from __future__ import annotations

import re
from typing import Any

from ..events.shape import Event
from ..web.present import preferences

MENTION = re.compile(r"(?<![\w@/.])@([A-Za-z0-9](?:[A-Za-z0-9_.-]{0,38}[A-Za-z0-9])?)")
MAX_MENTIONS = 20  # a message naming hundreds of people notifies none past this


def mentions(*texts: str | None) -> list[str]:
    """The @usernames in the texts, in order, once each (case kept as written)."""
    seen: dict[str, str] = {}
    for text in texts:
        for name in MENTION.findall(text or ""):
            seen.setdefault(name.lower(), name)
    return list(seen.values())[:MAX_MENTIONS]


def _who(review: dict[str, Any]) -> str:
    return str((review.get("user") or {}).get("username") or "someone")


def reasons(event: Event) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """The issue or pull request of an event, and {username: why} for whom to tell."""
    data = event.data
    item = data.get("issue") or data.get("pullRequest")
    if event.type not in ("issue", "pull_request") or not item:
        return None, {}
    action, why = data.get("action"), {}
    kind = "pull request" if event.type == "pull_request" else "issue"
    assigned = [p["username"] for p in item.get("assignees") or []]
    if action != "opened":
        # An edit (closing or reopening included) tells only those it added; an event
        # logged before assigneesAdded existed names every assignee.
        assigned = (
            data.get("assigneesAdded", assigned) if "assignees" in data.get("changes", ()) else []
        )
    for name in assigned:
        why[name] = f"you were assigned {kind} #{item['number']}"
    texts = [item.get("title"), item.get("body")] if action == "opened" else []
    if action == "commented":
        texts = [(data.get("comment") or {}).get("body")]
    if action == "reviewed" and isinstance(data.get("review"), dict):
        review, author = data["review"], (item.get("author") or {}).get("username")
        verdict = {"APPROVED": "approved", "CHANGES_REQUESTED": "requested changes on"}.get(
            review.get("state"), "reviewed"
        )
        if author:
            why[author] = f"{_who(review)} {verdict} your pull request #{item['number']}"
        texts = [review.get("body")]
    requested = data.get("requestedReviewer") if action == "review_requested" else None
    if isinstance(requested, dict) and requested.get("username"):
        why[requested["username"]] = f"you were asked to review pull request #{item['number']}"
    for name in mentions(*texts):
        why.setdefault(name, f"you were mentioned in {kind} #{item['number']}")
    return item, why


def wants(user: dict[str, Any], channel: str) -> bool:
    """Whether an account takes notifications on channel ("email", "chat") now."""
    return not user.get("disabled") and preferences(user)["notifications"][channel]


async def concerned(
    store: Any, event: Event, channel: str
) -> tuple[dict[str, Any] | None, list[tuple[dict[str, Any], str]]]:
    """The event's issue or pull request (None: it names nobody) and [(user, why)] to tell.

    Only users who may read the repository now, who did not cause the event, and who
    take notifications on channel.
    """
    if event.inbound:
        return None, []  # what a webhook poster says happened makes the server tell no one
    item, why = reasons(event)
    team = event.data.get("requestedTeam")
    if event.data.get("action") == "review_requested" and isinstance(team, dict) and item:
        members, _ = await store.orgs.team_members(int(team["id"]), 100, 0)
        for member in members:
            why.setdefault(
                member["username"],
                f"your team {team['name']} was asked to review pull request #{item['number']}",
            )
    if not why or event.repo_id is None:
        return None, []
    actor = (event.actor or {}).get("username", "").lower()
    audience = await store.repos.audience(int(event.repo_id))
    if audience is None:
        return item, []  # the repository is gone
    users = await store.users.by_usernames([n for n in why if n.lower() != actor])
    by_key = {name.lower(): text for name, text in why.items()}
    return item, [
        (user, by_key[user["username"].lower()])
        for user in users.values()
        if audience.may_read(user["id"], event) and wants(user, channel)
    ]
