"""Reviewing pull requests: files, commits, .diff/.patch, compare, and comment edits."""

from __future__ import annotations

from hubsvc.keys import BUS

from .conftest import sign_up
from .gitcli import git, remote
from .test_pulls import API, open_pull, setup_branches
from .test_repos import create


async def test_pull_files_commits_diff_and_patch(client, alice, tmp_path):
    await create(client, alice, "proj")
    work = tmp_path / "work"
    await git("init", "-q", "-b", "main", str(work))
    for name, text in (
        ("a.txt", "one\ntwo\nthree\n"),
        ("b.txt", "bee\n" * 20),
        ("gone.txt", "gone\n"),
    ):
        (work / name).write_text(text)
    await git("add", "-A", cwd=work)
    await git("commit", "-qm", "base", cwd=work)
    await git("checkout", "-qb", "topic", cwd=work)
    (work / "c.txt").write_text("topic file\n")
    await git("add", "-A", cwd=work)
    await git("commit", "-qm", "topic work", cwd=work)
    (work / "a.txt").write_text("one\ntwo\nthree\nfour\n")
    (work / "img.bin").write_bytes(b"\x00\x01\x02")
    (work / 'odd "name"\t.txt').write_text("odd\n")
    await git("rm", "-q", "gone.txt", cwd=work)
    await git("add", "-A", cwd=work)
    await git("commit", "-qm", "second topic commit", cwd=work)
    await git("mv", "b.txt", "moved.txt", cwd=work)
    await git("commit", "-qm", "rename", cwd=work)
    await git("checkout", "-q", "main", cwd=work)
    # main moves on too: the three-dot diff must not show main's change as reverted.
    (work / "main-only.txt").write_text("main\n")
    await git("add", "-A", cwd=work)
    await git("commit", "-qm", "main moves", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "proj"), "main", "topic", cwd=work)
    pull = await open_pull(client, alice)

    resp = await client.get(API + f"/pulls/{pull['number']}/files")
    assert resp.status == 200
    body = await resp.json()
    by_path = {f["path"]: f for f in body["files"]}
    assert set(by_path) == {
        "a.txt",
        "c.txt",
        "gone.txt",
        "img.bin",
        'odd "name"\t.txt',
        "moved.txt",
    }
    assert body["totalFiles"] == 6 and body["hasMore"] is False
    a = by_path["a.txt"]
    assert (a["status"], a["additions"], a["deletions"]) == ("modified", 1, 0)
    assert a["patch"].startswith("@@") and "+four\n" in a["patch"]
    assert by_path["gone.txt"]["status"] == "deleted" and "-gone\n" in by_path["gone.txt"]["patch"]
    assert by_path["c.txt"]["status"] == "added" and by_path["c.txt"]["oldPath"] is None
    assert by_path["img.bin"]["binary"] is True and by_path["img.bin"]["patch"] == ""
    assert "+odd\n" in by_path['odd "name"\t.txt']["patch"]  # a quoted path's patch is found
    moved = by_path["moved.txt"]
    assert (moved["status"], moved["oldPath"], moved["patch"]) == ("renamed", "b.txt", "")
    # Paged by path, as the list is sorted.
    first = await (await client.get(API + "/pulls/1/files?limit=2")).json()
    second = await (await client.get(API + "/pulls/1/files?limit=2&offset=2")).json()
    assert first["hasMore"] and len(first["files"]) == 2
    assert [f["path"] for f in first["files"] + second["files"]] == [
        f["path"] for f in body["files"][:4]
    ]
    assert (await client.get(API + "/pulls/1/files?limit=0")).status == 400

    commits = await (await client.get(API + "/pulls/1/commits")).json()
    assert [c["message"].strip() for c in commits["commits"]] == [
        "topic work",
        "second topic commit",
        "rename",
    ]  # oldest first
    assert commits["totalCommits"] == 3 and commits["hasMore"] is False
    page = await (await client.get(API + "/pulls/1/commits?limit=1&offset=1")).json()
    assert [c["message"].strip() for c in page["commits"]] == ["second topic commit"]
    assert page["hasMore"] is True

    resp = await client.get(API + "/pulls/1.diff")
    assert resp.status == 200 and resp.content_type == "text/plain"
    text = await resp.text()
    assert "diff --git a/a.txt b/a.txt" in text and "main-only" not in text
    resp = await client.get(API + "/pulls/1.patch")
    assert resp.status == 200 and resp.content_type == "text/plain"
    text = await resp.text()
    assert text.startswith("From ") and text.count("Subject: [PATCH") == 3
    assert text.index("topic work") < text.index("second topic commit")
    # The JSON route still parses its number; a missing number is 404 either way.
    assert (await client.get(API + "/pulls/1")).status == 200
    assert (await client.get(API + "/pulls/9.diff")).status == 404
    assert (await client.get(API + "/pulls/9/files")).status == 404


async def test_merged_pull_keeps_showing_what_it_merged(client, alice, tmp_path):
    await setup_branches(client, alice, tmp_path)
    await open_pull(client, alice)
    resp = await client.post(API + "/pulls/1/merge", json={}, headers=alice.headers)
    assert resp.status == 200
    files = await (await client.get(API + "/pulls/1/files")).json()
    assert [f["path"] for f in files["files"]] == ["c.txt"]
    commits = await (await client.get(API + "/pulls/1/commits")).json()
    assert [c["message"].strip() for c in commits["commits"]] == ["topic work"]


async def test_private_pull_review_routes_are_404(client, alice, bob, tmp_path):
    await setup_branches(client, alice, tmp_path)
    await open_pull(client, alice)
    await client.patch(
        "/api/repositories/alice/proj", json={"visibility": "private"}, headers=alice.headers
    )
    for path in (
        "/pulls/1/files",
        "/pulls/1/commits",
        "/pulls/1.diff",
        "/pulls/1.patch",
        "/compare/main...topic",
    ):
        assert (await client.get(API + path, headers=bob.headers)).status == 404, path
        assert (await client.get(API + path, headers=alice.headers)).status == 200, path


async def test_compare(client, alice, tmp_path):
    work = await setup_branches(client, alice, tmp_path)
    resp = await client.get(API + "/compare/main...topic")
    assert resp.status == 200
    body = await resp.json()
    assert (body["status"], body["aheadBy"], body["behindBy"]) == ("ahead", 1, 0)
    assert [f["path"] for f in body["files"]] == ["c.txt"]
    assert [c["message"].strip() for c in body["commits"]] == ["topic work"]
    assert body["mergeBaseCommit"] == body["baseCommit"]
    (work / "a.txt").write_text("main\n")
    await git("commit", "-qam", "main moves", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "proj"), "main", cwd=work)
    body = await (await client.get(API + "/compare/main...topic")).json()
    assert (body["status"], body["aheadBy"], body["behindBy"]) == ("diverged", 1, 1)
    assert [f["path"] for f in body["files"]] == ["c.txt"]  # three dots: main's change is not in it
    back = await (await client.get(API + "/compare/topic...main")).json()
    assert (back["aheadBy"], back["behindBy"]) == (1, 1)
    same = await (await client.get(API + "/compare/main...main")).json()
    assert (same["status"], same["files"], same["commits"]) == ("identical", [], [])
    short = body["headCommit"][:8]
    assert (await (await client.get(API + f"/compare/main...{short}")).json())["aheadBy"] == 1
    for spec, status in (
        ("main..topic", 400),
        ("main...", 400),
        ("main...nope", 404),
        ("nope...main", 404),
    ):
        resp = await client.get(API + "/compare/" + spec)
        assert resp.status == status, spec
        assert "error" in await resp.json()


async def test_edit_and_delete_comments(client, alice, bob, events, tmp_path):
    carol = await sign_up(client, "carol")
    dave = await sign_up(client, "dave")
    await client.post("/api/repositories", json={"name": "proj"}, headers=alice.headers)
    await client.put(
        API + "/collaborators/dave", json={"permission": "admin"}, headers=alice.headers
    )
    await client.put(
        API + "/collaborators/carol", json={"permission": "write"}, headers=alice.headers
    )
    await client.post(API + "/issues", json={"title": "t"}, headers=alice.headers)
    resp = await client.post(
        API + "/issues/1/comments", json={"body": "first"}, headers=bob.headers
    )
    comment = (await resp.json())["comment"]
    assert comment["edited"] is False
    url = API + f"/issues/1/comments/{comment['id']}"

    assert (await client.patch(url, json={"body": "x"})).status == 401
    # A writer who is not the author, and a plain reader, may not.
    assert (await client.patch(url, json={"body": "x"}, headers=carol.headers)).status == 403
    assert (await client.delete(url, headers=carol.headers)).status == 403
    resp = await client.patch(url, json={"body": ""}, headers=bob.headers)
    assert resp.status == 400
    resp = await client.patch(url, json={"body": "first, fixed"}, headers=bob.headers)
    assert resp.status == 200
    edited = (await resp.json())["comment"]
    assert (edited["body"], edited["edited"], edited["id"]) == ("first, fixed", True, comment["id"])
    listed = (await (await client.get(API + "/issues/1/comments")).json())["comments"]
    assert listed[0]["edited"] is True and listed[0]["body"] == "first, fixed"
    # The repository's admin may edit too; the issue's number must match the comment's.
    assert (await client.patch(url, json={"body": "by admin"}, headers=dave.headers)).status == 200
    await client.post(API + "/issues", json={"title": "other"}, headers=alice.headers)
    assert (
        await client.delete(API + f"/issues/2/comments/{comment['id']}", headers=alice.headers)
    ).status == 404
    for bad in ("x", "0", "99999", "1" * 40):
        assert (
            await client.delete(API + f"/issues/1/comments/{bad}", headers=alice.headers)
        ).status == 404
    assert (await client.delete(url, headers=bob.headers)).status == 204
    assert (await client.delete(url, headers=bob.headers)).status == 404
    issue = await (await client.get(API + "/issues/1")).json()
    assert issue["issue"]["commentCount"] == 0 and issue["comments"] == []

    await client.app[BUS].drain()
    actions = [e.data["action"] for e in events.of("issue")]
    assert actions.count("comment_edited") == 2 and actions[-1] == "comment_deleted"
    deleted = events.of("issue")[-1].data
    assert deleted["comment"]["id"] == comment["id"] and deleted["issue"]["commentCount"] == 0


async def test_pull_comments_edit_by_owner_and_private_404(client, alice, bob, events, tmp_path):
    await setup_branches(client, alice, tmp_path)
    await open_pull(client, alice)
    resp = await client.post(API + "/pulls/1/comments", json={"body": "lgtm"}, headers=bob.headers)
    cid = (await resp.json())["comment"]["id"]
    url = API + f"/pulls/1/comments/{cid}"
    assert (
        await client.patch(
            API + f"/issues/1/comments/{cid}", json={"body": "x"}, headers=alice.headers
        )
    ).status == 404  # #1 is a pull request
    resp = await client.patch(url, json={"body": "LGTM"}, headers=alice.headers)  # the owner
    assert resp.status == 200 and (await resp.json())["comment"]["edited"] is True
    await client.patch(
        "/api/repositories/alice/proj", json={"visibility": "private"}, headers=alice.headers
    )
    assert (await client.patch(url, json={"body": "x"}, headers=bob.headers)).status == 404
    assert (await client.delete(url, headers=bob.headers)).status == 404
    assert (await client.delete(url, headers=alice.headers)).status == 204
    await client.app[BUS].drain()
    actions = [e.data["action"] for e in events.of("pull_request")]
    assert "comment_edited" in actions and actions[-1] == "comment_deleted"


async def test_huge_file_patch_is_left_out_and_marked(client, alice, tmp_path):
    work = await setup_branches(client, alice, tmp_path)
    await git("checkout", "-q", "topic", cwd=work)
    (work / "big.txt").write_text("".join(f"line {n}\n" for n in range(20001)))
    await git("add", "-A", cwd=work)
    await git("commit", "-qm", "big", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "proj"), "topic", cwd=work)
    await open_pull(client, alice)
    files = {
        f["path"]: f for f in (await (await client.get(API + "/pulls/1/files")).json())["files"]
    }
    big = files["big.txt"]
    assert (big["additions"], big["patch"], big["truncated"]) == (20001, "", True)
    assert "truncated" not in files["c.txt"] and files["c.txt"]["patch"]
