"""The events feed and WebSocket resume, read from the event log."""

from __future__ import annotations

import asyncio

from hubsvc.keys import STORE
from hubsvc.timeutil import iso

from .conftest import sign_up
from .test_repos import create


async def _issues(client, user, repo: str, count: int, start: int = 0) -> None:
    for n in range(start, start + count):
        resp = await client.post(
            f"/api/repositories/{repo}/issues", headers=user.headers, json={"title": f"issue {n}"}
        )
        assert resp.status == 201


async def _feed(client, path="/api/events", user=None, **params):
    resp = await client.get(path, params=params, headers=user.headers if user else {})
    return resp.status, await resp.json()


async def test_the_feed_shows_only_what_the_caller_may_read(client, alice, bob):
    await create(client, alice, "open")
    await create(client, alice, "secret", visibility="private")
    await _issues(client, alice, "alice/open", 2)
    await _issues(client, alice, "alice/secret", 2)
    _, mine = await _feed(client, user=alice)
    assert [e["repository"]["name"] for e in mine["events"]] == ["open", "open", "secret", "secret"]
    assert [int(e["id"]) for e in mine["events"]] == sorted(int(e["id"]) for e in mine["events"])
    for who in (None, bob):
        _, theirs = await _feed(client, user=who)
        assert [e["repository"]["name"] for e in theirs["events"]] == ["open", "open"]
    status, _ = await _feed(client, "/api/repositories/alice/secret/events", bob)
    assert status == 404
    status, repo_feed = await _feed(client, "/api/repositories/alice/secret/events", alice)
    assert status == 200 and len(repo_feed["events"]) == 2
    event = mine["events"][0]
    assert set(event) == {
        "id",
        "type",
        "repository",
        "actor",
        "data",
        "createdAt",
        "public",
        "inbound",
    }
    assert event["type"] == "issue" and event["data"]["action"] == "opened"


async def test_the_feed_pages_with_its_cursor(client, alice):
    await create(client, alice, "proj")
    await _issues(client, alice, "alice/proj", 7)
    seen, after = [], None
    while True:
        params = {"limit": 3, **({"after": after} if after else {})}
        _, page = await _feed(client, user=alice, **params)
        seen += [e["data"]["issue"]["title"] for e in page["events"]]
        after = page["lastEventId"]
        if not page["hasMore"]:
            break
    assert seen == [f"issue {n}" for n in range(7)]
    _, empty = await _feed(client, user=alice, after=after)
    assert empty == {"events": [], "hasMore": False, "lastEventId": after}


async def test_a_cursor_older_than_the_retention_is_gone(client, alice):
    await create(client, alice, "proj")
    await _issues(client, alice, "alice/proj", 3)
    _, page = await _feed(client, user=alice)
    first = page["events"][0]["id"]
    await client.app[STORE].events.prune(iso(4102444800))  # everything so far
    status, body = await _feed(client, user=alice, after=str(int(first) - 1))
    assert status == 410 and "pruned" in body["error"]
    status, body = await _feed(client, user=alice)
    assert status == 200 and body["events"] == []


async def _connect(client, user, after: str | None = None):
    url = f"/ws?token={user.token}" + (f"&after={after}" if after is not None else "")
    ws = await client.ws_connect(url)
    hello = await ws.receive_json(timeout=5)
    assert hello["type"] == "connected"
    return ws, hello


async def _notifications(ws, count: int, timeout: float = 10.0) -> list[dict]:
    got = []
    while len(got) < count:
        message = await ws.receive_json(timeout=timeout)
        if message["type"] == "notification":
            got.append(message["notification"])
    return got


async def test_resume_sends_exactly_the_missed_events_then_live_ones(client, alice):
    await create(client, alice, "proj")
    ws, hello = await _connect(client, alice)
    cursor = hello["lastEventId"]
    await ws.close()
    await _issues(client, alice, "alice/proj", 50)  # missed while away
    ws, _ = await _connect(client, alice, after=cursor)
    # More land while the replay runs: the seam has neither a gap nor a repeat.
    writer = asyncio.ensure_future(_issues(client, alice, "alice/proj", 20, start=50))
    got = await _notifications(ws, 70)
    await writer
    titles = [n["data"]["issue"]["title"] for n in got]
    assert titles == [f"issue {n}" for n in range(70)]
    ids = [int(n["id"]) for n in got]
    assert ids == sorted(set(ids))
    await _issues(client, alice, "alice/proj", 1, start=70)
    [live] = await _notifications(ws, 1)
    assert live["data"]["issue"]["title"] == "issue 70"
    # Nothing more: no event came twice.
    try:
        while True:
            assert (await ws.receive_json(timeout=0.3))["type"] != "notification"
    except TimeoutError:
        pass
    await ws.close()


async def test_resume_by_message_and_private_events_only_for_readers_now(client, alice, bob):
    await create(client, alice, "secret", visibility="private")
    await client.put(
        "/api/repositories/alice/secret/collaborators/bob",
        headers=alice.headers,
        json={"permission": "read"},
    )
    ws, hello = await _connect(client, bob)
    cursor = hello["lastEventId"]
    await ws.close()
    await _issues(client, alice, "alice/secret", 3)
    # bob loses access before he comes back: the replay holds nothing of it.
    await client.delete("/api/repositories/alice/secret/collaborators/bob", headers=alice.headers)
    await create(client, alice, "open")
    await client.post("/api/repositories/alice/open/star", headers=bob.headers)
    ws, _ = await _connect(client, bob)
    await ws.send_json({"type": "resume", "after": cursor})
    got = await _notifications(ws, 1)
    assert got[0]["repository"]["name"] == "open" and got[0]["type"] == "star"
    message = await ws.receive_json(timeout=5)
    assert message == {"type": "resumed", "lastEventId": message["lastEventId"]}
    await ws.send_json({"type": "resume", "after": "not a number"})
    assert (await ws.receive_json(timeout=5))["type"] == "error"
    await ws.close()


async def test_resume_past_the_retention_asks_for_a_resync(client, alice):
    await create(client, alice, "proj")
    ws, hello = await _connect(client, alice)
    await ws.close()
    await _issues(client, alice, "alice/proj", 2)
    await client.app[STORE].events.prune(iso(4102444800))
    ws, _ = await _connect(client, alice, after=hello["lastEventId"])
    message = await ws.receive_json(timeout=5)
    assert message["type"] == "resync" and "pruned" in message["reason"]
    await ws.close()
    carol = await sign_up(client, "carol")
    resp = await client.get(f"/ws?token={carol.token}&after=x1")
    assert resp.status == 400


async def test_before_pages_back_from_the_newest(client, alice, bob):
    await create(client, alice, "proj")
    await create(client, alice, "secret", visibility="private")
    await _issues(client, alice, "alice/proj", 7)
    await _issues(client, alice, "alice/secret", 2)  # the newest: not bob's to see
    _, everything = await _feed(client, user=alice, limit=100)
    head = int(everything["events"][-1]["id"])
    seen, before, pages = [], str(head + 1), 0
    while True:
        _, page = await _feed(client, user=bob, limit=3, before=before)
        ids = [int(e["id"]) for e in page["events"]]
        assert ids == sorted(ids, reverse=True)
        if pages == 0:
            newest = page["lastEventId"]
        seen += [e["data"]["issue"]["title"] for e in page["events"]]
        pages += 1
        if not page["hasMore"]:
            break
        before = page["events"][-1]["id"]
    assert seen == [f"issue {n}" for n in reversed(range(7))] and pages == 3
    # lastEventId is the newest returned: after= from it holds nothing new for bob.
    _, rest = await _feed(client, user=bob, after=newest)
    assert rest["events"] == []
    # Between after and before, newest first; before far past the log never moves past it.
    ids = [e["id"] for e in everything["events"]]
    _, page = await _feed(client, user=alice, after=ids[1], before=ids[4])
    assert [e["id"] for e in page["events"]] == [ids[3], ids[2]]
    _, page = await _feed(client, user=alice, after=str(head), before="999999999")
    assert page == {"events": [], "hasMore": False, "lastEventId": str(head)}
    status, body = await _feed(client, user=alice, before="x")
    assert status == 400 and "before" in body["error"]


async def test_subscribe_all_on_the_upgrade_widens_the_replay(client, alice, bob):
    ws, hello = await _connect(client, bob)
    await ws.close()
    await create(client, alice, "newer")  # not bob's, not starred: only 'all' reaches it
    await _issues(client, alice, "alice/newer", 2)
    ws = await client.ws_connect(
        f"/ws?token={bob.token}&after={hello['lastEventId']}&subscribe=all"
    )
    assert (await ws.receive_json(timeout=5))["type"] == "connected"
    assert await ws.receive_json(timeout=5) == {"type": "subscribed", "all": True}
    got = await _notifications(ws, 2)
    assert [n["data"]["issue"]["title"] for n in got] == ["issue 0", "issue 1"]
    await ws.close()
