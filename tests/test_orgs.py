"""Organizations and teams as a team uses them, through HTTP, WebSockets and the stock git."""

from __future__ import annotations

from .conftest import sign_up
from .gitcli import git, remote
from .test_repos import create
from .test_ws import connect, next_of, nothing_for

ORG = "/api/orgs/acme"
APP = "/api/repositories/acme/app"


async def _ok(resp, status: int = 200) -> dict:
    assert resp.status == status, await resp.text()
    return await resp.json() if resp.content_type == "application/json" else {}


async def make_org(client, owner, *members) -> None:
    """acme, owned by owner, with these members, and its private repository app."""
    await _ok(
        await client.post(
            "/api/orgs", json={"name": "acme", "description": "A"}, headers=owner.headers
        ),
        201,
    )
    for member in members:
        await _ok(
            await client.put(f"{ORG}/members/{member.username}", json={}, headers=owner.headers),
            201,
        )
    await create(client, owner, "app", owner="acme", visibility="private", autoInit=True)


async def make_team(client, owner, name: str, permission: str, *members, repo="app") -> None:
    await _ok(
        await client.post(
            f"{ORG}/teams", json={"name": name, "permission": permission}, headers=owner.headers
        ),
        201,
    )
    for member in members:
        await _ok(
            await client.put(
                f"{ORG}/teams/{name}/members/{member.username}", headers=owner.headers
            ),
            201,
        )
    await _ok(
        await client.put(f"{ORG}/teams/{name}/repositories/{repo}", json={}, headers=owner.headers),
        201,
    )


async def permission(client, user) -> str | None:
    resp = await client.get(APP, headers=user.headers)
    if resp.status == 404:
        return None
    return (await _ok(resp))["repo"]["permission"]


async def test_an_organization_with_two_teams(client, alice, bob):
    carol, dave, erin = [await sign_up(client, n) for n in ("carol", "dave", "erin")]
    await make_org(client, alice, bob, carol, erin)
    await make_team(client, alice, "devs", "write", bob)
    await make_team(client, alice, "docs", "triage", carol)
    org = (await _ok(await client.get(ORG, headers=bob.headers)))["organization"]
    assert org["name"] == "acme" and org["description"] == "A"
    assert (org["memberCount"], org["teamCount"], org["role"]) == (4, 2, "member")
    assert (await _ok(await client.get(ORG)))["organization"]["role"] is None
    mine = await _ok(await client.get("/api/orgs", headers=bob.headers))
    assert [(o["name"], o["role"]) for o in mine["organizations"]] == [("acme", "member")]
    assert (await _ok(await client.get("/api/orgs", headers=dave.headers)))["organizations"] == []
    assert (await client.get("/api/orgs")).status == 401
    # The highest grant counts: org owner, team grants, member's base read, nothing.
    assert await permission(client, alice) == "owner"
    assert await permission(client, bob) == "write"
    assert await permission(client, carol) == "triage"
    assert await permission(client, erin) == "read"
    assert await permission(client, dave) is None
    # A collaborator's grant above the team's wins; the team's above a lower one too.
    await _ok(
        await client.put(
            f"{APP}/collaborators/carol", json={"permission": "admin"}, headers=alice.headers
        ),
        201,
    )
    assert await permission(client, carol) == "admin"
    await _ok(
        await client.put(
            f"{APP}/collaborators/bob", json={"permission": "read"}, headers=alice.headers
        ),
        201,
    )
    assert await permission(client, bob) == "write"
    teams = (await _ok(await client.get(f"{ORG}/teams", headers=erin.headers)))["teams"]
    assert [(t["name"], t["permission"], t["memberCount"]) for t in teams] == [
        ("devs", "write", 1),
        ("docs", "triage", 1),
    ]
    members = (await _ok(await client.get(f"{ORG}/members", headers=bob.headers)))["members"]
    assert [(m["username"], m["role"]) for m in members] == [
        ("alice", "owner"),
        ("bob", "member"),
        ("carol", "member"),
        ("erin", "member"),
    ]
    assert (await client.get(f"{ORG}/members", headers=dave.headers)).status == 403
    assert (await client.get(f"{ORG}/teams")).status == 401
    # Only owners manage the organization.
    for method, path, body in (
        ("PUT", f"{ORG}/members/dave", {}),
        ("POST", f"{ORG}/teams", {"name": "x"}),
        ("PUT", f"{ORG}/teams/devs/members/erin", None),
        ("DELETE", f"{ORG}/teams/devs", None),
    ):
        resp = await client.request(method, path, json=body, headers=bob.headers)
        assert resp.status == 403, (method, path)
    # Members create repositories in the organization (GitHub's default) and admin them.
    made = await create(client, erin, "notes", owner="acme")
    assert made["owner"]["username"] == "acme" and made["permission"] == "admin"
    assert not made["isOwner"]
    resp = await client.post(
        "/api/repositories", json={"name": "x", "owner": "acme"}, headers=dave.headers
    )
    assert resp.status == 403
    resp = await client.post(
        "/api/repositories", json={"name": "x", "owner": "bob"}, headers=dave.headers
    )
    assert resp.status == 403
    # The owner's repositories: the org's as any user's.
    listed = await _ok(await client.get("/api/users/acme/repositories", headers=erin.headers))
    assert [r["fullName"] for r in listed["repositories"]] == ["acme/notes", "acme/app"]
    listed = await _ok(await client.get("/api/users/acme/repositories"))
    assert [r["fullName"] for r in listed["repositories"]] == ["acme/notes"]


async def test_names_are_shared_with_users_and_an_org_never_signs_in(client, alice, bob):
    resp = await client.post("/api/orgs", json={"name": "BOB"}, headers=alice.headers)
    assert resp.status == 409
    await _ok(await client.post("/api/orgs", json={"name": "acme"}, headers=alice.headers), 201)
    resp = await client.post(
        "/auth/sign-up",
        json={
            "email": "a@example.com",
            "username": "Acme",
            "password": "correct horse",
            "name": "",
        },
    )
    assert resp.status == 409
    for login in ("acme", "org:acme"):
        resp = await client.post("/auth/sign-in", json={"username": login, "password": ""})
        assert resp.status in (400, 401)
    # An organization is no collaborator, member or team member of anything.
    await create(client, alice, "proj")
    resp = await client.put(
        "/api/repositories/alice/proj/collaborators/acme", json={}, headers=alice.headers
    )
    assert resp.status == 404
    resp = await client.put(f"{ORG}/members/acme", json={}, headers=alice.headers)
    assert resp.status == 404
    assert (await client.get("/api/orgs/bob")).status == 404
    for bad in ("-x", "a" * 40, "me"):
        resp = await client.post("/api/orgs", json={"name": bad}, headers=alice.headers)
        assert resp.status == 400, bad


async def test_a_team_grant_raised_from_read_to_write_takes_effect_at_once(
    client, alice, bob, tmp_path
):
    await make_org(client, alice, bob)
    await make_team(client, alice, "readers", "read", bob)
    work = tmp_path / "w"
    await git("clone", "-q", remote(client, bob, "acme", "app"), str(work))
    (work / "b.txt").write_text("bob\n")
    await git("add", "b.txt", cwd=work)
    await git("commit", "-qm", "bob's change", cwd=work)
    code, _, err = await git("push", "origin", "main", cwd=work, check=False)
    assert code != 0 and "403" in err
    await _ok(
        await client.patch(
            f"{ORG}/teams/readers", json={"permission": "write"}, headers=alice.headers
        )
    )
    await git("push", "-q", "origin", "main", cwd=work)  # right after: no cache in the way
    assert await permission(client, bob) == "write"
    # A per-repository grant overrides the team's, and lowering it holds at once too.
    resp = await client.put(
        f"{ORG}/teams/readers/repositories/app", json={"permission": "read"}, headers=alice.headers
    )
    assert (await _ok(resp))["repository"]["permission"] == "read"
    (work / "b.txt").write_text("bob again\n")
    await git("commit", "-qam", "again", cwd=work)
    code, _, err = await git("push", "origin", "main", cwd=work, check=False)
    assert code != 0 and "403" in err
    # Losing the repository ends the team's grant; the member's base read remains.
    resp = await client.delete(f"{ORG}/teams/readers/repositories/app", headers=alice.headers)
    assert resp.status == 204
    assert await permission(client, bob) == "read"


async def test_a_member_who_leaves_loses_every_grant_and_their_socket_stops(
    client, alice, bob, tmp_path
):
    await make_org(client, alice, bob)
    await make_team(client, alice, "devs", "write", bob)
    await make_team(client, alice, "ops", "admin", bob, repo="app")
    assert await permission(client, bob) == "admin"
    ws = await connect(client, bob)
    await ws.send_json({"type": "subscribe", "repository": {"owner": "acme", "name": "app"}})
    await next_of(ws, "subscribed")
    await _ok(await client.post(f"{APP}/issues", json={"title": "a"}, headers=alice.headers), 201)
    note = (await next_of(ws, "notification"))["notification"]
    assert note["data"]["issue"]["title"] == "a"
    resp = await client.delete(f"{ORG}/members/me", headers=bob.headers)
    assert resp.status == 204
    assert await next_of(ws, "unsubscribed") == {
        "type": "unsubscribed",
        "repository": {"owner": "acme", "name": "app"},
        "reason": "access revoked",
    }
    await _ok(await client.post(f"{APP}/issues", json={"title": "b"}, headers=alice.headers), 201)
    await nothing_for(ws)
    await ws.close()
    # Every grant went: the organization's, both teams', git's.
    assert await permission(client, bob) is None
    for team in ("devs", "ops"):
        body = await _ok(await client.get(f"{ORG}/teams/{team}/members", headers=alice.headers))
        assert body["users"] == []
    code, _, _ = await git(
        "ls-remote", remote(client, bob, "acme", "app"), cwd=tmp_path, check=False
    )
    assert code != 0
    assert (await client.get(ORG, headers=bob.headers)).status == 200  # the org itself is public
    assert (await client.get(f"{ORG}/members", headers=bob.headers)).status == 403


async def test_removal_from_a_team_ends_its_grant_and_the_socket_hears(client, alice, bob):
    await make_org(client, alice)
    resp = await client.patch(ORG, json={"description": "changed"}, headers=alice.headers)
    assert (await _ok(resp))["organization"]["description"] == "changed"
    # An outside collaborator of the org's repository keeps only that grant.
    await _ok(
        await client.put(
            f"{APP}/collaborators/bob", json={"permission": "read"}, headers=alice.headers
        ),
        201,
    )
    ws = await connect(client, bob)
    await ws.send_json({"type": "subscribe", "repository": {"owner": "acme", "name": "app"}})
    await next_of(ws, "subscribed")
    resp = await client.delete(f"{APP}/collaborators/bob", headers=alice.headers)
    assert resp.status == 204
    await next_of(ws, "unsubscribed")
    # Team membership needs org membership.
    await _ok(await client.post(f"{ORG}/teams", json={"name": "t"}, headers=alice.headers), 201)
    resp = await client.put(f"{ORG}/teams/t/members/bob", headers=alice.headers)
    assert resp.status == 422
    await ws.close()


async def test_the_last_owner_cannot_leave_or_be_demoted(client, alice, bob):
    await make_org(client, alice, bob)
    for resp in (
        await client.delete(f"{ORG}/members/alice", headers=alice.headers),
        await client.put(f"{ORG}/members/alice", json={"role": "member"}, headers=alice.headers),
    ):
        assert resp.status == 409
        assert "last owner" in (await resp.json())["error"]
    # Nor can the account go while it is the last owner.
    resp = await client.delete("/api/admin/users/alice", headers=alice.headers)
    assert resp.status == 409, await resp.text()
    await _ok(await client.put(f"{ORG}/members/bob", json={"role": "owner"}, headers=alice.headers))
    assert await permission(client, bob) == "owner"
    assert (await client.delete(f"{ORG}/members/alice", headers=alice.headers)).status == 204
    assert await permission(client, alice) is None
    # Members may not remove others.
    carol = await sign_up(client, "carol")
    await _ok(await client.put(f"{ORG}/members/carol", json={}, headers=bob.headers), 201)
    assert (await client.delete(f"{ORG}/members/bob", headers=carol.headers)).status == 403


async def test_the_private_repository_is_404_outside_the_org_everywhere(
    client, alice, bob, tmp_path
):
    dave = await sign_up(client, "dave")
    await make_org(client, alice, bob)
    await _ok(
        await client.post(f"{APP}/issues", json={"title": "secret plan"}, headers=alice.headers),
        201,
    )
    await _ok(await client.post(f"{APP}/fork", json={}, headers=bob.headers), 201)
    # A private repository is not forked into another organization, whose members would
    # read the copy; into its own, yes.
    await _ok(await client.post("/api/orgs", json={"name": "other"}, headers=bob.headers), 201)
    resp = await client.post(f"{APP}/fork", json={"owner": "other"}, headers=bob.headers)
    assert resp.status == 422
    resp = await client.post(
        f"{APP}/fork", json={"owner": "acme", "name": "app2"}, headers=bob.headers
    )
    assert (await _ok(resp, 201))["repo"]["private"]
    outsiders = (None, dave)
    for who in outsiders:
        headers = who.headers if who else {}
        for kind, q in (
            ("repositories", "app"),
            ("issues", "secret"),
            ("repositories", "acme/app"),
        ):
            resp = await client.get("/api/search", params={"q": q, "type": kind}, headers=headers)
            assert (await _ok(resp))["results"] == [], (kind, q)
        for path in (
            APP,
            f"{APP}/forks",
            f"{APP}/compare/main...main",
            f"{APP}/events",
            f"{APP}/hooks",
            f"{APP}/issues/1",
        ):
            resp = await client.get(path, headers=headers)
            assert resp.status == (404 if who or path != f"{APP}/hooks" else 401), (path, who)
        if who is not None:
            feed = await _ok(await client.get("/api/events", headers=headers))
            assert all(e["repository"]["owner"] != "acme" for e in feed["events"])
            resp = await client.post(f"{APP}/fork", json={}, headers=headers)
            assert resp.status == 404
        code, _, err = await git(
            "clone", "-q", remote(client, who, "acme", "app"), str(tmp_path / "c"), check=False
        )
        assert code != 0, err
    # Members find it everywhere.
    resp = await client.get(
        "/api/search", params={"q": "app", "type": "repositories"}, headers=bob.headers
    )
    found = {r["fullName"] for r in (await _ok(resp))["results"]}
    assert found == {"acme/app2", "bob/app", "acme/app"}
    feed = await _ok(await client.get("/api/events", headers=bob.headers))
    assert any(e["repository"]["owner"] == "acme" for e in feed["events"])
    await git("clone", "-q", remote(client, bob, "acme", "app"), str(tmp_path / "m"))


async def test_org_endpoints_need_the_org_scope(client, alice, bob):
    await make_org(client, alice)
    tokens = {}
    for scopes in (["org:read"], ["org:write"], ["repo:write"]):
        resp = await client.post(
            "/api/users/me/tokens",
            json={"name": scopes[0], "scopes": scopes},
            headers=alice.headers,
        )
        tokens[scopes[0]] = {"Authorization": f"Bearer {(await _ok(resp, 201))['secret']}"}
    assert (await client.get(ORG, headers=tokens["org:read"])).status == 200
    resp = await client.put(f"{ORG}/members/bob", json={}, headers=tokens["org:read"])
    assert resp.status == 403 and "org:write" in (await resp.json())["error"]
    resp = await client.get(f"{ORG}/members", headers=tokens["repo:write"])
    assert resp.status == 403 and "org:read" in (await resp.json())["error"]
    resp = await client.put(f"{ORG}/members/bob", json={}, headers=tokens["org:write"])
    assert resp.status == 201


async def test_triage_and_maintain_as_github_has_them(client, alice, bob):
    carol = await sign_up(client, "carol")
    await make_org(client, alice, bob, carol)
    await make_team(client, alice, "triagers", "triage", bob)
    await make_team(client, alice, "maintainers", "maintain", carol)
    await _ok(await client.post(f"{APP}/issues", json={"title": "x"}, headers=alice.headers), 201)
    # Triage: label, assign and close others' issues; no merge, no settings.
    resp = await client.patch(
        f"{APP}/issues/1",
        json={"labels": ["bug"], "assignees": ["bob"], "state": "closed"},
        headers=bob.headers,
    )
    assert (await _ok(resp))["issue"]["state"] == "closed"
    resp = await client.patch(APP, json={"description": "d"}, headers=bob.headers)
    assert resp.status == 403
    resp = await client.post(
        f"{APP}/statuses/{'0' * 40}", json={"state": "success"}, headers=bob.headers
    )
    assert resp.status == 403
    # Maintain: the description and default branch, not the name or visibility.
    resp = await client.patch(APP, json={"description": "kept up"}, headers=carol.headers)
    assert (await _ok(resp))["repo"]["description"] == "kept up"
    for change in ({"visibility": "public"}, {"name": "renamed"}):
        resp = await client.patch(APP, json=change, headers=carol.headers)
        assert resp.status == 403
    resp = await client.put(f"{APP}/branches/main/protection", json={}, headers=carol.headers)
    assert resp.status == 403
    # An owner of the organization is an owner of its repositories.
    resp = await client.patch(APP, json={"visibility": "public"}, headers=alice.headers)
    assert (await _ok(resp))["repo"]["visibility"] == "public"


async def test_team_members_watch_and_plain_members_subscribe(client, alice, bob):
    carol = await sign_up(client, "carol")
    await make_org(client, alice, bob, carol)
    await make_team(client, alice, "devs", "read", bob)
    ws_bob, ws_carol = await connect(client, bob), await connect(client, carol)
    await _ok(await client.post(f"{APP}/issues", json={"title": "a"}, headers=alice.headers), 201)
    assert (await next_of(ws_bob, "notification"))["notification"]["data"]["issue"]["title"] == "a"
    # The base read of a member doesn't make them watch every repository; they subscribe.
    await nothing_for(ws_carol)
    await ws_carol.send_json({"type": "subscribe", "repository": {"owner": "acme", "name": "app"}})
    await next_of(ws_carol, "subscribed")
    await _ok(await client.post(f"{APP}/issues", json={"title": "b"}, headers=alice.headers), 201)
    note = (await next_of(ws_carol, "notification"))["notification"]
    assert note["data"]["issue"]["title"] == "b"
    for ws in (ws_bob, ws_carol):
        await ws.close()
