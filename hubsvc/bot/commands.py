"""The bot's commands, for any chat platform: (chat user, arguments) -> Reply.

Each command is declared once in COMMANDS with its parameters; the Discord front end
registers slash commands from the declarations and the console parses typed lines with
them. `run_command` checks the arguments, calls the service as the chat user (see
ApiClient.as_user) and answers a Reply; every failure becomes a short private Reply.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from ..notify.messages import FORK_GREEN, GRAY, GREEN, PURPLE, PUSH_BLUE, RED
from .client import ApiClient, ServiceError, Unreachable, segment

log = logging.getLogger("hubsvc.bot")

PAGE_SIZE = 10
MAX_PAGE = 10000
SNIPPET = 200  # characters of a body or description shown in a list


@dataclass
class Field:
    name: str
    value: str
    inline: bool = False


@dataclass
class Reply:
    """What a command answers; the front ends only change its form."""

    title: str
    description: str = ""
    fields: list[Field] = field(default_factory=list)
    colour: int = PUSH_BLUE
    private: bool = False  # only the invoking user sees it
    url: str | None = None
    footer: str = ""


@dataclass(frozen=True)
class Param:
    name: str
    description: str
    required: bool = False
    choices: tuple[str, ...] = ()
    integer: bool = False  # a whole number from 1 to MAX_PAGE
    greedy: bool = False  # typed in the console, further plain words join it


@dataclass
class Call:
    """One invocation: the service client, the chat user, and whether they are linked."""

    api: ApiClient
    chat_id: str
    linked: bool | None = None  # learnt from the first read, so later ones ask once


@dataclass(frozen=True)
class Command:
    name: str
    description: str
    params: tuple[Param, ...]
    handler: Callable[[Call, dict[str, Any]], Awaitable[Reply]]
    private: bool = False  # always answered privately

    def usage(self) -> str:
        parts = [f"/{self.name}"]
        for p in self.params:
            shown = "|".join(p.choices) or ("N" if p.integer else p.name.upper())
            parts.append(f"<{p.name}>" if p.required else f"[{p.name}:{shown}]")
        return " ".join(parts)


class UsageError(Exception):
    """Arguments the command cannot take; the message says what to type."""


# Replies


def _cut(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _first_line(text: str) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0] if lines else ""


def _sorry(text: str) -> Reply:
    return Reply(title="Sorry", description=text, colour=RED, private=True)


def _page_footer(command: str, args: dict[str, Any], page: int, more: bool) -> str:
    if not more:
        return f"Page {page}" if page > 1 else ""
    named = " ".join(f"{k}:{v}" for k, v in args.items() if v is not None and k != "page")
    return f"Page {page} · next: /{command} {named} page:{page + 1}"


def _since(iso: str | None) -> str:
    return (iso or "")[:10]


# Arguments

REPO_RE = re.compile(r"^([^/\s]+)/([^/\s]+)$")


def repository(value: str) -> tuple[str, str]:
    """owner/name from "owner/name", "owner/name.git" or a repository's web address."""
    text = value.strip()
    if text.startswith(("http://", "https://")):
        text = "/".join(urlsplit(text).path.strip("/").split("/")[:2])
    if text.endswith(".git"):
        text = text[:-4]
    match = REPO_RE.match(text)
    if not match:
        raise UsageError(
            f"Give the repository as owner/name, e.g. ada/tool (not {_cut(value, 100)!r})."
        )
    return match.group(1), match.group(2)


def check_args(command: Command, given: dict[str, Any]) -> dict[str, Any]:
    """Given arguments checked against the declaration: choices, whole numbers, required."""
    known = {p.name: p for p in command.params}
    unknown = [name for name in given if name not in known]
    if unknown:
        raise UsageError(f"/{command.name} takes no {unknown[0]!r}. Usage: {command.usage()}")
    args: dict[str, Any] = {}
    for p in command.params:
        value = given.get(p.name)
        if isinstance(value, str):
            value = value.strip() or None
        if value is None:
            if p.required:
                raise UsageError(f"/{command.name} needs {p.name}. Usage: {command.usage()}")
            args[p.name] = None
            continue
        if p.integer:
            try:
                value = int(value)
            except (TypeError, ValueError):
                value = 0
            if not 1 <= value <= MAX_PAGE:
                raise UsageError(f"{p.name} must be a whole number from 1 to {MAX_PAGE}.")
        elif p.choices:
            value = str(value).lower()
            if value not in p.choices:
                raise UsageError(f"{p.name} must be one of: {', '.join(p.choices)}.")
        args[p.name] = value
    return args


# The service's answers, in a few words


def _error_reply(exc: ServiceError | Unreachable, thing: str, linked: bool | None) -> Reply:
    """A failed call in a few polite words; linked=False adds the hint to link on a 404."""
    if isinstance(exc, Unreachable):
        return _sorry("The service can't be reached right now. Please try again in a little while.")
    status = exc.status
    if status == 404:
        text = f"{thing} wasn't found."
        if linked is False:
            text += " If it's private, link your account with /link to see it."
        return _sorry(text)
    if status == 403:
        return _sorry("You don't have permission to do that.")
    if status == 429:
        wait = exc.retry_after or 60
        return _sorry(
            f"That's a lot of requests at once. Please try again in {wait} second"
            f"{'s' if wait != 1 else ''}."
        )
    if status == 401:
        return _sorry(
            "The service refused the bot's key, so it can't do that. Please let "
            "whoever runs the bot know."
        )
    if status >= 500:
        return _sorry(
            f"The service ran into a problem (error {status}). Please try again in a moment."
        )
    if status >= 400:
        return _sorry(f"The service couldn't do that: {_cut(exc.message, 300)}")
    return _sorry(
        "The service sent an answer the bot couldn't read. Please let whoever runs the bot know."
    )


class _Failed(Exception):
    """A command's early answer (an error already turned into a reply)."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply


async def _read(
    call: Call,
    path: str,
    thing: str,
    params: dict[str, Any] | None = None,
    maybe_private: bool = True,
) -> tuple[dict[str, Any], bool]:
    """A read as the chat user (anonymous when not linked): (answer, linked).

    maybe_private: a 404 may mean the thing is private, so an unlinked user is told
    that linking could show it.
    """
    try:
        data, call.linked = await call.api.as_user(
            call.chat_id, "GET", path, params=params, linked=call.linked
        )
        return data, call.linked
    except ServiceError as exc:
        raise _Failed(_error_reply(exc, thing, exc.linked if maybe_private else None)) from None


async def _bot(
    call: Call, method: str, path: str, body: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A call of the chat link endpoints, with the bot key alone."""
    try:
        return await call.api.request(method, path, body=body)
    except ServiceError as exc:
        raise _Failed(_error_reply(exc, "That", None)) from None


# The commands


def _repo_path(owner: str, name: str) -> str:
    return f"/api/repositories/{segment(owner)}/{segment(name)}"


async def _load_repo(call: Call, spec: str) -> tuple[dict[str, Any], bool]:
    owner, name = repository(spec)
    data, linked = await _read(call, _repo_path(owner, name), f"Repository {owner}/{name}")
    return data["repo"], linked


async def repo_command(call: Call, args: dict[str, Any]) -> Reply:
    repo, _ = await _load_repo(call, args["repository"])
    fields = [
        Field("Visibility", repo["visibility"], True),
        Field("Default branch", repo["defaultBranch"], True),
        Field("Stars", str(repo["starCount"]), True),
        Field("Forks", str(repo["forkCount"]), True),
        Field("Owner", repo["owner"]["username"], True),
        Field("Updated", _since(repo["updatedAt"]), True),
    ]
    if repo.get("parent"):
        fields.append(Field("Fork of", f"{repo['parent']['owner']}/{repo['parent']['name']}", True))
    fields.append(Field("Clone", repo["cloneUrl"]))
    return Reply(
        title=repo["fullName"],
        url=repo["url"],
        colour=PUSH_BLUE,
        description=_cut(repo["description"], 1000) or "No description.",
        fields=fields,
        private=repo["private"],
    )


STATE_COLOURS = {"open": GREEN, "closed": RED, "merged": PURPLE, "all": GRAY}


def _people(people: list[dict[str, Any]]) -> str:
    return ", ".join(p["username"] for p in people)


async def _item_list(call: Call, args: dict[str, Any], pulls: bool) -> Reply:
    repo, _ = await _load_repo(call, args["repository"])
    state, page = args["state"] or "open", args["page"] or 1
    kind = "pulls" if pulls else "issues"
    data, _ = await _read(
        call,
        f"{_repo_path(repo['owner']['username'], repo['name'])}/{kind}",
        f"Repository {repo['fullName']}",
        {"state": state, "limit": PAGE_SIZE, "offset": (page - 1) * PAGE_SIZE},
    )
    items = data["pullRequests" if pulls else "issues"]
    noun = "pull requests" if pulls else "issues"
    fields = []
    for item in items:
        facts = [
            item["state"],
            f"by {item['author']['username']}" if item["author"] else None,
            f"{item['commentCount']} comment{'s' if item['commentCount'] != 1 else ''}",
        ]
        if pulls:
            head = item["head"]
            if item.get("headRepository"):
                head = f"{item['headRepository']['owner']}:{head}"
            facts.append(f"{head} → {item['base']}")
        if item["labels"]:
            facts.append("labels: " + ", ".join(item["labels"]))
        if item["assignees"]:
            facts.append("assigned: " + _people(item["assignees"]))
        value = " · ".join(f for f in facts if f)
        snippet = _cut(_first_line(item["body"]), SNIPPET)
        fields.append(
            Field(
                f"#{item['number']} {item['title']}",
                "\n".join(v for v in (value, snippet, item["url"]) if v),
            )
        )
    label = "" if state == "all" else f"{state} "
    return Reply(
        title=f"{label.capitalize()}{noun if label else noun.capitalize()} in {repo['fullName']}",
        url=repo["url"],
        colour=STATE_COLOURS[state],
        private=repo["private"],
        description="" if items else f"No {label}{noun}" + (" on this page." if page > 1 else "."),
        fields=fields,
        footer=_page_footer(
            kind if not pulls else "prs",
            {"repository": repo["fullName"], "state": state},
            page,
            data["hasMore"],
        ),
    )


async def issues_command(call: Call, args: dict[str, Any]) -> Reply:
    return await _item_list(call, args, pulls=False)


async def prs_command(call: Call, args: dict[str, Any]) -> Reply:
    return await _item_list(call, args, pulls=True)


async def commits_command(call: Call, args: dict[str, Any]) -> Reply:
    repo, _ = await _load_repo(call, args["repository"])
    branch, page = args["branch"] or repo["defaultBranch"], args["page"] or 1
    data, _ = await _read(
        call,
        f"{_repo_path(repo['owner']['username'], repo['name'])}/commits",
        f"Branch {branch} in {repo['fullName']}",
        {"branch": branch, "limit": PAGE_SIZE, "skip": (page - 1) * PAGE_SIZE},
        maybe_private=False,
    )
    lines = []
    for commit in data["commits"]:
        message = _cut(_first_line(commit["message"]), 120) or "(no message)"
        author = commit["author"]
        lines.append(
            f"`{commit['oid'][:7]}` {message} — {author['name']}, {_since(author['date'])}"
        )
    if not lines:
        lines.append(f"No commits on {branch}" + (" on this page." if page > 1 else " yet."))
    return Reply(
        title=f"Commits on {branch} in {repo['fullName']}",
        url=repo["url"],
        colour=PUSH_BLUE,
        private=repo["private"],
        description="\n".join(lines),
        footer=_page_footer(
            "commits",
            {"repository": repo["fullName"], "branch": args["branch"]},
            page,
            data["hasMore"],
        ),
    )


SEARCH_TYPES = ("repositories", "issues", "pulls", "users")


def _search_field(result: dict[str, Any]) -> Field:
    kind = result["type"]
    name = result["title"]
    if kind in ("issue", "pull_request"):
        where = result["repository"]
        name = f"{where['owner']}/{where['name']}#{result['number']} {result['title']}"
        extra = f"{result['state']} {'pull request' if kind == 'pull_request' else 'issue'}"
    elif kind == "repository":
        extra = f"{result['visibility']} · {result['starCount']} stars"
    else:
        extra = "user"
    snippet = _cut(_first_line(result["description"]), SNIPPET)
    return Field(name, "\n".join(v for v in (extra, snippet, result["url"]) if v))


async def search_command(call: Call, args: dict[str, Any]) -> Reply:
    query, kind, page = args["query"], args["type"] or "repositories", args["page"] or 1
    if len(query) > 256:
        raise UsageError("The search text can be at most 256 characters.")
    data, linked = await _read(
        call,
        "/api/search",
        "That",
        {"q": query, "type": kind, "limit": PAGE_SIZE, "offset": (page - 1) * PAGE_SIZE},
    )
    results = data["results"]
    # Only the asker may see private hits; the issue results do not say whether their
    # repository is private, so a linked user's issue hits are answered privately.
    private = any(r.get("private") for r in results) or (
        linked and kind in ("issues", "pulls") and bool(results)
    )
    return Reply(
        title=f'Search "{_cut(query, 80)}" in {kind}',
        colour=PUSH_BLUE,
        private=private,
        fields=[_search_field(r) for r in results],
        description="" if results else "Nothing found" + (" on this page." if page > 1 else "."),
        footer=_page_footer("search", {"query": f'"{query}"', "type": kind}, page, data["hasMore"]),
    )


LINK_FIRST = "Link your chat account first: /link (or /link-email your@address)."


async def fork_command(call: Call, args: dict[str, Any]) -> Reply:
    owner, name = repository(args["repository"])
    body = {"name": args["name"]} if args["name"] else {}
    try:
        data = await call.api.request(
            "POST", f"{_repo_path(owner, name)}/fork", chat_id=call.chat_id, body=body
        )
    except ServiceError as exc:
        if exc.status == 401 and (exc.not_linked or not call.api.bot_key):
            return _sorry(f"Forking needs your account. {LINK_FIRST}")
        if exc.status == 409:
            taken = args["name"] or name
            return _sorry(
                f"You already have a repository named {taken}. Pick another name: "
                f"/fork {owner}/{name} name:new-name"
            )
        return _error_reply(exc, f"Repository {owner}/{name}", True)
    fork = data["repo"]
    return Reply(
        title=f"Forked {owner}/{name}",
        url=fork["url"],
        colour=FORK_GREEN,
        description=f"Your fork: {fork['fullName']}",
        private=fork["private"],
        fields=[
            Field("Fork", fork["fullName"], True),
            Field("Source", f"{owner}/{name}", True),
            Field("Clone", fork["cloneUrl"]),
        ],
    )


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


REPOSITORY = Param("repository", "owner/name, e.g. ada/tool", required=True)
PAGE = Param("page", "page of results, from 1", integer=True)

COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command("repo", "Show a repository", (REPOSITORY,), repo_command),
        Command(
            "search",
            "Search repositories, issues, pull requests or users",
            (
                Param("query", "what to look for", required=True, greedy=True),
                Param("type", "what to search (default: repositories)", choices=SEARCH_TYPES),
                PAGE,
            ),
            search_command,
        ),
        Command(
            "issues",
            "List a repository's issues",
            (REPOSITORY, Param("state", "default: open", choices=("open", "closed", "all")), PAGE),
            issues_command,
        ),
        Command(
            "prs",
            "List a repository's pull requests",
            (
                REPOSITORY,
                Param("state", "default: open", choices=("open", "closed", "merged", "all")),
                PAGE,
            ),
            prs_command,
        ),
        Command(
            "commits",
            "List a repository's recent commits",
            (
                REPOSITORY,
                Param("branch", "a branch, tag or commit (default: the default branch)"),
                PAGE,
            ),
            commits_command,
        ),
        Command(
            "fork",
            "Fork a repository into your linked account",
            (REPOSITORY, Param("name", "the fork's name (default: the repository's)")),
            fork_command,
        ),
        Command(
            "link",
            "Link your chat account to your account on the service",
            (),
            link_command,
            private=True,
        ),
        Command(
            "link-email",
            "Link your account through a link sent to its e-mail address",
            (Param("address", "your account's e-mail address", required=True),),
            link_email_command,
            private=True,
        ),
        Command("unlink", "Remove the link of your chat account", (), unlink_command, private=True),
        Command(
            "link-status",
            "Whether your chat account is linked, and to whom",
            (),
            link_status_command,
            private=True,
        ),
    )
}


async def run_command(api: ApiClient, chat_id: str, name: str, given: dict[str, Any]) -> Reply:
    """Run one command for a chat user; never raises, every failure is a private Reply."""
    command = COMMANDS.get(name.lstrip("/").lower())
    if command is None:
        return _sorry(
            f"There is no command /{name.lstrip('/')}. The commands: "
            + ", ".join(f"/{n}" for n in COMMANDS)
            + "."
        )
    try:
        reply = await command.handler(Call(api, chat_id), check_args(command, given))
    except UsageError as exc:
        return _sorry(str(exc))
    except _Failed as exc:
        return exc.reply
    except (ServiceError, Unreachable) as exc:
        return _error_reply(exc, "That", None)
    except Exception:
        log.exception("/%s failed for chat user %s", command.name, chat_id)
        return _sorry("Something went wrong in the bot. Please try again later.")
    if command.private:
        reply.private = True
    return reply
