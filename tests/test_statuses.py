"""Commit statuses from CI, and what they hold back in a protected branch."""

from __future__ import annotations

from hubsvc.keys import BUS

from .gitcli import git, remote
from .test_accounts import bearer, new_pat
from .test_hooks import _receiver
from .test_repos import create

REPO = "/api/repositories/alice/proj"


async def head(client, user) -> str:
    resp = await client.get(REPO + "/branches", headers=user.headers)
    return (await resp.json())["branches"][0]["commit"]["oid"]


async def feature_pull(client, alice, tmp_path):
    """Branch feature with one commit pushed, and pull request #1 from it: (its tip, answer)."""
    work = tmp_path / "w"
    await git("clone", "-q", remote(client, alice, "alice", "proj"), str(work))
    await git("checkout", "-q", "-b", "feature", cwd=work)
    await git("commit", "-q", "--allow-empty", "-m", "feature", cwd=work)
    await git("push", "-q", "origin", "feature", cwd=work)
    tip = (await git("rev-parse", "HEAD", cwd=work))[1].strip()
    resp = await client.post(
        REPO + "/pulls", json={"title": "F", "head": "feature"}, headers=alice.headers
    )
    assert resp.status == 201, await resp.text()
    return tip, resp


async def post(client, user, sha, **body):
    return await client.post(f"{REPO}/statuses/{sha}", json=body, headers=user.headers)


async def test_ci_reports_and_the_combined_state_follows_github(client, alice, tmp_path):
    await create(client, alice, "proj", autoInit=True)
    sha = await head(client, alice)
    resp = await post(
        client,
        alice,
        sha,
        state="pending",
        context="ci/test",
        target_url="https://ci.example/1",
        description="running",
    )
    assert resp.status == 201, await resp.text()
    status = (await resp.json())["status"]
    assert status["state"] == "pending" and status["targetUrl"] == "https://ci.example/1"
    assert status["creator"]["username"] == "alice" and status["context"] == "ci/test"
    combined = (await (await client.get(f"{REPO}/commits/main/status")).json())["status"]
    assert (combined["state"], combined["sha"], combined["totalCount"]) == ("pending", sha, 1)

    await post(client, alice, sha, state="success", context="ci/test")
    await post(client, alice, sha, state="success", context="ci/lint")
    combined = (await (await client.get(f"{REPO}/commits/{sha}/status")).json())["status"]
    assert combined["state"] == "success"
    assert [s["context"] for s in combined["statuses"]] == ["ci/lint", "ci/test"]
    await post(client, alice, sha, state="error", context="ci/lint")
    combined = (await (await client.get(f"{REPO}/commits/main/status")).json())["status"]
    assert combined["state"] == "failure"
    listed = await (await client.get(f"{REPO}/commits/main/statuses?limit=2")).json()
    assert [s["state"] for s in listed["statuses"]] == ["error", "success"] and listed["hasMore"]
    # A new commit has no status yet: pending, as GitHub says.
    work = tmp_path / "w"
    await git("clone", "-q", remote(client, alice, "alice", "proj"), str(work))
    await git("commit", "-q", "--allow-empty", "-m", "next", cwd=work)
    await git("push", "-q", "origin", "main", cwd=work)
    combined = (await (await client.get(f"{REPO}/commits/main/status")).json())["status"]
    assert (combined["state"], combined["totalCount"]) == ("pending", 0)
    assert combined["sha"] != sha


async def test_who_may_post_and_what_is_refused(client, alice, bob):
    await create(client, alice, "proj", visibility="private", autoInit=True)
    sha = await head(client, alice)
    # Strangers: 404, as for everything of a private repository.
    assert (await post(client, bob, sha, state="success")).status == 404
    assert (await client.get(f"{REPO}/commits/main/status", headers=bob.headers)).status == 404
    await client.put(
        REPO + "/collaborators/bob", json={"permission": "read"}, headers=alice.headers
    )
    assert (await post(client, bob, sha, state="success")).status == 403
    assert (await client.get(f"{REPO}/commits/main/status", headers=bob.headers)).status == 200
    for body in (
        {"state": "green"},
        {"state": "success", "target_url": "javascript:alert(1)"},
        {"state": "success", "description": "x" * 141},
        {"state": "success", "context": ""},
        {"state": "success", "context": "a\nb"},
    ):
        resp = await post(client, alice, sha, **body)
        assert resp.status == 400, (body, await resp.text())
    assert (await post(client, alice, "0" * 40, state="success")).status == 404
    assert (await post(client, alice, "main", state="success")).status == 404
    # A CI token with only the statuses scope posts, and can do nothing else.
    ci = bearer((await new_pat(client, alice, "ci", scopes=["statuses:write"]))["secret"])
    resp = await client.post(f"{REPO}/statuses/{sha}", json={"state": "success"}, headers=ci)
    assert resp.status == 201, await resp.text()
    assert (await client.get(f"{REPO}/issues", headers=ci)).status == 403
    assert (await client.get(f"{REPO}/tree", headers=ci)).status == 403


async def test_statuses_are_events_and_pull_requests_show_theirs(
    aiohttp_client, aiohttp_server, tmp_path
):
    from hubsvc.app import create_app

    from .conftest import make_config, sign_up

    client = await aiohttp_client(
        create_app(make_config(tmp_path, webhooks__allowed_hosts=["127.0.0.1"]))
    )
    alice = await sign_up(client, "alice")
    receiver = await _receiver(aiohttp_server)
    await create(client, alice, "proj", autoInit=True)
    resp = await client.post(
        REPO + "/hooks",
        json={"url": receiver.url, "format": "json", "events": ["status"]},
        headers=alice.headers,
    )
    assert resp.status == 201, await resp.text()
    tip, resp = await feature_pull(client, alice, tmp_path)
    assert (await resp.json())["pullRequest"]["status"] is None
    await post(client, alice, tip, state="failure", context="ci/test")
    pull = (await (await client.get(REPO + "/pulls/1")).json())["pullRequest"]
    assert pull["status"] == "failure"
    pulls = (await (await client.get(REPO + "/pulls")).json())["pullRequests"]
    assert [p["status"] for p in pulls] == ["failure"]
    [got] = await receiver.wait_for(1)
    assert got["json"]["type"] == "status" and got["json"]["data"]["state"] == "failure"
    await client.app[BUS].drain()
    feed = (await (await client.get(REPO + "/events")).json())["events"]
    assert feed[-1]["type"] == "status" and feed[-1]["data"]["sha"] == tip


async def test_required_contexts_hold_a_merge_until_success(client, alice, bob, tmp_path):
    await create(client, alice, "proj", autoInit=True)
    tip, _ = await feature_pull(client, alice, tmp_path)
    await client.put(
        REPO + "/branches/main/protection",
        json={"requiredStatusChecks": {"contexts": ["ci/test"]}, "enforceAdmins": True},
        headers=alice.headers,
    )
    resp = await client.post(REPO + "/pulls/1/merge", json={}, headers=alice.headers)
    assert (
        resp.status == 405 and "required status ci/test is expected" in (await resp.json())["error"]
    )
    await post(client, alice, tip, state="pending", context="ci/test")
    resp = await client.post(REPO + "/pulls/1/merge", json={}, headers=alice.headers)
    assert resp.status == 405 and "ci/test is pending" in (await resp.json())["error"]
    await post(client, alice, tip, state="success", context="ci/test")
    resp = await client.post(REPO + "/pulls/1/merge", json={}, headers=alice.headers)
    assert resp.status == 200, await resp.text()
