"""Protected branches through the API and the stock git client."""

from __future__ import annotations

from urllib.parse import quote

from .gitcli import git, remote
from .test_repos import create

REPO = "/api/repositories/alice/proj"


def protection(branch: str) -> str:
    return f"{REPO}/branches/{quote(branch, safe='')}/protection"


async def setup(client, alice, bob, tmp_path):
    """alice/proj with main, bob a writer, and bob's clone of it."""
    await create(client, alice, "proj", autoInit=True)
    await client.put(
        REPO + "/collaborators/bob", json={"permission": "write"}, headers=alice.headers
    )
    work = tmp_path / "bob"
    await git("clone", "-q", remote(client, bob, "alice", "proj"), str(work))
    return work


async def tip(client, alice, branch: str = "main") -> str | None:
    branches = (await (await client.get(REPO + "/branches", headers=alice.headers)).json())[
        "branches"
    ]
    return next((b["commit"]["oid"] for b in branches if b["name"] == branch), None)


async def test_rules_are_set_by_admins_and_read_by_readers(client, alice, bob):
    await create(client, alice, "proj", autoInit=True)
    await client.put(
        REPO + "/collaborators/bob", json={"permission": "write"}, headers=alice.headers
    )
    rule = {
        "requiredPullRequestReviews": {"requiredApprovingReviewCount": 2},
        "requiredStatusChecks": {"strict": True, "contexts": ["ci/test", "ci/test"]},
    }
    resp = await client.put(protection("main"), json=rule, headers=bob.headers)
    assert resp.status == 403
    resp = await client.put(protection("main"), json=rule, headers=alice.headers)
    assert resp.status == 200, await resp.text()
    body = (await resp.json())["protection"]
    assert body["pattern"] == "main" and body["enforceAdmins"] is False
    assert body["requiredPullRequestReviews"] == {
        "requiredApprovingReviewCount": 2,
        "requireCodeOwnerReviews": False,
    }
    assert body["requiredStatusChecks"] == {"strict": True, "contexts": ["ci/test"]}
    assert body["allowForcePushes"] is False and body["allowDeletions"] is False
    # Readers, anonymous ones of a public repository included, see the rule.
    assert (await client.get(protection("main"))).status == 200
    assert (await client.get(protection("release/*"))).status == 404
    for bad in ("-x", "a b", "x;rm", "/main", "a" * 256):
        resp = await client.put(protection(bad), json={}, headers=alice.headers)
        assert resp.status == 400, bad
    resp = await client.put(
        protection("main"),
        json={"requiredPullRequestReviews": {"requiredApprovingReviewCount": 7}},
        headers=alice.headers,
    )
    assert resp.status == 400
    assert (await client.delete(protection("main"), headers=bob.headers)).status == 403
    assert (await client.delete(protection("main"), headers=alice.headers)).status == 204
    assert (await client.get(protection("main"))).status == 404


async def test_private_rules_are_404_to_outsiders(client, alice, bob):
    await create(client, alice, "proj", visibility="private", autoInit=True)
    await client.put(protection("main"), json={}, headers=alice.headers)
    for headers in ({}, bob.headers):
        assert (await client.get(protection("main"), headers=headers)).status in (401, 404)
        assert (await client.put(protection("main"), json={}, headers=headers)).status in (
            401,
            404,
        )


async def test_git_refuses_direct_pushes_force_pushes_and_deletion(client, alice, bob, tmp_path):
    work = await setup(client, alice, bob, tmp_path)
    before = await tip(client, alice)
    await client.put(
        protection("main"),
        json={"requiredPullRequestReviews": {"requiredApprovingReviewCount": 1}},
        headers=alice.headers,
    )
    await git("commit", "-q", "--allow-empty", "-m", "direct", cwd=work)
    code, _, err = await git("push", "origin", "main", cwd=work, check=False)
    assert code != 0, err
    assert "remote: main is protected: changes must go through a pull request" in err, err
    assert await tip(client, alice) == before

    # Without the pull request rule: pushes go in, a rewrite or a deletion does not.
    await client.put(protection("main"), json={}, headers=alice.headers)
    await git("push", "-q", "origin", "main", cwd=work)
    await git("commit", "-q", "--amend", "--allow-empty", "-m", "rewritten", cwd=work)
    pushed = await tip(client, alice)
    code, _, err = await git("push", "--force", "origin", "main", cwd=work, check=False)
    assert code != 0 and "remote: main is protected: force-pushes are not allowed" in err, err
    code, _, err = await git("push", "origin", ":main", cwd=work, check=False)
    assert code != 0 and "main is protected: it cannot be deleted" in err, err
    assert await tip(client, alice) == pushed

    # A glob protects what it matches; other branches stay free.
    await client.put(protection("release/*"), json={}, headers=alice.headers)
    await git("push", "-q", "origin", "HEAD:release/1.0", "HEAD:topic", cwd=work)
    code, _, err = await git("push", "origin", ":release/1.0", cwd=work, check=False)
    assert code != 0 and "release/1.0 is protected: it cannot be deleted" in err, err
    await git("push", "-q", "origin", ":topic", cwd=work)
    assert await tip(client, alice, "topic") is None


async def test_admins_pass_unless_enforced(client, alice, bob, tmp_path):
    await setup(client, alice, bob, tmp_path)
    work = tmp_path / "alice"
    await git("clone", "-q", remote(client, alice, "alice", "proj"), str(work))
    rule = {"requiredPullRequestReviews": {"requiredApprovingReviewCount": 1}}
    await client.put(protection("main"), json=rule, headers=alice.headers)
    await git("commit", "-q", "--allow-empty", "-m", "hotfix", cwd=work)
    await git("push", "-q", "origin", "main", cwd=work)  # the owner is exempt by default
    await client.put(
        protection("main"), json={**rule, "enforceAdmins": True}, headers=alice.headers
    )
    await git("commit", "-q", "--allow-empty", "-m", "another", cwd=work)
    code, _, err = await git("push", "origin", "main", cwd=work, check=False)
    assert code != 0 and "changes must go through a pull request" in err, err


async def test_a_strict_rule_needs_the_head_up_to_date(client, alice, bob, tmp_path):
    work = await setup(client, alice, bob, tmp_path)
    await git("checkout", "-q", "-b", "feature", cwd=work)
    (work / "f.txt").write_text("feature\n")
    await git("add", "f.txt", cwd=work)
    await git("commit", "-q", "-m", "feature", cwd=work)
    await git("push", "-q", "origin", "feature", cwd=work)
    resp = await client.post(
        REPO + "/pulls", json={"title": "Feature", "head": "feature"}, headers=bob.headers
    )
    assert resp.status == 201, await resp.text()
    # main moves on after the branch was made.
    await git("checkout", "-q", "main", cwd=work)
    await git("commit", "-q", "--allow-empty", "-m", "meanwhile", cwd=work)
    await git("push", "-q", "origin", "main", cwd=work)
    await client.put(
        protection("main"),
        json={"requiredStatusChecks": {"strict": True, "contexts": []}, "enforceAdmins": True},
        headers=alice.headers,
    )
    resp = await client.post(REPO + "/pulls/1/merge", json={}, headers=bob.headers)
    assert resp.status == 405, await resp.text()
    assert "not up to date with main" in (await resp.json())["error"]
    assert (await (await client.get(REPO + "/pulls/1", headers=bob.headers)).json())["pullRequest"][
        "merged"
    ] is False
    # Bring the head up to date: then it merges.
    await git("checkout", "-q", "feature", cwd=work)
    await git("merge", "-q", "--no-edit", "main", cwd=work)
    await git("push", "-q", "origin", "feature", cwd=work)
    resp = await client.post(REPO + "/pulls/1/merge", json={}, headers=bob.headers)
    assert resp.status == 200, await resp.text()
