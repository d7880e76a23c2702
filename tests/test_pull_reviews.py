"""Pull request reviews: verdicts, line comments on the diff, staleness, and protection."""

from __future__ import annotations

from hubsvc.keys import BUS

from .conftest import sign_up
from .gitcli import git, remote
from .test_chat_link import smtp  # noqa: F401 - the aiosmtpd fixture
from .test_repos import create

REPO = "/api/repositories/alice/proj"


async def setup(client, alice, bob, tmp_path):
    """alice/proj with a.txt; bob (writer) opens pull request #1 changing line 2 of it."""
    await create(client, alice, "proj")
    await client.put(
        REPO + "/collaborators/bob", json={"permission": "write"}, headers=alice.headers
    )
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    (work / "a.txt").write_text("one\ntwo\nthree\nfour\n")
    await git("add", "a.txt", cwd=work)
    await git("commit", "-q", "-m", "base", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "proj"), "main", cwd=work)
    await git("checkout", "-q", "-b", "feature", cwd=work)
    (work / "a.txt").write_text("one\nTWO\nthree\nfour\n")
    await git("commit", "-q", "-am", "shout", cwd=work)
    await git("push", "-q", remote(client, bob, "alice", "proj"), "feature", cwd=work)
    resp = await client.post(
        REPO + "/pulls", json={"title": "Shout", "head": "feature"}, headers=bob.headers
    )
    assert resp.status == 201, await resp.text()
    return work


async def review(client, user, **body):
    return await client.post(REPO + "/pulls/1/reviews", json=body, headers=user.headers)


async def test_readers_review_and_the_author_cannot_approve(client, alice, bob, tmp_path):
    await setup(client, alice, bob, tmp_path)
    carol = await sign_up(client, "carol")  # a reader of the public repository
    resp = await review(client, bob, event="APPROVE")
    assert resp.status == 422 and "own pull request" in (await resp.json())["error"]
    resp = await review(client, carol, event="COMMENT")
    assert resp.status == 422 and (await resp.json())["error"].startswith("body:")
    resp = await review(
        client,
        carol,
        event="REQUEST_CHANGES",
        body="Not so loud",
        comments=[{"path": "a.txt", "line": 2, "body": "TWO?"}],
    )
    assert resp.status == 201, await resp.text()
    got = (await resp.json())["review"]
    assert got["state"] == "CHANGES_REQUESTED" and got["stale"] is False
    assert got["user"]["username"] == "carol" and len(got["commitId"]) == 40
    assert [(c["path"], c["line"], c["side"]) for c in got["comments"]] == [("a.txt", 2, "RIGHT")]
    resp = await review(client, alice, event="APPROVE")
    assert resp.status == 201
    listed = (await (await client.get(REPO + "/pulls/1/reviews")).json())["reviews"]
    assert [r["state"] for r in listed] == ["CHANGES_REQUESTED", "APPROVED"]


async def test_line_comments_must_be_on_the_diff(client, alice, bob, tmp_path):
    await setup(client, alice, bob, tmp_path)
    for comment, field in (
        ({"path": "nope.txt", "line": 1, "body": "x"}, "comments.0.path"),
        ({"path": "a.txt", "line": 40, "body": "x"}, "comments.0.line"),
        # The removed line exists on the base side only.
        ({"path": "a.txt", "line": 2, "side": "LEFT", "body": "x"}, None),
    ):
        resp = await review(client, alice, event="COMMENT", comments=[comment])
        if field is None:
            assert resp.status == 201, await resp.text()
        else:
            assert resp.status == 422 and (await resp.json())["error"].startswith(field), (
                await resp.text()
            )
    resp = await review(client, alice, event="COMMENT", body="x", comments=[{"path": "a.txt"}])
    assert resp.status == 400
    many = [{"path": "a.txt", "line": 2, "body": "x"}] * 101
    assert (await review(client, alice, event="COMMENT", comments=many)).status == 400


async def test_a_push_makes_an_approval_stale_and_protection_counts_writers(
    client, alice, bob, tmp_path
):
    work = await setup(client, alice, bob, tmp_path)
    carol = await sign_up(client, "carol")
    await client.put(
        REPO + "/branches/main/protection",
        json={"requiredPullRequestReviews": {"requiredApprovingReviewCount": 1}},
        headers=alice.headers,
    )
    resp = await client.post(REPO + "/pulls/1/merge", json={}, headers=bob.headers)
    assert resp.status == 405 and "approvals 0 of 1" in (await resp.json())["error"]
    # A reader's approval does not count; a writer's does.
    assert (await review(client, carol, event="APPROVE")).status == 201
    resp = await client.post(REPO + "/pulls/1/merge", json={}, headers=bob.headers)
    assert resp.status == 405 and "approvals 0 of 1" in (await resp.json())["error"]
    assert (await review(client, alice, event="APPROVE")).status == 201
    # bob pushes again: alice's approval is for the old head.
    (work / "b.txt").write_text("more\n")
    await git("add", "b.txt", cwd=work)
    await git("commit", "-q", "-m", "more", cwd=work)
    await git("push", "-q", remote(client, bob, "alice", "proj"), "feature", cwd=work)
    await client.app[BUS].drain()
    listed = (await (await client.get(REPO + "/pulls/1/reviews")).json())["reviews"]
    assert [r["stale"] for r in listed] == [True, True]
    resp = await client.post(REPO + "/pulls/1/merge", json={}, headers=bob.headers)
    assert resp.status == 405 and "approvals 0 of 1" in (await resp.json())["error"]
    assert (await review(client, alice, event="APPROVE")).status == 201
    resp = await client.post(REPO + "/pulls/1/merge", json={}, headers=bob.headers)
    assert resp.status == 200, await resp.text()
    # Merged: no more reviews.
    assert (await review(client, alice, event="APPROVE")).status == 422


async def test_held_until_a_second_person_approves_and_ci_posts_success_then_merged(
    client, alice, bob, tmp_path
):
    """The whole team flow: one approval from someone else and CI's success, then it merges."""
    from .test_accounts import bearer, new_pat

    await setup(client, alice, bob, tmp_path)
    await client.put(
        REPO + "/branches/main/protection",
        json={
            "requiredPullRequestReviews": {"requiredApprovingReviewCount": 1},
            "requiredStatusChecks": {"contexts": ["ci/test"]},
            "enforceAdmins": True,
        },
        headers=alice.headers,
    )
    ci = bearer((await new_pat(client, alice, scopes=["statuses:write"]))["secret"])
    resp = await client.get(REPO + "/pulls/1")
    assert resp.status == 200, await resp.text()
    body = await resp.json()
    sha = body.get("pullRequest", body)["headSha"]

    async def merge_refusal() -> str:
        resp = await client.post(REPO + "/pulls/1/merge", json={}, headers=bob.headers)
        assert resp.status == 405, await resp.text()
        return (await resp.json())["error"]

    error = await merge_refusal()
    assert "approvals 0 of 1" in error and "ci/test is expected" in error
    # The author's own approval is refused; a second person's counts.
    assert (await review(client, bob, event="APPROVE")).status == 422
    assert (await review(client, alice, event="APPROVE")).status == 201
    error = await merge_refusal()
    assert "approvals" not in error and "ci/test is expected" in error
    body = {"state": "pending", "context": "ci/test"}
    resp = await client.post(f"{REPO}/statuses/{sha}", json=body, headers=ci)
    assert resp.status == 201, await resp.text()
    assert "ci/test is pending" in await merge_refusal()
    body = {"state": "success", "context": "ci/test"}
    assert (await client.post(f"{REPO}/statuses/{sha}", json=body, headers=ci)).status == 201
    resp = await client.post(REPO + "/pulls/1/merge", json={}, headers=bob.headers)
    assert resp.status == 200, await resp.text()
    # main now holds the approved, CI-checked head.
    log = (await (await client.get(REPO + "/commits?branch=main&limit=5")).json())["commits"]
    assert sha in {c["oid"] for c in log} | {p for c in log for p in c["parents"]}


async def test_reviews_are_events_and_private_ones_stay_private(client, alice, bob, tmp_path):
    await setup(client, alice, bob, tmp_path)
    await review(client, alice, event="COMMENT", body="looks fine @bob")
    await client.app[BUS].drain()
    feed = (await (await client.get(REPO + "/events")).json())["events"]
    last = feed[-1]
    assert last["type"] == "pull_request" and last["data"]["action"] == "reviewed"
    assert last["data"]["review"]["body"] == "looks fine @bob"
    await client.patch(REPO, json={"visibility": "private"}, headers=alice.headers)
    stranger = await sign_up(client, "dave")
    assert (await client.get(REPO + "/pulls/1/reviews", headers=stranger.headers)).status == 404
    resp = await review(client, stranger, event="COMMENT", body="hi")
    assert resp.status == 404


async def test_the_author_is_told_of_a_review(aiohttp_client, tmp_path, smtp):
    from hubsvc.app import create_app

    from .conftest import make_config
    from .test_email_notify import _mails

    config = make_config(
        tmp_path, mail__smtp_host="127.0.0.1", mail__smtp_port=smtp.port, mail__starttls=False
    )
    client = await aiohttp_client(create_app(config))
    alice, bob = await sign_up(client, "alice"), await sign_up(client, "bob")
    await setup(client, alice, bob, tmp_path)
    assert (await review(client, alice, event="APPROVE")).status == 201
    [mail] = await _mails(smtp, 1)
    assert mail["To"] == "bob@example.com"
    assert "alice approved your pull request #1" in mail.get_content()


async def decision(client, user) -> str | None:
    resp = await client.get(REPO + "/pulls/1", headers=user.headers)
    assert resp.status == 200
    return (await resp.json())["pullRequest"]["reviewDecision"]


async def test_review_decision_as_github_shows_it(client, alice, bob, tmp_path):
    work = await setup(client, alice, bob, tmp_path)
    carol = await sign_up(client, "carol")  # reads the public repository, doesn't write
    assert await decision(client, bob) is None  # no rule, no verdict
    resp = await client.put(
        REPO + "/branches/main/protection",
        json={"requiredPullRequestReviews": {"requiredApprovingReviewCount": 1}},
        headers=alice.headers,
    )
    assert resp.status == 200
    assert await decision(client, bob) == "REVIEW_REQUIRED"
    # A reader's verdicts don't count; a writer's do, the latest one of each.
    assert (await review(client, carol, event="REQUEST_CHANGES", body="no")).status == 201
    assert await decision(client, bob) == "REVIEW_REQUIRED"
    assert (await review(client, alice, event="REQUEST_CHANGES", body="no")).status == 201
    assert await decision(client, bob) == "CHANGES_REQUESTED"
    assert (await review(client, alice, event="APPROVE")).status == 201
    listed = await (await client.get(REPO + "/pulls", headers=bob.headers)).json()
    assert [p["reviewDecision"] for p in listed["pullRequests"]] == ["APPROVED"]
    # A push makes the approval stale: review required again.
    (work / "a.txt").write_text("one\nTWO!\nthree\nfour\n")
    await git("commit", "-q", "-am", "louder", cwd=work)
    await git("push", "-q", remote(client, bob, "alice", "proj"), "feature", cwd=work)
    await client.app[BUS].drain()  # the pull request learns its new head from the log
    assert await decision(client, bob) == "REVIEW_REQUIRED"
