"""Pull requests with the real git CLI: mergeable, each merge method, conflicts, forks."""

from __future__ import annotations

import asyncio

import pytest

from hubsvc.errors import Conflict
from hubsvc.git.files import REPO_FILES
from hubsvc.keys import BUS, STORE

from .conftest import sign_up
from .gitcli import git, remote
from .test_repos import create

API = "/api/repositories/alice/proj"


async def setup_branches(client, alice, tmp_path, conflict=False):
    """proj with main (a.txt, b.txt) and branch topic (+c.txt, and a main-side change)."""
    await create(client, alice, "proj")
    work = tmp_path / "work"
    await git("init", "-q", "-b", "main", str(work))
    (work / "a.txt").write_text("one\ntwo\nthree\n")
    (work / "b.txt").write_text("b\n")
    await git("add", "-A", cwd=work)
    await git("commit", "-qm", "base", cwd=work)
    await git("checkout", "-qb", "topic", cwd=work)
    (work / "c.txt").write_text("topic file\n")
    if conflict:
        (work / "a.txt").write_text("one\nTOPIC\nthree\n")
    await git("add", "-A", cwd=work)
    await git("commit", "-qm", "topic work", cwd=work)
    await git("checkout", "-q", "main", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "proj"), "main", "topic", cwd=work)
    return work


async def open_pull(client, user, head="topic", **extra):
    resp = await client.post(
        API + "/pulls",
        json={"title": "Topic", "body": "please", "head": head, **extra},
        headers=user.headers,
    )
    assert resp.status == 201, await resp.text()
    return (await resp.json())["pullRequest"]


async def advance_main(client, alice, work, text="one\nMAIN\nthree\n"):
    (work / "a.txt").write_text(text)
    await git("commit", "-qam", "main moves", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "proj"), "main", cwd=work)


async def clone_main(client, tmp_path, name):
    dest = tmp_path / name
    await git("clone", "-q", remote(client, None, "alice", "proj"), str(dest))
    return dest


async def test_create_fields_duplicates_and_missing_branches(client, alice, bob, tmp_path):
    await setup_branches(client, alice, tmp_path)
    await client.post(API + "/issues", json={"title": "an issue"}, headers=alice.headers)
    pull = await open_pull(client, bob)
    for field in (
        "id",
        "number",
        "title",
        "body",
        "state",
        "author",
        "head",
        "base",
        "headRepository",
        "merged",
        "mergeable",
        "mergedAt",
        "mergedBy",
        "mergeCommit",
        "commentCount",
        "createdAt",
        "updatedAt",
        "closedAt",
    ):
        assert field in pull
    assert pull["number"] == 2  # one sequence with issues
    assert (pull["base"], pull["state"], pull["merged"], pull["mergeable"]) == (
        "main",
        "open",
        False,
        True,
    )
    resp = await client.post(
        API + "/pulls", json={"title": "again", "head": "topic"}, headers=bob.headers
    )
    assert resp.status == 409
    for body in (
        {"title": "x", "head": "nope"},
        {"title": "x", "head": "topic", "base": "nope"},
        {"title": "x", "head": "main"},
        {"title": "x"},
    ):
        resp = await client.post(API + "/pulls", json=body, headers=bob.headers)
        assert resp.status == 400, body
    assert (await client.get(API + "/pulls/1")).status == 404  # #1 is an issue


async def test_list_states_and_ignore_unknown(client, alice, tmp_path):
    await setup_branches(client, alice, tmp_path)
    await open_pull(client, alice)
    body = await (await client.get(API + "/pulls")).json()
    assert [p["number"] for p in body["pullRequests"]] == [1] and body["hasMore"] is False
    await client.patch(API + "/pulls/1", json={"state": "closed"}, headers=alice.headers)
    assert (await (await client.get(API + "/pulls?state=closed")).json())["pullRequests"][0][
        "state"
    ] == "closed"
    assert (await (await client.get(API + "/pulls?state=merged")).json())["pullRequests"] == []
    assert (await client.get(API + "/pulls?state=weird")).status == 400
    assert (await client.get(API + "/pulls?sort=new")).status == 400
    resp = await client.get(API + "/pulls?state=weird&sort=new&ignoreUnknown=true")
    assert resp.status == 200 and (await resp.json())["pullRequests"] == []  # state → open
    resp = await client.get(API + "/pulls?state=all&ignoreUnknown=true&x=1")
    assert len((await resp.json())["pullRequests"]) == 1


async def check_merged(client, pull_number, alice):
    resp = await client.get(f"{API}/pulls/{pull_number}")
    pull = (await resp.json())["pullRequest"]
    assert pull["state"] == "merged" and pull["merged"] is True
    assert pull["mergedBy"]["username"] == "alice" and pull["mergedAt"].endswith("Z")
    return pull


async def test_merge_commit_has_both_parents(client, events, alice, tmp_path):
    work = await setup_branches(client, alice, tmp_path)
    await advance_main(client, alice, work, "one\ntwo\nthree\nfour\n")
    await open_pull(client, alice)
    resp = await client.post(API + "/pulls/1/merge", json={}, headers=alice.headers)
    assert resp.status == 200, await resp.text()
    pull = await check_merged(client, 1, alice)
    clone = await clone_main(client, tmp_path, "c1")
    head = (await git("rev-parse", "HEAD", cwd=clone))[1].strip()
    assert head == pull["mergeCommit"]
    parents = (await git("log", "-1", "--format=%P", cwd=clone))[1].split()
    topic = (await git("rev-parse", "topic", cwd=work))[1].strip()
    assert len(parents) == 2 and parents[1] == topic
    assert (clone / "c.txt").read_text() == "topic file\n"
    assert (clone / "a.txt").read_text() == "one\ntwo\nthree\nfour\n"
    assert "Merge pull request #1" in (await git("log", "-1", "--format=%B", cwd=clone))[1]
    await events.wait_for(5)
    merged = [e for e in events.events if e.type == "pull_request" and e.data["action"] == "merged"]
    assert merged and merged[0].data["pullRequest"]["mergeCommit"] == head
    pushes = [e for e in events.of("push") if e.data["after"] == head]
    assert pushes and pushes[0].data["ref"] == "refs/heads/main"
    # Merging again is a conflict of state.
    assert (await client.post(API + "/pulls/1/merge", json={}, headers=alice.headers)).status == 409
    resp = await client.patch(API + "/pulls/1", json={"state": "open"}, headers=alice.headers)
    assert resp.status == 409


async def test_squash_is_one_commit_with_one_parent(client, alice, tmp_path):
    work = await setup_branches(client, alice, tmp_path)
    before = (await git("rev-parse", "main", cwd=work))[1].strip()
    await open_pull(client, alice)
    resp = await client.post(
        API + "/pulls/1/merge",
        json={"method": "squash", "message": "Squashed!"},
        headers=alice.headers,
    )
    assert resp.status == 200
    clone = await clone_main(client, tmp_path, "c2")
    assert (await git("log", "-1", "--format=%P", cwd=clone))[1].split() == [before]
    assert (await git("log", "-1", "--format=%B", cwd=clone))[1].strip() == "Squashed!"
    assert (clone / "c.txt").exists()


async def test_fast_forward_only_when_possible(client, alice, tmp_path):
    work = await setup_branches(client, alice, tmp_path)
    await open_pull(client, alice)
    topic = (await git("rev-parse", "topic", cwd=work))[1].strip()
    resp = await client.post(
        API + "/pulls/1/merge", json={"method": "fast-forward"}, headers=alice.headers
    )
    assert resp.status == 200
    assert (await resp.json())["pullRequest"]["mergeCommit"] == topic
    clone = await clone_main(client, tmp_path, "c3")
    assert (await git("rev-parse", "HEAD", cwd=clone))[1].strip() == topic
    # A second pull request whose base has moved on cannot fast-forward.
    await git("checkout", "-qb", "later", "main~0", cwd=work)
    (work / "d.txt").write_text("d\n")
    await git("add", "d.txt", cwd=work)
    await git("commit", "-qm", "later", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "proj"), "later", cwd=work)
    await open_pull(client, alice, head="later")
    before = await (await client.get(API + "/branches")).json()
    resp = await client.post(
        API + "/pulls/2/merge", json={"method": "fast-forward"}, headers=alice.headers
    )
    assert resp.status == 409
    assert await (await client.get(API + "/branches")).json() == before
    assert (await (await client.get(API + "/pulls/2")).json())["pullRequest"]["state"] == "open"


async def test_conflict_is_409_and_changes_nothing(client, alice, tmp_path):
    work = await setup_branches(client, alice, tmp_path, conflict=True)
    pull = await open_pull(client, alice)
    assert pull["mergeable"] is True
    await advance_main(client, alice, work)  # main edits the same line: now it conflicts
    await client.app[BUS].drain()
    pull = (await (await client.get(API + "/pulls/1")).json())["pullRequest"]
    assert pull["mergeable"] is False
    listed = (await (await client.get(API + "/pulls")).json())["pullRequests"][0]
    assert listed["mergeable"] is False
    before = await (await client.get(API + "/branches")).json()
    for method in ("merge", "squash"):
        resp = await client.post(
            API + "/pulls/1/merge", json={"method": method}, headers=alice.headers
        )
        assert resp.status == 409 and "conflict" in (await resp.json())["error"]
    assert await (await client.get(API + "/branches")).json() == before
    assert (await (await client.get(API + "/pulls/1")).json())["pullRequest"]["state"] == "open"


async def test_merge_needs_write_access(client, alice, bob, tmp_path):
    await setup_branches(client, alice, tmp_path)
    await open_pull(client, bob)
    resp = await client.post(API + "/pulls/1/merge", json={}, headers=bob.headers)
    assert resp.status == 403
    resp = await client.patch(API + "/pulls/1", json={"title": "mine"}, headers=bob.headers)
    assert resp.status == 200  # the author may edit
    carol = await sign_up(client, "carol")
    resp = await client.patch(API + "/pulls/1", json={"title": "no"}, headers=carol.headers)
    assert resp.status == 403


async def test_pull_request_from_a_fork(client, events, alice, bob, tmp_path):
    await setup_branches(client, alice, tmp_path)
    resp = await client.post(API + "/fork", json={}, headers=bob.headers)
    assert resp.status == 201
    fork_work = tmp_path / "fork"
    await git("clone", "-q", remote(client, bob, "bob", "proj"), str(fork_work))
    await git("checkout", "-qb", "fix", cwd=fork_work)
    (fork_work / "fix.txt").write_text("fixed\n")
    await git("add", "fix.txt", cwd=fork_work)
    await git("commit", "-qm", "fix from fork", cwd=fork_work)
    await git("push", "-q", "origin", "fix", cwd=fork_work)
    pull = await open_pull(client, bob, head="fix", headRepository={"owner": "bob", "name": "proj"})
    assert pull["headRepository"] == {"owner": "bob", "name": "proj"}
    assert pull["mergeable"] is True
    resp = await client.post(
        API + "/pulls",
        json={"title": "x", "head": "fix", "headRepository": {"owner": "bob", "name": "nope"}},
        headers=bob.headers,
    )
    # The page exists; the body names a repository that doesn't (GitHub: 422).
    assert resp.status == 422 and "headRepository" in (await resp.json())["error"]
    resp = await client.post(API + "/pulls/1/merge", json={}, headers=alice.headers)
    assert resp.status == 200, await resp.text()
    clone = await clone_main(client, tmp_path, "c4")
    assert (clone / "fix.txt").read_text() == "fixed\n"
    assert "bob:fix" in (await git("log", "-1", "--format=%B", cwd=clone))[1]


async def test_base_ref_moves_only_from_where_the_merge_began(client, alice, tmp_path):
    work = await setup_branches(client, alice, tmp_path)
    repo = (await (await client.get(API)).json())["repo"]
    files = client.app[REPO_FILES]
    old = (await git("rev-parse", "main", cwd=work))[1].strip()
    topic = (await git("rev-parse", "topic", cwd=work))[1].strip()
    await advance_main(client, alice, work, "pushed meanwhile\n")
    moved = (await git("rev-parse", "main", cwd=work))[1].strip()
    # A merge computed on the old tip must not overwrite the push that landed since.
    ok = await files.run(int(repo["id"]), lambda g: g.update_branch("main", topic, old))
    assert ok is False
    assert await files.run(int(repo["id"]), lambda g: g.branch_oid("main")) == moved


async def test_mergeable_follows_pushes_to_the_head(client, alice, tmp_path):
    work = await setup_branches(client, alice, tmp_path)
    pull = await open_pull(client, alice)
    assert pull["mergeable"] is True
    await advance_main(client, alice, work)  # changes line 2 of a.txt on main
    await git("checkout", "-q", "topic", cwd=work)
    (work / "a.txt").write_text("one\nTOPIC\nthree\n")
    await git("commit", "-qam", "conflicting topic", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "proj"), "topic", cwd=work)
    await client.app[BUS].drain()
    pull = (await (await client.get(API + "/pulls/1")).json())["pullRequest"]
    assert pull["mergeable"] is False
    assert pull["headSha"] == (await git("rev-parse", "topic", cwd=work))[1].strip()


async def test_every_pull_request_transition_publishes_its_event(client, events, alice, tmp_path):
    await setup_branches(client, alice, tmp_path)
    await open_pull(client, alice)
    url = API + "/pulls/1"
    await client.patch(url, json={"state": "closed"}, headers=alice.headers)
    await client.patch(url, json={"state": "open"}, headers=alice.headers)
    await client.patch(url, json={"title": "Better title"}, headers=alice.headers)
    await client.post(url + "/comments", json={"body": "LGTM"}, headers=alice.headers)
    await client.post(url + "/merge", json={"method": "squash"}, headers=alice.headers)
    await client.app[BUS].drain()
    actions = [e.data["action"] for e in events.events if e.type == "pull_request"]
    assert actions == ["opened", "closed", "reopened", "edited", "commented", "merged"]
    merged = [e for e in events.events if e.type == "pull_request"][-1]
    assert merged.data["pullRequest"]["state"] == "merged"
    assert merged.actor["username"] == "alice"
    assert merged.repository == {"owner": "alice", "name": "proj"}


async def _main_history(client, tmp_path, name):
    clone = await clone_main(client, tmp_path, name)
    return (await git("rev-list", "--first-parent", "main", cwd=clone))[1].split()


@pytest.mark.parametrize("method", ["squash", "merge", "fast-forward"])
async def test_concurrent_merges_of_one_pull_request_merge_it_once(
    client, events, alice, tmp_path, method
):
    work = await setup_branches(client, alice, tmp_path)
    before = (await git("rev-parse", "main", cwd=work))[1].strip()
    await open_pull(client, alice)
    answers = await asyncio.gather(
        *(
            client.post(API + "/pulls/1/merge", json={"method": method}, headers=alice.headers)
            for _ in range(4)
        )
    )
    assert sorted(r.status for r in answers) == [200, 409, 409, 409]
    # The base branch moved by exactly one commit (on its first-parent line).
    assert (await _main_history(client, tmp_path, "c")).index(before) == 1
    await asyncio.sleep(0.05)
    assert len([e for e in events.of("pull_request") if e.data["action"] == "merged"]) == 1


async def test_a_merge_racing_a_close_has_one_winner(client, alice, tmp_path):
    work = await setup_branches(client, alice, tmp_path)
    before = (await git("rev-parse", "main", cwd=work))[1].strip()
    await open_pull(client, alice)
    merge, close = await asyncio.gather(
        client.post(API + "/pulls/1/merge", json={"method": "squash"}, headers=alice.headers),
        client.patch(API + "/pulls/1", json={"state": "closed"}, headers=alice.headers),
    )
    pull = (await (await client.get(API + "/pulls/1")).json())["pullRequest"]
    head = (await _main_history(client, tmp_path, "c"))[0]
    assert sorted((merge.status, close.status)) == [200, 409]
    if merge.status == 200:  # the merge took the pull request first: closing it is refused
        assert pull["merged"] is True and pull["state"] == "merged" and head != before
    else:  # closed first: nothing merged, the base branch untouched
        assert pull["merged"] is False and pull["state"] == "closed" and head == before


async def test_a_merged_pull_request_refuses_a_state_change_in_the_store_itself(
    client, alice, tmp_path
):
    # The race above, taken apart: the handler looked at `merged` before the merge finished,
    # so the store's write must refuse on its own (a no-op close answered 200 before).
    await setup_branches(client, alice, tmp_path)
    await open_pull(client, alice)
    resp = await client.post(
        API + "/pulls/1/merge", json={"method": "merge"}, headers=alice.headers
    )
    assert resp.status == 200
    store = client.app[STORE]
    repo = await store.repos.by_name("alice", "proj")
    item = await store.issues.get(repo["id"], 1, True)
    for fields in ({"state": "closed"}, {"state": "open"}, {"base": "main"}):
        with pytest.raises(Conflict):
            await store.issues.update(item["id"], fields)
    pull = (await (await client.get(API + "/pulls/1")).json())["pullRequest"]
    assert pull["merged"] is True and pull["state"] == "merged"


async def test_two_processes_merging_one_pull_request_merge_it_once(tmp_path, redis_url):
    # The claim lives in the database, not in a process's lock: two servers over one data
    # folder (which takes Redis: a lone process locks its data), one merge request to
    # each at once, exactly one merge.
    from .server import ServerProcess, seed_owner

    url, prefix = redis_url
    first = ServerProcess(tmp_path / "data", {"redis": {"url": url, "prefix": prefix}})
    await asyncio.to_thread(first.start)
    second = ServerProcess(tmp_path / "data", first.settings)
    try:
        headers, url = await asyncio.to_thread(seed_owner, first)
        work = tmp_path / "w"
        await git("init", "-q", "-b", "main", str(work))
        (work / "a.txt").write_text("a\n")
        await git("add", "-A", cwd=work)
        await git("commit", "-qm", "base", cwd=work)
        await git("checkout", "-qb", "topic", cwd=work)
        (work / "b.txt").write_text("b\n")
        await git("add", "-A", cwd=work)
        await git("commit", "-qm", "topic", cwd=work)
        await git("push", "-q", url, "main", "topic", cwd=work)
        assert (
            await asyncio.to_thread(
                first.request,
                "POST",
                "/api/repositories/owner/proj/pulls",
                {"title": "T", "head": "topic"},
                headers,
            )
        )[0] == 201
        await asyncio.to_thread(second.start)
        path = "/api/repositories/owner/proj/pulls/1/merge"
        answers = await asyncio.gather(
            *(
                asyncio.to_thread(server.request, "POST", path, {"method": "squash"}, headers)
                for server in (first, second, first, second)
            )
        )
        assert sorted(status for status, _ in answers) == [200, 409, 409, 409]
        clone = tmp_path / "c"
        await git("clone", "-q", url, str(clone))
        history = (await git("rev-list", "--first-parent", "main", cwd=clone))[1].split()
        assert len(history) == 2  # base plus exactly one squash commit
    finally:
        await asyncio.to_thread(first.stop)
        if second.proc is not None:
            await asyncio.to_thread(second.stop)
