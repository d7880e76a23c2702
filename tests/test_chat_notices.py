"""notifications.chat: direct messages through the bot, against a real hubsvc process.

Assignments and @mentions become notices for linked readers who want them; the bot reads
them (GET /api/chat/notifications, a long poll), sends them (notices.Pump, and the Discord
front end against a stand-in for Discord's REST API) and acknowledges them.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any
from urllib.parse import urlencode

import discord
import pytest
from aiohttp import web

from hubsvc.bot import discord_front
from hubsvc.bot.client import ApiClient
from hubsvc.bot.notices import Pump, Undeliverable, notice_reply

from .server import ServerProcess
from .test_bot import BOT_KEY, FakeDiscord, _call, _sign_up, json_answer, link

BOT = {"X-Chat-Bot-Key": BOT_KEY}
CHATS = {"alice": "1001", "bob": "2002", "carol": "3003", "zed": "9009"}  # dave: unlinked
REPOS = "/api/repositories"


def notices(server: ServerProcess, **params: Any) -> tuple[int, dict]:
    """GET /api/chat/notifications as the bot (status, body)."""
    return server.request("GET", f"/api/chat/notifications?{urlencode(params)}", None, BOT)


def ack(server: ServerProcess, through: Any) -> tuple[int, dict]:
    return server.request("POST", "/api/chat/notifications/ack", {"through": through}, BOT)


def mention(server: ServerProcess, by: dict, repo: str, text: str, number: int = 1) -> None:
    _call(server, by, "POST", f"{REPOS}/{repo}/issues/{number}/comments", {"body": text}, 201)


def settle(server: ServerProcess, acknowledge: bool = True) -> list[dict]:
    """The notices of every event so far (sentinels left out), read as the bot reads them.

    zed is mentioned last, in alice/sentinel; the consumer reads the log in order, so once
    that notice is queued, every earlier event has been read.
    """
    mention(server, server.users["alice"], "alice/sentinel", "@zed ping")
    # A settle that did not acknowledge left its sentinel queued: wait for a sentinel
    # newer than any seen before, not just for the first one in the queue.
    seen = getattr(server, "last_sentinel", 0)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        status, page = notices(server, limit=100, wait=2)
        assert status == 200 and not page["hasMore"], page
        found = page["notifications"]
        mark = [n["id"] for n in found if n["repository"]["name"] == "sentinel"]
        if mark and max(mark) > seen:
            server.last_sentinel = max(mark)
            if acknowledge:
                assert ack(server, found[-1]["id"])[0] == 200
            return [n for n in found if n["repository"]["name"] != "sentinel"]
    raise AssertionError("the sentinel notice never came")


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    root = tmp_path_factory.mktemp("dm")
    server = ServerProcess(root / "data", {"chat": {"bot_key": BOT_KEY}}).start()
    try:
        server.users = {n: _sign_up(server, n) for n in ("alice", "bob", "carol", "dave", "zed")}
        for name, chat in CHATS.items():
            link(server, server.users[name], chat)
        alice = server.users["alice"]
        for name, title in (("proj", "Fix the build"), ("sentinel", "Pings")):
            _call(server, alice, "POST", REPOS, {"name": name}, 201)
            _call(server, alice, "POST", f"{REPOS}/alice/{name}/issues", {"title": title}, 201)
        for name in ("bob", "carol"):  # assignable: writers (a reader is not)
            collaborator = f"{REPOS}/alice/proj/collaborators/{name}"
            _call(server, alice, "PUT", collaborator, {"permission": "write"}, 201)
        yield server
    finally:
        server.stop()


@pytest.fixture
def dm(service):
    """The service with nothing queued."""
    settle(service)
    return service


def set_chat(server: ServerProcess, user: dict, on: bool) -> None:
    answer = _call(
        server, user, "POST", "/api/users/me/settings/preferences", {"notifications": {"chat": on}}
    )
    assert answer["preferences"]["notifications"]["chat"] is on


def test_assignments_and_mentions_reach_linked_readers_but_not_the_actor(dm):
    alice, bob = dm.users["alice"], dm.users["bob"]
    issue = _call(
        dm,
        alice,
        "POST",
        f"{REPOS}/alice/proj/issues",
        {
            "title": "Broken build",
            "body": "cc @carol @dave @alice @nobody",
            "assignees": ["bob", "alice"],
        },
        201,
    )["issue"]
    n = issue["number"]
    got = settle(dm)
    assert [(x["username"], x["chatId"], x["reason"]) for x in got] == [
        ("bob", "2002", f"you were assigned issue #{n}"),
        ("carol", "3003", f"you were mentioned in issue #{n}"),
    ]
    first = got[0]
    assert first == {
        "id": first["id"],
        "chatId": "2002",
        "username": "bob",
        "reason": f"you were assigned issue #{n}",
        "actor": "alice",
        "title": "Broken build",
        "number": n,
        "url": f"{dm.url}/api/repositories/alice/proj/issues/{n}",
        "repository": {"owner": "alice", "name": "proj"},
        "type": "issue",
        "createdAt": first["createdAt"],
    }
    assert isinstance(first["id"], int) and first["createdAt"].endswith("Z")
    assert got[1]["id"] > first["id"]

    # A comment mentions alice (not its author, bob); an edit assigns carol, and tells
    # only her: bob was assigned already.
    mention(dm, bob, "alice/proj", "@alice @bob have a look", n)
    _call(dm, alice, "PATCH", f"{REPOS}/alice/proj/issues/{n}", {"assignees": ["bob", "carol"]})
    got = settle(dm)
    assert got[0]["username"] == "alice" and got[0]["actor"] == "bob"
    assert got[0]["reason"] == f"you were mentioned in issue #{n}"
    assert [(x["username"], x["actor"], x["reason"]) for x in got[1:]] == [
        ("carol", "alice", f"you were assigned issue #{n}")
    ]
    assert settle(dm) == []  # acknowledged: gone


def test_the_switch_stops_new_notices_and_drops_queued_ones(dm):
    alice, bob = dm.users["alice"], dm.users["bob"]
    try:
        set_chat(dm, bob, False)
        mention(dm, alice, "alice/proj", "@bob are you there?")
        assert settle(dm) == []
        set_chat(dm, bob, True)
        mention(dm, alice, "alice/proj", "@bob now?")
        assert [x["username"] for x in settle(dm)] == ["bob"]

        # Queued while on, switched off before the bot came: dropped, and it stays gone
        # when the switch goes back on.
        mention(dm, alice, "alice/proj", "@bob later")
        assert [x["username"] for x in settle(dm, acknowledge=False)] == ["bob"]
        set_chat(dm, bob, False)
        assert settle(dm) == []
        set_chat(dm, bob, True)
        assert settle(dm) == []
    finally:
        set_chat(dm, bob, True)


def test_private_repositories_unlinked_users_and_lost_access(dm):
    alice, bob = dm.users["alice"], dm.users["bob"]
    _call(dm, alice, "POST", REPOS, {"name": "secret", "visibility": "private"}, 201)
    _call(dm, alice, "PUT", f"{REPOS}/alice/secret/collaborators/bob", {"permission": "read"}, 201)
    _call(
        dm,
        alice,
        "POST",
        f"{REPOS}/alice/secret/issues",
        {"title": "Secret plan", "body": "@bob @carol read this"},
        201,
    )
    got = settle(dm)
    assert [(x["username"], x["repository"]["name"]) for x in got] == [("bob", "secret")]

    # Queued, then bob may no longer read the repository: nothing, and no word of it.
    mention(dm, alice, "alice/secret", "@bob the second secret plan")
    _call(dm, alice, "DELETE", f"{REPOS}/alice/secret/collaborators/bob", expect=204)
    status, page = notices(dm, limit=100)
    assert status == 200 and "secret" not in json.dumps(page)
    assert settle(dm) == []

    # Queued, then unlinked: nothing, not even to a chat account linked afterwards.
    mention(dm, alice, "alice/proj", "@bob one for your chat")
    assert [x["chatId"] for x in settle(dm, acknowledge=False)] == ["2002"]
    assert dm.request("POST", "/api/chat/link/unlink", {"chatId": "2002"}, BOT)[0] == 200
    mention(dm, alice, "alice/proj", "@bob while unlinked")
    try:
        assert settle(dm) == []
        link(dm, bob, "2222")
        assert settle(dm) == []
        mention(dm, alice, "alice/proj", "@bob linked again")
        assert [x["chatId"] for x in settle(dm)] == ["2222"]
    finally:
        dm.request("POST", "/api/chat/link/unlink", {"chatId": "2222"}, BOT)
        link(dm, bob, "2002")


def test_long_poll_answers_when_a_notice_arrives(dm):
    started = time.monotonic()
    status, page = notices(dm, wait=1)
    assert status == 200 and page == {"notifications": [], "hasMore": False}
    assert 0.9 <= time.monotonic() - started < 5

    answer: dict[str, Any] = {}
    poller = threading.Thread(target=lambda: answer.update(page=notices(dm, wait=20)[1]))
    started = time.monotonic()
    poller.start()
    time.sleep(0.5)
    mention(dm, dm.users["alice"], "alice/proj", "@carol wake up")
    poller.join(20)
    assert time.monotonic() - started < 10
    assert [x["username"] for x in answer["page"]["notifications"]] == ["carol"]
    assert settle(dm)[0]["username"] == "carol"


def test_bad_input_and_missing_key(service):
    url = "/api/chat/notifications"
    for path, body in ((url, None), (url + "/ack", {"through": 1})):
        method = "GET" if body is None else "POST"
        for headers in ({}, {"X-Chat-Bot-Key": "wrong"}, service.users["alice"]["headers"]):
            status, answer = service.request(method, path, body, headers)
            assert status == 401 and isinstance(answer["error"], str), (path, headers)
    for params in (
        {"limit": 0},
        {"limit": 101},
        {"limit": "x"},
        {"wait": "abc"},
        {"wait": -1},
        {"wait": 31},
        {"wait": 1.5},
    ):
        status, answer = notices(service, **params)
        assert status == 400 and isinstance(answer["error"], str), params
    for through in (-1, 0, "5", 1.5, None, True, 10**9):
        status, answer = ack(service, through)
        assert status == 400 and isinstance(answer["error"], str), through
    status, answer = service.request("POST", url + "/ack", {}, BOT)
    assert status == 400 and "through" in answer["error"]


async def test_pump_sends_in_order_retries_and_acknowledges(dm):
    alice, sent = dm.users["alice"], []
    failures = {"bob": 1}

    async def send(notice: dict) -> None:
        await asyncio.sleep(0)
        who = notice["username"]
        if failures.get(who):
            failures[who] -= 1
            raise RuntimeError("the chat platform is down")
        if who == "carol":
            raise Undeliverable("direct messages closed")
        sent.append(notice)

    mention(dm, alice, "alice/proj", "@bob @carol @alice two for the pump")
    queued = settle(dm, acknowledge=False)
    assert [x["username"] for x in queued] == ["bob", "carol"]
    async with ApiClient(dm.url, BOT_KEY) as api:
        pump = Pump(api, send, wait=1, pause=0.05)
        # Bob's send fails: nothing is acknowledged, bob's notice is still first.
        assert await pump.run_once() is False
        assert sent == [] and pump.tries == {queued[0]["id"]: 1}
        assert [x["id"] for x in notices(dm, limit=100)[1]["notifications"]][:2] == [
            x["id"] for x in queued
        ]
        # Then bob's goes, carol's is given up for good, the sentinel goes: all acknowledged.
        assert await pump.run_once() is True
        assert [x["username"] for x in sent] == ["bob", "zed"] and pump.tries == {}
        assert notices(dm)[1]["notifications"] == []

        # Running on its own: a new notice is sent and acknowledged.
        task = asyncio.create_task(pump.run())
        try:
            mention(dm, alice, "alice/proj", "@bob live")
            for _ in range(200):
                if (
                    any(x["username"] == "bob" and x["id"] > queued[-1]["id"] for x in sent)
                    and pump.acked == pump.handled
                ):
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the pump did not send the new notice")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    assert notices(dm)[1]["notifications"] == []
    reply = notice_reply(sent[-1])
    assert reply.title == "alice/proj#1 Fix the build"
    assert reply.description == "You were mentioned in issue #1 by alice in alice/proj."
    assert reply.url == sent[-1]["url"] and reply.private


class DiscordWithDms(FakeDiscord):
    """The stand-in Discord, which also opens DM channels and takes messages in them."""

    CLOSED = "3003"  # carol has closed her direct messages

    def __init__(self, token: str) -> None:
        super().__init__(token)
        self.messages: list[tuple[str, dict]] = []
        router = self.server.app.router
        router.add_get("/api/v10/users/{id}", self.user)
        router.add_post("/api/v10/users/@me/channels", self.open_dm)
        router.add_post("/api/v10/channels/{channel}/messages", self.message)

    @staticmethod
    def _user(user_id: str) -> dict:
        return {
            "id": user_id,
            "username": f"u{user_id}",
            "discriminator": "0",
            "avatar": None,
            "global_name": None,
        }

    async def user(self, request: web.Request) -> web.Response:
        return json_answer(self._user(request.match_info["id"]))

    async def open_dm(self, request: web.Request) -> web.Response:
        recipient = str((await request.json())["recipient_id"])
        return json_answer(
            {"id": f"5{recipient}", "type": 1, "recipients": [self._user(recipient)]}
        )

    async def message(self, request: web.Request) -> web.Response:
        channel, payload = request.match_info["channel"], await request.json()
        if channel == f"5{self.CLOSED}":
            return json_answer(
                {"message": "Cannot send messages to this user", "code": 50007}, status=403
            )
        self.messages.append((channel[1:], payload))
        return json_answer(
            {
                "id": str(7000 + len(self.messages)),
                "channel_id": channel,
                "type": 0,
                "content": "",
                "author": self._user("999"),
                "embeds": payload.get("embeds", []),
                "attachments": [],
                "mentions": [],
                "mention_roles": [],
                "pinned": False,
                "tts": False,
                "mention_everyone": False,
                "timestamp": "2026-01-01T00:00:00+00:00",
                "edited_timestamp": None,
            }
        )


async def test_discord_front_sends_direct_messages(dm, monkeypatch):
    fake = DiscordWithDms("tok")
    await fake.server.start_server()
    monkeypatch.setattr(discord.http.Route, "BASE", str(fake.server.make_url("/api/v10")))
    alice = dm.users["alice"]
    bot = discord_front.HubBot(dm.url, BOT_KEY, 1234)
    try:
        await bot.login("tok")  # setup_hook starts the pump
        mention(dm, alice, "alice/proj", "@carol @bob over to you")
        for _ in range(300):
            if (
                any(chat == "2002" for chat, _ in fake.messages)
                and not notices(dm)[1]["notifications"]
            ):
                break  # bob's sent, carol's given up: both acknowledged
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"not delivered: {fake.messages}")
    finally:
        await bot.close()
        await fake.server.close()
    to_bob = [p for chat, p in fake.messages if chat == "2002"]
    assert len(to_bob) == 1 and "3003" not in [chat for chat, _ in fake.messages]
    [embed] = to_bob[0]["embeds"]
    assert embed["title"] == "alice/proj#1 Fix the build"
    assert embed["description"] == "You were mentioned in issue #1 by alice in alice/proj."
    assert embed["url"] == f"{dm.url}/api/repositories/alice/proj/issues/1"


def test_restart_neither_loses_nor_repeats_and_no_key_means_no_replay(tmp_path):
    server = ServerProcess(tmp_path / "data", {"chat": {"bot_key": BOT_KEY}}).start()
    try:
        alice, bob = _sign_up(server, "alice"), _sign_up(server, "bob")
        link(server, bob, "2002")
        _call(server, alice, "POST", REPOS, {"name": "proj"}, 201)
        collaborator = f"{REPOS}/alice/proj/collaborators/bob"
        _call(server, alice, "PUT", collaborator, {"permission": "write"}, 201)
        for title in ("One", "Two"):
            _call(
                server,
                alice,
                "POST",
                f"{REPOS}/alice/proj/issues",
                {"title": title, "assignees": ["bob"]},
                201,
            )

        def titles(count: int = 0) -> list[tuple[int, str]]:
            """The queue, once it holds count notices (the consumer runs after the answer)."""
            for _ in range(200):
                status, page = notices(server)
                assert status == 200, page
                if len(page["notifications"]) >= count:
                    break
                time.sleep(0.05)
            return [(x["id"], x["title"]) for x in page["notifications"]]

        queued = titles(2)
        assert [t for _, t in queued] == ["One", "Two"]
        assert ack(server, queued[-1][0] + 1)[0] == 400  # not handed out: nothing goes
        # A poll waiting when the server stops answers at once instead of holding it up.
        assert ack(server, queued[-1][0])[1] == {"acknowledged": 2}
        answer: dict[str, Any] = {}
        poller = threading.Thread(target=lambda: answer.update(page=notices(server, wait=30)))
        poller.start()
        time.sleep(0.5)
        started = time.monotonic()
        server.stop()
        poller.join(10)
        assert time.monotonic() - started < 5
        assert answer["page"] == (200, {"notifications": [], "hasMore": False})
        server.start()
        _call(
            server,
            alice,
            "POST",
            f"{REPOS}/alice/proj/issues",
            {"title": "One", "assignees": ["bob"]},
            201,
        )
        _call(
            server,
            alice,
            "POST",
            f"{REPOS}/alice/proj/issues",
            {"title": "Two", "assignees": ["bob"]},
            201,
        )
        queued = titles(2)
        server.stop()
        server.start()
        assert titles() == queued  # neither lost nor doubled (the log was not read again)
        assert ack(server, queued[0][0])[1] == {"acknowledged": 1}
        server.stop()
        server.start()
        assert titles() == queued[1:]

        # Without a bot key nothing is queued, and a key set later does not replay it.
        server.stop()
        server.settings["chat"]["bot_key"] = ""
        server.start()
        _call(
            server,
            alice,
            "POST",
            f"{REPOS}/alice/proj/issues",
            {"title": "While keyless", "assignees": ["bob"]},
            201,
        )
        server.stop()
        server.settings["chat"]["bot_key"] = BOT_KEY
        server.start()
        _call(
            server,
            alice,
            "POST",
            f"{REPOS}/alice/proj/issues",
            {"title": "Three", "assignees": ["bob"]},
            201,
        )
        assert [t for _, t in titles(2)] == ["Two", "Three"]
    finally:
        server.stop()
