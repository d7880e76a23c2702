"""A repository made public keeps its private past private: events and dangling commits."""

from __future__ import annotations

import json

from hubsvc.app import create_app
from hubsvc.keys import BUS

from .conftest import make_config, sign_up
from .gitcli import git, remote
from .test_hooks import _receiver
from .test_repos import create
from .test_ws import connect, next_of

REPO = "/api/repositories/alice/proj"


async def private_history(client, alice, tmp_path) -> str:
    """A private repository with an edited issue, a deleted comment and a branch pushed
    and deleted; returns the oid of that branch's now dangling commit."""
    await create(client, alice, "proj", visibility="private", autoInit=True)
    resp = await client.post(
        REPO + "/issues",
        headers=alice.headers,
        json={"title": "Launch", "body": "the secret plan: acquire bob"},
    )
    assert resp.status == 201
    await client.patch(REPO + "/issues/1", json={"body": "nothing to see"}, headers=alice.headers)
    resp = await client.post(
        REPO + "/issues/1/comments", json={"body": "secret comment"}, headers=alice.headers
    )
    comment = (await resp.json())["comment"]["id"]
    resp = await client.delete(f"{REPO}/issues/1/comments/{comment}", headers=alice.headers)
    assert resp.status == 204

    work = tmp_path / "work"
    await git("clone", remote(client, alice, "alice", "proj"), str(work))
    await git("checkout", "-b", "leak", cwd=work)
    (work / "keys.txt").write_text("secret key material\n")
    await git("add", "keys.txt", cwd=work)
    await git("commit", "-m", "oops, the keys", cwd=work)
    oid = (await git("rev-parse", "HEAD", cwd=work))[1].strip()
    await git("push", "origin", "leak", cwd=work)
    await git("push", "origin", "--delete", "leak", cwd=work)
    assert (await client.get(f"{REPO}/commits/{oid}/diff", headers=alice.headers)).status == 200
    return oid


async def feed(client, headers=None, after: str = "0") -> list[dict]:
    resp = await client.get(f"{REPO}/events?after={after}&limit=100", headers=headers or {})
    assert resp.status == 200, await resp.text()
    return (await resp.json())["events"]


async def test_the_private_past_stays_private_after_going_public(client, alice, bob, tmp_path):
    oid = await private_history(client, alice, tmp_path)
    # bob becomes a collaborator while it is still private, after all that happened.
    await client.put(
        REPO + "/collaborators/bob", json={"permission": "read"}, headers=alice.headers
    )
    resp = await client.patch(REPO, json={"visibility": "public"}, headers=alice.headers)
    assert resp.status == 200
    resp = await client.post(REPO + "/issues", json={"title": "Hello world"}, headers=alice.headers)
    assert resp.status == 201

    for who in (None, bob.headers):
        seen = await feed(client, who)
        text = json.dumps(seen)
        assert "secret" not in text and oid not in text
        assert [(e["type"], e["data"].get("action"), e.get("public")) for e in seen] == [
            ("issue", "opened", True)
        ], who
    # The owner keeps the whole history, each event marked with what it was.
    mine = await feed(client, alice.headers)
    assert [e["public"] for e in mine] == [False] * (len(mine) - 1) + [True]
    assert any(e["type"] == "push" for e in mine)
    # A deleted comment's event names the comment, not what it said.
    [gone] = [e for e in mine if e["data"].get("action") == "comment_deleted"]
    assert "body" not in gone["data"]["comment"] and "secret comment" not in json.dumps(gone)

    # The commit of the branch deleted while private is gone, for everyone.
    for who in ({}, bob.headers, alice.headers):
        resp = await client.get(f"{REPO}/commits/{oid}/diff", headers=who)
        assert resp.status == 404, (who, resp.status)
    clone = tmp_path / "anon"
    await git("clone", remote(client, None, "alice", "proj"), str(clone))
    code, _, _ = await git("cat-file", "-e", oid, cwd=clone, check=False)
    assert code != 0
    # The repository still works: clone, history, the README.
    resp = await client.get(REPO + "/commits")
    assert resp.status == 200 and len((await resp.json())["commits"]) == 1


async def test_resume_and_live_sockets_skip_the_private_past(client, alice, bob, tmp_path):
    await private_history(client, alice, tmp_path)
    await client.patch(REPO, json={"visibility": "public"}, headers=alice.headers)
    ws = await connect(client, bob)
    await ws.send_json({"type": "subscribe", "repository": {"owner": "alice", "name": "proj"}})
    await ws.send_json({"type": "resume", "after": "0"})
    # Nothing of the private period is replayed: the first notification is the new one.
    await client.post(REPO + "/issues", json={"title": "Public now"}, headers=alice.headers)
    note = (await next_of(ws, "notification"))["notification"]
    assert note["data"]["issue"]["title"] == "Public now" and note["public"] is True
    await ws.close()


async def test_a_hook_added_later_hears_nothing_of_the_private_past(
    aiohttp_client, aiohttp_server, tmp_path
):
    config = make_config(tmp_path, webhooks__allowed_hosts=["127.0.0.1"])
    client = await aiohttp_client(create_app(config))
    alice = await sign_up(client, "alice")
    receiver = await _receiver(aiohttp_server)
    await private_history(client, alice, tmp_path)
    await client.patch(REPO, json={"visibility": "public"}, headers=alice.headers)
    resp = await client.post(
        REPO + "/hooks",
        headers=alice.headers,
        json={
            "url": receiver.url,
            "format": "json",
            "events": ["issue", "push", "pull_request", "star", "fork"],
        },
    )
    assert resp.status == 201, await resp.text()
    await client.post(REPO + "/issues", json={"title": "Public now"}, headers=alice.headers)
    [got] = await receiver.wait_for(1)
    await client.app[BUS].drain()
    assert len(receiver.requests) == 1 and "Public now" in got["body"].decode()
    assert b"secret" not in got["body"]
