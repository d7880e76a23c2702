"""The notifications inbox: who gets a thread and why, read state, ignore, lost access, sockets."""

from __future__ import annotations

import asyncio

import aiohttp

from hubsvc.keys import BUS

from . import test_cluster as cluster
from .conftest import sign_up
from .server import start_several, stop_all
from .test_repos import create

REPO = "/api/repositories/alice/proj"


async def inbox(client, user, query: str = "") -> dict:
    """The user's threads once the inbox consumer has read every event so far."""
    await client.app[BUS].drain()
    resp = await client.get(f"/api/notifications{query}", headers=user.headers)
    assert resp.status == 200, await resp.text()
    return await resp.json()


def reasons(body: dict) -> dict[int, str]:
    return {n["subject"]["number"]: n["reason"] for n in body["notifications"]}


async def test_who_gets_a_thread_and_why(client, alice, bob):
    carol = await sign_up(client, "carol")
    dave = await sign_up(client, "dave")  # may not read the private repository
    await create(client, alice, "proj", visibility="private")
    for who in ("bob", "carol"):
        await client.put(
            f"{REPO}/collaborators/{who}", headers=alice.headers, json={"permission": "write"}
        )
    # bob opens an issue naming carol and dave: alice watches her repository.
    resp = await client.post(
        f"{REPO}/issues",
        headers=bob.headers,
        json={"title": "Crash", "body": "@carol @dave see this", "assignees": []},
    )
    assert resp.status == 201
    assert reasons(await inbox(client, alice)) == {1: "subscribed"}
    assert reasons(await inbox(client, carol)) == {1: "mention"}
    assert reasons(await inbox(client, dave)) == {}
    assert reasons(await inbox(client, bob)) == {}  # no thread for one's own act
    # alice assigns carol and closes it: bob (the author) hears of it, alice does not.
    await client.patch(f"{REPO}/issues/1", headers=alice.headers, json={"assignees": ["carol"]})
    assert reasons(await inbox(client, carol)) == {1: "assign"}
    await client.patch(f"{REPO}/issues/1", headers=alice.headers, json={"state": "closed"})
    body = await inbox(client, bob)
    assert reasons(body) == {1: "author"} and body["unreadCount"] == 1
    thread = body["notifications"][0]
    assert thread["unread"] is True and thread["subject"]["type"] == "Issue"
    assert thread["subject"]["title"] == "Crash" and thread["repository"]["name"] == "proj"
    assert thread["url"].endswith(f"/api/notifications/threads/{thread['id']}")
    # carol comments: alice (closed it: state_change) and bob get it, with the comment linked.
    resp = await client.post(
        f"{REPO}/issues/1/comments", headers=carol.headers, json={"body": "fixed"}
    )
    comment_id = (await resp.json())["comment"]["id"]
    assert reasons(await inbox(client, alice)) == {1: "state_change"}
    [latest] = (await inbox(client, bob))["notifications"]
    assert latest["subject"]["latestCommentUrl"].endswith(f"#comment-{comment_id}")
    # participating leaves `subscribed` out; the repository filter keeps its own.
    await client.post(f"{REPO}/issues", headers=bob.headers, json={"title": "Two"})
    assert reasons(await inbox(client, alice)) == {1: "state_change", 2: "subscribed"}
    assert reasons(await inbox(client, alice, "?participating=true")) == {1: "state_change"}
    assert reasons(await inbox(client, alice, "?repository=alice/proj")) == {
        1: "state_change",
        2: "subscribed",
    }
    resp = await client.get("/api/repositories/alice/proj/notifications", headers=dave.headers)
    assert resp.status == 404


async def test_read_state_mark_all_and_ignore(client, alice, bob):
    await create(client, alice, "proj")
    await client.post(f"{REPO}/issues", headers=bob.headers, json={"title": "One"})
    await client.post(f"{REPO}/issues", headers=bob.headers, json={"title": "Two"})
    body = await inbox(client, alice)
    assert body["unreadCount"] == 2
    first = next(n for n in body["notifications"] if n["subject"]["number"] == 1)
    resp = await client.patch(f"/api/notifications/threads/{first['id']}", headers=alice.headers)
    assert resp.status == 200
    read = (await resp.json())["notification"]
    assert read["unread"] is False and read["lastReadAt"]
    assert reasons(await inbox(client, alice)) == {2: "subscribed"}
    assert reasons(await inbox(client, alice, "?all=true")) == {1: "subscribed", 2: "subscribed"}
    # Another person's thread is not there for bob.
    resp = await client.get(f"/api/notifications/threads/{first['id']}", headers=bob.headers)
    assert resp.status == 404
    # Mark all: nothing unread; a new comment makes the thread unread again.
    resp = await client.put("/api/notifications", headers=alice.headers, json={})
    assert (await resp.json()) == {"marked": 1, "unreadCount": 0}
    await client.post(f"{REPO}/issues/1/comments", headers=bob.headers, json={"body": "ping"})
    assert reasons(await inbox(client, alice)) == {1: "subscribed"}
    # Ignored: not even a mention brings it back; unsubscribed: a mention does.
    resp = await client.put(
        f"/api/notifications/threads/{first['id']}/subscription",
        headers=alice.headers,
        json={"ignored": True},
    )
    assert (await resp.json())["subscription"]["ignored"] is True
    await client.put("/api/notifications", headers=alice.headers, json={})
    await client.post(f"{REPO}/issues/1/comments", headers=bob.headers, json={"body": "@alice"})
    assert reasons(await inbox(client, alice)) == {}
    resp = await client.delete(
        f"/api/notifications/threads/{first['id']}/subscription", headers=alice.headers
    )
    assert resp.status == 204
    await client.post(f"{REPO}/issues/1/comments", headers=bob.headers, json={"body": "more"})
    assert reasons(await inbox(client, alice)) == {}
    await client.post(f"{REPO}/issues/1/comments", headers=bob.headers, json={"body": "@alice"})
    assert reasons(await inbox(client, alice)) == {1: "mention"}
    # Per issue: bob unsubscribes from his own issue; a subscriber by hand gets `subscribed`.
    carol = await sign_up(client, "carol")
    resp = await client.put(f"{REPO}/issues/2/subscription", headers=carol.headers, json={})
    assert (await resp.json())["subscription"]["subscribed"] is True
    assert (await client.delete(f"{REPO}/issues/2/subscription", headers=bob.headers)).status == 204
    await client.post(f"{REPO}/issues/2/comments", headers=alice.headers, json={"body": "ok"})
    assert reasons(await inbox(client, carol)) == {2: "subscribed"}
    assert 2 not in reasons(await inbox(client, bob))


async def test_access_lost_hides_threads(client, alice, bob):
    await create(client, alice, "proj", visibility="private")
    await client.put(
        f"{REPO}/collaborators/bob", headers=alice.headers, json={"permission": "write"}
    )
    await client.post(f"{REPO}/issues", headers=alice.headers, json={"title": "hi @bob"})
    [thread] = (await inbox(client, bob))["notifications"]
    await client.delete(f"{REPO}/collaborators/bob", headers=alice.headers)
    body = await inbox(client, bob, "?all=true")
    assert body == {"notifications": [], "hasMore": False, "unreadCount": 0}
    for method in ("get", "patch"):
        resp = await getattr(client, method)(
            f"/api/notifications/threads/{thread['id']}", headers=bob.headers
        )
        assert resp.status == 404


async def _next_inbox(ws, timeout: float = 5.0) -> dict:
    while True:
        message = await asyncio.wait_for(ws.receive_json(), timeout)
        if message["type"] == "inbox":
            return message


async def test_inbox_message_reaches_own_sockets_only(client, alice, bob):
    carol = await sign_up(client, "carol")
    await create(client, alice, "proj")
    alice_ws = await client.ws_connect(f"/ws?token={alice.token}")
    bob_ws = await client.ws_connect(f"/ws?token={bob.token}")
    # carol's issue names bob: alice (watching her repository) and bob each get a thread.
    await client.post(f"{REPO}/issues", headers=carol.headers, json={"title": "Live @bob"})
    message = await _next_inbox(alice_ws)
    assert message["unreadCount"] == 1
    assert message["thread"]["reason"] == "subscribed"
    assert message["thread"]["subject"]["title"] == "Live @bob"
    theirs = await _next_inbox(bob_ws)
    assert theirs["thread"]["reason"] == "mention" and theirs["unreadCount"] == 1
    # Reading it tells alice's sockets the count went down, and nobody else's.
    resp = await client.patch(
        f"/api/notifications/threads/{message['thread']['id']}", headers=alice.headers
    )
    assert resp.status == 200
    message = await _next_inbox(alice_ws)
    assert message["unreadCount"] == 0 and message["thread"]["unread"] is False
    await bob_ws.send_json({"type": "ping"})
    while (seen := await asyncio.wait_for(bob_ws.receive_json(), 5)).get("type") != "pong":
        assert seen["type"] != "inbox", seen
    await alice_ws.close()
    await bob_ws.close()


async def test_inbox_messages_cross_processes(tmp_path, redis_url):
    """Two processes on one Redis: the lease holder writes the thread, every process tells
    its own sockets of the user; a thread read on one process is told on the other."""
    servers = await asyncio.to_thread(start_several, tmp_path / "data", 2, redis_url, {})
    try:
        async with aiohttp.ClientSession() as session:
            a, b = servers
            owner = await cluster.sign_up(session, a, "owner")
            other = await cluster.sign_up(session, b, "other")
            status, _ = await cluster.call(
                session, a, "POST", "/api/repositories", {"name": "proj"}, owner
            )
            assert status == 201
            sockets = [await cluster.socket(session, s, owner) for s in (a, b)]
            for server in (a, b):
                await cluster.open_issue(session, server, other, f"from {server.url}")
            for ws in sockets:
                got = [(await cluster.next_of(ws, "inbox"))["unreadCount"] for _ in range(2)]
                assert got == [1, 2]
            status, body = await cluster.call(session, b, "GET", "/api/notifications", token=owner)
            first = body["notifications"][0]["id"]
            await cluster.call(
                session, a, "PATCH", f"/api/notifications/threads/{first}", token=owner
            )
            for ws in sockets:
                assert (await cluster.next_of(ws, "inbox"))["unreadCount"] == 1
                await ws.close()
    finally:
        await asyncio.to_thread(stop_all, servers)
