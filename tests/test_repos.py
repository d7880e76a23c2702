"""Repositories: create, names, info, update, delete, collaborators, stars, forks, events."""

from __future__ import annotations

from hubsvc.git.files import REPO_FILES
from hubsvc.keys import CONFIG

from .conftest import sign_up


async def create(client, user, name="proj", **extra):
    resp = await client.post(
        "/api/repositories", json={"name": name, **extra}, headers=user.headers
    )
    assert resp.status == 201, await resp.text()
    return (await resp.json())["repo"]


async def test_create_and_read_with_every_field(client, alice, bob):
    repo = await create(client, alice, "proj", description="a project")
    for field in (
        "id",
        "name",
        "description",
        "visibility",
        "defaultBranch",
        "createdAt",
        "updatedAt",
        "owner",
        "starCount",
        "starred",
        "forkCount",
        "isOwner",
    ):
        assert field in repo
    assert repo["visibility"] == "public" and repo["defaultBranch"] == "main"
    assert set(repo["owner"]) == {"id", "username", "name", "avatarUrl"}
    assert repo["createdAt"].endswith("Z")
    resp = await client.get("/api/repositories/alice/proj", headers=bob.headers)
    body = await resp.json()
    assert body["isOwner"] is False and body["repo"]["isOwner"] is False
    resp = await client.get("/api/repositories/ALICE/PROJ", headers=alice.headers)
    body = await resp.json()
    assert body["isOwner"] is True and body["repo"]["isOwner"] is True
    anonymous = await (await client.get("/api/repositories/alice/proj")).json()
    assert anonymous["repo"]["starred"] is False


async def test_repository_lives_at_a_path_built_from_its_id(client, alice):
    repo = await create(client, alice, "..x", autoInit=True)
    path = client.app[REPO_FILES].path(int(repo["id"]))
    assert path.is_dir() and path.name == f"{repo['id']}.git"
    assert "..x" not in str(path)
    root = client.app[CONFIG].data_dir.resolve()
    assert path.resolve().is_relative_to(root)


async def test_name_rules(client, alice):
    for bad in ("", ".", "..", "a b", "x.git", "X.GIT", "a/b", "a" * 101, "é"):
        resp = await client.post("/api/repositories", json={"name": bad}, headers=alice.headers)
        assert resp.status == 400, bad
        assert "name" in (await resp.json())["error"]
    await create(client, alice, "Case")
    resp = await client.post("/api/repositories", json={"name": "case"}, headers=alice.headers)
    assert resp.status == 409
    resp = await client.post(
        "/api/repositories", json={"name": "ok", "visibility": "secret"}, headers=alice.headers
    )
    assert resp.status == 400
    resp = await client.post(
        "/api/repositories", json={"name": "ok", "defaultBranch": "a..b"}, headers=alice.headers
    )
    assert resp.status == 400
    assert (await client.post("/api/repositories", json={"name": "anon"})).status == 401


async def test_auto_init_makes_a_real_first_commit(client, alice):
    await create(client, alice, "init", autoInit=True, description="hello", defaultBranch="trunk")
    resp = await client.get("/api/repositories/alice/init/commits?branch=trunk")
    commits = (await resp.json())["commits"]
    assert len(commits) == 1 and commits[0]["parents"] == []
    resp = await client.get("/api/repositories/alice/init/file?branch=trunk&path=README.md")
    assert "hello" in (await resp.json())["file"]["content"]
    branches = (await (await client.get("/api/repositories/alice/init/branches")).json())[
        "branches"
    ]
    assert branches[0]["name"] == "trunk" and branches[0]["isDefault"] is True


async def test_private_repository_is_404_for_outsiders_on_every_route(client, alice, bob):
    await create(client, alice, "secret", visibility="private", autoInit=True)
    sha = (
        await (
            await client.get("/api/repositories/alice/secret/commits", headers=alice.headers)
        ).json()
    )["commits"][0]["oid"]
    paths = [
        "",
        "/branches",
        "/commits",
        f"/commits/{sha}/diff",
        "/tree",
        "/file?path=README.md",
        "/forks",
        "/stars",
        "/collaborators",
    ]
    for who in (None, bob):
        headers = who.headers if who else {}
        for path in paths:
            resp = await client.get(f"/api/repositories/alice/secret{path}", headers=headers)
            assert resp.status == 404, (path, who)
            assert await resp.json() == {"error": "repository not found"}
        for method, path in (
            ("POST", "/star"),
            ("DELETE", "/star"),
            ("POST", "/fork"),
            ("PATCH", ""),
            ("DELETE", ""),
            ("PUT", "/collaborators/bob"),
        ):
            resp = await client.request(
                method, f"/api/repositories/alice/secret{path}", json={}, headers=headers
            )
            assert resp.status == (401 if who is None else 404), (method, path, who)
    # The owner's list hides it from others.
    listed = await (await client.get("/api/users/alice/repositories", headers=bob.headers)).json()
    assert [r["name"] for r in listed["repositories"]] == []
    listed = await (await client.get("/api/users/alice/repositories", headers=alice.headers)).json()
    assert [r["name"] for r in listed["repositories"]] == ["secret"]


async def test_collaborators_roles(client, alice, bob):
    carol = await sign_up(client, "carol")
    await create(client, alice, "team", visibility="private")
    url = "/api/repositories/alice/team"
    resp = await client.put(
        url + "/collaborators/bob", json={"permission": "read"}, headers=alice.headers
    )
    assert resp.status == 201
    assert (await resp.json())["user"]["permission"] == "read"
    assert (await client.get(url, headers=bob.headers)).status == 200
    # A reader may not write, and may not manage collaborators.
    resp = await client.patch(url, json={"description": "x"}, headers=bob.headers)
    assert resp.status == 403
    resp = await client.put(url + "/collaborators/carol", json={}, headers=bob.headers)
    assert resp.status == 403
    assert (await client.get(url, headers=carol.headers)).status == 404
    resp = await client.put(
        url + "/collaborators/bob", json={"permission": "write"}, headers=alice.headers
    )
    assert resp.status == 200
    users = (await (await client.get(url + "/collaborators", headers=bob.headers)).json())["users"]
    assert [(u["username"], u["permission"]) for u in users] == [("bob", "write")]
    resp = await client.put(
        url + "/collaborators/bob", json={"permission": "owner"}, headers=alice.headers
    )
    assert resp.status == 400
    resp = await client.put(url + "/collaborators/nobody", json={}, headers=alice.headers)
    assert resp.status == 404
    assert (await client.delete(url + "/collaborators/bob", headers=alice.headers)).status == 204
    assert (await client.get(url, headers=bob.headers)).status == 404
    assert (await client.delete(url + "/collaborators/bob", headers=alice.headers)).status == 404


async def test_collaborator_list_is_for_writers_only(client, alice, bob):
    """As on GitHub (listing collaborators needs push access): who holds which permission
    is the writers' business, even on a public repository."""
    carol, dave = await sign_up(client, "carol"), await sign_up(client, "dave")
    await create(client, alice, "tool")
    await create(client, alice, "team", visibility="private")
    for repo, user, permission in (
        ("tool", bob, "write"),
        ("tool", carol, "read"),
        ("team", carol, "read"),
    ):
        resp = await client.put(
            f"/api/repositories/alice/{repo}/collaborators/{user.username}",
            json={"permission": permission},
            headers=alice.headers,
        )
        assert resp.status == 201
    tool = "/api/repositories/alice/tool/collaborators"
    team = "/api/repositories/alice/team/collaborators"
    for who, url, status in (
        (None, tool, 401),
        (dave, tool, 403),
        (carol, tool, 403),
        (carol, team, 403),
        (None, team, 404),
        (dave, team, 404),
        (None, "/api/repositories/alice/nothing/collaborators", 404),
    ):
        resp = await client.get(url, headers=who.headers if who else {})
        body = await resp.json()
        assert resp.status == status and set(body) == {"error"}, (who and who.username, url, body)
    resp = await client.get(tool, headers=carol.headers)
    assert (await resp.json())["error"] == "write access to this repository is required"
    resp = await client.get(tool)
    assert (await resp.json())["error"] == "authentication required"
    for who in (alice, bob):
        users = (await (await client.get(tool, headers=who.headers)).json())["users"]
        assert [(u["username"], u["permission"]) for u in users] == [
            ("bob", "write"),
            ("carol", "read"),
        ]


async def test_update_rename_and_delete_are_owner_only(client, alice, bob):
    await create(client, alice, "old", autoInit=True)
    await create(client, alice, "taken")
    url = "/api/repositories/alice/old"
    assert (await client.patch(url, json={"name": "new"}, headers=bob.headers)).status == 403
    assert (await client.patch(url, json={"name": "taken"}, headers=alice.headers)).status == 409
    resp = await client.patch(
        url,
        json={"name": "new", "description": "d", "visibility": "private"},
        headers=alice.headers,
    )
    repo = (await resp.json())["repo"]
    assert (repo["name"], repo["description"], repo["visibility"]) == ("new", "d", "private")
    # The old name redirects to the new one (tests/test_names.py has the details).
    resp = await client.get(url, headers=alice.headers, allow_redirects=False)
    assert (resp.status, resp.headers["Location"]) == (301, "/api/repositories/alice/new")
    # The git data followed the rename, because the disk path never had the name in it.
    resp = await client.get("/api/repositories/alice/new/tree", headers=alice.headers)
    assert (await resp.json())["files"][0]["name"] == "README.md"
    resp = await client.patch(
        "/api/repositories/alice/new", json={"defaultBranch": "nope"}, headers=alice.headers
    )
    assert resp.status == 400
    assert (await client.delete("/api/repositories/alice/new", headers=bob.headers)).status == 404
    assert (await client.delete("/api/repositories/alice/new", headers=alice.headers)).status == 204
    assert (await client.get("/api/repositories/alice/new", headers=alice.headers)).status == 404


async def test_star_and_unstar_are_idempotent_and_publish(client, events, alice, bob):
    await create(client, alice, "starme")
    url = "/api/repositories/alice/starme/star"
    for _ in range(2):
        resp = await client.post(url, headers=bob.headers)
        assert await resp.json() == {"starred": True, "starCount": 1}
    info = await (await client.get("/api/repositories/alice/starme", headers=bob.headers)).json()
    assert info["repo"]["starred"] is True and info["repo"]["starCount"] == 1
    users = await (await client.get("/api/repositories/alice/starme/stars")).json()
    assert [u["username"] for u in users["users"]] == ["bob"] and users["hasMore"] is False
    for _ in range(2):
        resp = await client.delete(url, headers=bob.headers)
        assert await resp.json() == {"starred": False, "starCount": 0}
    assert (await client.post(url)).status == 401
    stars = await events.wait_for(2)
    assert [(e.type, e.data["action"]) for e in stars] == [("star", "added"), ("star", "removed")]
    assert stars[0].actor["username"] == "bob"
    assert stars[0].repository == {"owner": "alice", "name": "starme"}


async def test_lists_paginate(client, alice):
    for n in range(3):
        await create(client, alice, f"r{n}")
    resp = await client.get("/api/users/alice/repositories?limit=2")
    body = await resp.json()
    assert [r["name"] for r in body["repositories"]] == ["r2", "r1"] and body["hasMore"] is True
    body = await (await client.get("/api/users/alice/repositories?limit=2&offset=2")).json()
    assert [r["name"] for r in body["repositories"]] == ["r0"] and body["hasMore"] is False
    for bad in ("limit=0", "limit=101", "offset=-1", "limit=x"):
        assert (await client.get(f"/api/users/alice/repositories?{bad}")).status == 400
    assert (await client.get("/api/users/nobody/repositories")).status == 404


async def test_fork_flow(client, events, alice, bob):
    await create(client, alice, "upstream", autoInit=True)
    url = "/api/repositories/alice/upstream"
    resp = await client.post(url + "/fork", json={}, headers=bob.headers)
    assert resp.status == 201
    fork = (await resp.json())["repo"]
    assert fork["name"] == "upstream" and fork["owner"]["username"] == "bob"
    assert fork["parent"] == {"owner": "alice", "name": "upstream"}
    resp = await client.post(url + "/fork", json={}, headers=bob.headers)
    assert resp.status == 409
    resp = await client.post(
        url + "/fork", json={"name": "second", "description": "mine"}, headers=bob.headers
    )
    assert resp.status == 201
    info = (await (await client.get(url)).json())["repo"]
    assert info["forkCount"] == 2
    forks = await (await client.get(url + "/forks")).json()
    assert [f["name"] for f in forks["forks"]] == ["second", "upstream"]
    await events.wait_for(2)
    fork_events = events.of("fork")
    assert fork_events[0].data["forker"]["username"] == "bob"
    assert fork_events[0].data["forkee"]["name"] == "upstream"
    # The fork has the history and outlives its parent.
    parent_log = await (await client.get(url + "/commits")).json()
    assert (await client.delete(url, headers=alice.headers)).status == 204
    fork_log = await (await client.get("/api/repositories/bob/upstream/commits")).json()
    assert fork_log["commits"] == parent_log["commits"]
    info = (await (await client.get("/api/repositories/bob/upstream")).json())["repo"]
    assert info["parent"] is None


async def test_profile_counts_public_repositories_and_stars(client, alice, bob):
    await create(client, alice, "pub")
    await create(client, alice, "priv", visibility="private")
    await client.post("/api/repositories/alice/pub/star", headers=bob.headers)
    profile = (await (await client.get("/api/users/alice/profile")).json())["profile"]
    assert profile["repositoryCount"] == 1
    profile = (await (await client.get("/api/users/bob/profile")).json())["profile"]
    assert profile["starCount"] == 1
