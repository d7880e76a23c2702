"""Review requests: asked by hand or by CODEOWNERS, told through the inbox, mail and chat,
answered by a review, and required by protection's requireCodeOwnerReviews."""

from __future__ import annotations

import asyncio

import pytest

from hubsvc.keys import BUS
from hubsvc.services.codeowners import owners_of, parse

from .conftest import make_config, sign_up
from .gitcli import git, remote
from .test_chat_link import smtp  # noqa: F401 - the aiosmtpd fixture
from .test_email_notify import _mails
from .test_inbox import inbox, reasons
from .test_repos import create

REPO = "/api/repositories/alice/proj"
BOT = {"X-Chat-Bot-Key": "k" * 40}


@pytest.fixture
def config(tmp_path, smtp):
    return make_config(
        tmp_path,
        mail__smtp_host="127.0.0.1",
        mail__smtp_port=smtp.port,
        mail__starttls=False,
        chat__bot_key=BOT["X-Chat-Bot-Key"],
    )


async def grant(client, owner, who: str, permission: str = "write") -> None:
    resp = await client.put(
        f"{REPO}/collaborators/{who}", headers=owner.headers, json={"permission": permission}
    )
    assert resp.status in (200, 201), await resp.text()


async def commit(work, files: dict[str, str], message: str) -> None:
    for path, text in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text)
        await git("add", path, cwd=work)
    await git("commit", "-q", "-m", message, cwd=work)


async def project(client, alice, bob, tmp_path, files: dict[str, str], **repo):
    """alice/proj with files on main and bob (a writer) on branch feature, not yet pushed."""
    await create(client, alice, "proj", **repo)
    await grant(client, alice, "bob")
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    await commit(work, {"README.md": "hi\n", **files}, "base")
    await git("push", "-q", remote(client, alice, "alice", "proj"), "main", cwd=work)
    await git("checkout", "-q", "-b", "feature", cwd=work)
    return work


async def open_pull(client, bob) -> dict:
    resp = await client.post(
        REPO + "/pulls", json={"title": "Work", "head": "feature"}, headers=bob.headers
    )
    assert resp.status == 201, await resp.text()
    return (await resp.json())["pullRequest"]


def names(pull: dict) -> list[str]:
    return [u["username"] for u in pull["requestedReviewers"]]


async def link_chat(client, user, chat_id: str) -> None:
    resp = await client.post("/api/chat/link/generate", json={"chatId": chat_id}, headers=BOT)
    token = (await resp.json())["token"]
    resp = await client.post(
        "/api/chat/link/verify",
        headers=user.headers,
        json={"token": token, "serviceUserId": user.id},
    )
    assert resp.status == 200, await resp.text()


async def test_requested_reviewers_are_told_and_a_review_answers(
    client, smtp, alice, bob, tmp_path
):
    carol, dave = await sign_up(client, "carol"), await sign_up(client, "dave")
    work = await project(client, alice, bob, tmp_path, {}, visibility="private")
    await grant(client, alice, "carol", "read")
    await commit(work, {"a.txt": "a\n"}, "a")
    await git("push", "-q", remote(client, bob, "alice", "proj"), "feature", cwd=work)
    pull = await open_pull(client, bob)
    assert pull["requestedReviewers"] == [] and pull["requestedTeams"] == []
    await link_chat(client, carol, "chat-carol")
    url = REPO + "/pulls/1/requested_reviewers"
    for body, error in (
        ({"reviewers": ["bob"]}, "reviewers: the author cannot review their own pull request: bob"),
        ({"reviewers": ["dave"]}, "reviewers: cannot read this repository: dave"),
        ({"reviewers": ["nobody"]}, "reviewers: no such user: nobody"),
        ({"teamReviewers": ["devs"]}, "teamReviewers: no such team of alice: devs"),
        ({}, "reviewers: give reviewers or teamReviewers"),
    ):
        resp = await client.post(url, json=body, headers=bob.headers)
        assert resp.status == 422 and (await resp.json())["error"] == error, body
    resp = await client.post(url, json={"reviewers": ["carol"]}, headers=dave.headers)
    assert resp.status == 404  # dave may not read it at all
    resp = await client.post(url, json={"reviewers": ["carol", "alice"]}, headers=bob.headers)
    assert resp.status == 201, await resp.text()
    assert sorted(names((await resp.json())["pullRequest"])) == ["alice", "carol"]
    # carol hears of it three ways: the inbox, e-mail, and a chat notice for the bot.
    assert reasons(await inbox(client, carol)) == {1: "review_requested"}
    mails = await _mails(smtp, 2)
    to_carol = [m for m in mails if m["To"] == "carol@example.com"]
    assert "you were asked to review pull request #1 by bob" in to_carol[0].get_content()
    resp = await client.get("/api/chat/notifications", headers=BOT)
    [notice] = [n for n in (await resp.json())["notifications"] if n["username"] == "carol"]
    assert notice["chatId"] == "chat-carol" and "review pull request #1" in notice["reason"]
    # carol's review answers her request; alice's is withdrawn by bob.
    resp = await client.post(
        REPO + "/pulls/1/reviews",
        json={"event": "COMMENT", "body": "looks fine"},
        headers=carol.headers,
    )
    assert resp.status == 201
    resp = await client.get(REPO + "/pulls/1", headers=bob.headers)
    assert names((await resp.json())["pullRequest"]) == ["alice"]
    resp = await client.delete(url, json={"reviewers": ["alice"]}, headers=bob.headers)
    assert resp.status == 200 and names((await resp.json())["pullRequest"]) == []
    await client.app[BUS].drain()
    actions = [
        (e["data"]["action"], (e["data"].get("requestedReviewer") or {}).get("username"))
        for e in (await (await client.get(REPO + "/events", headers=alice.headers)).json())[
            "events"
        ]
        if e["data"].get("action", "").startswith("review_request")
    ]
    assert sorted(actions) == [
        ("review_request_removed", "alice"),
        ("review_requested", "alice"),
        ("review_requested", "carol"),
    ]


CODEOWNERS = """\
# GitHub's syntax: the last matching line wins
*           @alice
/docs/      @carol
*.py        @dave
/src/vendored.py
"""


async def test_code_owners_are_requested_and_required(client, alice, bob, tmp_path):
    carol, dave = await sign_up(client, "carol"), await sign_up(client, "dave")
    work = await project(client, alice, bob, tmp_path, {".github/CODEOWNERS": CODEOWNERS})
    for who in ("carol", "dave"):
        await grant(client, alice, who)
    await commit(work, {"docs/guide.md": "read me\n", "src/vendored.py": "x = 1\n"}, "docs")
    await git("push", "-q", remote(client, bob, "alice", "proj"), "feature", cwd=work)
    pull = await open_pull(client, bob)
    assert names(pull) == ["carol"]  # docs/ is carol's; src/vendored.py is nobody's
    assert reasons(await inbox(client, carol)) == {1: "review_requested"}
    # A new commit changes a path dave owns: he is asked too, carol is not asked twice.
    await commit(work, {"tool.py": "print()\n"}, "tool")
    await git("push", "-q", remote(client, bob, "alice", "proj"), "feature", cwd=work)
    for _ in range(100):
        await client.app[BUS].drain()
        resp = await client.get(REPO + "/pulls/1", headers=bob.headers)
        if len(names((await resp.json())["pullRequest"])) == 2:
            break
        await asyncio.sleep(0.05)
    assert sorted(names((await resp.json())["pullRequest"])) == ["carol", "dave"]
    resp = await client.put(
        REPO + "/branches/main/protection",
        json={
            "requiredPullRequestReviews": {
                "requiredApprovingReviewCount": 0,
                "requireCodeOwnerReviews": True,
            },
            "enforceAdmins": True,
        },
        headers=alice.headers,
    )
    assert resp.status == 200, await resp.text()
    rule = (await resp.json())["protection"]["requiredPullRequestReviews"]
    assert rule["requireCodeOwnerReviews"] is True

    async def merge() -> tuple[int, str]:
        resp = await client.post(REPO + "/pulls/1/merge", json={}, headers=alice.headers)
        return resp.status, (await resp.json()).get("error", "")

    status, error = await merge()
    assert status == 405
    assert "changes to docs/guide.md need an approval from a code owner (@carol)" in error
    assert "changes to tool.py need an approval from a code owner (@dave)" in error
    resp = await client.post(
        REPO + "/pulls/1/reviews", json={"event": "APPROVE"}, headers=carol.headers
    )
    assert resp.status == 201
    status, error = await merge()
    assert status == 405 and "docs/guide.md" not in error and "tool.py" in error
    resp = await client.post(
        REPO + "/pulls/1/reviews", json={"event": "APPROVE"}, headers=dave.headers
    )
    assert resp.status == 201
    status, error = await merge()
    assert status == 200, error


def test_codeowners_patterns_as_github_reads_them():
    rules = parse(
        "*.js @web\n/build/logs/ @ops\ndocs/* @docs\napps/ @apps\n**/logs @logs\n"
        "/scripts/ @a @org/team # comment\nsrc/**/x.c @x\n/vendor\n"
    )
    assert owners_of(rules, "a/b/c.js") == ("@web",)
    assert owners_of(rules, "build/logs/x.txt") == ("@logs",)  # **/logs comes later
    assert owners_of(rules, "docs/a.md") == ("@docs",)
    assert owners_of(rules, "docs/deep/a.md") == ()
    assert owners_of(rules, "x/apps/y.txt") == ("@apps",)
    assert owners_of(rules, "scripts/run.sh") == ("@a", "@org/team")
    assert owners_of(rules, "src/a/b/x.c") == ("@x",) and owners_of(rules, "src/x.c") == ("@x",)
    assert owners_of(rules, "vendor/lib.js") == ()  # a line without owners unowns
    assert owners_of(rules, "README") == ()


async def test_teams_are_mentioned_and_asked_to_review(client, alice, bob, tmp_path):
    carol = await sign_up(client, "carol")
    org = "/api/orgs/acme"
    assert (
        await client.post("/api/orgs", json={"name": "acme"}, headers=alice.headers)
    ).status == 201
    for who in ("bob", "carol"):
        await client.put(f"{org}/members/{who}", json={"role": "member"}, headers=alice.headers)
    await client.post(
        f"{org}/teams", json={"name": "devs", "permission": "write"}, headers=alice.headers
    )
    await client.put(f"{org}/teams/devs/members/carol", headers=alice.headers)
    resp = await client.post(
        "/api/repositories",
        json={"name": "site", "owner": "acme", "visibility": "private", "autoInit": True},
        headers=alice.headers,
    )
    assert resp.status == 201, await resp.text()
    site = "/api/repositories/acme/site"
    await client.post(f"{site}/issues", json={"title": "Hi @acme/devs"}, headers=bob.headers)
    assert reasons(await inbox(client, carol)) == {1: "team_mention"}
    work = tmp_path / "site"
    await git("clone", "-q", remote(client, alice, "acme", "site"), str(work))
    await git("checkout", "-q", "-b", "feature", cwd=work)
    await commit(work, {"b.txt": "b\n"}, "b")
    await git("push", "-q", "origin", "feature", cwd=work)
    resp = await client.post(
        f"{site}/pulls", json={"title": "B", "head": "feature"}, headers=alice.headers
    )
    assert resp.status == 201, await resp.text()
    resp = await client.post(
        f"{site}/pulls/2/requested_reviewers",
        json={"teamReviewers": ["devs"]},
        headers=alice.headers,
    )
    assert resp.status == 201, await resp.text()
    teams = (await resp.json())["pullRequest"]["requestedTeams"]
    assert [(t["name"], t["organization"]) for t in teams] == [("devs", "acme")]
    assert reasons(await inbox(client, carol)) == {1: "team_mention", 2: "review_requested"}
    # A member's review answers the team's request.
    resp = await client.post(
        f"{site}/pulls/2/reviews", json={"event": "APPROVE"}, headers=carol.headers
    )
    assert resp.status == 201
    resp = await client.get(f"{site}/pulls/2", headers=bob.headers)
    assert (await resp.json())["pullRequest"]["requestedTeams"] == []
