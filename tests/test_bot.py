"""The companion chat bot against a real hubsvc process: the command layer, the console
front end as a subprocess, and the Discord front end's conversion to real discord.py
objects (Discord itself is never reached: its REST API is stood in for locally)."""

from __future__ import annotations

import asyncio
import email
import email.policy
import json
import os
import re
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import discord
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from hubsvc.bot import commands, discord_front
from hubsvc.bot.calls import Field, Reply
from hubsvc.bot.client import ApiClient
from hubsvc.bot.commands import COMMANDS, run_command
from hubsvc.bot.console import parse_line
from hubsvc.notify.messages import FORK_GREEN, GRAY, GREEN, PURPLE, PUSH_BLUE, RED

from .gitcli import ENV
from .server import ROOT, ServerProcess, free_port

BOT_KEY = "b" * 32
PASSWORD = "correct-horse-42"
ADA_CHAT, BOB_CHAT, NOBODY_CHAT = "1001", "1002", "3001"
# One sample invocation of every command, valid as arguments go.
EVERY_COMMAND = [
    ("repo", {"repository": "ada/tool"}),
    ("search", {"query": "parser"}),
    ("issues", {"repository": "ada/tool"}),
    ("prs", {"repository": "ada/tool"}),
    ("commits", {"repository": "ada/tool"}),
    ("fork", {"repository": "ada/tool", "name": "another"}),
    ("link", {}),
    ("link-email", {"address": "ada@example.com"}),
    ("unlink", {}),
    ("link-status", {}),
]


# The service, seeded once per module


def _sign_up(server: ServerProcess, name: str) -> dict[str, Any]:
    status, body = server.request(
        "POST",
        "/auth/sign-up",
        {
            "email": f"{name}@example.com",
            "username": name,
            "password": PASSWORD,
            "name": name.title(),
        },
    )
    assert status == 201, body
    return {
        "id": body["user"]["id"],
        "name": name,
        "headers": {"Authorization": f"Bearer {body['token']}"},
    }


def _call(
    server: ServerProcess,
    user: dict,
    method: str,
    path: str,
    body: dict | None = None,
    expect: int = 200,
) -> dict:
    status, answer = server.request(method, path, body, user["headers"])
    assert status == expect, (method, path, status, answer)
    return answer


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **ENV},
        check=True,
        capture_output=True,
        timeout=60,
    )


def _push_commits(
    server: ServerProcess, user: dict, repo: str, branch: str, messages: list[str], work: Path
) -> None:
    url = server.url.replace("http://", f"http://{user['name']}:{PASSWORD}@") + f"/{repo}.git"
    folder = work / f"{repo.replace('/', '-')}-{branch}"
    _git("clone", "-q", url, str(folder), cwd=work)
    _git("checkout", "-q", "-B", branch, cwd=folder)
    for message in messages:
        _git("commit", "-q", "--allow-empty", "-m", message, cwd=folder)
    _git("push", "-q", "origin", branch, cwd=folder)


def link(server: ServerProcess, user: dict, chat_id: str, token: str | None = None) -> None:
    """The link flow as the service runs it: a token for the chat id, verified by the user."""
    if token is None:
        status, body = server.request(
            "POST", "/api/chat/link/generate", {"chatId": chat_id}, {"X-Chat-Bot-Key": BOT_KEY}
        )
        assert status == 200, body
        token = body["token"]
    _call(
        server, user, "POST", "/api/chat/link/verify", {"token": token, "serviceUserId": user["id"]}
    )


def seed(server: ServerProcess, work: Path) -> dict[str, Any]:
    ada, bob, cyd = (_sign_up(server, n) for n in ("ada", "bob", "cyd"))
    repos = "/api/repositories"
    _call(
        server,
        ada,
        "POST",
        repos,
        {"name": "tool", "description": "A tool for parsing", "autoInit": True},
        201,
    )
    _call(
        server,
        ada,
        "POST",
        repos,
        {
            "name": "secret",
            "description": "Secret plans",
            "visibility": "private",
            "autoInit": True,
        },
        201,
    )
    _call(
        server,
        ada,
        "POST",
        repos,
        {"name": "trunked", "defaultBranch": "trunk", "autoInit": True},
        201,
    )
    broken = _call(server, ada, "POST", repos, {"name": "broken"}, 201)["repo"]
    for n in range(1, 13):
        _call(
            server,
            ada,
            "POST",
            f"{repos}/ada/tool/issues",
            {"title": f"Parser bug {n}", "body": f"Case {n} fails\nsecond line"},
            201,
        )
    old = _call(server, ada, "POST", f"{repos}/ada/tool/issues", {"title": "Old crash"}, 201)
    _call(
        server,
        ada,
        "PATCH",
        f"{repos}/ada/tool/issues/{old['issue']['number']}",
        {"state": "closed"},
    )
    _call(server, ada, "POST", f"{repos}/ada/secret/issues", {"title": "Hidden leak"}, 201)
    _push_commits(server, ada, "ada/tool", "main", [f"Change {n}" for n in range(1, 12)], work)

    _call(server, bob, "POST", f"{repos}/ada/tool/fork", {}, 201)
    _push_commits(server, bob, "bob/tool", "docs", ["Better docs"], work)
    _push_commits(server, bob, "bob/tool", "idea", ["Faster parser"], work)
    fork = {"owner": "bob", "name": "tool"}
    numbers = {}
    for title, head in (("Better docs", "docs"), ("Faster parser", "idea"), ("Open idea", "main")):
        numbers[title] = _call(
            server,
            bob,
            "POST",
            f"{repos}/ada/tool/pulls",
            {"title": title, "head": head, "headRepository": fork},
            201,
        )["pullRequest"]["number"]
    _call(
        server,
        ada,
        "POST",
        f"{repos}/ada/tool/pulls/{numbers['Better docs']}/merge",
        {"method": "fast-forward"},
    )
    _call(
        server,
        bob,
        "PATCH",
        f"{repos}/ada/tool/pulls/{numbers['Faster parser']}",
        {"state": "closed"},
    )

    # A repository whose git data is gone: the service answers 500 for its commits.
    folder = (
        server.data_dir
        / "repositories"
        / f"{int(broken['id']) // 1000:03d}"
        / f"{broken['id']}.git"
    )
    assert folder.is_dir()
    subprocess.run(["rm", "-rf", str(folder)], check=True)

    link(server, ada, ADA_CHAT)
    link(server, bob, BOB_CHAT)
    return {"ada": ada, "bob": bob, "cyd": cyd}


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    root = tmp_path_factory.mktemp("bot")
    server = ServerProcess(root / "data", {"chat": {"bot_key": BOT_KEY}}).start()
    try:
        server.users = seed(server, root)
        yield server
    finally:
        server.stop()


@pytest.fixture
def limited(tmp_path):
    """A service that allows each client four requests, then one a minute."""
    server = ServerProcess(
        tmp_path / "data",
        {
            "chat": {"bot_key": BOT_KEY},
            "rate_limit": {"enabled": True, "burst": 4, "per_minute": 1},
        },
    ).start()
    yield server
    server.stop()


class Stub:
    """A stand-in service (in this test's loop) that answers every request the same way."""

    def __init__(self, status: int, text: str, content_type: str = "application/json"):
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.status, self.text, self.content_type = status, text, content_type
        self.server = TestServer(app, host="127.0.0.1")
        self.paths: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.paths.append(request.path)
        return web.Response(status=self.status, text=self.text, content_type=self.content_type)

    async def __aenter__(self) -> str:
        await self.server.start_server()
        return str(self.server.make_url("")).rstrip("/")

    async def __aexit__(self, *exc: Any) -> None:
        await self.server.close()


def unreachable_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


# Discord's limits, checked on every reply the tests see


def check_embed(reply: Reply) -> discord.Embed:
    embed = discord_front.to_embed(reply)
    assert isinstance(embed, discord.Embed)
    assert embed.title and len(embed.title) <= 256
    assert embed.description is None or 0 < len(embed.description) <= 4096
    assert len(embed.fields) <= 25
    for item in embed.fields:
        assert 0 < len(item.name) <= 256 and 0 < len(item.value) <= 1024
    assert embed.footer.text is None or 0 < len(embed.footer.text) <= 2048
    assert len(embed) <= 6000
    assert embed.colour.value == reply.colour
    embed.to_dict()
    return embed


async def ask(base: str, chat_id: str, command: str, /, key: str = BOT_KEY, **args: Any) -> Reply:
    """One command through the command layer, its reply checked as a Discord embed too."""
    async with ApiClient(base, key) as api:
        reply = await run_command(api, chat_id, command, args)
    check_embed(reply)
    return reply


def is_sorry(reply: Reply, *phrases: str) -> bool:
    text = reply.description
    return (
        reply.title == "Sorry"
        and reply.private
        and reply.colour == RED
        and all(p in text for p in phrases)
        and "Traceback" not in text
        and len(text) < 400
    )


# The command layer


async def test_repo_public_private_linked_and_not(service):
    url = service.url
    for chat in (ADA_CHAT, NOBODY_CHAT):
        for spec in ("ada/tool", f"{url}/ada/tool", "ada/tool.git"):
            reply = await ask(url, chat, "repo", repository=spec)
            assert reply.title == "ada/tool" and not reply.private
            assert reply.url == f"{url}/api/repositories/ada/tool" and reply.colour == PUSH_BLUE
            assert reply.description == "A tool for parsing"
            values = {f.name: f.value for f in reply.fields}
            assert values["Visibility"] == "public" and values["Default branch"] == "main"
            assert values["Clone"] == f"{url}/ada/tool.git"
    reply = await ask(url, ADA_CHAT, "repo", repository="ada/secret")
    assert reply.title == "ada/secret" and reply.private  # never shown to a channel
    assert {f.name: f.value for f in reply.fields}["Visibility"] == "private"
    reply = await ask(url, NOBODY_CHAT, "repo", repository="ada/secret")
    assert is_sorry(reply, "ada/secret wasn't found", "/link")
    # Linked, but bob may not read it: the same 404, without the hint to link.
    reply = await ask(url, BOB_CHAT, "repo", repository="ada/secret")
    assert is_sorry(reply, "ada/secret wasn't found") and "/link" not in reply.description
    reply = await ask(url, BOB_CHAT, "repo", repository="bob/tool")
    assert {f.name: f.value for f in reply.fields}["Fork of"] == "ada/tool"


async def test_issues_default_open_paged_by_has_more(service):
    url = service.url
    reply = await ask(url, NOBODY_CHAT, "issues", repository="ada/tool")
    assert reply.title == "Open issues in ada/tool" and reply.colour == GREEN
    assert not reply.private and len(reply.fields) == 10
    assert reply.fields[0].name == "#12 Parser bug 12"
    assert "open · by ada" in reply.fields[0].value
    assert "Case 12 fails" in reply.fields[0].value and "second line" not in reply.fields[0].value
    assert reply.fields[0].value.endswith(f"{url}/api/repositories/ada/tool/issues/12")
    assert reply.footer == "Page 1 · next: /issues repository:ada/tool state:open page:2"
    reply = await ask(url, NOBODY_CHAT, "issues", repository="ada/tool", page=2)
    assert [f.name for f in reply.fields] == ["#2 Parser bug 2", "#1 Parser bug 1"]
    assert reply.footer == "Page 2"
    reply = await ask(url, NOBODY_CHAT, "issues", repository="ada/tool", state="closed")
    assert reply.title == "Closed issues in ada/tool" and reply.colour == RED
    assert [f.name for f in reply.fields] == ["#13 Old crash"] and reply.footer == ""
    reply = await ask(url, ADA_CHAT, "issues", repository="ada/tool", state="all", page="2")
    assert reply.title == "Issues in ada/tool" and reply.colour == GRAY
    assert len(reply.fields) == 3 and reply.footer == "Page 2"
    reply = await ask(url, NOBODY_CHAT, "issues", repository="ada/trunked")
    assert reply.description == "No open issues." and not reply.fields
    reply = await ask(url, NOBODY_CHAT, "issues", repository="ada/tool", page=9)
    assert reply.description == "No open issues on this page."

    reply = await ask(url, ADA_CHAT, "issues", repository="ada/secret")
    assert [f.name for f in reply.fields] == ["#1 Hidden leak"] and reply.private
    for chat in (NOBODY_CHAT, BOB_CHAT):
        assert is_sorry(await ask(url, chat, "issues", repository="ada/secret"), "wasn't found")


async def test_prs_states(service):
    url = service.url
    reply = await ask(url, NOBODY_CHAT, "prs", repository="ada/tool")
    assert reply.title == "Open pull requests in ada/tool" and reply.colour == GREEN
    assert [f.name.split(" ", 1)[1] for f in reply.fields] == ["Open idea"]
    assert "bob:main → main" in reply.fields[0].value and "by bob" in reply.fields[0].value
    reply = await ask(url, BOB_CHAT, "prs", repository="ada/tool", state="closed")
    assert [f.name.split(" ", 1)[1] for f in reply.fields] == ["Faster parser"]
    assert reply.colour == RED and "bob:idea → main" in reply.fields[0].value
    reply = await ask(url, NOBODY_CHAT, "prs", repository="ada/tool", state="merged")
    assert [f.name.split(" ", 1)[1] for f in reply.fields] == ["Better docs"]
    assert reply.colour == PURPLE and reply.fields[0].value.startswith("merged")
    reply = await ask(url, NOBODY_CHAT, "prs", repository="ada/tool", state="all")
    assert len(reply.fields) == 3 and reply.colour == GRAY
    reply = await ask(url, ADA_CHAT, "prs", repository="ada/secret")
    assert reply.description == "No open pull requests." and reply.private
    assert is_sorry(await ask(url, NOBODY_CHAT, "prs", repository="ada/secret"), "/link")


async def test_commits_default_branch_paging_and_private(service):
    url = service.url
    reply = await ask(url, NOBODY_CHAT, "commits", repository="ada/tool")
    assert reply.title == "Commits on main in ada/tool" and reply.colour == PUSH_BLUE
    lines = reply.description.splitlines()
    assert len(lines) == 10 and re.match(
        r"^`[0-9a-f]{7}` Better docs — Tess Ter, 2026-01-02$", lines[0]
    )
    assert reply.footer == "Page 1 · next: /commits repository:ada/tool page:2"
    reply = await ask(url, NOBODY_CHAT, "commits", repository="ada/tool", page=2)
    assert [line.split(" ", 1)[1].split(" —")[0] for line in reply.description.splitlines()] == [
        "Change 2",
        "Change 1",
        "Initial commit",
    ]
    reply = await ask(url, NOBODY_CHAT, "commits", repository="bob/tool", branch="idea")
    assert reply.title == "Commits on idea in bob/tool"
    assert reply.description.splitlines()[0].split(" ", 1)[1].startswith("Faster parser")
    # No branch given: the repository's default branch, whatever it is called.
    reply = await ask(url, NOBODY_CHAT, "commits", repository="ada/trunked")
    assert reply.title == "Commits on trunk in ada/trunked"
    assert "Initial commit" in reply.description
    reply = await ask(url, NOBODY_CHAT, "commits", repository="ada/tool", branch="nope")
    assert is_sorry(reply, "Branch nope in ada/tool wasn't found")
    assert "/link" not in reply.description
    reply = await ask(url, ADA_CHAT, "commits", repository="ada/secret")
    assert reply.private and "Initial commit" in reply.description
    assert is_sorry(await ask(url, NOBODY_CHAT, "commits", repository="ada/secret"), "/link")


async def test_search_kinds_and_privacy(service):
    url = service.url
    reply = await ask(url, NOBODY_CHAT, "search", query="parsing")
    assert reply.title == 'Search "parsing" in repositories' and not reply.private
    found = {f.name: f.value for f in reply.fields}  # with whatever forks other tests made
    assert found["ada/tool"].startswith("public · 0 stars\nA tool for parsing\n")
    reply = await ask(url, NOBODY_CHAT, "search", query="parser bug", type="issues")
    assert len(reply.fields) == 10 and not reply.private
    assert all(re.match(r"ada/tool#\d+ Parser bug \d+$", f.name) for f in reply.fields)
    assert reply.footer.endswith('/search query:"parser bug" type:issues page:2')
    reply = await ask(url, NOBODY_CHAT, "search", query="parser bug", type="issues", page=2)
    assert len(reply.fields) == 2 and reply.footer == "Page 2"
    reply = await ask(url, NOBODY_CHAT, "search", query="parser", type="pulls")
    assert [f.name for f in reply.fields][0].endswith("Faster parser")
    assert "closed pull request" in reply.fields[0].value
    reply = await ask(url, NOBODY_CHAT, "search", query="ada", type="users")
    assert [f.name for f in reply.fields] == ["ada"]
    assert reply.fields[0].value == f"user\nAda\n{url}/api/users/ada"

    # Private hits: only the linked reader gets them, and only privately.
    for kind, expected in (("repositories", "ada/secret"), ("issues", "ada/secret#1 Hidden leak")):
        query = "secret" if kind == "repositories" else "hidden leak"
        reply = await ask(url, ADA_CHAT, "search", query=query, type=kind)
        assert [f.name for f in reply.fields] == [expected] and reply.private
        for chat in (NOBODY_CHAT, BOB_CHAT):
            reply = await ask(url, chat, "search", query=query, type=kind)
            assert reply.description == "Nothing found." and not reply.private


async def test_fork_needs_a_link_and_names(service):
    url = service.url
    reply = await ask(url, NOBODY_CHAT, "fork", repository="ada/tool")
    assert is_sorry(reply, "Forking needs your account", "/link")
    reply = await ask(url, BOB_CHAT, "fork", repository="ada/tool")
    assert is_sorry(reply, "already have a repository named tool", "/fork ada/tool name:new-name")
    reply = await ask(url, BOB_CHAT, "fork", repository="ada/tool", name="tool-copy")
    assert reply.title == "Forked ada/tool" and reply.colour == FORK_GREEN
    assert reply.url == f"{url}/api/repositories/bob/tool-copy" and not reply.private
    assert "bob/tool-copy" in reply.description
    assert (
        await ask(url, NOBODY_CHAT, "repo", repository="bob/tool-copy")
    ).title == "bob/tool-copy"
    assert is_sorry(await ask(url, BOB_CHAT, "fork", repository="ada/secret"), "wasn't found")
    reply = await ask(url, ADA_CHAT, "fork", repository="ada/secret", name="secret-2")
    assert reply.title == "Forked ada/secret" and reply.private
    # An organization is an owner like any other: a member forks into it.
    bob = service.users["bob"]
    _call(service, bob, "POST", "/api/orgs", {"name": "bobs-team"}, 201)
    reply = await ask(url, BOB_CHAT, "fork", repository="ada/tool", owner="bobs-team")
    assert "bobs-team/tool" in reply.description
    assert (await ask(url, NOBODY_CHAT, "repo", repository="bobs-team/tool")).fields
    reply = await ask(url, BOB_CHAT, "fork", repository="ada/tool", owner="bobs-team")
    assert is_sorry(reply, "bobs-team already has a repository named tool")
    reply = await ask(url, ADA_CHAT, "fork", repository="ada/tool", name="bad name!")
    assert is_sorry(reply, "The service couldn't do that", "name")


async def test_link_flow_by_page_and_by_email(service):
    url, cyd, chat = service.url, service.users["cyd"], "4242"
    reply = await ask(url, chat, "link-status")
    assert reply.title == "Not linked" and reply.private and "/link" in reply.description
    reply = await ask(url, chat, "link")
    assert reply.private and reply.colour == GREEN
    assert reply.description.startswith("Open this page within 60 minutes")
    token = re.search(r"/chat/link\?token=([0-9a-f]{64})\b", reply.description).group(1)
    assert reply.url == f"{url}/chat/link?token={token}"
    # The person opens the page and confirms; the page calls verify as the signed-in user.
    link(service, cyd, chat, token)
    reply = await ask(url, chat, "link-status")
    assert (
        reply.title == "Linked" and reply.description == "Your chat account is linked to cyd (Cyd)."
    )
    assert {f.name: f.value for f in reply.fields} == {"Account": "cyd", "Verified": "yes"}
    reply = await ask(url, chat, "fork", repository="ada/tool")
    assert reply.title == "Forked ada/tool" and reply.url == f"{url}/api/repositories/cyd/tool"

    reply = await ask(url, chat, "unlink")
    assert reply.title == "Unlinked" and reply.private and reply.colour == GRAY
    assert is_sorry(await ask(url, chat, "fork", repository="ada/tool", name="x"), "/link")
    reply = await ask(url, chat, "unlink")
    assert reply.title == "Not linked" and "nothing to undo" in reply.description

    reply = await ask(url, chat, "link-email", address="CYD@example.com")
    assert reply.title == "Check your e-mail" and reply.private
    assert "CYD@example.com" in reply.description and "60 minutes" in reply.description
    # No SMTP configured: the service writes the message into its outbox folder.
    message = await mailed_to(service.data_dir / "outbox", "cyd@example.com")
    token = re.search(r"token=([0-9a-f]{64})", message.get_content()).group(1)
    link(service, cyd, chat, token)
    assert (await ask(url, chat, "link-status")).title == "Linked"
    reply = await ask(url, chat, "link-email", address="not-an-address")
    assert is_sorry(reply, "e-mail address")


async def mailed_to(outbox: Path, address: str) -> email.message.EmailMessage:
    """The message the service wrote into its outbox for address (sent in the background)."""
    for _ in range(200):
        for path in sorted(outbox.glob("*.eml")) if outbox.exists() else []:
            message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
            if message["To"] == address:
                return message
        await asyncio.sleep(0.05)
    raise AssertionError(f"no message to {address}")


async def test_every_api_error_is_a_short_private_message(service, limited):
    # Unreachable: nothing listens on the port.
    base = unreachable_url()
    for name, args in EVERY_COMMAND:
        assert is_sorry(await ask(base, ADA_CHAT, name, **args), "can't be reached"), name
    # 404 from the real service.
    for name in ("repo", "issues", "prs", "commits", "fork"):
        reply = await ask(service.url, ADA_CHAT, name, repository="nobody/nothing")
        assert is_sorry(reply, "Repository nobody/nothing wasn't found"), name
    # 5xx from the real service (the repository's git data is gone).
    reply = await ask(service.url, NOBODY_CHAT, "commits", repository="ada/broken")
    assert is_sorry(reply, "ran into a problem (error 500)", "try again")
    # 429 from the real service, with the wait it names (its start-up check spent a token
    # or two of the allowance already).
    replies = [await ask(limited.url, "555", "link-status") for _ in range(6)]
    assert replies[0].title == "Not linked" and is_sorry(replies[-1], "a lot of requests")
    wait = int(re.search(r"try again in (\d+) seconds", replies[-1].description)[1])
    assert 1 <= wait <= 60
    # A read of an unlinked user falls back to the bot's own (spent) allowance.
    reply = await ask(limited.url, "556", "repo", repository="ada/tool")
    assert is_sorry(reply, "a lot of requests", "try again in")
    # 403, 502 and 503 (a proxy in front), and answers that are not JSON: a stand-in.
    cases = (
        (
            403,
            '{"error": "write access to this repository is required"}',
            "application/json",
            "don't have permission",
        ),
        (502, "<html>Bad Gateway</html>", "text/html", "ran into a problem (error 502)"),
        (503, '{"error": "service unavailable"}', "application/json", "(error 503)"),
        (200, "<html>a web page</html>", "text/html", "couldn't read"),
        (200, "[1, 2]", "application/json", "couldn't read"),
        (401, '{"error": "invalid chat bot key"}', "application/json", "refused the bot's key"),
    )
    for status, body, content_type, phrase in cases:
        async with Stub(status, body, content_type) as base:
            for name, args in EVERY_COMMAND:
                reply = await ask(base, ADA_CHAT, name, **args)
                assert is_sorry(reply, phrase), (status, name, reply)


async def test_bot_key_wrong_or_missing(service):
    url = service.url
    for name, args in EVERY_COMMAND:
        reply = await ask(url, ADA_CHAT, name, key="wrong", **args)
        assert is_sorry(reply, "refused the bot's key"), name
    # Without a key the bot is anonymous: public reads work, linking cannot.
    reply = await ask(url, ADA_CHAT, "repo", key="", repository="ada/tool")
    assert reply.title == "ada/tool"
    assert is_sorry(
        await ask(url, ADA_CHAT, "repo", key="", repository="ada/secret"), "wasn't found"
    )
    assert is_sorry(await ask(url, ADA_CHAT, "fork", key="", repository="ada/tool"), "/link")
    for name in ("link", "link-status", "unlink"):
        assert is_sorry(await ask(url, ADA_CHAT, name, key=""), "refused the bot's key")


async def test_bad_arguments_are_explained(service, monkeypatch):
    url = service.url
    cases = [
        ("issues", {}, "/issues needs repository"),
        ("issues", {"repository": "ada"}, "owner/name"),
        ("issues", {"repository": "ada/tool/x"}, "owner/name"),
        ("issues", {"repository": "ada/tool", "state": "weird"}, "open, closed, all"),
        ("prs", {"repository": "ada/tool", "state": "weird"}, "open, closed, merged, all"),
        ("issues", {"repository": "ada/tool", "page": "0"}, "whole number"),
        ("commits", {"repository": "ada/tool", "page": "two"}, "whole number"),
        ("search", {"query": "  "}, "/search needs query"),
        ("search", {"query": "x" * 300}, "at most 256"),
        ("search", {"query": "x", "type": "code"}, "repositories, issues, pulls, users"),
        ("repo", {"repository": "ada/tool", "colour": "red"}, "takes no 'colour'"),
        ("link-email", {"address": "nobody"}, "e-mail address"),
        ("nope", {}, "There is no command /nope"),
    ]
    for name, args, phrase in cases:
        assert is_sorry(await ask(url, NOBODY_CHAT, name, **args), phrase), (name, args)
    # An upper-case choice is read as Discord users type it.
    reply = await ask(url, NOBODY_CHAT, "issues", repository="ada/tool", state="Closed")
    assert reply.title == "Closed issues in ada/tool"

    async def broken(call, args):
        raise KeyError("a bug in the bot")

    monkeypatch.setitem(COMMANDS, "repo", replace(COMMANDS["repo"], handler=broken))
    reply = await ask(url, NOBODY_CHAT, "repo", repository="ada/tool")
    assert is_sorry(reply, "Something went wrong in the bot")


async def test_an_unlinked_user_costs_one_refused_request_per_command(service):
    """The service refuses an unlinked X-Chat-User-Id; the bot learns it once per command."""
    seen: list[tuple[str, bool]] = []

    async def proxy(request: web.Request) -> web.Response:
        # Forwards to the real service, recording who each request was made as.
        seen.append((request.path, "X-Chat-User-Id" in request.headers))
        status, answer = await asyncio.to_thread(
            service.request,
            "GET",
            request.path_qs,
            None,
            {k: v for k, v in request.headers.items() if k.startswith("X-Chat")},
        )
        return web.json_response(answer, status=status)

    app = web.Application()
    app.router.add_get("/{tail:.*}", proxy)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        base = str(server.make_url("")).rstrip("/")
        reply = await ask(base, NOBODY_CHAT, "issues", repository="ada/tool")
        assert reply.title == "Open issues in ada/tool"
        assert seen == [
            ("/api/repositories/ada/tool", True),
            ("/api/repositories/ada/tool", False),
            ("/api/repositories/ada/tool/issues", False),
        ]
        seen.clear()
        reply = await ask(base, ADA_CHAT, "issues", repository="ada/secret")
        assert reply.private and seen == [
            ("/api/repositories/ada/secret", True),
            ("/api/repositories/ada/secret/issues", True),
        ]
    finally:
        await server.close()


# The console front end, as a subprocess


def console_env(api_base: str, key: str = BOT_KEY) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUBSVC_")}
    return {
        **env,
        "PYTHONPATH": str(ROOT),
        "HUBSVC_BOT_API_BASE": api_base,
        "HUBSVC_BOT_BOT_KEY": key,
    }


def console(api_base: str, chat_id: str, lines: list[str], key: str = BOT_KEY) -> list[str]:
    """Run `run.py bot --console` with lines on its input: the reply blocks it printed."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "bot", "--console", "--as", chat_id],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        env=console_env(api_base, key),
        cwd=ROOT,
    )
    return blocks(proc.returncode, proc.stdout, proc.stderr)


async def console_async(api_base: str, chat_id: str, lines: list[str]) -> list[str]:
    """The same, while this test's loop serves a stand-in service."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROOT / "run.py"),
        "bot",
        "--console",
        "--as",
        chat_id,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=console_env(api_base),
        cwd=ROOT,
    )
    out, err = await asyncio.wait_for(proc.communicate(("\n".join(lines) + "\n").encode()), 120)
    return blocks(proc.returncode, out.decode(), err.decode())


def blocks(code: int, out: str, err: str) -> list[str]:
    assert code == 0, err
    assert "Traceback" not in out and "Traceback" not in err, err
    assert err == "", err
    return [b.strip() for b in re.split(r"(?m)^(?=== )", out) if b.strip()]


def title(block: str) -> str:
    return re.match(r"== (.*) ==", block).group(1)


def test_console_answers_every_command_for_a_linked_user(service):
    url, chat = service.url, "6006"
    link(service, service.users["ada"], chat)
    out = console(
        url,
        chat,
        [
            "/repo ada/secret",
            "/search secret",
            "/search parser bug type:issues page:2",
            "/issues ada/tool state:closed",
            "/prs ada/tool state:merged",
            "/commits ada/tool page:2",
            "/fork ada/tool name:tool-from-console",
            "/link-status",
            "/link",
            "/link-email ada@example.com",
            "# a comment line, and a blank one, print nothing",
            "",
            "/unlink",
            "/link-status",
            "/repo ada/secret",
        ],
    )
    assert [title(b) for b in out] == [
        "ada/secret",
        'Search "secret" in repositories',
        'Search "parser bug" in issues',
        "Closed issues in ada/tool",
        "Merged pull requests in ada/tool",
        "Commits on main in ada/tool",
        "Forked ada/tool",
        "Linked",
        "Link your account",
        "Check your e-mail",
        "Unlinked",
        "Not linked",
        "Sorry",
    ]
    assert "* Visibility: private" in out[0] and out[0].endswith("(only you can see this)")
    assert "* ada/secret\n    private · 0 stars" in out[1]
    assert out[2].count("\n* ada/tool#") == 2 and "-- Page 2" in out[2]
    assert "* #13 Old crash\n    closed · by ada" in out[3]
    assert "Better docs" in out[4] and "(only you" not in out[4]
    assert "Initial commit" in out[5] and "-- Page 2" in out[5]
    assert f"{url}/api/repositories/ada/tool-from-console" in out[6]
    assert "linked to ada (Ada)" in out[7]
    assert re.search(rf"{re.escape(url)}/chat/link\?token=[0-9a-f]{{64}}", out[8])
    assert "wasn't found" in out[12] and "/link" in out[12]


def test_console_answers_every_command_for_an_unlinked_user(service):
    out = console(
        service.url,
        "5005",
        [
            "/repo ada/tool",
            "/repo ada/secret",
            '/search "parser bug" type:issues',
            "/search query:parser bug type:issues page:2",
            "/issues ada/tool",
            "/prs ada/tool",
            "/commits ada/trunked",
            "/fork ada/tool",
            "/link-status",
            "/link",
            "/link-email nobody@example.com",
            "/unlink",
            "/help",
            "/nope",
            "/issues",
            "/issues ada/tool state:weird",
            '/search "unclosed',
            "/repo ada/tool extra words",
        ],
    )
    titles = [title(b) for b in out[:12]]
    assert titles == [
        "ada/tool",
        "Sorry",
        'Search "parser bug" in issues',
        'Search "parser bug" in issues',
        "Open issues in ada/tool",
        "Open pull requests in ada/tool",
        "Commits on trunk in ada/trunked",
        "Sorry",
        "Not linked",
        "Link your account",
        "Check your e-mail",
        "Not linked",
    ]
    assert "If it's private, link your account with /link" in out[1]
    assert "-- Page 1 · next: /issues repository:ada/tool state:open page:2" in out[4]
    assert "Forking needs your account" in out[7]
    assert title(out[12]) == "Commands" and "Typed as on Discord" in out[12]
    for command in COMMANDS:
        assert f"/{command}" in out[12]
    assert [title(b) for b in out[13:]] == ["Sorry"] * 5
    assert "There is no command /nope" in out[13]
    assert "/issues needs repository" in out[14]
    assert "state must be one of: open, closed, all." in out[15]
    assert "close your quotes" in out[16]
    assert "Too many words for /repo" in out[17]


def test_console_errors_from_the_service(service, limited):
    out = console(
        unreachable_url(),
        ADA_CHAT,
        [
            f"/{name} " + " ".join(f"{k}:{v}" for k, v in args.items())
            for name, args in EVERY_COMMAND
        ],
    )
    assert len(out) == len(EVERY_COMMAND)
    assert all(
        title(b) == "Sorry" and "can't be reached" in b and b.endswith("(only you can see this)")
        for b in out
    )
    out = console(service.url, NOBODY_CHAT, ["/repo nobody/nothing", "/commits ada/broken"])
    assert "Repository nobody/nothing wasn't found" in out[0]
    assert "error 500" in out[1]
    out = console(limited.url, "777", ["/link-status"] * 6)
    assert title(out[0]) == "Not linked" and title(out[-1]) == "Sorry"
    assert re.search(r"Please try again in \d+ seconds\.", out[-1])
    out = console(service.url, ADA_CHAT, ["/repo ada/tool", "/link"], key="wrong")
    assert all("refused the bot's key" in b for b in out)


async def test_console_403_and_5xx_from_a_stand_in():
    for status, phrase in ((403, "don't have permission"), (500, "error 500"), (503, "error 503")):
        async with Stub(status, '{"error": "x"}') as base:
            out = await console_async(
                base,
                ADA_CHAT,
                [
                    f"/{name} " + " ".join(f'{k}:"{v}"' for k, v in args.items())
                    for name, args in EVERY_COMMAND
                ],
            )
        assert len(out) == len(EVERY_COMMAND)
        assert all(title(b) == "Sorry" and phrase in b for b in out), out


def test_console_parses_as_discord_users_type():
    assert parse_line("/issues ada/tool state:closed") == (
        "issues",
        {"repository": "ada/tool", "state": "closed"},
    )
    assert parse_line("issues state:all ada/tool 2") == (
        "issues",
        {"repository": "ada/tool", "state": "all", "page": "2"},
    )
    assert parse_line('/search "a b" type:users') == ("search", {"query": "a b", "type": "users"})
    assert parse_line("/search a b c page:3") == ("search", {"query": "a b c", "page": "3"})
    assert parse_line("/search query:a b") == ("search", {"query": "a b"})
    assert parse_line("/repo http://h/ada/tool") == ("repo", {"repository": "http://h/ada/tool"})
    assert parse_line("/fork ada/tool name:x") == ("fork", {"repository": "ada/tool", "name": "x"})
    assert parse_line("/LINK-STATUS") == ("link-status", {})


# Starting up: what is required is said in one line


def start(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("HUBSVC_")}
    return subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**base, "PYTHONPATH": str(ROOT), **(env or {})},
        cwd=ROOT,
    )


def one_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and proc.stdout == "", proc.stderr
    return lines[0]


def test_start_refused_with_one_line_naming_what_is_missing(tmp_path):
    line = one_line(start("bot"))
    assert "bot.token, bot.application_id, bot.api_base: required" in line
    assert "HUBSVC_BOT_TOKEN" in line
    line = one_line(start("bot", env={"HUBSVC_BOT_API_BASE": "http://127.0.0.1:1"}))
    assert "bot.token, bot.application_id: required" in line and "api_base" not in line
    config = tmp_path / "bot.toml"
    config.write_text('[bot]\ntoken = "t"\napplication_id = "1"\n')
    assert "bot.api_base: required to start the Discord bot" in one_line(
        start("bot", "--config", str(config))
    )
    # The console needs no Discord application, only the service.
    assert "bot.api_base: required to start the console bot" in one_line(
        start("bot", "--console", "--as", "1")
    )
    for args in (("bot", "--console"), ("bot", "--as", "1")):
        proc = start(*args)
        assert proc.returncode == 2
        assert proc.stderr.splitlines()[-1].endswith("--console and --as CHAT_ID go together")
    config.write_text('[bot]\napplication_id = "12x"\n')
    assert "bot.application_id: must be a Discord id" in one_line(
        start("bot", "--config", str(config))
    )
    assert "bot.guild_id: must be a Discord id" in one_line(
        start("bot", "--console", "--as", "1", env={"HUBSVC_BOT_GUILD_ID": "abc"})
    )
    assert "bot.api_base: must be an http" in one_line(
        start("bot", env={"HUBSVC_BOT_API_BASE": "ftp://x"})
    )


def test_discord_mode_without_discord_py_says_how_to_install(tmp_path):
    code = (
        "import runpy, sys; sys.modules['discord'] = None; "
        f"sys.argv = ['run.py', 'bot']; runpy.run_path({str(ROOT / 'run.py')!r}, "
        "run_name='__main__')"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("HUBSVC_")}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={
            **base,
            "PYTHONPATH": str(ROOT),
            "HUBSVC_BOT_TOKEN": "t",
            "HUBSVC_BOT_APPLICATION_ID": "1",
            "HUBSVC_BOT_API_BASE": "http://127.0.0.1:1",
        },
    )
    assert "pip install -e '.[bot]'" in one_line(proc)


def test_bot_key_falls_back_to_chat_bot_key():
    from hubsvc.bot import settings
    from hubsvc.config import load_config

    config = load_config(None, {"bot.api_base": "http://h", "chat.bot_key": "k1"}, env={})
    assert settings(config, console=True)["bot_key"] == "k1"
    config = load_config(
        None, {"bot.api_base": "http://h", "chat.bot_key": "k1", "bot.bot_key": "k2"}, env={}
    )
    assert settings(config, console=True)["bot_key"] == "k2"


# The Discord front end: conversion, registration, responding


def test_embeds_fit_every_discord_limit():
    huge = Reply(
        title="T" * 1000,
        description="D" * 10000,
        footer="F" * 3000,
        fields=[Field("N" * 300, "V" * 1500, i % 2 == 0) for i in range(40)],
        colour=PURPLE,
        url="http://h/x",
    )
    embed = check_embed(huge)
    assert len(embed.title) == 256 and embed.title.endswith("…")
    assert embed.url == "http://h/x"
    # The description gave way first, then all but the fields that fit.
    assert embed.description is None and len(embed.fields) == 2
    assert embed.footer.text.startswith("38 more not shown · FFF")
    # Many fields of full size: the total limit drops the last ones and says so.
    many = Reply(title="t", fields=[Field(f"n{i}", "v" * 1024) for i in range(25)])
    embed = check_embed(many)
    assert len(embed.fields) == 5 and embed.footer.text == "20 more not shown"
    # Empty names and values are refused by Discord; they become a dash.
    embed = check_embed(Reply(title="", fields=[Field("", "")]))
    assert embed.title == "—" and (embed.fields[0].name, embed.fields[0].value) == ("—", "—")
    # A reply inside the limits is carried over unchanged.
    reply = Reply(
        title="ada/tool",
        description="A tool",
        colour=GREEN,
        footer="Page 2",
        fields=[Field("Stars", "3", True), Field("Clone", "http://h/ada/tool.git")],
    )
    embed = check_embed(reply)
    assert {k: v for k, v in embed.to_dict().items() if k != "flags"} == {
        "type": "rich",
        "title": "ada/tool",
        "description": "A tool",
        "color": GREEN,
        "fields": [
            {"name": "Stars", "value": "3", "inline": True},
            {"name": "Clone", "value": "http://h/ada/tool.git", "inline": False},
        ],
        "footer": {"text": "Page 2"},
    }


async def test_slash_commands_registered_from_the_declarations():
    bot = discord_front.HubBot("http://127.0.0.1:1", BOT_KEY, 1234)
    try:
        registered = {c.name: c.to_dict(bot.tree) for c in bot.tree.get_commands()}
    finally:
        await bot.close()
    assert (
        list(registered)
        == list(COMMANDS)
        == [
            "repo",
            "search",
            "issues",
            "prs",
            "commits",
            "fork",
            "link",
            "link-email",
            "unlink",
            "link-status",
        ]
    )
    for name, command in COMMANDS.items():
        options = registered[name]["options"]
        assert [o["name"] for o in options] == [p.name for p in command.params]
        for option, param in zip(options, command.params):
            assert option["required"] == param.required
            assert option["description"] == param.description
            if param.choices:
                assert [c["value"] for c in option["choices"]] == list(param.choices)
            if param.integer:
                assert option["type"] == 4 and option["min_value"] == 1
            else:
                assert option["type"] == 3
    issues = {o["name"]: o for o in registered["issues"]["options"]}
    assert issues["repository"]["required"] and not issues["state"]["required"]


class FakeInteraction:
    """The part of discord.Interaction the front end uses, recording every call."""

    def __init__(self, user_id: int) -> None:
        self.user = SimpleNamespace(id=user_id)
        self.calls: list[tuple[str, dict]] = []
        record = self._record
        self.response = SimpleNamespace(send_message=record("send_message"), defer=record("defer"))
        self.followup = SimpleNamespace(send=record("followup.send"))
        self.edit_original_response = record("edit_original_response")
        self.delete_original_response = record("delete_original_response")

    def _record(self, name: str):
        async def call(**kwargs: Any) -> None:
            self.calls.append((name, kwargs))

        return call


async def test_discord_callbacks_answer_as_the_discord_user(service, monkeypatch):
    bot = discord_front.HubBot(service.url, BOT_KEY, 1234)
    bot.api = ApiClient(service.url, BOT_KEY)
    try:

        async def invoke(name: str, user_id: int, **kwargs: Any) -> list[tuple[str, dict]]:
            interaction = FakeInteraction(user_id)
            await bot.tree.get_command(name).callback(interaction, **kwargs)
            for _, sent in interaction.calls:
                if "embed" in sent:
                    check_embed_dict(sent["embed"])
            return interaction.calls

        calls = await invoke("repo", int(NOBODY_CHAT), repository="ada/tool")
        assert [c[0] for c in calls] == ["send_message"]
        assert calls[0][1]["ephemeral"] is False and calls[0][1]["embed"].title == "ada/tool"
        calls = await invoke("repo", int(ADA_CHAT), repository="ada/secret")
        assert calls[0][1]["ephemeral"] is True and calls[0][1]["embed"].title == "ada/secret"
        calls = await invoke("issues", int(NOBODY_CHAT), repository="ada/tool", state=None, page=2)
        assert calls[0][1]["embed"].footer.text == "Page 2"
        calls = await invoke("link-status", int(ADA_CHAT))
        assert calls[0][1]["ephemeral"] is True
        assert calls[0][1]["embed"].description == "Your chat account is linked to ada (Ada)."

        # Slower than Discord waits: "thinking" first, then the answer in its place; a
        # private answer after a public "thinking" replaces it with a private follow-up.
        monkeypatch.setattr(discord_front, "ANSWER_WITHIN", 0)
        calls = await invoke("repo", int(NOBODY_CHAT), repository="ada/tool")
        assert [c[0] for c in calls] == ["defer", "edit_original_response"]
        assert calls[0][1] == {"ephemeral": False, "thinking": True}
        calls = await invoke("repo", int(ADA_CHAT), repository="ada/secret")
        assert [c[0] for c in calls] == ["defer", "delete_original_response", "followup.send"]
        assert calls[2][1]["ephemeral"] is True
        calls = await invoke("link", int(NOBODY_CHAT))
        assert [c[0] for c in calls] == ["defer", "edit_original_response"]
        assert calls[0][1] == {"ephemeral": True, "thinking": True}
    finally:
        await bot.close()


def check_embed_dict(embed: discord.Embed) -> None:
    assert len(embed) <= 6000 and len(embed.fields) <= 25


def json_answer(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        status=status, body=json.dumps(data).encode(), headers={"Content-Type": "application/json"}
    )


class FakeDiscord:
    """Discord's REST API as far as logging in and syncing commands go, on this machine."""

    def __init__(self, token: str) -> None:
        self.token = token  # discord.py reads JSON only under this exact content type
        self.synced: list[tuple[str, list]] = []
        app = web.Application()
        app.router.add_get("/api/v10/users/@me", self.me)
        app.router.add_get("/api/v10/oauth2/applications/@me", self.application)
        app.router.add_put("/api/v10/applications/{app}/commands", self.sync)
        app.router.add_put("/api/v10/applications/{app}/guilds/{guild}/commands", self.sync)
        self.server = TestServer(app, host="127.0.0.1")

    def _authorised(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bot {self.token}"

    async def me(self, request: web.Request) -> web.Response:
        if not self._authorised(request):
            return json_answer({"message": "401: Unauthorized", "code": 0}, status=401)
        return json_answer(
            {
                "id": "999",
                "username": "hubsvc",
                "discriminator": "0",
                "avatar": None,
                "bot": True,
                "global_name": None,
            }
        )

    async def application(self, request: web.Request) -> web.Response:
        return json_answer(
            {
                "id": "1234",
                "name": "hubsvc",
                "icon": None,
                "description": "",
                "bot_public": True,
                "bot_require_code_grant": False,
                "verify_key": "0" * 64,
                "flags": 0,
                "owner": {"id": "1", "username": "ada", "discriminator": "0", "avatar": None},
            }
        )

    async def sync(self, request: web.Request) -> web.Response:
        if not self._authorised(request):
            return json_answer({"message": "401: Unauthorized", "code": 0}, status=401)
        payload = await request.json()
        self.synced.append((request.path, payload))
        return json_answer(
            [
                {
                    **c,
                    "id": str(100 + i),
                    "application_id": "1234",
                    "version": "1",
                    "guild_id": request.match_info.get("guild"),
                }
                for i, c in enumerate(payload)
            ]
        )


async def test_commands_sync_to_the_guild_at_once_or_globally(monkeypatch):
    fake = FakeDiscord("tok")
    await fake.server.start_server()
    monkeypatch.setattr(discord.http.Route, "BASE", str(fake.server.make_url("/api/v10")))
    try:
        for guild, path in (
            (4321, "/api/v10/applications/1234/guilds/4321/commands"),
            (None, "/api/v10/applications/1234/commands"),
        ):
            bot = discord_front.HubBot("http://127.0.0.1:1", BOT_KEY, 1234, guild)
            try:
                await bot.login("tok")  # logs in, then setup_hook syncs
            finally:
                await bot.close()
            synced_path, payload = fake.synced[-1]
            assert synced_path == path
            assert [c["name"] for c in payload] == list(COMMANDS)
    finally:
        await fake.server.close()


def test_a_refused_token_ends_the_bot_with_one_line(monkeypatch, capsys):
    loop = asyncio.new_event_loop()
    fake = FakeDiscord("right-token")
    ready = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(fake.server.start_server())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10)
    monkeypatch.setattr(discord.http.Route, "BASE", str(fake.server.make_url("/api/v10")))
    try:
        code = discord_front.main("wrong-token", "1234", "http://127.0.0.1:1", BOT_KEY, "")
    finally:
        asyncio.run_coroutine_threadsafe(fake.server.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
    assert code == 1
    assert capsys.readouterr().err.strip() == "hubsvc: Discord refused bot.token"


def test_every_command_has_a_sample_and_usage():
    assert [name for name, _ in EVERY_COMMAND] == list(COMMANDS)
    assert (
        commands.COMMANDS["issues"].usage()
        == "/issues <repository> [state:open|closed|all] [page:N]"
    )
