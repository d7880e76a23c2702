"""When a membership ends, what it gave ends with it (issue 30, findings 1 and 5): the admin
a member held on the repositories they created or forked into the organization, and their
private forks of its private repositories, through HTTP, stock git and a real WebSocket."""

from __future__ import annotations

import pytest

from hubsvc.app import create_app
from hubsvc.git.files import REPO_FILES
from hubsvc.keys import STORE

from . import test_cluster as cluster
from .conftest import sign_up
from .gitcli import git, remote
from .test_cluster import three  # noqa: F401  # the fixture of three processes
from .test_orgs import ORG, _ok, make_org
from .test_repos import create
from .test_ws import connect, next_of, nothing_for

API = "/api/repositories"
TOOL = f"{API}/acme/tool"
HEADER = "X-Hubsvc-Deleted-Forks"


async def _can_git(client, user, owner: str, name: str, tmp_path) -> bool:
    code, _, _ = await git(
        "ls-remote", remote(client, user, owner, name), cwd=tmp_path, check=False
    )
    return code == 0


async def _push(client, user, owner: str, name: str, work) -> int:
    return (
        await git(
            "push",
            "-q",
            remote(client, user, owner, name),
            "HEAD:refs/heads/x",
            cwd=work,
            check=False,
        )
    )[0]


async def test_a_removed_member_loses_admin_on_what_they_created_or_forked_in(
    client, alice, bob, tmp_path
):
    await make_org(client, alice, bob)
    # bob, a plain member, creates a private repository in acme and forks acme/app into
    # acme: GitHub makes him admin of both, while he is a member.
    await create(client, bob, "tool", owner="acme", visibility="private", autoInit=True)
    resp = await client.post(
        f"{API}/acme/app/fork", json={"owner": "acme", "name": "app-copy"}, headers=bob.headers
    )
    await _ok(resp, 201)
    for path in (TOOL, f"{API}/acme/app-copy"):
        assert (await _ok(await client.get(path, headers=bob.headers)))["repo"][
            "permission"
        ] == "admin"
    hook = {"url": "https://example.com/hook", "events": ["push"]}
    await _ok(await client.get(f"{TOOL}/hooks", headers=bob.headers))  # admins only
    work = tmp_path / "w"
    await git("clone", "-q", remote(client, bob, "acme", "tool"), str(work))
    assert await _push(client, bob, "acme", "tool", work) == 0
    ws = await connect(client, bob)
    await ws.send_json({"type": "subscribe", "repository": {"owner": "acme", "name": "tool"}})
    await next_of(ws, "subscribed")
    await _ok(await client.post(f"{TOOL}/issues", json={"title": "a"}, headers=alice.headers), 201)
    assert (await next_of(ws, "notification"))["notification"]["data"]["issue"]["title"] == "a"

    resp = await client.delete(f"{ORG}/members/bob", headers=alice.headers)
    assert resp.status == 204 and HEADER not in resp.headers

    assert await next_of(ws, "unsubscribed") == {
        "type": "unsubscribed",
        "repository": {"owner": "acme", "name": "tool"},
        "reason": "access revoked",
    }
    await _ok(await client.post(f"{TOOL}/issues", json={"title": "b"}, headers=alice.headers), 201)
    await nothing_for(ws)
    await ws.close()
    for path in (TOOL, f"{API}/acme/app-copy"):
        assert (await client.get(path, headers=bob.headers)).status == 404
        assert (await client.get(f"{path}/hooks", headers=bob.headers)).status == 404
    resp = await client.post(f"{TOOL}/hooks", json=hook, headers=bob.headers)
    assert resp.status == 404
    resp = await client.delete(TOOL, headers=bob.headers)
    assert resp.status == 404
    assert not await _can_git(client, bob, "acme", "tool", tmp_path)
    assert not await _can_git(client, bob, "acme", "app-copy", tmp_path)
    code, _, _ = await git(
        "clone", "-q", remote(client, bob, "acme", "tool"), str(tmp_path / "c"), check=False
    )
    assert code != 0
    assert await _push(client, bob, "acme", "tool", work) != 0
    # The repositories stay the organization's, untouched.
    assert (await client.get(TOOL, headers=alice.headers)).status == 200
    body = await _ok(await client.get(f"{TOOL}/collaborators", headers=alice.headers))
    assert body["users"] == []
    # Back as a member, bob reads as every member does, no more.
    await _ok(await client.put(f"{ORG}/members/bob", json={}, headers=alice.headers), 201)
    repo = (await _ok(await client.get(TOOL, headers=bob.headers)))["repo"]
    assert repo["permission"] == "read"


async def test_an_owners_own_grant_to_the_creator_outlives_the_membership(client, alice, bob):
    await make_org(client, alice, bob)
    await create(client, bob, "tool", owner="acme", visibility="private")
    # The owner chooses to keep bob as a collaborator: a grant of its own now.
    resp = await client.put(
        f"{TOOL}/collaborators/bob", json={"permission": "write"}, headers=alice.headers
    )
    await _ok(resp, 200)
    await _ok(await client.delete(f"{ORG}/members/me", headers=bob.headers), 204)
    assert (await _ok(await client.get(TOOL, headers=bob.headers)))["repo"]["permission"] == (
        "write"
    )


async def test_a_member_who_leaves_loses_their_private_forks_of_its_private_repositories(
    client, alice, bob, tmp_path
):
    await make_org(client, alice, bob)
    await create(client, alice, "site", owner="acme", visibility="public", autoInit=True)
    fork = await _ok(await client.post(f"{API}/acme/app/fork", json={}, headers=bob.headers), 201)
    folder = client.app[REPO_FILES].path(int(fork["repo"]["id"]))
    assert folder.is_dir() and await _can_git(client, bob, "bob", "app", tmp_path)
    await _ok(await client.post(f"{API}/acme/site/fork", json={}, headers=bob.headers), 201)
    ws = await connect(client, bob)
    await ws.send_json({"type": "subscribe", "repository": {"owner": "bob", "name": "app"}})
    await next_of(ws, "subscribed")

    resp = await client.delete(f"{ORG}/members/bob", headers=alice.headers)
    # The note of the removal: deletes answer 204; this one names what went with it.
    assert resp.status == 204 and resp.headers[HEADER] == "bob/app"

    assert (await next_of(ws, "unsubscribed"))["repository"] == {"owner": "bob", "name": "app"}
    await ws.close()
    assert (await client.get(f"{API}/bob/app", headers=bob.headers)).status == 404
    assert not folder.exists()
    assert not await _can_git(client, bob, "bob", "app", tmp_path)
    mine = await _ok(await client.get("/api/users/bob/repositories", headers=bob.headers))
    assert [r["name"] for r in mine["repositories"]] == ["site"]  # the public fork stays
    parent = (await _ok(await client.get(f"{API}/acme/app", headers=alice.headers)))["repo"]
    assert parent["forkCount"] == 0


async def test_an_outside_collaborator_removed_loses_their_private_fork(client, alice, bob):
    await make_org(client, alice)
    carol = await sign_up(client, "carol")
    for who in ("bob", "carol"):
        resp = await client.put(
            f"{API}/acme/app/collaborators/{who}",
            json={"permission": "read"},
            headers=alice.headers,
        )
        await _ok(resp, 201)
        await _ok(
            await client.post(
                f"{API}/acme/app/fork",
                json={},
                headers=carol.headers if who == "carol" else bob.headers,
            ),
            201,
        )
    resp = await client.delete(f"{API}/acme/app/collaborators/carol", headers=alice.headers)
    assert resp.status == 204 and resp.headers[HEADER] == "carol/app"
    assert (await client.get(f"{API}/carol/app", headers=carol.headers)).status == 404
    # bob still reads acme/app: his fork stays.
    assert (await client.get(f"{API}/bob/app", headers=bob.headers)).status == 200


async def test_the_migration_ends_creation_grants_that_outlived_their_membership(
    config, aiohttp_client, tmp_path
):
    first = await aiohttp_client(create_app(config))
    alice, bob, carol, dave = [await sign_up(first, n) for n in ("alice", "bob", "carol", "dave")]
    await make_org(first, alice, bob, carol)
    # An event, as any install in use has: a collaborator added by hand begins after it.
    resp = await first.post(f"{API}/acme/app/issues", json={"title": "t"}, headers=alice.headers)
    await _ok(resp, 201)
    await create(first, bob, "tool", owner="acme", visibility="private")
    await create(first, carol, "kit", owner="acme", visibility="private")
    resp = await first.put(
        f"{TOOL}/collaborators/dave", json={"permission": "write"}, headers=alice.headers
    )
    await _ok(resp, 201)

    def as_before(conn) -> None:
        # What the old code left: bob removed, his creation grant kept, no column yet.
        conn.execute("DELETE FROM org_members WHERE user_id = ?", (bob.id,))
        conn.execute("ALTER TABLE collaborators DROP COLUMN with_membership")
        conn.execute("DELETE FROM schema_migrations WHERE version = 37")

    await first.app[STORE].db.write(as_before)
    await first.close()
    client = await aiohttp_client(create_app(config))  # opening applies 0037
    assert (await client.get(TOOL, headers=bob.headers)).status == 404
    assert not await _can_git(client, bob, "acme", "tool", tmp_path)
    # A collaborator added by hand keeps their grant; a member's ends when they go.
    assert (await _ok(await client.get(TOOL, headers=dave.headers)))["repo"]["permission"] == (
        "write"
    )
    kit = f"{API}/acme/kit"
    assert (await _ok(await client.get(kit, headers=carol.headers)))["repo"]["permission"] == (
        "admin"
    )
    await _ok(await client.delete(f"{ORG}/members/carol", headers=alice.headers), 204)
    assert (await client.get(kit, headers=carol.headers)).status == 404


async def test_on_several_processes_the_removal_holds_at_once_everywhere(three):
    (a, b, c), session = three
    owner = await cluster.sign_up(session, a, "owner")
    member = await cluster.sign_up(session, a, "member")
    assert (await cluster.call(session, a, "POST", "/api/orgs", {"name": "acme"}, owner))[0] == 201
    path = "/api/orgs/acme/members/member"
    assert (await cluster.call(session, a, "PUT", path, {"role": "member"}, owner))[0] == 201
    body = {"name": "tool", "owner": "acme", "visibility": "private"}
    assert (await cluster.call(session, a, "POST", API, body, member))[0] == 201
    fork = {"name": "mine"}
    assert (await cluster.call(session, a, "POST", f"{TOOL}/fork", fork, member))[0] == 201
    # B knows both, with the member as admin: its caches hold them.
    assert (await cluster.call(session, b, "GET", TOOL, token=member))[1]["repo"][
        "permission"
    ] == "admin"
    assert (await cluster.call(session, b, "GET", f"{API}/member/mine", token=member))[0] == 200
    ws = await cluster.socket(session, b, member)
    await cluster.subscribe(ws, "acme", "tool")
    await cluster.open_issue(session, a, owner, "before", repo="acme/tool")
    await cluster.next_of(ws, "notification")

    assert (await cluster.call(session, c, "DELETE", path, token=owner))[0] == 204
    # At once on B: no wait for a cache to expire.
    assert (await cluster.call(session, b, "GET", TOOL, token=member))[0] == 404
    assert (await cluster.call(session, b, "GET", f"{TOOL}/hooks", token=member))[0] == 404
    assert (await cluster.call(session, b, "GET", f"{API}/member/mine", token=member))[0] == 404
    gone = await cluster.next_of(ws, "unsubscribed", timeout=1)
    assert gone["repository"] == {"owner": "acme", "name": "tool"}
    await cluster.open_issue(session, a, owner, "after", repo="acme/tool")
    with pytest.raises(TimeoutError):
        await cluster.next_of(ws, "notification", timeout=0.5)
    await ws.close()
