"""What the acting page needs of the server: its HTML at a forge's paths (git's and the
API's own paths untouched), bodies rendered with #N and @user linked, and what holds a
merge, named before anyone tries it."""

from __future__ import annotations

from hubsvc.web.markdown import render

from .test_pull_reviews import REPO, review, setup
from .test_repos import create

HTML = {"Accept": "application/vnd.github.html+json"}


def test_references_are_linked_outside_code_and_links_only():
    html = render(
        '<a href="https://x.org">see #1</a> [#2](https://y.org) `#3` mail a@b.org #4', ("o w", "n")
    )
    assert html.count("/issues/") == 1 and 'href="/o%20w/n/issues/4"' in html
    assert "@b.org" in html and 'href="/b' not in html


async def test_the_links_notices_carry_open_the_page(client, alice, tmp_path):
    await create(client, alice, "vault", visibility="private")
    index = await (await client.get("/")).text()
    for path in (
        "/alice",
        "/alice/proj",
        "/alice/vault/issues/1",  # private: the same page; its API calls answer 404
        "/nobody/nothing/pulls/7",
        "/alice/proj/issues",
        "/alice/proj/releases",
        "/alice/proj/commit/abc1234",
        "/alice/proj/commits/main",
    ):
        resp = await client.get(path)
        assert resp.status == 200, path
        assert resp.content_type == "text/html" and await resp.text() == index
        assert "script-src 'self'" in resp.headers["Content-Security-Policy"]
    # The API, git and the server's own words keep their answers.
    for path in ("/api/nothing", "/api/repositories/alice/vault", "/ws/x", "/ui/none.js"):
        resp = await client.get(path)
        assert resp.status == 404 and "error" in await resp.json(), path
    resp = await client.get("/alice/proj/info/refs?service=git-upload-pack")
    assert resp.status != 200 or resp.content_type != "text/html"
    for bad in ("x", "0", "01"):
        assert (await client.get(f"/alice/proj/issues/{bad}")).status == 404
    meta = await (await client.get("/api/meta")).json()
    assert meta["openSignUp"] is True


async def test_bodies_come_rendered_when_asked_and_merge_holds_are_named(
    client, alice, bob, tmp_path
):
    await setup(client, alice, bob, tmp_path)
    # The repository's owner is exempt from the rule unless it is enforced.
    resp = await client.put(
        REPO + "/branches/main/protection",
        json={"requiredPullRequestReviews": {"requiredApprovingReviewCount": 1}},
        headers=alice.headers,
    )
    assert resp.status == 200, await resp.text()
    body = "Closes #1, thanks @bob <script>x()</script> `#2`"
    resp = await client.post(REPO + "/issues/1/comments", json={"body": body}, headers=bob.headers)
    assert resp.status == 404  # #1 is a pull request: its comments are under /pulls
    resp = await client.post(
        REPO + "/pulls/1/comments", json={"body": body}, headers={**bob.headers, **HTML}
    )
    made = (await resp.json())["comment"]
    assert made["body"] == body
    assert made["bodyHtml"] == (
        '<p>Closes <a href="/alice/proj/issues/1" rel="nofollow noopener noreferrer">#1</a>, '
        'thanks <a href="/bob" rel="nofollow noopener noreferrer">@bob</a>  <code>#2</code></p>\n'
    )
    plain = await (await client.get(REPO + "/pulls/1", headers=bob.headers)).json()
    assert "bodyHtml" not in plain["comments"][0] and "bodyHtml" not in plain["pullRequest"]
    # bob is a writer, so the rule binds him: the page shows why before he tries.
    shown = await (await client.get(REPO + "/pulls/1", headers={**bob.headers, **HTML})).json()
    assert shown["comments"][0]["bodyHtml"] == made["bodyHtml"]
    assert shown["pullRequest"]["bodyHtml"] == ""
    [hold] = shown["pullRequest"]["mergeProblems"]
    assert "approvals 0 of 1" in hold
    resp = await client.post(REPO + "/pulls/1/merge", json={}, headers=bob.headers)
    assert resp.status == 405 and (await resp.json())["error"] == hold
    resp = await review(
        client,
        alice,
        event="APPROVE",
        body="Fine by **me**",
        comments=[{"path": "a.txt", "line": 2, "body": "see #1"}],
    )
    assert resp.status == 201
    got = await (await client.get(REPO + "/pulls/1/reviews", headers=HTML)).json()
    [approval] = got["reviews"]
    assert approval["bodyHtml"] == "<p>Fine by <strong>me</strong></p>\n"
    assert 'href="/alice/proj/issues/1"' in approval["comments"][0]["bodyHtml"]
    shown = await (await client.get(REPO + "/pulls/1", headers=bob.headers)).json()
    assert shown["pullRequest"]["mergeProblems"] == []
    resp = await client.post(REPO + "/pulls/1/merge", json={}, headers=bob.headers)
    assert resp.status == 200
    shown = await (await client.get(REPO + "/pulls/1", headers=bob.headers)).json()
    assert shown["pullRequest"]["mergeProblems"] is None
