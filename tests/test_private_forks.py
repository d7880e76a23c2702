"""Private stays private through forks and pull requests, as on GitHub: a fork made private
leaks nothing more through the public repository it proposed changes to."""

from __future__ import annotations

import asyncio

from hubsvc.keys import BUS

from .conftest import sign_up
from .gitcli import git, remote
from .test_repos import create
from .test_ws import connect, next_of

API = "/api/repositories"


async def _commit(work, name: str, text: str, message: str) -> str:
    (work / name).write_text(text)
    await git("add", "-A", cwd=work)
    await git("commit", "-qm", message, cwd=work)
    return (await git("rev-parse", "HEAD", cwd=work))[1].strip()


async def _fork_pull(client, alice, bob, tmp_path):
    """alice/proj (public) and bob's fork with branch feat, pull request #1 from it."""
    await create(client, alice, "proj")
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    await _commit(work, "a.txt", "a\n", "base")
    await git("push", "-q", remote(client, alice, "alice", "proj"), "main", cwd=work)
    resp = await client.post(f"{API}/alice/proj/fork", json={}, headers=bob.headers)
    assert resp.status == 201, await resp.text()
    await git("checkout", "-qb", "feat", cwd=work)
    shared = await _commit(work, "feat.txt", "public work\n", "public work")
    await git("push", "-q", remote(client, bob, "bob", "proj"), "feat", cwd=work)
    resp = await client.post(
        f"{API}/alice/proj/pulls",
        headers=bob.headers,
        json={
            "title": "Feature",
            "head": "feat",
            "headRepository": {"owner": "bob", "name": "proj"},
        },
    )
    assert resp.status == 201, await resp.text()
    return work, shared


async def _ls_remote(client, owner, name):
    out = (await git("ls-remote", remote(client, None, owner, name)))[1]
    return {ref: oid for oid, ref in (line.split("\t") for line in out.splitlines())}


async def test_a_fork_made_private_leaks_nothing_through_its_pull_request(
    client, events, alice, bob, tmp_path
):
    work, shared = await _fork_pull(client, alice, bob, tmp_path)
    assert (await _ls_remote(client, "alice", "proj"))["refs/pull/1/head"] == shared
    resp = await client.patch(
        f"{API}/bob/proj", json={"visibility": "private"}, headers=bob.headers
    )
    assert resp.status == 200

    # Work pushed while private: never copied into, nor served by, the public repository.
    secret = await _commit(work, "secret.txt", "private work\n", "private work")
    seen = len(events.events)
    await git("push", "-q", remote(client, bob, "bob", "proj"), "feat", cwd=work)
    # The push's event, then the pull request refresh it triggers, have run.
    await events.wait_for(seen + 1)
    await client.app[BUS].drain()
    await client.patch(
        f"{API}/alice/proj/pulls/1", json={"title": "Feature v2"}, headers=bob.headers
    )
    assert (await _ls_remote(client, "alice", "proj"))["refs/pull/1/head"] == shared
    for who in (None, alice):
        headers = who.headers if who else {}
        resp = await client.get(
            f"{API}/alice/proj/file",
            headers=headers,
            params={"branch": secret, "path": "secret.txt"},
        )
        assert resp.status == 404, await resp.text()
    mirror = tmp_path / "mirror.git"
    await git("clone", "-q", "--mirror", remote(client, None, "alice", "proj"), str(mirror))
    assert (await git("cat-file", "-e", secret, cwd=mirror, check=False))[0] != 0

    # The pull request names the private fork only to those who may read it.
    anon = (await (await client.get(f"{API}/alice/proj/pulls/1")).json())["pullRequest"]
    assert anon["headRepository"] is None and anon["headSha"] == shared
    mine = (await (await client.get(f"{API}/alice/proj/pulls/1", headers=bob.headers)).json())[
        "pullRequest"
    ]
    assert mine["headRepository"] == {"owner": "bob", "name": "proj"}
    listed = (await (await client.get(f"{API}/alice/proj/pulls", headers=alice.headers)).json())[
        "pullRequests"
    ]
    assert listed[0]["headRepository"] is None
    # Events reach every reader of the base: they never name it.
    await asyncio.sleep(0.05)
    edited = [e for e in events.of("pull_request") if e.data.get("action") == "edited"]
    assert edited and edited[-1].data["pullRequest"]["headRepository"] is None

    # forkCount counts only forks the caller may read.
    for who, count in ((None, 0), (alice, 0), (bob, 1)):
        resp = await client.get(f"{API}/alice/proj", headers=who.headers if who else {})
        assert (await resp.json())["repo"]["forkCount"] == count, who


async def test_a_private_fork_cannot_open_a_pull_request_into_a_public_repository(
    client, alice, bob, tmp_path
):
    await create(client, alice, "proj")
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    await _commit(work, "a.txt", "a\n", "base")
    await git("push", "-q", remote(client, alice, "alice", "proj"), "main", cwd=work)
    assert (await client.post(f"{API}/alice/proj/fork", json={}, headers=bob.headers)).status == 201
    await client.patch(f"{API}/bob/proj", json={"visibility": "private"}, headers=bob.headers)
    await git("checkout", "-qb", "feat", cwd=work)
    await _commit(work, "f.txt", "f\n", "private")
    await git("push", "-q", remote(client, bob, "bob", "proj"), "feat", cwd=work)
    resp = await client.post(
        f"{API}/alice/proj/pulls",
        headers=bob.headers,
        json={"title": "F", "head": "feat", "headRepository": {"owner": "bob", "name": "proj"}},
    )
    assert resp.status == 400 and "private fork" in (await resp.json())["error"]
    assert "refs/pull/1/head" not in await _ls_remote(client, "alice", "proj")


async def test_a_parent_made_private_is_not_named(client, alice, bob):
    await create(client, alice, "lib", autoInit=True)
    assert (await client.post(f"{API}/alice/lib/fork", json={}, headers=bob.headers)).status == 201
    await client.patch(f"{API}/alice/lib", json={"visibility": "private"}, headers=alice.headers)
    for who in (None, bob):
        repo = (
            await (await client.get(f"{API}/bob/lib", headers=who.headers if who else {})).json()
        )["repo"]
        assert repo["fork"] is True and repo["parent"] is None
    repo = (await (await client.get(f"{API}/bob/lib", headers=alice.headers)).json())["repo"]
    assert repo["parent"] == {"owner": "alice", "name": "lib"}


async def test_a_reader_may_fork_a_private_repository_but_the_fork_stays_private(
    client, alice, bob
):
    # GitHub: a fork of a private repository is private and can't be made public.
    await create(client, alice, "secret", visibility="private", autoInit=True)
    resp = await client.put(
        f"{API}/alice/secret/collaborators/bob", json={"permission": "read"}, headers=alice.headers
    )
    assert resp.status in (200, 201)
    resp = await client.post(f"{API}/alice/secret/fork", json={}, headers=bob.headers)
    assert resp.status == 201 and (await resp.json())["repo"]["visibility"] == "private"
    resp = await client.patch(
        f"{API}/bob/secret", json={"visibility": "public"}, headers=bob.headers
    )
    assert resp.status == 409 and "stays private" in (await resp.json())["error"]
    # Even once bob loses access to the parent, or the parent is deleted.
    await client.delete(f"{API}/alice/secret/collaborators/bob", headers=alice.headers)
    await client.delete(f"{API}/alice/secret", headers=alice.headers)
    resp = await client.patch(
        f"{API}/bob/secret", json={"visibility": "public"}, headers=bob.headers
    )
    assert resp.status == 409
    carol = await sign_up(client, "carol")
    assert (await client.get(f"{API}/bob/secret", headers=carol.headers)).status == 404


async def test_the_fork_event_names_a_private_fork_to_nobody(client, alice, bob):
    await create(client, alice, "secret", visibility="private", autoInit=True)
    carol = await sign_up(client, "carol")
    for who in ("bob", "carol"):
        await client.put(
            f"{API}/alice/secret/collaborators/{who}",
            json={"permission": "read"},
            headers=alice.headers,
        )
    ws = await connect(client, carol)  # carol watches alice/secret as a collaborator
    resp = await client.post(
        f"{API}/alice/secret/fork",
        headers=bob.headers,
        json={"name": "bobs-plan", "description": "acquire the company"},
    )
    assert resp.status == 201
    # carol reads the parent, not bob's private fork: the event names bob, not the fork.
    note = (await next_of(ws, "notification"))["notification"]
    await ws.close()
    resp = await client.get(f"{API}/alice/secret/events?after=0", headers=carol.headers)
    [event] = [e for e in (await resp.json())["events"] if e["type"] == "fork"]
    for seen in (note, event):
        assert seen["type"] == "fork" and seen["data"]["forkee"] is None
        assert seen["data"]["forker"]["username"] == "bob"
        assert "bobs-plan" not in str(seen) and "acquire" not in str(seen)
    assert (await client.get(f"{API}/bob/bobs-plan", headers=carol.headers)).status == 404


async def _private_fork(client, alice, bob, tmp_path):
    """alice/proj private with readers bob and dave; bob's private fork with branch feat."""
    await create(client, alice, "proj", visibility="private")
    dave = await sign_up(client, "dave")
    carol = await sign_up(client, "carol")
    for who in ("bob", "carol", "dave"):
        await client.put(
            f"{API}/alice/proj/collaborators/{who}",
            json={"permission": "read"},
            headers=alice.headers,
        )
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    await _commit(work, "a.txt", "a\n", "base")
    await git("push", "-q", remote(client, alice, "alice", "proj"), "main", cwd=work)
    resp = await client.post(f"{API}/alice/proj/fork", json={}, headers=bob.headers)
    assert resp.status == 201 and (await resp.json())["repo"]["visibility"] == "private"
    await git("checkout", "-qb", "feat", cwd=work)
    shared = await _commit(work, "feat.txt", "shared work\n", "shared work")
    await git("push", "-q", remote(client, bob, "bob", "proj"), "feat", cwd=work)
    return work, shared, carol, dave


PULL = {
    "title": "From the fork",
    "head": "feat",
    "headRepository": {"owner": "bob", "name": "proj"},
}


async def test_a_reader_of_a_private_fork_may_not_open_a_pull_request_from_it(
    client, alice, bob, tmp_path
):
    _, _, carol, dave = await _private_fork(client, alice, bob, tmp_path)
    await client.put(
        f"{API}/bob/proj/collaborators/carol", json={"permission": "read"}, headers=bob.headers
    )
    resp = await client.post(f"{API}/alice/proj/pulls", json=PULL, headers=carol.headers)
    assert resp.status == 403 and "write access" in (await resp.json())["error"]
    resp = await client.get(f"{API}/alice/proj/pulls?state=all", headers=dave.headers)
    assert (await resp.json())["pullRequests"] == []
    # Its writers may: bob himself.
    resp = await client.post(f"{API}/alice/proj/pulls", json=PULL, headers=bob.headers)
    assert resp.status == 201, await resp.text()


async def test_the_head_freezes_when_its_author_loses_write_access(client, alice, bob, tmp_path):
    work, shared, carol, dave = await _private_fork(client, alice, bob, tmp_path)
    await client.put(
        f"{API}/bob/proj/collaborators/carol", json={"permission": "write"}, headers=bob.headers
    )
    resp = await client.post(f"{API}/alice/proj/pulls", json=PULL, headers=carol.headers)
    assert resp.status == 201, await resp.text()
    # carol may no longer write to the fork; bob pushes more work there.
    await client.delete(f"{API}/bob/proj/collaborators/carol", headers=bob.headers)
    later = await _commit(work, "later.txt", "bob's private work\n", "bob's private work")
    await git("push", "-q", remote(client, bob, "bob", "proj"), "feat", cwd=work)
    await client.app[BUS].drain()
    for path in ("", "/commits", "/files", ".diff"):
        resp = await client.get(f"{API}/alice/proj/pulls/1{path}", headers=dave.headers)
        assert resp.status == 200, (path, await resp.text())
        text = await resp.text()
        assert later not in text and "private work" not in text, path
    resp = await client.get(f"{API}/alice/proj/pulls/1/commits", headers=dave.headers)
    assert [c["oid"] for c in (await resp.json())["commits"]] == [shared]
    assert (
        await client.get(f"{API}/alice/proj/commits/{later}/diff", headers=dave.headers)
    ).status == 404
