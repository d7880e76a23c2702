"""What a principal may do: the one decision for every route, git, socket, list and feed.

A request's principal is its user (or nobody) and the credential it came with: a
session, a sign-in bearer token, a personal access token with its scopes and
repositories, a git password, the chat bot acting for a linked user, or the bot key
alone. What it may do is the least of two things: the user's own grant on the resource
(`store/access.py`, turned into a role by `web/permissions.py`) and what the
credential allows, its `Caps`. Every route declares the action it performs (`requires`,
read back by the start-up check and the policy table); scopes follow from actions, never
from the shape of a URL. Lists, the feed, search and socket fan-out ask `readable` and
`may_receive` the same question per item.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from .store.access import Readable

# Each action and the personal access token scope that covers it (None: no scope needed).
# GitHub's fine-grained tokens and Gitea's scoped ones, folded into this API's areas:
# repo (contents, git, the repository and its settings), issues (issues and pull
# requests), notifications (the inbox: its own area, as GitHub's classic scope, so a
# script that triages the inbox needs no hold on the account's profile or tokens),
# statuses, org, user, and admin. A write scope holds its read one.
ACTIONS: dict[str, str | None] = {
    "public": None,  # anyone: health, documents, the dashboard, sign-in
    "auth.sign-out": None,  # ends the credential it came with
    "events.stream": "repo:read",  # the WebSocket
    "bot.key": None,  # the chat bot's key itself (link endpoints, its notice queue)
    "repo.read": "repo:read",
    "repo.collaborators": "repo:read",  # who holds what: for writers, never the bot
    "repo.create": "repo:write",
    "repo.fork": "repo:write",
    "repo.star": "repo:write",
    "repo.write": "repo:write",
    "repo.admin": "repo:write",
    "pulls.merge": "repo:write",
    "git.read": "repo:read",
    "git.write": "repo:write",
    "issues.read": "issues:read",
    "issues.create": "issues:write",
    "issues.comment": "issues:write",
    "issues.write": "issues:write",
    "notifications.read": "notifications:read",  # the inbox: GitHub's notifications scope
    "notifications.write": "notifications:write",  # read state and subscriptions
    "statuses.read": "statuses:read",
    "statuses.write": "statuses:write",
    "org.read": "org:read",
    "org.write": "org:write",
    "org.admin": "org:write",
    "user.read": "user:read",
    "user.settings": "user:read",  # e-mail, preferences, the tokens' list: never the bot
    "user.write": "user:write",
    "user.tokens": "user:write",
    "user.sessions": "user:write",  # ending sign-in sessions
    "user.keys": "user:write",  # adding an SSH key to the account: a credential, as a token
    "user.two-factor": "user:write",  # enrolling and removing second factors
    "chat.verify": "user:write",
    "chat.unlink": "user:write",  # by the bot key or the linked user (the handler checks)
    "admin": "admin",
}
AREAS = ("repo", "issues", "notifications", "statuses", "org", "user")
SCOPES = tuple(f"{area}:{level}" for area in AREAS for level in ("read", "write")) + ("admin",)

# A GitHub App's user-to-server token can do only what both the user and the app may;
# here the app's part is this set. It holds what chat commands need (read what the user
# may read, fork, open issues and comment, the chat link) and nothing that would let a
# leaked bot key take an account over: no tokens, password, settings, administration,
# hooks, edits, deletes, visibility, collaborators, merges or git.
BOT_ACTIONS = frozenset(
    {
        "public",
        "bot.key",
        "chat.unlink",
        "repo.read",
        "repo.fork",
        "issues.read",
        "issues.create",
        "issues.comment",
        "notifications.read",
        "statuses.read",
        "org.read",
        "user.read",
    }
)
# Actions a stored credential a script holds may never take: minting tokens, adding
# SSH keys, ending sessions, confirming a chat link and adding or removing a second
# factor need the person, in a session (or their sign-in token).
PERSON_ONLY = frozenset(
    {"user.tokens", "user.keys", "user.sessions", "chat.verify", "user.two-factor"}
)
# Actions that make something outside any named repository: never for a limited token.
PERSON_ONLY_REFUSAL = (
    "a signed-in session is needed for this (creating tokens, adding SSH keys, ending "
    "sessions, verifying a chat link, second factors), "
    "not a personal access token, a git password or the bot key"
)
CREATES = frozenset({"repo.create", "repo.fork"})
# What reading an event of each type needs (feed, search, sockets, replay).
EVENT_ACTIONS = {
    "issue": "issues.read",
    "pull_request": "issues.read",
    "push": "repo.read",
    "star": "repo.read",
    "fork": "repo.read",
    "status": "statuses.read",
    "milestone": "issues.read",
    "label": "issues.read",
    "reaction": "issues.read",
    "release": "repo.read",
}
# Credential kinds, as Identity.via names them; "sshkey" and "deploykey" are git over SSH's
# (a user's key, and a repository's deploy key with repo:read or repo:write on it alone).
KINDS = ("cookie", "bearer", "pat", "basic", "bot", "sshkey", "deploykey")
# What an SSH key opens: git, and nothing else of the API (GitHub's keys the same).
SSH_KINDS = frozenset({"sshkey", "deploykey"})
GIT_ACTIONS = frozenset({"public", "git.read", "git.write"})
SSH_REFUSAL = "an SSH key opens git only"


@dataclass(frozen=True)
class Caps:
    """What a credential allows, whatever its user holds: scopes and repositories by id."""

    kind: str  # one of KINDS
    scopes: frozenset[str] | None = None  # None: every scope
    repositories: frozenset[int] | None = None  # None: every repository

    def allows_scope(self, scope: str | None) -> bool:
        """Whether the scopes hold scope (a write scope holds its read one)."""
        if scope is None or self.scopes is None:
            return True
        return scope in self.scopes or (
            scope.endswith(":read") and scope[: -len("read")] + "write" in self.scopes
        )

    def covers(self, repo_id: int) -> bool:
        """Whether the credential may act on this repository at all."""
        return self.repositories is None or repo_id in self.repositories


FULL = Caps("cookie")


class Decision(NamedTuple):
    """An answer: allowed, or the status and reason to refuse with."""

    ok: bool
    status: int = 200
    reason: str = ""


ALLOW = Decision(True)


def _scope_word(caps: Caps) -> str:
    if caps.kind == "deploykey":
        return "deploy key"
    return "personal access token" if caps.kind == "pat" else "credential"


def decide_action(caps: Caps | None, action: str, *, is_admin: bool = False) -> Decision:
    """May a credential take this action at all, before any resource is looked at."""
    scope = ACTIONS[action]
    if action == "admin" and not is_admin:
        return Decision(False, 403, "administrator only")
    if caps is None:
        return ALLOW
    if caps.kind == "bot" and action not in BOT_ACTIONS:
        return Decision(False, 403, BOT_REFUSAL)
    if caps.kind in SSH_KINDS and action not in GIT_ACTIONS:
        return Decision(False, 403, SSH_REFUSAL)
    if action in PERSON_ONLY and caps.kind in ("pat", "basic", "bot"):
        return Decision(False, 403, PERSON_ONLY_REFUSAL)
    if not caps.allows_scope(scope):
        return Decision(False, 403, f"this {_scope_word(caps)} lacks the {scope} scope")
    if caps.repositories is not None and action in CREATES:
        return Decision(False, 403, "this personal access token is limited to named repositories")
    return ALLOW


def decide(caps: Caps | None, action: str, repo_id: int, repo_name: str) -> Decision:
    """May a credential take this action on this repository (its user's grant checked apart)."""
    first = decide_action(caps, action)
    if not first.ok or caps is None:
        return first
    if not caps.covers(repo_id):
        return Decision(False, 403, f"this {_scope_word(caps)} is not for {repo_name}")
    return ALLOW


def may_receive(caps: Caps | None, event_type: str, repo_id: int | str | None) -> bool:
    """Whether a socket or list opened with caps may carry an event of this type and repository."""
    if caps is None:
        return True
    if repo_id is not None and not caps.covers(int(repo_id)):
        return False
    return decide_action(caps, EVENT_ACTIONS.get(event_type, "repo.read")).ok


def readable(caps: Caps | None) -> Readable | None:
    """What a credential's lists, feed and search may hold beyond its user's reach (None: all)."""
    if caps is None or (caps.scopes is None and caps.repositories is None and caps.kind != "bot"):
        return None
    types = tuple(t for t, action in EVENT_ACTIONS.items() if decide_action(caps, action).ok)
    return Readable(
        caps.repositories,
        decide_action(caps, "repo.read").ok,
        None if len(types) == len(EVENT_ACTIONS) else types,
    )


def requires(action: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare the action a route's handler performs (the start-up check refuses none)."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action}")

    def mark(handler: Callable[..., Any]) -> Callable[..., Any]:
        handler.__action__ = action  # type: ignore[attr-defined]  # read by action_of
        return handler

    return mark


def action_of(handler: Any) -> str | None:
    """The action a handler declared, or None."""
    return getattr(handler, "__action__", None)


BOT_REFUSAL = (
    "outside the chat bot's scope: with X-Chat-Bot-Key the bot may read, search, "
    "fork, open issues and comment for a linked user; sign in as the user "
    "for anything else"
)


TABLE_START = "<!-- policy table: generated by policy.table, compared by tests -->"
TABLE_END = "<!-- end of policy table -->"
_KIND_LABELS = (
    ("cookie", "session or sign-in token"),
    ("bot", "chat bot for a linked user"),
    ("sshkey", "SSH key (git over SSH)"),
)


def table(routes: list[tuple[str, str, str]]) -> str:
    """README's policy table: each action, what each credential kind needs for it, its routes."""
    by_action: dict[str, list[str]] = {}
    for method, template, action in sorted(routes, key=lambda r: (r[1], r[0])):
        by_action.setdefault(action, []).append(f"`{method} {template}`")
    head = ["action", "personal access token needs"] + [label for _, label in _KIND_LABELS]
    lines = ["| " + " | ".join(head + ["routes"]) + " |", "|" + "---|" * (len(head) + 1)]
    for action in ACTIONS:
        if action not in by_action:
            continue
        scope = ACTIONS[action]
        pat = "never" if action in PERSON_ONLY else (f"`{scope}`" if scope else "nothing")
        if action in CREATES:
            pat += ", and no repository list"
        cells = [f"`{action}`", pat]
        for kind, _ in _KIND_LABELS:
            if action == "bot.key":
                cells.append("only with `X-Chat-Bot-Key`")
            else:
                allowed = decide_action(Caps(kind), action, is_admin=True).ok
                cells.append(
                    ("yes" if allowed else "no")
                    + (" (an administrator)" if action == "admin" and allowed else "")
                )
        lines.append("| " + " | ".join(cells + [", ".join(by_action[action])]) + " |")
    return "\n".join([TABLE_START, *lines, TABLE_END])
