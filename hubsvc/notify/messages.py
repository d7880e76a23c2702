"""Events as chat messages: one neutral message per event, rendered per receiver format."""

from __future__ import annotations

import re
from typing import Any

from ..events.shape import Event
from ..links import SiteUrl
from .formats import discord, slack
from .shape import Commit, Message
from .text import cut, one_line, plural

GREEN, RED, PURPLE = 65280, 16711680, 8540383
PUSH_BLUE, YELLOW, GRAY, FORK_GREEN = 5793266, 16705372, 9807270, 5763719
PUSH_SHOWN = 5
COMMIT_LINE_MAX = 100  # a commit's first line as shown in a push (GitHub shows less)
FORMATS = ("discord", "slack", "json")

_OID = re.compile(r"^[0-9a-f]{4,64}$")
_FULL_NAME = re.compile(r"^[^/\s]+/[^/\s]+$")


def _value(value: Any) -> str:
    return str(value) if value not in (None, "", []) else "—"


def _names(people: Any) -> str:
    return ", ".join(p.get("username", "?") for p in people or [] if isinstance(p, dict))


def _who(person: Any) -> str:
    return person.get("username") or "someone" if isinstance(person, dict) else "someone"


def push_summary(data: dict[str, Any]) -> str:
    """What a push did, in GitHub's words: created branch, deleted branch, tagged, …"""
    ref = data.get("ref", "")
    kind, _, name = ref[len("refs/") :].partition("/") if ref.startswith("refs/") else ("", "", ref)
    total = data.get("totalCommits", len(data.get("commits", [])))
    commits = plural(total, "new commit")
    if kind == "tags":
        if data.get("deleted"):
            return f"deleted tag {name}"
        return f"tagged {(data.get('after') or '')[:7]} as {name}"
    if data.get("deleted"):
        return f"deleted branch {name}"
    if data.get("created"):
        return f"created branch {name}" + (f" with {commits}" if total else "")
    if data.get("forced"):
        return f"force-pushed {name} ({commits})"
    return f"pushed {commits} to {name}"


def _issue(msg: Message, event: Event, site: SiteUrl, pull: bool) -> None:
    owner, name = event.repository["owner"], event.repository["name"]
    item = event.data.get("pullRequest" if pull else "issue") or {}
    action = event.data.get("action", "updated")
    kind = "pull request" if pull else "issue"
    number, title = item.get("number"), one_line(str(item.get("title", "")))
    if action == "commented" and isinstance(event.data.get("comment"), dict):
        msg.headline = f"New comment on {kind} #{number}: {title}"
        msg.body = event.data["comment"].get("body") or ""
    else:
        msg.headline = f"{kind.capitalize()} {str(action).replace('_', ' ')}: #{number} {title}"
        msg.body = item.get("body") or ""
    if isinstance(number, int):
        msg.url = site.issue(owner, name, number, pull)
    state = item.get("state")
    if pull:
        msg.colour = (
            PURPLE
            if item.get("merged") or state == "merged"
            else (GREEN if state == "open" else RED)
        )
        head = str(item.get("head", "?"))
        if isinstance(item.get("headRepository"), dict):
            head = f"{item['headRepository'].get('owner', '?')}:{head}"
        msg.fields = [
            ("State", _value(state), True),
            ("Author", _who(item.get("author")), True),
            ("Branches", f"{head} → {item.get('base', '?')}", True),
        ]
    else:
        msg.colour = GREEN if state == "open" else RED
        labels = ", ".join(str(label) for label in item.get("labels") or [])
        msg.fields = [
            ("State", _value(state), True),
            ("Author", _who(item.get("author")), True),
            ("Labels", _value(labels), True),
            ("Assignees", _value(_names(item.get("assignees"))), True),
        ]


def _push(msg: Message, event: Event, site: SiteUrl) -> None:
    owner, name = event.repository["owner"], event.repository["name"]
    data = event.data
    commits = [c for c in data.get("commits") or [] if isinstance(c, dict)]
    total = data.get("totalCommits", len(commits))
    for commit in commits[:PUSH_SHOWN]:
        oid = str(commit.get("oid", ""))
        lines = (commit.get("message") or "").strip().splitlines()
        msg.commits.append(
            Commit(
                label=oid[:7],
                url=site.commit(owner, name, oid) if _OID.match(oid) else msg.url,
                text=cut(lines[0].strip(), COMMIT_LINE_MAX) if lines else "",
                author=str((commit.get("author") or {}).get("name") or ""),
            )
        )
    if total > PUSH_SHOWN:
        msg.more = f"… and {plural(total - PUSH_SHOWN, 'more commit')}"
    if not msg.commits:
        msg.text = "(no new commits)"
    summary = data.get("summary") or push_summary(data)
    msg.headline = (f"{event.actor['username']} " if event.actor else "") + one_line(str(summary))
    after = str(data.get("after") or "")
    if not data.get("deleted") and _OID.match(after) and after.strip("0"):
        msg.url = site.commits(owner, name, after)
    msg.colour = PUSH_BLUE
    msg.fields = [("Total commits", str(total), True), ("Pusher", _who(event.actor), True)]


def _star(msg: Message, event: Event) -> None:
    added = event.data.get("action") == "added"
    count = event.data.get("starCount")
    msg.headline = f"{'Starred' if added else 'Unstarred'} by {_who(event.actor)}"
    stars = plural(count, "star") if isinstance(count, int) else "? stars"
    msg.text = f"{msg.repo} now has {stars}"
    msg.colour = YELLOW if added else GRAY
    msg.fields = [("Repository", msg.repo, True), ("Action", "star" if added else "unstar", True)]


def _fork(msg: Message, event: Event, site: SiteUrl) -> None:
    forkee = event.data.get("forkee") or {}
    forker = event.data.get("forker") or event.actor
    full_name = str(forkee.get("fullName") or "?")
    msg.headline = f"Forked by {_who(forker)}"
    msg.text = f"New fork: {full_name}" if forkee else "New private fork"
    if _FULL_NAME.match(full_name):
        msg.url = site.repo(*full_name.split("/"))
    msg.colour = FORK_GREEN
    msg.fields = [("Repository", msg.repo, True), ("Forker", _who(forker), True)]


PLANNING = ("milestone", "label", "reaction", "release")


def _planning(msg: Message, event: Event, site: SiteUrl) -> None:
    """Milestones, labels, reactions and releases: one line saying what changed."""
    data, kind = event.data, event.type
    action = str(data.get("action", "changed"))
    thing: dict[str, Any] = data[kind] if isinstance(data.get(kind), dict) else {}
    if kind == "milestone":
        what = f"milestone {one_line(str(thing.get('title', '?')))}"
    elif kind == "label":
        what = f"label {one_line(str(thing.get('name', '?')))}"
    elif kind == "release":
        what = f"release {one_line(str(thing.get('name') or thing.get('tagName', '?')))}"
    else:
        subject: dict[str, Any] = data["subject"] if isinstance(data.get("subject"), dict) else {}
        number = subject.get("number")
        what = f"a reaction {thing.get('content', '')} on #{number}"
        if isinstance(number, int):
            msg.url = site.issue(
                event.repository["owner"],
                event.repository["name"],
                number,
                subject.get("kind") == "pull_request",
            )
    msg.headline = f"{_who(event.actor)} {action} {what}"
    msg.colour = GREEN if action in ("created", "published") else GRAY
    msg.fields = [("Repository", msg.repo, True)]


STATUS_COLOURS = {"success": GREEN, "failure": RED, "error": RED, "pending": YELLOW}


def _status(msg: Message, event: Event, site: SiteUrl) -> None:
    data = event.data
    state, context = str(data.get("state", "")), one_line(str(data.get("context", "")))
    sha = str(data.get("sha", ""))
    msg.headline = f"{context}: {state} on {sha[:7]}"
    msg.text = one_line(str(data.get("description") or ""))
    if _OID.match(sha):
        msg.url = site.commit(event.repository["owner"], event.repository["name"], sha)
    msg.colour = STATUS_COLOURS.get(state, GRAY)
    msg.fields = [("Repository", msg.repo, True), ("State", state, True)]


def message(event: Event, urls: str) -> Message:
    """The neutral message of an event; links are built here, never taken from the data."""
    site = SiteUrl.of(urls)
    owner, name = event.repository["owner"], event.repository["name"]
    msg = Message(
        repo=f"{owner}/{name}",
        headline="",
        url=site.repo(owner, name),
        colour=GRAY,
        timestamp=event.createdAt,
    )
    if event.actor:
        msg.actor = event.actor["username"]
        msg.actor_url = site.user(event.actor["username"])
        msg.actor_icon = event.actor.get("avatarUrl")
    if event.type in ("issue", "pull_request"):
        _issue(msg, event, site, event.type == "pull_request")
    elif event.type == "push":
        _push(msg, event, site)
    elif event.type == "star":
        _star(msg, event)
    elif event.type == "status":
        _status(msg, event, site)
    elif event.type in PLANNING:
        _planning(msg, event, site)
    else:
        _fork(msg, event, site)
    if event.inbound:
        # Posted to the inbound webhook: the channel must not take it for the server's word.
        msg.headline = f"Inbound event: {msg.headline}"
    return msg


def _headers(event_type: str, delivery_id: str | None) -> dict[str, str]:
    headers = {"X-Hubsvc-Event": event_type}
    if delivery_id:
        headers["X-Hubsvc-Delivery"] = delivery_id
    return headers


def render(
    event: Event, fmt: str, urls: str, delivery_id: str | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """(JSON body, extra headers) of an event for a receiver of format discord, slack or json.

    urls is the config's base_url (a SiteUrl, which knows web_url); delivery_id, when
    given, goes into X-Hubsvc-Delivery.
    """
    if fmt == "json":
        body = event.to_dict()
    elif fmt == "discord":
        body = discord.body(message(event, urls))
    elif fmt == "slack":
        body = slack.body(message(event, urls))
    else:
        raise ValueError(f"unknown message format {fmt!r}")
    return body, _headers(event.type, delivery_id)


def render_ping(
    fmt: str, urls: str, delivery_id: str | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """(JSON body, extra headers) of a connectivity test in format discord, slack or json."""
    home = SiteUrl.of(urls).home()
    if fmt == "json":
        body: dict[str, Any] = {"type": "ping", "url": home}
    elif fmt == "discord":
        body = discord.ping(home)
    elif fmt == "slack":
        body = slack.ping(home)
    else:
        raise ValueError(f"unknown message format {fmt!r}")
    return body, _headers("ping", delivery_id)


def chat_message(event: Event, base_url: str) -> dict[str, Any]:
    """The server-wide chat webhook's (Discord) body of an event."""
    return render(event, "discord", base_url)[0]


def ping_message(base_url: str) -> dict[str, Any]:
    """The body of an administrator's connectivity test (Discord)."""
    return render_ping("discord", base_url)[0]
