"""The bot's commands, for any chat platform: (chat user, arguments) -> Reply.

Each command is declared once in COMMANDS with its parameters; the Discord front end
registers slash commands from the declarations and the console parses typed lines with
them. `run_command` checks the arguments, calls the service as the chat user (see
ApiClient.as_user) and answers a Reply; every failure becomes a short private Reply.
"""

from __future__ import annotations

from typing import Any

from ..notify.messages import FORK_GREEN, GRAY, GREEN, PURPLE, PUSH_BLUE, RED
from .calls import (
    PAGE_SIZE,
    SNIPPET,
    Call,
    Command,
    Field,
    Param,
    Reply,
    UsageError,
    _cut,
    _error_reply,
    _Failed,
    _first_line,
    _page_footer,
    _read,
    _repo_path,
    _since,
    _sorry,
    check_args,
    log,
    repository,
)
from .client import ApiClient, ServiceError, Unreachable
from .linking import (
    LINK_FIRST,
    link_command,
    link_email_command,
    link_status_command,
    unlink_command,
)


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


async def fork_command(call: Call, args: dict[str, Any]) -> Reply:
    owner, name = repository(args["repository"])
    # An organization is an owner like any other: the fork may go to one the user is in.
    body = {key: args[key] for key in ("name", "owner") if args.get(key)}
    try:
        data = await call.api.request(
            "POST", f"{_repo_path(owner, name)}/fork", chat_id=call.chat_id, body=body
        )
    except ServiceError as exc:
        if exc.status == 401 and (exc.not_linked or not call.api.bot_key):
            return _sorry(f"Forking needs your account. {LINK_FIRST}")
        if exc.status == 409:
            taken = args["name"] or name
            who = f"{args['owner']} already has" if args.get("owner") else "You already have"
            return _sorry(
                f"{who} a repository named {taken}. Pick another name: "
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
            "Fork a repository into your linked account (or an organization of yours)",
            (
                REPOSITORY,
                Param("name", "the fork's name (default: the repository's)"),
                Param("owner", "an organization you belong to (default: you)"),
            ),
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
