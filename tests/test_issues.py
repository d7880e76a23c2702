"""Issues: numbering, states and events, permissions per role, comments."""

from __future__ import annotations

import asyncio

from .conftest import sign_up
from .test_repos import create

API = "/api/repositories/alice/proj/issues"


async def open_issue(client, user, title="Bug", **extra):
    resp = await client.post(API, json={"title": title, **extra}, headers=user.headers)
    assert resp.status == 201, await resp.text()
    return (await resp.json())["issue"]


async def test_create_get_list_and_fields(client, alice, bob):
    await create(client, alice)
    issue = await open_issue(client, bob, "It breaks", body="steps")
    for field in (
        "id",
        "number",
        "title",
        "body",
        "state",
        "labels",
        "assignees",
        "author",
        "commentCount",
        "createdAt",
        "updatedAt",
        "closedAt",
    ):
        assert field in issue
    assert issue["number"] == 1 and issue["state"] == "open" and issue["closedAt"] is None
    assert issue["author"]["username"] == "bob"
    await open_issue(client, bob, "Second")
    body = await (await client.get(API)).json()
    assert [i["number"] for i in body["issues"]] == [2, 1] and body["hasMore"] is False
    body = await (await client.get(API + "?limit=1")).json()
    assert [i["number"] for i in body["issues"]] == [2] and body["hasMore"] is True
    body = await (await client.get(API + "?limit=1&offset=1")).json()
    assert [i["number"] for i in body["issues"]] == [1] and body["hasMore"] is False
    got = await (await client.get(API + "/1")).json()
    assert got["issue"]["title"] == "It breaks" and got["comments"] == []
    assert (await client.get(API + "/99")).status == 404
    assert (await client.get(API + "/abc")).status == 404
    for bad in ("state=weird", "limit=0", "limit=101", "offset=-3"):
        assert (await client.get(f"{API}?{bad}")).status == 400


async def test_numbers_never_collide_under_concurrent_creates(client, alice):
    await create(client, alice)
    results = await asyncio.gather(
        *(client.post(API, json={"title": f"t{n}"}, headers=alice.headers) for n in range(40))
    )
    numbers = sorted([(await r.json())["issue"]["number"] for r in results])
    assert numbers == list(range(1, 41))
    body = await (await client.get(API + "?limit=100")).json()
    assert len(body["issues"]) == 40


async def test_state_transitions_and_their_events(client, events, alice, bob):
    await create(client, alice)
    await open_issue(client, bob)
    url = API + "/1"
    resp = await client.patch(url, json={"state": "closed"}, headers=bob.headers)
    closed = (await resp.json())["issue"]
    assert closed["state"] == "closed" and closed["closedAt"].endswith("Z")
    assert (await (await client.get(API)).json())["issues"] == []
    assert len((await (await client.get(API + "?state=closed")).json())["issues"]) == 1
    assert len((await (await client.get(API + "?state=all")).json())["issues"]) == 1
    resp = await client.patch(url, json={"state": "open"}, headers=alice.headers)
    assert (await resp.json())["issue"]["closedAt"] is None
    await client.patch(url, json={"title": "Renamed"}, headers=bob.headers)
    resp = await client.post(url + "/comments", json={"body": "me too"}, headers=alice.headers)
    assert resp.status == 201
    await events.wait_for(5)
    assert [(e.type, e.data["action"]) for e in events.events] == [
        ("issue", "opened"),
        ("issue", "closed"),
        ("issue", "reopened"),
        ("issue", "edited"),
        ("issue", "commented"),
    ]
    commented = events.events[-1]
    assert commented.data["comment"]["body"] == "me too"
    assert commented.data["issue"]["commentCount"] == 1
    assert commented.repository == {"owner": "alice", "name": "proj"}


async def test_permission_rules(client, alice, bob):
    carol = await sign_up(client, "carol")
    writer = await sign_up(client, "wendy")
    await create(client, alice)
    await client.put(
        "/api/repositories/alice/proj/collaborators/wendy",
        json={"permission": "write"},
        headers=alice.headers,
    )
    await open_issue(client, bob, "by bob")
    url = API + "/1"
    assert (await client.post(API, json={"title": "x"})).status == 401
    # Labels and assignees need write access, on create and on edit.
    resp = await client.post(API, json={"title": "x", "labels": ["bug"]}, headers=bob.headers)
    assert resp.status == 403
    resp = await client.patch(url, json={"labels": ["bug"]}, headers=bob.headers)
    assert resp.status == 403
    # Someone else's issue: only writers may edit it.
    resp = await client.patch(url, json={"title": "hijack"}, headers=carol.headers)
    assert resp.status == 403
    resp = await client.patch(url, json={"state": "closed"}, headers=carol.headers)
    assert resp.status == 403
    # bob only reads the public repository: not assignable (GitHub: triage or more).
    resp = await client.patch(url, json={"assignees": ["bob", "wendy"]}, headers=writer.headers)
    assert resp.status == 422 and (await resp.json())["error"].endswith(": bob")
    resp = await client.patch(
        url,
        json={"labels": ["bug", "ui"], "assignees": ["alice", "wendy"], "title": "By Bob"},
        headers=writer.headers,
    )
    issue = (await resp.json())["issue"]
    assert issue["labels"] == ["bug", "ui"]
    assert [a["username"] for a in issue["assignees"]] == ["alice", "wendy"]
    resp = await client.patch(url, json={"assignees": ["ghost"]}, headers=writer.headers)
    assert resp.status == 400 and "ghost" in (await resp.json())["error"]
    # Any signed-in reader may comment.
    resp = await client.post(url + "/comments", json={"body": "hi"}, headers=carol.headers)
    assert resp.status == 201
    # Delete: the owner only.
    assert (await client.delete(url, headers=writer.headers)).status == 403
    assert (await client.delete(url, headers=bob.headers)).status == 403
    assert (await client.delete(url, headers=alice.headers)).status == 204
    assert (await client.get(url)).status == 404


async def test_private_repository_issues_are_hidden(client, alice, bob):
    await create(client, alice, visibility="private")
    await open_issue(client, alice)
    for path in ("", "/1", "/1/comments"):
        assert (await client.get(API + path, headers=bob.headers)).status == 404
    assert (await client.post(API, json={"title": "x"}, headers=bob.headers)).status == 404
    resp = await client.post(API + "/1/comments", json={"body": "x"}, headers=bob.headers)
    assert resp.status == 404


async def test_validation(client, alice):
    await create(client, alice)
    for body in (
        {"title": ""},
        {"title": "x" * 257},
        {"title": "x", "body": "b" * 65537},
        {"title": "x", "labels": "bug"},
        {"title": 5},
        {},
    ):
        resp = await client.post(API, json=body, headers=alice.headers)
        assert resp.status == 400, body
    await open_issue(client, alice)
    resp = await client.post(API + "/1/comments", json={"body": ""}, headers=alice.headers)
    assert resp.status == 400
    resp = await client.patch(API + "/1", json={"state": "merged"}, headers=alice.headers)
    assert resp.status == 400


async def test_comments_list_in_order_with_pages(client, alice):
    await create(client, alice)
    await open_issue(client, alice)
    for n in range(3):
        await client.post(API + "/1/comments", json={"body": f"c{n}"}, headers=alice.headers)
    got = await (await client.get(API + "/1")).json()
    assert [c["body"] for c in got["comments"]] == ["c0", "c1", "c2"]
    assert got["issue"]["commentCount"] == 3
    page = await (await client.get(API + "/1/comments?limit=2&offset=1")).json()
    assert [c["body"] for c in page["comments"]] == ["c1", "c2"] and page["hasMore"] is False
