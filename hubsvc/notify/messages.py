"""Events as Discord-compatible chat messages (embeds with title, fields, colour)."""

from __future__ import annotations

from typing import Any

from ..events import Event

GREEN, RED, PURPLE = 65280, 16711680, 8540383
PUSH_BLUE, YELLOW, GRAY, FORK_GREEN = 5793266, 16705372, 9807270, 5763719
PUSH_SHOWN = 5

# Discord's limits; longer text is cut so the receiver never rejects the body.
TITLE_MAX, DESCRIPTION_MAX, FIELD_MAX = 256, 4096, 1024


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _field(name: str, value: Any, inline: bool = True) -> dict[str, Any]:
    text = str(value) if value not in (None, "", []) else "—"
    return {"name": name, "value": _cut(text, FIELD_MAX), "inline": inline}


def _names(people: list[dict[str, Any]] | None) -> str:
    return ", ".join(p["username"] for p in people or []) or "—"


def _who(person: dict[str, Any] | None) -> str:
    return person["username"] if person else "someone"


def _issue_embed(repo: str, event: Event) -> dict[str, Any]:
    issue = event.data.get("issue", {})
    action = event.data.get("action", "updated")
    embed = {
        "title": f"[{repo}] Issue {action}: #{issue.get('number')} {issue.get('title', '')}",
        "description": issue.get("body", ""),
        "url": issue.get("url"),
        "color": GREEN if issue.get("state") == "open" else RED,
        "fields": [
            _field("State", issue.get("state")),
            _field("Author", _who(issue.get("author"))),
            _field("Labels", ", ".join(issue.get("labels", []))),
            _field("Assignees", _names(issue.get("assignees"))),
        ],
    }
    if "comment" in event.data:
        embed["fields"].append(_field("Comment", event.data["comment"].get("body"), False))
    return embed


def _pull_embed(repo: str, event: Event) -> dict[str, Any]:
    pull = event.data.get("pullRequest", {})
    action = event.data.get("action", "updated")
    state = pull.get("state")
    colour = PURPLE if pull.get("merged") else GREEN if state == "open" else RED
    head = pull.get("head", "?")
    if pull.get("headRepository"):
        head = f"{pull['headRepository']['owner']}:{head}"
    embed = {
        "title": f"[{repo}] Pull request {action}: #{pull.get('number')} {pull.get('title', '')}",
        "description": pull.get("body", ""),
        "url": pull.get("url"),
        "color": colour,
        "fields": [
            _field("State", state),
            _field("Author", _who(pull.get("author"))),
            _field("Branches", f"{head} → {pull.get('base', '?')}"),
        ],
    }
    if "comment" in event.data:
        embed["fields"].append(_field("Comment", event.data["comment"].get("body"), False))
    return embed


def push_summary(data: dict[str, Any]) -> str:
    """What a push did, in GitHub's words: created branch, deleted branch, tagged, …"""
    ref = data.get("ref", "")
    kind, _, name = ref[len("refs/"):].partition("/") if ref.startswith("refs/") else ("", "", ref)
    total = data.get("totalCommits", len(data.get("commits", [])))
    commits = f"{total} new commit{'s' if total != 1 else ''}"
    if kind == "tags":
        if data.get("deleted"):
            return f"deleted tag {name}"
        return f"tagged {data.get('after', '')[:7]} as {name}"
    if data.get("deleted"):
        return f"deleted branch {name}"
    if data.get("created"):
        return f"created branch {name}" + (f" with {commits}" if total else "")
    if data.get("forced"):
        return f"force-pushed {name} ({commits})"
    return f"pushed {commits} to {name}"


def _push_embed(repo: str, event: Event, base_url: str) -> dict[str, Any]:
    data = event.data
    total = data.get("totalCommits", len(data.get("commits", [])))
    lines = []
    for commit in data.get("commits", [])[:PUSH_SHOWN]:
        first_line = (commit.get("message") or "").strip().splitlines()[0:1]
        author = (commit.get("author") or {}).get("name", "")
        lines.append(f"`{commit.get('oid', '')[:7]}` {first_line[0] if first_line else ''}"
                     + (f" — {author}" if author else ""))
    if total > PUSH_SHOWN:
        lines.append(f"… and {total - PUSH_SHOWN} more")
    owner_name = f"{event.repository['owner']}/{event.repository['name']}"
    summary = data.get("summary") or push_summary(data)
    return {
        "title": f"[{repo}] " + (f"{event.actor['username']} " if event.actor else "") + summary,
        "description": "\n".join(lines) if lines else "(no new commits)",
        "url": f"{base_url}/{owner_name}",
        "color": PUSH_BLUE,
        "fields": [_field("Total commits", total), _field("Pusher", _who(event.actor))],
    }


def _star_embed(repo: str, event: Event, base_url: str) -> dict[str, Any]:
    added = event.data.get("action") == "added"
    return {
        "title": f"[{repo}] {'Starred' if added else 'Unstarred'} by {_who(event.actor)}",
        "description": f"{repo} now has {event.data.get('starCount', '?')} stars",
        "url": f"{base_url}/{repo}",
        "color": YELLOW if added else GRAY,
        "fields": [_field("Repository", repo), _field("Action", "star" if added else "unstar")],
    }


def _fork_embed(repo: str, event: Event, base_url: str) -> dict[str, Any]:
    forkee = event.data.get("forkee") or {}
    forker = event.data.get("forker") or event.actor
    return {
        "title": f"[{repo}] Forked by {_who(forker)}",
        "description": f"New fork: {forkee.get('fullName', '?')}",
        "url": forkee.get("url") or f"{base_url}/{repo}",
        "color": FORK_GREEN,
        "fields": [_field("Repository", repo), _field("Forker", _who(forker))],
    }


def chat_message(event: Event, base_url: str) -> dict[str, Any]:
    """The webhook body for an event: {"username", "embeds": [embed]}."""
    repo = f"{event.repository['owner']}/{event.repository['name']}"
    if event.type == "issue":
        embed = _issue_embed(repo, event)
    elif event.type == "pull_request":
        embed = _pull_embed(repo, event)
    elif event.type == "push":
        embed = _push_embed(repo, event, base_url)
    elif event.type == "star":
        embed = _star_embed(repo, event, base_url)
    else:
        embed = _fork_embed(repo, event, base_url)
    embed["title"] = _cut(embed["title"], TITLE_MAX)
    embed["description"] = _cut(embed.get("description") or "", DESCRIPTION_MAX)
    if not embed.get("url"):
        embed["url"] = f"{base_url}/{repo}"
    embed["timestamp"] = event.createdAt
    if event.actor:
        embed["author"] = {"name": event.actor["username"], "icon_url": event.actor["avatarUrl"]}
    return {"username": "hubsvc", "embeds": [embed]}


def ping_message(base_url: str) -> dict[str, Any]:
    """The body of an administrator's connectivity test."""
    return {"username": "hubsvc", "content": "hubsvc webhook test",
            "embeds": [{"title": "hubsvc webhook test", "description": "It works.",
                        "url": base_url, "color": GREEN}]}
