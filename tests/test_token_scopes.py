"""Scoped personal access tokens: what they may do through the API and through git."""

from __future__ import annotations

from .gitcli import git, remote
from .test_accounts import bearer, new_pat
from .test_repos import create

REPO = "/api/repositories/alice/proj"


async def refused(resp, scope: str) -> None:
    assert resp.status == 403, (resp.url, resp.status, await resp.text())
    assert scope in (await resp.json())["error"]


async def test_scopes_cap_a_token_in_the_api(client, alice):
    await create(client, alice, "proj", visibility="private", autoInit=True)
    await client.post(REPO + "/issues", json={"title": "first"}, headers=alice.headers)
    token = bearer((await new_pat(client, alice, "triage", scopes=["issues:read"]))["secret"])
    assert (await client.get(REPO + "/issues", headers=token)).status == 200
    assert (await client.get(REPO + "/pulls", headers=token)).status == 200
    await refused(
        await client.post(REPO + "/issues", json={"title": "x"}, headers=token), "issues:write"
    )
    await refused(await client.get(REPO + "/tree", headers=token), "repo:read")
    await refused(await client.get("/api/users/me/settings", headers=token), "user:read")
    await refused(await client.get("/api/admin/users", headers=token), "admin")
    # Write holds read; nothing was opened by the refused token.
    writer = bearer((await new_pat(client, alice, "bot", scopes=["issues:write"]))["secret"])
    assert (await client.get(REPO + "/issues", headers=writer)).status == 200
    issues = (await (await client.get(REPO + "/issues", headers=alice.headers)).json())["issues"]
    assert [i["title"] for i in issues] == ["first"]
    # An unscoped token keeps every scope its owner has.
    everything = bearer((await new_pat(client, alice, "all"))["secret"])
    assert (await client.get("/api/admin/users", headers=everything)).status == 200


async def test_a_read_only_token_clones_and_cannot_push(client, alice, tmp_path):
    await create(client, alice, "proj", visibility="private", autoInit=True)
    secret = (await new_pat(client, alice, "ci", scopes=["repo:read"]))["secret"]
    url = remote(client, alice, "alice", "proj", secret)
    work = tmp_path / "work"
    await git("clone", "-q", url, str(work))
    assert (work / "README.md").exists()
    await git("commit", "-q", "--allow-empty", "-m", "sneaky", cwd=work)
    code, _, err = await git("push", "origin", "main", cwd=work, check=False)
    assert code != 0 and "403" in err, err
    commits = (await (await client.get(REPO + "/commits", headers=alice.headers)).json())["commits"]
    assert [c["message"].strip() for c in commits] != ["sneaky"] and len(commits) == 1
    # The same through Bearer: refs are readable, receive-pack is not.
    resp = await client.get(
        "/alice/proj.git/info/refs?service=git-upload-pack", headers=bearer(secret)
    )
    assert resp.status == 200
    resp = await client.get(
        "/alice/proj.git/info/refs?service=git-receive-pack", headers=bearer(secret)
    )
    assert resp.status == 403 and "repo:write" in await resp.text()


async def test_a_token_limited_to_repositories(client, alice):
    await create(client, alice, "proj", visibility="private", autoInit=True)
    await create(client, alice, "other", visibility="private", autoInit=True)
    created = await new_pat(client, alice, "one", scopes=["repo:read"], repositories=["alice/proj"])
    assert created["token"]["scopes"] == ["repo:read"]
    assert created["token"]["repositories"] == ["alice/proj"]
    token = bearer(created["secret"])
    assert (await client.get(REPO + "/tree", headers=token)).status == 200
    await refused(
        await client.get("/api/repositories/alice/other/tree", headers=token), "alice/other"
    )
    # Answers that span repositories hold only its own (issue 30: narrowed, not refused).
    found = await (await client.get("/api/search?q=other", headers=token)).json()
    assert found["results"] == []
    found = await (await client.get("/api/search?q=proj", headers=token)).json()
    assert [r["fullName"] for r in found["results"]] == ["alice/proj"]
    await refused(
        await client.post("/api/repositories", json={"name": "more"}, headers=token), "repo:write"
    )


async def test_bad_scopes_are_refused(client, alice):
    for body in (
        {"name": "x", "scopes": ["repo:everything"]},
        {"name": "x", "scopes": []},
        {"name": "x", "repositories": ["not a repo"]},
        {"name": "x", "repositories": ["a/b"] * 101},
    ):
        resp = await client.post("/api/users/me/tokens", json=body, headers=alice.headers)
        assert resp.status == 400, body
        assert set(await resp.json()) == {"error"}


async def test_a_statuses_token_can_neither_push_nor_read_issues(client, alice, tmp_path):
    await create(client, alice, "proj", autoInit=True)
    secret = (await new_pat(client, alice, "ci", scopes=["statuses:write"]))["secret"]
    work = tmp_path / "work"
    await git("clone", "-q", remote(client, alice, "alice", "proj"), str(work))
    await git("commit", "-q", "--allow-empty", "-m", "from ci", cwd=work)
    url = remote(client, alice, "alice", "proj", secret)
    code, _, err = await git("push", url, "main", cwd=work, check=False)
    assert code != 0 and "403" in err, err
    await refused(await client.get(REPO + "/issues", headers=bearer(secret)), "issues:read")
