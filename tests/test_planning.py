"""Milestones, labels as objects, and reactions: counts that follow, once per person and kind."""

from __future__ import annotations

from .test_repos import create
from .test_ws import connect, next_of

REPO = "/api/repositories/alice/proj"


async def issue(client, user, **body):
    resp = await client.post(REPO + "/issues", json={"title": "t", **body}, headers=user.headers)
    assert resp.status == 201, await resp.text()
    return (await resp.json())["issue"]


async def milestone(client, user, number):
    resp = await client.get(f"{REPO}/milestones/{number}", headers=user.headers)
    assert resp.status == 200, await resp.text()
    return (await resp.json())["milestone"]


async def test_milestone_counts_follow_issue_state(client, alice, bob):
    await create(client, alice, "proj")
    ws = await connect(client, alice)
    resp = await client.post(
        REPO + "/milestones",
        json={"title": "v1", "description": "first", "dueOn": "2030-01-02T03:04:05+01:00"},
        headers=alice.headers,
    )
    assert resp.status == 201, await resp.text()
    made = (await resp.json())["milestone"]
    assert (made["number"], made["dueOn"], made["state"]) == (1, "2030-01-02T02:04:05Z", "open")
    assert (made["openIssues"], made["closedIssues"]) == (0, 0)
    sent = await next_of(ws, "notification")
    assert sent["notification"]["type"] == "milestone"
    assert sent["notification"]["data"]["action"] == "created"
    dup = await client.post(REPO + "/milestones", json={"title": "V1"}, headers=alice.headers)
    assert dup.status == 409

    one = await issue(client, alice, milestone=1)
    assert one["milestone"]["number"] == 1 and one["milestone"]["title"] == "v1"
    two = await issue(client, alice)
    assert two["milestone"] is None
    resp = await client.patch(
        f"{REPO}/issues/{two['number']}", json={"milestone": 1}, headers=alice.headers
    )
    assert resp.status == 200 and (await resp.json())["issue"]["milestone"]["number"] == 1
    assert (await milestone(client, alice, 1))["openIssues"] == 2
    await client.patch(f"{REPO}/issues/1", json={"state": "closed"}, headers=alice.headers)
    got = await milestone(client, alice, 1)
    assert (got["openIssues"], got["closedIssues"]) == (1, 1)
    # Filters: by number, none and any.
    await issue(client, alice)
    for value, numbers in (("1", [2]), ("none", [3]), ("*", [2])):
        listed = await client.get(f"{REPO}/issues?milestone={value}")
        assert [i["number"] for i in (await listed.json())["issues"]] == numbers
    # Only triagers set one; a number with no milestone is 422 naming the field.
    resp = await client.patch(f"{REPO}/issues/2", json={"milestone": None}, headers=bob.headers)
    assert resp.status == 403
    resp = await client.patch(f"{REPO}/issues/2", json={"milestone": 9}, headers=alice.headers)
    assert resp.status == 422 and "milestone" in (await resp.json())["error"]
    # Closing the milestone; deleting it leaves the issues without one.
    resp = await client.patch(
        f"{REPO}/milestones/1", json={"state": "closed"}, headers=alice.headers
    )
    assert (await resp.json())["milestone"]["closedAt"] is not None
    listed = await (await client.get(f"{REPO}/milestones?state=all")).json()
    assert [m["number"] for m in listed["milestones"]] == [1] and not listed["hasMore"]
    assert (await (await client.get(f"{REPO}/milestones")).json())["milestones"] == []
    assert (await client.delete(f"{REPO}/milestones/1", headers=bob.headers)).status == 403
    assert (await client.delete(f"{REPO}/milestones/1", headers=alice.headers)).status == 204
    after = await (await client.get(f"{REPO}/issues/2")).json()
    assert after["issue"]["milestone"] is None
    await ws.close()


async def test_labels_are_objects_and_names_keep_working(client, alice):
    await create(client, alice, "proj")
    # A name used on an issue gets its object on first use, grey.
    made = await issue(client, alice, labels=["bug"])
    assert made["labels"] == ["bug"]
    assert made["labelObjects"][0]["color"] == "ededed"
    resp = await client.post(
        REPO + "/labels",
        json={"name": "UI", "color": "00FF88", "description": "screens"},
        headers=alice.headers,
    )
    assert resp.status == 201, await resp.text()
    assert (await resp.json())["label"]["color"] == "00ff88"
    assert (
        await client.post(REPO + "/labels", json={"name": "ui"}, headers=alice.headers)
    ).status == 409
    bad = await client.post(
        REPO + "/labels", json={"name": "x", "color": "#fff"}, headers=alice.headers
    )
    assert bad.status == 400 and "color" in (await bad.json())["error"]
    listed = await (await client.get(REPO + "/labels")).json()
    assert [label["name"] for label in listed["labels"]] == ["bug", "UI"]
    resp = await client.patch(
        f"{REPO}/issues/{made['number']}", json={"labels": ["bug", "ui"]}, headers=alice.headers
    )
    objects = (await resp.json())["issue"]["labelObjects"]
    assert [(o["name"], o["color"]) for o in objects] == [("bug", "ededed"), ("UI", "00ff88")]
    # Renaming follows onto the issues; deleting takes it off them.
    resp = await client.patch(
        f"{REPO}/labels/bug", json={"name": "defect", "color": "ff0000"}, headers=alice.headers
    )
    assert resp.status == 200, await resp.text()
    got = (await (await client.get(f"{REPO}/issues/{made['number']}")).json())["issue"]
    assert got["labels"] == ["defect", "ui"] and got["labelObjects"][0]["color"] == "ff0000"
    assert (await client.get(f"{REPO}/issues?labels=defect")).status == 200
    assert (await client.delete(f"{REPO}/labels/UI", headers=alice.headers)).status == 204
    got = (await (await client.get(f"{REPO}/issues/{made['number']}")).json())["issue"]
    assert got["labels"] == ["defect"]
    assert (await client.get(f"{REPO}/labels/ui")).status == 404


async def test_reactions_once_per_person_and_kind(client, alice, bob, events):
    await create(client, alice, "proj")
    made = await issue(client, alice)
    number = made["number"]
    assert made["reactions"] == {
        "totalCount": 0,
        "+1": 0,
        "-1": 0,
        "laugh": 0,
        "confused": 0,
        "heart": 0,
        "hooray": 0,
        "rocket": 0,
        "eyes": 0,
    }
    url = f"{REPO}/issues/{number}/reactions"
    first = await client.post(url, json={"content": "+1"}, headers=bob.headers)
    assert first.status == 201
    again = await client.post(url, json={"content": "+1"}, headers=bob.headers)
    assert again.status == 200
    assert (await again.json())["reaction"]["id"] == (await first.json())["reaction"]["id"]
    await client.post(url, json={"content": "heart"}, headers=bob.headers)
    await client.post(url, json={"content": "+1"}, headers=alice.headers)
    bad = await client.post(url, json={"content": "thumbsup"}, headers=bob.headers)
    assert bad.status == 400
    got = (await (await client.get(f"{REPO}/issues/{number}")).json())["issue"]["reactions"]
    assert (got["totalCount"], got["+1"], got["heart"]) == (3, 2, 1)
    listed = await (await client.get(url + "?content=%2B1")).json()
    assert [r["user"]["username"] for r in listed["reactions"]] == ["bob", "alice"]
    # A comment's reactions, in the comment list too (one query for the page).
    resp = await client.post(
        f"{REPO}/issues/{number}/comments", json={"body": "hi"}, headers=alice.headers
    )
    comment = (await resp.json())["comment"]
    assert comment["reactions"]["totalCount"] == 0
    curl = f"{REPO}/issues/{number}/comments/{comment['id']}/reactions"
    resp = await client.post(curl, json={"content": "rocket"}, headers=bob.headers)
    assert resp.status == 201
    reaction_id = (await resp.json())["reaction"]["id"]
    page = await (await client.get(f"{REPO}/issues/{number}/comments")).json()
    assert page["comments"][0]["reactions"]["rocket"] == 1
    # Only the one who reacted takes it back.
    assert (await client.delete(f"{curl}/{reaction_id}", headers=alice.headers)).status == 403
    assert (await client.delete(f"{curl}/{reaction_id}", headers=bob.headers)).status == 204
    page = await (await client.get(f"{REPO}/issues/{number}/comments")).json()
    assert page["comments"][0]["reactions"]["totalCount"] == 0
    # Anonymous callers read but do not react; the issue list carries the counts.
    assert (await client.post(url, json={"content": "eyes"})).status == 401
    listed = await (await client.get(REPO + "/issues")).json()
    assert listed["issues"][0]["reactions"]["+1"] == 2
    kinds = [(e.type, e.data["action"]) for e in events.events if e.type == "reaction"]
    assert kinds == [("reaction", "created")] * 4 + [("reaction", "deleted")]


async def test_private_repository_planning_is_404(client, alice, bob):
    await create(client, alice, "proj", visibility="private")
    await issue(client, alice)
    for path in ("/milestones", "/labels", "/issues/1/reactions"):
        assert (await client.get(REPO + path, headers=bob.headers)).status == 404
    resp = await client.post(
        REPO + "/issues/1/reactions", json={"content": "+1"}, headers=bob.headers
    )
    assert resp.status == 404
