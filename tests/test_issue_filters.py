"""Finding issues and pull requests: GitHub's list filters, and 400 for unknown ones."""

from __future__ import annotations

from .conftest import sign_up
from .test_repos import create

API = "/api/repositories/alice/proj"


async def numbers(client, query, headers=None, kind="issues"):
    resp = await client.get(f"{API}/{kind}?{query}", headers=headers)
    assert resp.status == 200, (query, await resp.text())
    return [
        item["number"]
        for item in (await resp.json())["issues" if kind == "issues" else "pullRequests"]
    ]


async def test_issue_list_filters(client, alice, bob):
    await create(client, alice, "proj")
    await client.put(  # assignable: a writer
        API + "/collaborators/bob", json={"permission": "write"}, headers=alice.headers
    )
    for title, labels, assignees, who in (
        ("one", ["bug", "ui"], ["bob"], alice),
        ("two", ["bug"], [], alice),
        ("three", ["UI"], ["alice", "bob"], alice),
        ("four", [], [], bob),
    ):
        body = {"title": title}
        if who is alice:
            body.update(labels=labels, assignees=assignees)
        resp = await client.post(API + "/issues", json=body, headers=who.headers)
        assert resp.status == 201
    await client.post(API + "/issues/2/comments", json={"body": "a"}, headers=bob.headers)
    await client.post(API + "/issues/2/comments", json={"body": "b"}, headers=bob.headers)
    await client.post(API + "/issues/3/comments", json={"body": "c"}, headers=bob.headers)

    assert await numbers(client, "") == [4, 3, 2, 1]
    assert await numbers(client, "labels=bug") == [2, 1]
    assert await numbers(client, "labels=bug,ui") == [1]  # every label must match
    assert await numbers(client, "labels=ui") == [3, 1]  # ignoring case
    assert await numbers(client, "labels=nope") == []
    assert await numbers(client, "assignee=bob") == [3, 1]
    assert await numbers(client, "assignee=ALICE") == [3]
    assert await numbers(client, "assignee=none") == [4, 2]
    assert await numbers(client, "assignee=*") == [3, 1]
    assert await numbers(client, "assignee=me", bob.headers) == [3, 1]
    assert await numbers(client, "author=bob") == [4]
    assert await numbers(client, "creator=alice&labels=bug") == [2, 1]
    assert await numbers(client, "author=nobody") == []
    assert await numbers(client, "sort=created&direction=asc") == [1, 2, 3, 4]
    assert await numbers(client, "sort=comments") == [2, 3, 4, 1]
    assert await numbers(client, "sort=comments&direction=asc") == [1, 4, 3, 2]
    # Times have whole seconds, so within one the number breaks the tie.
    updated = await numbers(client, "sort=updated")
    assert sorted(updated) == [1, 2, 3, 4]
    assert await numbers(client, "sort=updated&direction=asc") == updated[::-1]
    assert await numbers(client, "since=2999-01-01T00:00:00Z") == []
    assert await numbers(client, "since=2000-01-01") == [4, 3, 2, 1]
    assert await numbers(client, "labels=bug&limit=1&offset=1") == [1]

    for query, named in (
        ("labels=bug&color=red", "color"),
        ("sort=new", "sort"),
        ("direction=up", "direction"),
        ("since=yesterday", "since"),
        ("state=weird", "state"),
    ):
        resp = await client.get(f"{API}/issues?{query}")
        assert resp.status == 400, query
        assert named in (await resp.json())["error"], query
    resp = await client.get(API + "/issues?assignee=me")
    assert resp.status == 401
    assert await numbers(client, "color=red&state=weird&ignoreUnknown=true&labels=bug") == [2, 1]


async def test_pull_list_filters(client, alice, tmp_path):
    from .test_pulls import open_pull, setup_branches

    await setup_branches(client, alice, tmp_path)
    carol = await sign_up(client, "carol")
    await open_pull(client, alice)
    await open_pull(client, carol, head="main", base="topic")
    assert await numbers(client, "author=carol", kind="pulls") == [2]
    assert await numbers(client, "direction=asc", kind="pulls") == [1, 2]
    assert await numbers(client, "labels=bug", kind="pulls") == []
    resp = await client.get(API + "/pulls?label=bug")
    assert resp.status == 400 and "label" in (await resp.json())["error"]
