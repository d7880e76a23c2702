"""The notifications inbox: a durable consumer of the event log turns events into threads.

On the lease holder only (cursor `inbox`), each issue or pull request event subscribes
the people it concerns (its author, commenters, whoever changes its state, assignees,
@mentions, @org/team mentions, requested reviewers) and marks their thread unread with
GitHub's reason, in the transaction that moves the cursor: a restart neither loses nor
repeats one. The owner of a personal repository watches it (reason `subscribed`). The
actor gets no thread for their own act. Whoever may not read the repository now gets
nothing; a thread whose reader later loses access is hidden when read. Each new thread
state goes live to its person's own sockets as an `inbox` message, in every process.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from aiohttp import web

from ..events.shape import Event
from ..keys import CONFIG, STORE
from ..web.present import notification
from .concern import MAX_MENTIONS, mentions
from .hub import HUB
from .leader import LEADER, consumer

CURSOR = "inbox"
TEAM_MENTION = re.compile(r"(?<![\w@/.])@([A-Za-z0-9][A-Za-z0-9-]{0,38})/([A-Za-z0-9._-]{1,100})")
# What the actor's own act makes them: a participant of the thread, never told of it.
JOINS = {
    "opened": "author",
    "commented": "comment",
    "reviewed": "comment",
    "closed": "state_change",
    "reopened": "state_change",
    "merged": "state_change",
}


def named(event: Event) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """Whom an event names: {username: reason}, and [(org, team, reason)]."""
    data = event.data
    item = data.get("issue") or data.get("pullRequest") or {}
    action = data.get("action")
    users: dict[str, str] = {}
    teams: list[tuple[str, str, str]] = []
    if action == "review_requested":
        if isinstance(data.get("requestedReviewer"), dict):
            users[data["requestedReviewer"]["username"]] = "review_requested"
        team = data.get("requestedTeam")
        if isinstance(team, dict):
            teams.append((team["organization"], team["name"], "review_requested"))
    assigned = [p["username"] for p in item.get("assignees") or []]
    if action != "opened":
        assigned = (
            data.get("assigneesAdded", assigned) if "assignees" in data.get("changes", ()) else []
        )
    for name in assigned:
        users.setdefault(name, "assign")
    texts: list[str | None] = []
    if action == "opened":
        texts = [item.get("title"), item.get("body")]
    elif action == "commented":
        texts = [(data.get("comment") or {}).get("body")]
    elif action == "reviewed":
        texts = [(data.get("review") or {}).get("body")]
    for text in texts:
        for org, team in TEAM_MENTION.findall(text or "")[:MAX_MENTIONS]:
            teams.append((org, team, "team_mention"))
    # "@org/team" names a team, not the organization's account.
    plain = [TEAM_MENTION.sub("", t or "") for t in texts]
    for name in mentions(*plain):
        users.setdefault(name, "mention")
    return users, teams


class Inbox:
    """Writes threads for the people an event concerns, and tells their sockets."""

    def __init__(self, app: web.Application) -> None:
        self.app = app

    async def on_event(self, event: Event) -> None:
        item = event.data.get("issue") or event.data.get("pullRequest")
        if (
            event.inbound
            or event.type not in ("issue", "pull_request")
            or event.repo_id is None
            or not isinstance(item, dict)
            or not str(item.get("id", "")).isdigit()
        ):
            return  # nothing to write: no mark needed, read again it writes nothing
        store = self.app[STORE]
        repo_id = event.repo_number
        audience = await store.repos.audience(repo_id)
        if audience is None:
            return  # the repository is gone
        actor_id = int(event.actor["id"]) if event.actor and event.actor.get("id") else None
        users, teams = named(event)
        found = await store.users.by_usernames(list(users))
        direct = {u["id"]: users_reason(users, u["username"]) for u in found.values()}
        for org, team, reason in teams:
            for user_id in await store.notifications.team_member_ids(org, team):
                direct.setdefault(user_id, reason)
        # Only who may read the repository now is subscribed or told.
        direct = {u: r for u, r in direct.items() if audience.may_read(u, event)}
        watcher = await store.notifications.repo_watcher(repo_id)
        watchers = {watcher} if watcher is not None and audience.may_read(watcher, event) else set()
        action = event.data.get("action")
        joined = {actor_id: JOINS[action]} if actor_id and action in JOINS else {}
        comment = event.data.get("comment") or {}
        told = await store.notifications.record(
            CURSOR,
            int(event.id),
            int(item["id"]),
            repo_id,
            event.createdAt,
            int(comment["id"]) if str(comment.get("id", "")).isdigit() else None,
            joined,
            {u: r for u, r in direct.items() if u != actor_id},
            watchers,
            actor_id,
        )
        if told:
            await self.tell(int(item["id"]), [u for u in told if audience.may_read(u, event)])

    async def tell(self, issue_id: int, user_ids: list[int]) -> None:
        """Send each person their thread of the issue as it is now, with their unread count."""
        store, base = self.app[STORE], self.app[CONFIG].base_url
        for row in await store.notifications.threads_of(issue_id, user_ids):
            count = await store.notifications.unread_count(row["user_id"])
            self.app[HUB].inbox(
                row["user_id"],
                row["visibility"] == "public",
                {"type": "inbox", "thread": notification(base, row), "unreadCount": count},
            )


def users_reason(users: dict[str, str], username: str) -> str:
    """The reason given for a username, whatever case the text wrote it in."""
    by_key = {name.lower(): reason for name, reason in users.items()}
    return by_key[username.lower()]


async def inbox_ctx(app: web.Application) -> AsyncIterator[None]:
    """Read the log for the inbox on the lease holder, from where the last holder stopped."""
    app[LEADER].add(consumer(app, CURSOR, Inbox(app).on_event))
    yield
